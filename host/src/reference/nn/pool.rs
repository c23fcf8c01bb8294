//! Reference pooling: `MaxPool` (with its optional I64 `Indices` output), `AveragePool`, `LpPool`,
//! `GlobalAveragePool` and `GlobalMaxPool` over X `(N, C, D1..Dn)`.
//!
//! Every window is listed as taps in kernel (row-major) order; a tap is an input element, padding
//! inside the explicit pads, or overhang past the padded input (only with `ceil_mode`). Padding
//! never contributes a value; `count_include_pad` only changes the average's divisor.

use planner::DType;
use planner::op::{AutoPad, AveragePool, LpPool, MaxPool};

use super::operand::{View, count, number_view, required, strides, tensor, unravel};
use super::window::{Geometry, geometry};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// One kernel tap of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tap {
    /// Reads the input element at this flat spatial offset.
    In(usize),
    /// Falls in the explicit (or auto) padding.
    Pad,
    /// Falls past the padded input (a `ceil_mode` overhang).
    Out,
}

/// X (read in place) with its batch/channel planes and the resolved window geometry.
struct Pooled<'t> {
    x: View<'t>,
    planes: usize,
    spatial: Vec<usize>,
    g: Geometry,
}

#[allow(clippy::too_many_arguments)]
fn setup<'t>(
    node: &NodeCtx,
    inputs: &[Option<&'t HostTensor>],
    kernel: &[usize],
    st: &[usize],
    dil: &[usize],
    pads: &[usize],
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> Result<Pooled<'t>, HostError> {
    let x = number_view(node, required(node, inputs, 0, "X")?, "X")?;
    if x.shape.len() < 3 {
        return Err(node.err(format!("X must be (N, C, D1, ...), got {:?}", x.shape)));
    }
    if kernel.is_empty() {
        return Err(node.err("kernel_shape is required"));
    }
    let spatial = x.shape[2..].to_vec();
    let g = geometry(node, &spatial, kernel, st, dil, pads, auto_pad, ceil_mode)?;
    Ok(Pooled { planes: x.shape[0] * x.shape[1], x, spatial, g })
}

impl Pooled<'_> {
    fn out_shape(&self) -> Vec<usize> {
        let mut s = self.x.shape[..2].to_vec();
        s.extend(&self.g.out);
        s
    }

    /// Taps of every output position, `n_tap` per position, output positions row-major.
    fn taps(&self, node: &NodeCtx) -> Result<Vec<Tap>, HostError> {
        let (n_out, n_tap) = (count(node, &self.g.out)?, count(node, &self.g.kernel)?);
        let nd = self.spatial.len();
        let in_strides = strides(&self.spatial);
        let (mut oi, mut ki) = (vec![0; nd], vec![0; nd]);
        let mut taps = crate::tensor::try_with_capacity(n_out * n_tap, "a working buffer")?;
        for o in 0..n_out {
            unravel(o, &self.g.out, &mut oi);
            for k in 0..n_tap {
                unravel(k, &self.g.kernel, &mut ki);
                let mut tap = Tap::In(0);
                for a in 0..nd {
                    let padded = oi[a] * self.g.strides[a] + ki[a] * self.g.dilations[a];
                    let limit = self.spatial[a] + self.g.pad_begin[a] + self.g.pad_end[a];
                    tap = match (tap, padded.checked_sub(self.g.pad_begin[a])) {
                        (Tap::Out, _) => Tap::Out,
                        _ if padded >= limit => Tap::Out,
                        (Tap::In(off), Some(p)) if p < self.spatial[a] => Tap::In(off + p * in_strides[a]),
                        _ => Tap::Pad,
                    };
                }
                taps.push(tap);
            }
        }
        Ok(taps)
    }

    /// Applies `reduce(plane_offset, taps_of_window)` to every window, planes outermost.
    fn reduce(&self, node: &NodeCtx, mut f: impl FnMut(usize, &[Tap]) -> f64) -> Result<Vec<f64>, HostError> {
        let taps = self.taps(node)?;
        let n_tap = self.g.kernel.iter().product::<usize>();
        let n_in = self.spatial.iter().product::<usize>();
        let mut out = Vec::new();
        for plane in 0..self.planes {
            out.extend(taps.chunks(n_tap.max(1)).map(|w| f(plane * n_in, w)));
        }
        Ok(out)
    }
}

