//! Reference normalizations: `BatchNormalization`, `InstanceNormalization`, `LayerNormalization`,
//! `GroupNormalization` and `RMSNormalization`.
//!
//! Statistics are computed in f64 with the biased variance (divide by the count), as ONNX
//! specifies; `stash_type` only selects the dtype of LayerNormalization's Mean/InvStdDev outputs.

use planner::op::{
    BatchNormalization, GroupNormalization, InstanceNormalization, LayerNormalization, RmsNormalization,
};

use super::operand::{
    Floats, OutBuf, axis, broadcast_iter, broadcast_map, expect_shape, float_view, input, input_opt,
    required, tensor,
};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// Mean and biased variance of `v`.
fn moments(v: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = v.clone().count().max(1) as f64;
    let mean = v.clone().sum::<f64>() / n;
    let var = v.map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var)
}

/// X `(N, C, ...)` with its channel count and the size of one `(n, c)` plane.
fn channels(node: &NodeCtx, x: &Floats) -> Result<(usize, usize, usize), HostError> {
    if x.shape.len() < 2 {
        return Err(node.err(format!("X must be (N, C, ...), got {:?}", x.shape)));
    }
    Ok((x.shape[0], x.shape[1], x.shape[2..].iter().product()))
}

/// ONNX `BatchNormalization` (opset 15). Inference: `Y = scale·(X − mean)/sqrt(var + ε) + B` per
/// channel (axis 1), one output. With `training_mode` the batch statistics (over every axis but 1)
/// normalize X and the outputs are Y, `running_mean = mean·momentum + batch_mean·(1 − momentum)`
/// and `running_var` likewise (with the biased batch variance), as the ONNX reference computes.
pub fn batch_normalization(
    node: &NodeCtx,
    attrs: &BatchNormalization,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let (batch, c, plane) = channels(node, &x)?;
    let [scale, bias, mean, var] =
        [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")].map(|(i, w)| input(node, inputs, i, w));
    let (scale, bias, mean, var) = (scale?, bias?, mean?, var?);
    for (t, w) in [(&scale, "scale"), (&bias, "B"), (&mean, "input_mean"), (&var, "input_var")] {
        expect_shape(node, &t.shape, &[c], w)?;
    }
    let eps = attrs.epsilon as f64;
    let at = |n: usize, ch: usize, i: usize| x.data[(n * c + ch) * plane + i];
    let mut stats = crate::tensor::try_with_capacity(c, "a working buffer")?;
    for ch in 0..c {
        if attrs.training_mode {
            stats.push(moments((0..batch).flat_map(|n| (0..plane).map(move |i| at(n, ch, i)))));
        } else {
            stats.push((mean.data[ch], var.data[ch]));
        }
    }
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    for (k, slot) in y.iter_mut().enumerate() {
        let ch = (k / plane.max(1)) % c;
        let (m, v) = stats[ch];
        *slot = scale.data[ch] * (x.data[k] - m) / (v + eps).sqrt() + bias.data[ch];
    }
    let mut outs = vec![tensor(node, x.dtype, x.shape.clone(), y)?];
    if attrs.training_mode {
        let mom = attrs.momentum as f64;
        let run = |old: &[f64], pick: fn(&(f64, f64)) -> f64| -> Vec<f64> {
            old.iter().zip(&stats).map(|(o, s)| o * mom + pick(s) * (1.0 - mom)).collect()
        };
        outs.push(tensor(node, mean.dtype, vec![c], run(&mean.data, |s| s.0))?);
        outs.push(tensor(node, var.dtype, vec![c], run(&var.data, |s| s.1))?);
    }
    Ok(outs)
}

/// ONNX `InstanceNormalization` (opset 6): each `(n, c)` plane is normalized by its own mean and
/// variance, then `· scale[c] + B[c]`.
pub fn instance_normalization(
    node: &NodeCtx,
    attrs: &InstanceNormalization,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let (_, c, plane) = channels(node, &x)?;
    let (scale, bias) = (input(node, inputs, 1, "scale")?, input(node, inputs, 2, "B")?);
    expect_shape(node, &scale.shape, &[c], "scale")?;
    expect_shape(node, &bias.shape, &[c], "B")?;
    let eps = attrs.epsilon as f64;
    let mut y = crate::tensor::try_with_capacity(x.data.len(), "a working buffer")?;
    for (p, chunk) in x.data.chunks(plane.max(1)).enumerate() {
        let ch = p % c;
        let (m, v) = moments(chunk.iter().copied());
        y.extend(chunk.iter().map(|&e| (e - m) / (v + eps).sqrt() * scale.data[ch] + bias.data[ch]));
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

/// ONNX `LayerNormalization` (opset 17): normalizes over axes `axis..rank`, then `· Scale + B`
/// (both broadcast to X). Outputs Y, Mean and InvStdDev (`1/sqrt(var + ε)`); the statistics have
/// X's shape with the normalized axes set to 1 and the dtype `stash_type`.
pub fn layer_normalization(
    node: &NodeCtx,
    attrs: &LayerNormalization,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = float_view(node, required(node, inputs, 0, "X")?, "X")?;
    let ax = axis(node, attrs.axis, x.shape.len())?;
    let scale = input(node, inputs, 1, "Scale")?;
    let bias = input_opt(node, inputs, 2, "B")?;
    let mut s_at = broadcast_iter(node, &scale.shape, x.shape, "Scale")?;
    let mut b_at = bias.as_ref().map(|b| broadcast_iter(node, &b.shape, x.shape, "B")).transpose()?;
    let inner: usize = x.shape[ax..].iter().product();
    let rows: usize = x.shape[..ax].iter().product();
    let mut y = OutBuf::new(node, x.dtype, x.shape.to_vec())?;
    let (mut means, mut inv_stds) = (Vec::new(), Vec::new());
    // One row widened at a time; Scale and B are read through their broadcast offsets.
    let mut row = crate::tensor::try_filled(inner, 0.0, "a working buffer")?;
    for r in 0..if inner == 0 { 0 } else { rows } {
        for (j, v) in row.iter_mut().enumerate() {
            *v = x.at(r * inner + j);
        }
        let (m, v) = moments(row.iter().copied());
        let inv = 1.0 / (v + attrs.epsilon as f64).sqrt();
        for (j, &e) in row.iter().enumerate() {
            let b = match (&bias, &mut b_at) {
                (Some(b), Some(at)) => b.data[at.next().unwrap_or(0)],
                _ => 0.0,
            };
            y.set(r * inner + j, (e - m) * inv * scale.data[s_at.next().unwrap_or(0)] + b);
        }
        means.push(m);
        inv_stds.push(inv);
    }
    if inner == 0 {
        // Normalized over no elements: each row's mean and inverse deviation are undefined (NaN,
        // as numpy's mean of an empty axis); the output is empty.
        (means, inv_stds) = (vec![f64::NAN; rows], vec![f64::NAN; rows]);
    }
    let mut stat_shape = x.shape[..ax].to_vec();
    stat_shape.extend(std::iter::repeat_n(1, x.shape.len() - ax));
    Ok(vec![
        y.finish(node)?,
        tensor(node, attrs.stash_type, stat_shape.clone(), means)?,
        tensor(node, attrs.stash_type, stat_shape, inv_stds)?,
    ])
}

/// ONNX `GroupNormalization` (opset 21): channels split into `num_groups` groups; each `(n, group)`
/// is normalized by its mean and variance, then `· scale[c] + bias[c]` per channel. A scale/bias
/// of length `num_groups` (the opset-18 form) is applied per group instead.
pub fn group_normalization(
    node: &NodeCtx,
    attrs: &GroupNormalization,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let (_, c, plane) = channels(node, &x)?;
    let groups = attrs.num_groups;
    if groups == 0 || c % groups != 0 {
        return Err(node.err(format!("num_groups {groups} must divide the {c} channels")));
    }
    let (scale, bias) = (input(node, inputs, 1, "scale")?, input(node, inputs, 2, "bias")?);
    let per_group = scale.shape == [groups] && groups != c;
    let want = if per_group { groups } else { c };
    expect_shape(node, &scale.shape, &[want], "scale")?;
    expect_shape(node, &bias.shape, &[want], "bias")?;
    let group_len = (c / groups) * plane;
    let mut y = crate::tensor::try_with_capacity(x.data.len(), "a working buffer")?;
    for (gi, chunk) in x.data.chunks(group_len.max(1)).enumerate() {
        let (m, v) = moments(chunk.iter().copied());
        let inv = 1.0 / (v + attrs.epsilon as f64).sqrt();
        for (j, &e) in chunk.iter().enumerate() {
            let ch = (gi % groups) * (c / groups) + j / plane.max(1);
            let p = if per_group { gi % groups } else { ch };
            y.push((e - m) * inv * scale.data[p] + bias.data[p]);
        }
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

/// ONNX `RMSNormalization` (opset 23): `Y = X / sqrt(mean(X²) + ε) · scale` with the mean over
/// axes `axis..rank` and scale broadcast to X.
pub fn rms_normalization(
    node: &NodeCtx,
    attrs: &RmsNormalization,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let ax = axis(node, attrs.axis, x.shape.len())?;
    let scale = input(node, inputs, 1, "scale")?;
    let s_map = broadcast_map(node, &scale.shape, &x.shape, "scale")?;
    let inner: usize = x.shape[ax..].iter().product();
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    for (r, chunk) in x.data.chunks(inner.max(1)).enumerate() {
        let ms = chunk.iter().map(|e| e * e).sum::<f64>() / inner.max(1) as f64;
        let inv = 1.0 / (ms + attrs.epsilon as f64).sqrt();
        for (j, &e) in chunk.iter().enumerate() {
            y[r * inner + j] = e * inv * scale.data[s_map[r * inner + j]];
        }
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

#[cfg(test)]
#[path = "norm_tests.rs"]
mod tests;
