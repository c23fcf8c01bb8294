//! Reference `MaxUnpool`, as the ONNX reference defines it: X is scattered to the flat indices I
//! of the unpooled shape `(N, C, (in − 1) · stride − pad_begin − pad_end + kernel ...)`, every
//! other element 0; with `output_shape`, that tensor is placed at the origin of a zero tensor of
//! the requested (no smaller) shape.

use planner::op::MaxUnpool;

use super::operand::{count, input, ints, optional, required, strides, tensor, unravel};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// ONNX `MaxUnpool(X, I, output_shape?)`.
pub fn max_unpool(
    node: &NodeCtx,
    attrs: &MaxUnpool,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let idx = ints(node, required(node, inputs, 1, "I")?, "I")?;
    let s = attrs.kernel_shape.len();
    if x.shape.len() != s + 2 || idx.len() != x.data.len() {
        return Err(node.err(format!(
            "X {:?} and {} indices do not fit {s} spatial dims",
            x.shape,
            idx.len()
        )));
    }
    let mut unpooled = x.shape[..2].to_vec();
    for d in 0..s {
        let stride = attrs.strides.get(d).copied().unwrap_or(1);
        let pads = attrs.pads.get(d).copied().unwrap_or(0) + attrs.pads.get(d + s).copied().unwrap_or(0);
        let full = x.shape[d + 2].saturating_sub(1) * stride + attrs.kernel_shape[d];
        unpooled.push(full.checked_sub(pads).ok_or_else(|| node.err("pads exceed the unpooled size"))?);
    }
    let n = count(node, &unpooled)?;
    let mut y = crate::tensor::try_filled(n, 0.0, "a working buffer")?;
    for (&i, &v) in idx.iter().zip(&x.data) {
        let i = usize::try_from(i)
            .ok()
            .filter(|&i| i < n)
            .ok_or_else(|| node.err(format!("index {i} is outside [0, {n})")))?;
        y[i] = v;
    }
    let Some(shape) = optional(inputs, 2) else {
        return Ok(vec![tensor(node, x.dtype, unpooled, y)?]);
    };
    let out: Vec<usize> = ints(node, shape, "output_shape")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| node.err(format!("negative output dim {d}"))))
        .collect::<Result<_, _>>()?;
    if out.len() != unpooled.len() || out.iter().zip(&unpooled).any(|(o, u)| o < u) {
        return Err(node.err(format!("output_shape {out:?} is smaller than the unpooled {unpooled:?}")));
    }
    let mut z = crate::tensor::try_filled(count(node, &out)?, 0.0, "a working buffer")?;
    let out_strides = strides(&out);
    let mut at = vec![0; out.len()];
    for (i, &v) in y.iter().enumerate() {
        unravel(i, &unpooled, &mut at);
        z[at.iter().zip(&out_strides).map(|(a, s)| a * s).sum::<usize>()] = v;
    }
    Ok(vec![tensor(node, x.dtype, out, z)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, tf, ti, vals};

    #[test]
    fn scatters_to_the_pooled_positions() {
        // 1-D: X (1, 1, 2) from a kernel-2 stride-2 pool over 4 -> positions 1 and 2.
        let x = tf(&[1, 1, 2], &[5.0, 6.0]);
        let i = ti(&[1, 1, 2], &[1, 2]);
        let attrs = MaxUnpool { kernel_shape: vec![2], strides: vec![2], pads: vec![] };
        let y = max_unpool(&node("MaxUnpool"), &attrs, &[Some(&x), Some(&i)]).unwrap();
        assert_eq!(y[0].shape(), [1, 1, 4]);
        assert_eq!(vals(&y[0]), [0.0, 5.0, 6.0, 0.0]);
        let shape = ti(&[3], &[1, 1, 5]);
        let y = max_unpool(&node("MaxUnpool"), &attrs, &[Some(&x), Some(&i), Some(&shape)]).unwrap();
        assert_eq!(vals(&y[0]), [0.0, 5.0, 6.0, 0.0, 0.0]);
        let bad = ti(&[1, 1, 2], &[1, 9]);
        assert!(max_unpool(&node("MaxUnpool"), &attrs, &[Some(&x), Some(&bad)]).is_err());
    }
}
