//! Index arithmetic and input decoding shared by the reference ops: row-major strides, multi-index
//! iteration, NumPy broadcasting maps, ONNX axis normalisation, and reading shape/axes/index
//! tensors (I64 or I32) into `i64`s.
//!
//! Every function that can fail on model data returns an error naming the node through
//! [`NodeCtx`]; none panics on data.

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::Lanes;
use crate::shape::{broadcast_shape, broadcast_strides};
use crate::tensor::HostTensor;

/// Row-major strides of `shape` (in elements).
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of row-major offset `offset` in `shape`.
pub fn unravel(mut offset: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        if shape[d] > 0 {
            idx[d] = offset % shape[d];
            offset /= shape[d];
        }
    }
    idx
}

/// Row-major offset of multi-index `idx` with `strides`.
pub fn ravel(idx: &[usize], strides: &[usize]) -> usize {
    idx.iter().zip(strides).map(|(i, s)| i * s).sum()
}

/// Element count of `shape`, or an error when it overflows or exceeds the run's size limit
/// ([`NodeCtx::count`]).
pub fn count(ctx: &NodeCtx, shape: &[usize]) -> Result<usize, HostError> {
    ctx.count(shape)
}

/// The broadcast shape of all `shapes` (NumPy multidirectional broadcasting).
pub fn broadcast_all(ctx: &NodeCtx, shapes: &[&[usize]]) -> Result<Vec<usize>, HostError> {
    let mut out: Vec<usize> = Vec::new();
    for s in shapes {
        out = broadcast_shape(&out, s)
            .ok_or_else(|| ctx.err(format!("shapes {shapes:?} do not broadcast together")))?;
    }
    count(ctx, &out)?;
    Ok(out)
}

/// For every element of `out_shape` (row-major), the offset of the element of a tensor of
/// `in_shape` that broadcasting reads (`in_shape` must broadcast to `out_shape`).
pub fn broadcast_map(in_shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    broadcast_offsets(in_shape, out_shape).collect()
}

/// [`broadcast_map`] as an iterator (nothing held per element).
pub fn broadcast_offsets(in_shape: &[usize], out_shape: &[usize]) -> impl Iterator<Item = usize> + use<> {
    let s = broadcast_strides(in_shape, out_shape.len());
    strided_offsets(out_shape, s)
}

/// For every element of `shape` (row-major), the offset `Σ index[d] · strides[d]`.
pub fn strided_offsets(shape: &[usize], strides: Vec<usize>) -> impl Iterator<Item = usize> + use<> {
    let n: usize = shape.iter().product();
    let shape = shape.to_vec();
    let mut idx = vec![0usize; shape.len()];
    (0..n).map(move |_| {
        let at = ravel(&idx, &strides);
        next_index(&mut idx, &shape);
        at
    })
}

/// Advances a row-major multi-index over `shape` (wrapping to all zeros at the end).
pub fn next_index(idx: &mut [usize], shape: &[usize]) {
    for d in (0..shape.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// ONNX axis normalisation: `axis` in `[-rank, rank)` maps to `[0, rank)`.
pub fn axis(ctx: &NodeCtx, axis: i64, rank: usize) -> Result<usize, HostError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(ctx.err(format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Normalises a list of axes against `rank`, rejecting duplicates.
pub fn axes(ctx: &NodeCtx, list: &[i64], rank: usize) -> Result<Vec<usize>, HostError> {
    let mut out = crate::tensor::try_with_capacity(list.len(), "a working buffer")?;
    for &a in list {
        let a = axis(ctx, a, rank)?;
        if out.contains(&a) {
            return Err(ctx.err(format!("axis {a} is repeated in {list:?}")));
        }
        out.push(a);
    }
    Ok(out)
}

/// An integer tensor (I64, I32, I8 or U8; shapes, axes, indices) as `i64`s.
pub fn ints(ctx: &NodeCtx, t: &HostTensor, what: &str) -> Result<Vec<i64>, HostError> {
    if !t.dtype().is_int() {
        return Err(ctx.err(format!("{what} must be an integer tensor, got {}", t.dtype())));
    }
    match Lanes::of(t)? {
        Lanes::I(v) => Ok(v),
        Lanes::F(_) => Err(ctx.err(format!("{what} must be an integer tensor"))),
    }
}

/// A one-element integer tensor (rank 0 or 1) as an `i64`.
pub fn int_scalar(ctx: &NodeCtx, t: &HostTensor, what: &str) -> Result<i64, HostError> {
    match ints(ctx, t, what)?.as_slice() {
        [v] => Ok(*v),
        other => Err(ctx.err(format!("{what} must hold one element, got {}", other.len()))),
    }
}

/// A one-element tensor of any dtype as an f64.
pub fn scalar_f64(ctx: &NodeCtx, t: &HostTensor, what: &str) -> Result<f64, HostError> {
    match Lanes::of(t)?.to_f64s().as_slice() {
        [v] => Ok(*v),
        other => Err(ctx.err(format!("{what} must hold one element, got {}", other.len()))),
    }
}

/// A shape given as a non-negative integer list.
pub fn dims(ctx: &NodeCtx, t: &HostTensor, what: &str) -> Result<Vec<usize>, HostError> {
    ints(ctx, t, what)?
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ctx.err(format!("{what} has negative size {d}"))))
        .collect()
}

/// Input `slot`, which the op requires.
pub fn required<'t>(
    ctx: &NodeCtx,
    inputs: &[Option<&'t HostTensor>],
    slot: usize,
) -> Result<&'t HostTensor, HostError> {
    inputs.get(slot).copied().flatten().ok_or_else(|| ctx.err(format!("input {slot} is required")))
}

/// Input `slot` if present (an omitted optional input or a slot past the end is `None`).
pub fn optional<'t>(inputs: &[Option<&'t HostTensor>], slot: usize) -> Option<&'t HostTensor> {
    inputs.get(slot).copied().flatten()
}

/// Index `i` along a dim of size `dim`, with ONNX negative indexing (`-dim <= i < dim`).
pub fn index(ctx: &NodeCtx, i: i64, dim: usize) -> Result<usize, HostError> {
    let d = dim as i64;
    if i < -d || i >= d {
        return Err(ctx.err(format!("index {i} is out of range for a dimension of size {dim}")));
    }
    Ok(if i < 0 { (i + d) as usize } else { i as usize })
}

/// Fails unless the two tensors have the same dtype.
pub fn same_dtype(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<(), HostError> {
    if a.dtype() != b.dtype() {
        return Err(ctx.err(format!("operands have different dtypes: {} and {}", a.dtype(), b.dtype())));
    }
    Ok(())
}
