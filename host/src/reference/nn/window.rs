//! Sliding-window geometry shared by `Conv` and the pooling ops: output sizes and begin paddings
//! from `kernel_shape`, `strides`, `dilations`, `pads`, `auto_pad` and `ceil_mode`, as the ONNX
//! operator docs define them.
//!
//! Invariant: for every output position `o` on axis `i`, the window reads input positions
//! `o * strides[i] - pad_begin[i] + k * dilations[i]` for `k < kernel[i]`; positions outside
//! `[0, in)` are padding.

use planner::op::AutoPad;

use crate::error::HostError;
use crate::reference::NodeCtx;

/// Resolved geometry of an N-D sliding window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Window size per spatial axis.
    pub kernel: Vec<usize>,
    /// Stride per spatial axis.
    pub strides: Vec<usize>,
    /// Dilation per spatial axis.
    pub dilations: Vec<usize>,
    /// Padding before each spatial axis.
    pub pad_begin: Vec<usize>,
    /// Padding after each spatial axis.
    pub pad_end: Vec<usize>,
    /// Output size per spatial axis.
    pub out: Vec<usize>,
}

/// The attribute list `list` of length `n`, or `default` repeated when it is empty.
pub(crate) fn per_axis(
    node: &NodeCtx,
    list: &[usize],
    n: usize,
    default: usize,
    what: &str,
) -> Result<Vec<usize>, HostError> {
    match list.len() {
        0 => Ok(vec![default; n]),
        l if l == n => Ok(list.to_vec()),
        l => Err(node.err(format!("{what} has {l} values for {n} spatial axes"))),
    }
}

/// Begin and end pads from the ONNX `pads` list (empty = all 0).
pub(crate) fn split_pads(
    node: &NodeCtx,
    pads: &[usize],
    n: usize,
) -> Result<(Vec<usize>, Vec<usize>), HostError> {
    match pads.len() {
        0 => Ok((vec![0; n], vec![0; n])),
        l if l == 2 * n => Ok((pads[..n].to_vec(), pads[n..].to_vec())),
        l => Err(node.err(format!("pads has {l} values for {n} spatial axes (need {})", 2 * n))),
    }
}

/// Window geometry for input spatial sizes `input`. `ceil_mode` rounds the output size up (pooling
/// only); a window that would start in the end padding is dropped, as in the ONNX reference.
#[allow(clippy::too_many_arguments)]
pub(crate) fn geometry(
    node: &NodeCtx,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> Result<Geometry, HostError> {
    let n = input.len();
    if kernel.len() != n {
        return Err(node.err(format!("kernel has {} axes, input has {n} spatial axes", kernel.len())));
    }
    let strides = per_axis(node, strides, n, 1, "strides")?;
    let dilations = per_axis(node, dilations, n, 1, "dilations")?;
    if strides.contains(&0) || dilations.contains(&0) || kernel.contains(&0) {
        return Err(node.err("strides, dilations and kernel sizes must be positive"));
    }
    let (mut pad_begin, mut pad_end) = split_pads(node, pads, n)?;
    let mut out = vec![0; n];
    for i in 0..n {
        let extent = (kernel[i] - 1) * dilations[i] + 1;
        match auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => {
                out[i] = input[i].div_ceil(strides[i]);
                let total = ((out[i].max(1) - 1) * strides[i] + extent).saturating_sub(input[i]);
                let small = total / 2;
                (pad_begin[i], pad_end[i]) = if auto_pad == AutoPad::SameUpper {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
            }
            AutoPad::Valid | AutoPad::NotSet => {
                if auto_pad == AutoPad::Valid {
                    (pad_begin[i], pad_end[i]) = (0, 0);
                }
                let total = input[i] + pad_begin[i] + pad_end[i];
                if total < extent {
                    return Err(node.err(format!(
                        "axis {i}: padded input {total} is smaller than the dilated kernel {extent}"
                    )));
                }
                let span = total - extent;
                out[i] = if ceil_mode { span.div_ceil(strides[i]) + 1 } else { span / strides[i] + 1 };
                if ceil_mode && (out[i] - 1) * strides[i] >= input[i] + pad_begin[i] {
                    out[i] -= 1;
                }
            }
        }
    }
    Ok(Geometry { kernel: kernel.to_vec(), strides, dilations, pad_begin, pad_end, out })
}

impl Geometry {
    /// Input position read by output position `o` and kernel tap `k` on `axis`, or `None` in padding.
    pub(crate) fn source(&self, axis: usize, o: usize, k: usize, input: usize) -> Option<usize> {
        let pos = (o * self.strides[axis] + k * self.dilations[axis]).checked_sub(self.pad_begin[axis])?;
        (pos < input).then_some(pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::node;

    fn geo(input: &[usize], k: &[usize], s: &[usize], pads: &[usize], ap: AutoPad, ceil: bool) -> Geometry {
        geometry(&node("Conv"), input, k, s, &[], pads, ap, ceil).unwrap()
    }

    #[test]
    fn explicit_valid_and_same_padding() {
        assert_eq!(geo(&[5], &[3], &[], &[1, 1], AutoPad::NotSet, false).out, vec![5]);
        assert_eq!(geo(&[5], &[3], &[2], &[1, 1], AutoPad::NotSet, false).out, vec![3]);
        assert_eq!(geo(&[5], &[3], &[2], &[1, 1], AutoPad::Valid, false).out, vec![2]);
        let up = geo(&[5], &[4], &[2], &[], AutoPad::SameUpper, false);
        assert_eq!((up.out[0], up.pad_begin[0], up.pad_end[0]), (3, 1, 2));
        let low = geo(&[5], &[4], &[2], &[], AutoPad::SameLower, false);
        assert_eq!((low.out[0], low.pad_begin[0], low.pad_end[0]), (3, 2, 1));
    }

    #[test]
    fn ceil_mode_rounds_up_but_drops_windows_starting_in_padding() {
        assert_eq!(geo(&[4], &[3], &[2], &[], AutoPad::NotSet, false).out, vec![1]);
        assert_eq!(geo(&[4], &[3], &[2], &[], AutoPad::NotSet, true).out, vec![2]);
        // in=5,k=2,s=2,pad_end=1: span 4 -> ceil gives 3, and the 3rd window starts at 4 < 5: kept.
        assert_eq!(geo(&[5], &[2], &[2], &[0, 1], AutoPad::NotSet, true).out, vec![3]);
        // in=4,k=1,s=2,pads 0,1: span 4 -> 3 windows; the 3rd starts at 4 >= 4: dropped.
        assert_eq!(geo(&[4], &[1], &[2], &[0, 1], AutoPad::NotSet, true).out, vec![2]);
    }

    #[test]
    fn rejects_kernels_larger_than_the_padded_input() {
        assert!(geometry(&node("Conv"), &[2], &[3], &[], &[], &[], AutoPad::NotSet, false).is_err());
        assert!(geometry(&node("Conv"), &[4], &[3], &[0], &[], &[], AutoPad::NotSet, false).is_err());
        assert!(geometry(&node("Conv"), &[4], &[3], &[], &[], &[1], AutoPad::NotSet, false).is_err());
    }
}