/// ONNX `MaxPool` (opset 12): the maximum over each window's input elements (padding ignored).
/// Outputs Y and Indices (I64): the flat index into X of the first maximum, with the spatial part
/// row-major (`storage_order` 0) or column-major (1), as ONNX Runtime computes it.
pub fn max_pool(
    node: &NodeCtx,
    attrs: &MaxPool,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let p = setup(
        node,
        inputs,
        &attrs.kernel_shape,
        &attrs.strides,
        &attrs.dilations,
        &attrs.pads,
        attrs.auto_pad,
        attrs.ceil_mode,
    )?;
    let nd = p.spatial.len();
    let mut col_strides = vec![1; nd];
    for a in 1..nd {
        col_strides[a] = col_strides[a - 1] * p.spatial[a - 1];
    }
    let mut idx = vec![0; nd];
    let mut indices = Vec::new();
    let y = p.reduce(node, |base, w| {
        let mut best: Option<(f64, usize)> = None;
        for tap in w {
            if let Tap::In(off) = *tap {
                let v = p.x.at(base + off);
                if best.is_none_or(|(b, _)| v > b) {
                    best = Some((v, off));
                }
            }
        }
        let (v, off) = best.unwrap_or((f64::NEG_INFINITY, 0));
        let flat = if attrs.storage_order == 1 {
            unravel(off, &p.spatial, &mut idx);
            idx.iter().zip(&col_strides).map(|(i, s)| i * s).sum()
        } else {
            off
        };
        indices.push((base + flat) as i64);
        v
    })?;
    let shape = p.out_shape();
    Ok(vec![tensor(node, p.x.dtype, shape.clone(), y)?, HostTensor::new(shape, indices)?])
}

/// ONNX `AveragePool` (opset 19): the mean of each window's input elements; with
/// `count_include_pad` the divisor also counts taps in the padding (but not a `ceil_mode` overhang).
pub fn average_pool(
    node: &NodeCtx,
    attrs: &AveragePool,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let p = setup(
        node,
        inputs,
        &attrs.kernel_shape,
        &attrs.strides,
        &attrs.dilations,
        &attrs.pads,
        attrs.auto_pad,
        attrs.ceil_mode,
    )?;
    float_only(node, p.x.dtype)?;
    let y = p.reduce(node, |base, w| {
        let (mut sum, mut n) = (0.0, 0usize);
        for tap in w {
            match *tap {
                Tap::In(off) => {
                    sum += p.x.at(base + off);
                    n += 1;
                }
                Tap::Pad if attrs.count_include_pad => n += 1,
                _ => {}
            }
        }
        sum / n as f64
    })?;
    Ok(vec![tensor(node, p.x.dtype, p.out_shape(), y)?])
}

/// ONNX `LpPool` (opset 18): `(Σ |x|^p)^(1/p)` over each window's input elements.
pub fn lp_pool(
    node: &NodeCtx,
    attrs: &LpPool,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let p = setup(
        node,
        inputs,
        &attrs.kernel_shape,
        &attrs.strides,
        &attrs.dilations,
        &attrs.pads,
        attrs.auto_pad,
        attrs.ceil_mode,
    )?;
    float_only(node, p.x.dtype)?;
    if attrs.p <= 0 {
        return Err(node.err(format!("p must be positive, got {}", attrs.p)));
    }
    let e = attrs.p as f64;
    let y = p.reduce(node, |base, w| {
        let sum: f64 = w
            .iter()
            .filter_map(|t| if let Tap::In(off) = *t { Some(p.x.at(base + off).abs().powf(e)) } else { None })
            .sum();
        sum.powf(1.0 / e)
    })?;
    Ok(vec![tensor(node, p.x.dtype, p.out_shape(), y)?])
}

fn float_only(node: &NodeCtx, dtype: DType) -> Result<(), HostError> {
    if matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        Ok(())
    } else {
        Err(node.err(format!("X must be a float tensor, got {dtype}")))
    }
}

/// Reduces each `(n, c)` plane of X to one value, keeping the spatial dims as 1.
fn global(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    f: impl Fn(&[f64]) -> f64,
) -> Result<Vec<HostTensor>, HostError> {
    let x = number_view(node, required(node, inputs, 0, "X")?, "X")?;
    float_only(node, x.dtype)?;
    if x.shape.len() < 2 {
        return Err(node.err(format!("X must be (N, C, ...), got {:?}", x.shape)));
    }
    let plane = x.shape[2..].iter().product::<usize>();
    // One plane widened at a time.
    let mut row = crate::tensor::try_filled(plane, 0.0, "a working buffer")?;
    let y: Vec<f64> = (0..x.shape[0] * x.shape[1])
        .map(|p| {
            for (k, v) in row.iter_mut().enumerate() {
                *v = x.at(p * plane + k);
            }
            f(&row)
        })
        .collect();
    let mut shape = x.shape[..2].to_vec();
    shape.extend(std::iter::repeat_n(1, x.shape.len() - 2));
    Ok(vec![tensor(node, x.dtype, shape, y)?])
}

/// ONNX `GlobalAveragePool`: the mean over all spatial dims of each `(n, c)`.
pub fn global_average_pool(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    global(node, inputs, |v| v.iter().sum::<f64>() / v.len() as f64)
}

/// ONNX `GlobalMaxPool`: the maximum over all spatial dims of each `(n, c)`.
pub fn global_max_pool(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    global(node, inputs, |v| v.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
