//! Shape ops: ONNX Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, Expand, Transpose, Tile,
//! Identity and Dropout (inference). Reshaping ops keep the row-major data and change only the
//! shape; Expand, Transpose and Tile copy elements through offset maps.

use planner::DType;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{Lanes, gather_iter};
use crate::reference::strides::{
    self, broadcast_all, broadcast_offsets, count, dims, ints, next_index, strided_offsets,
};
use crate::tensor::HostTensor;

/// `t`'s data with a new shape of the same element count.
pub fn with_shape(ctx: &NodeCtx, t: &HostTensor, shape: Vec<usize>) -> Result<HostTensor, HostError> {
    if count(ctx, &shape)? != t.len() {
        return Err(ctx.err(format!(
            "cannot view {} elements of shape {:?} as shape {shape:?}",
            t.len(),
            t.shape()
        )));
    }
    HostTensor::new(shape, t.data().clone())
}

/// ONNX `Reshape`: a 0 copies the input dim (or means size 0 with `allowzero`), one -1 is inferred.
pub fn reshape(
    ctx: &NodeCtx,
    x: &HostTensor,
    shape: &HostTensor,
    allowzero: bool,
) -> Result<HostTensor, HostError> {
    let spec = ints(ctx, shape, "shape")?;
    if allowzero && spec.contains(&0) && spec.contains(&-1) {
        return Err(ctx.err("with allowzero, shape may not contain both 0 and -1"));
    }
    let mut out = crate::tensor::try_with_capacity(spec.len(), "a working buffer")?;
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        out.push(match d {
            0 if !allowzero => *x
                .shape()
                .get(i)
                .ok_or_else(|| ctx.err(format!("shape {spec:?}: dim {i} copies a missing input dim")))?,
            -1 if infer.is_none() => {
                infer = Some(i);
                1
            }
            d if d >= 0 => d as usize,
            _ => return Err(ctx.err(format!("invalid shape {spec:?}"))),
        });
    }
    if let Some(i) = infer {
        let known = count(ctx, &out)?;
        if known == 0 || !x.len().is_multiple_of(known) {
            return Err(ctx.err(format!("cannot infer -1 in {spec:?} for {} elements", x.len())));
        }
        out[i] = x.len() / known;
    }
    with_shape(ctx, x, out)
}

/// ONNX `Flatten`: `[prod(dims[..axis]), prod(dims[axis..])]`, axis in `[-rank, rank]`.
pub fn flatten(ctx: &NodeCtx, x: &HostTensor, axis: i64) -> Result<HostTensor, HostError> {
    let rank = x.shape().len();
    let axis = if axis == rank as i64 { rank } else { strides::axis(ctx, axis, rank)? };
    let shape = vec![x.shape()[..axis].iter().product(), x.shape()[axis..].iter().product()];
    with_shape(ctx, x, shape)
}

/// ONNX `Squeeze`: removes the listed size-1 axes, or every size-1 axis when none are listed.
pub fn squeeze(ctx: &NodeCtx, x: &HostTensor, listed: Option<Vec<i64>>) -> Result<HostTensor, HostError> {
    let rank = x.shape().len();
    let drop = match listed {
        Some(list) => {
            let a = strides::axes(ctx, &list, rank)?;
            if let Some(&bad) = a.iter().find(|&&d| x.shape()[d] != 1) {
                return Err(ctx.err(format!("cannot squeeze axis {bad} of size {}", x.shape()[bad])));
            }
            a
        }
        None => (0..rank).filter(|&d| x.shape()[d] == 1).collect(),
    };
    let shape = x.shape().iter().enumerate().filter(|(d, _)| !drop.contains(d)).map(|(_, &n)| n).collect();
    with_shape(ctx, x, shape)
}

/// ONNX `Unsqueeze`: inserts size-1 axes at the listed positions of the output.
pub fn unsqueeze(ctx: &NodeCtx, x: &HostTensor, listed: &[i64]) -> Result<HostTensor, HostError> {
    let out_rank = x.shape().len() + listed.len();
    let new = strides::axes(ctx, listed, out_rank)?;
    let mut rest = x.shape().iter();
    let shape =
        (0..out_rank).map(|d| if new.contains(&d) { 1 } else { rest.next().copied().unwrap_or(1) }).collect();
    with_shape(ctx, x, shape)
}

/// ONNX `Shape` (opset 15): dims `start..end` (negative counts from the back, both clamped to
/// `[0, rank]`) as a 1-D I64 tensor.
pub fn shape_of(x: &HostTensor, start: i64, end: Option<i64>) -> Result<HostTensor, HostError> {
    let rank = x.shape().len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let (s, e) = (clamp(start), clamp(end.unwrap_or(rank)));
    let v: Vec<i64> = if s < e { x.shape()[s..e].iter().map(|&d| d as i64).collect() } else { Vec::new() };
    HostTensor::new(vec![v.len()], v)
}

/// ONNX `Size`: the element count as a scalar I64.
pub fn size(x: &HostTensor) -> Result<HostTensor, HostError> {
    HostTensor::new(vec![], vec![x.len() as i64])
}

/// ONNX `Expand`: broadcasts `x` against `shape` (bidirectionally, so the result may be larger
/// than `shape`).
pub fn expand(ctx: &NodeCtx, x: &HostTensor, shape: &HostTensor) -> Result<HostTensor, HostError> {
    let target = dims(ctx, shape, "shape")?;
    let out = broadcast_all(ctx, &[x.shape(), &target])?;
    let n = count(ctx, &out)?;
    gather_iter(x, n, broadcast_offsets(x.shape(), &out), out)
}

/// ONNX `Transpose`: output axis `i` is input axis `perm[i]` (default: reversed).
pub fn transpose(ctx: &NodeCtx, x: &HostTensor, perm: Option<&[usize]>) -> Result<HostTensor, HostError> {
    let rank = x.shape().len();
    let perm: Vec<usize> = perm.map_or_else(|| (0..rank).rev().collect(), <[usize]>::to_vec);
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..rank).collect::<Vec<_>>() {
        return Err(ctx.err(format!("perm {perm:?} is not a permutation of 0..{rank}")));
    }
    let in_strides = strides::strides(x.shape());
    let out_shape: Vec<usize> = perm.iter().map(|&p| x.shape()[p]).collect();
    let moved: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    gather_iter(x, x.len(), strided_offsets(&out_shape, moved), out_shape)
}

/// ONNX `Tile`: repeats `x` `repeats[d]` times along each axis d.
pub fn tile(ctx: &NodeCtx, x: &HostTensor, repeats: &HostTensor) -> Result<HostTensor, HostError> {
    let reps = dims(ctx, repeats, "repeats")?;
    if reps.len() != x.shape().len() {
        return Err(ctx.err(format!("repeats has {} entries for rank {}", reps.len(), x.shape().len())));
    }
    let out_shape: Vec<usize> = x
        .shape()
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.checked_mul(r).ok_or_else(|| ctx.err(format!("repeats {reps:?} overflow"))))
        .collect::<Result<_, _>>()?;
    let n = count(ctx, &out_shape)?;
    let in_strides = strides::strides(x.shape());
    let mut idx = vec![0usize; out_shape.len()];
    let (shape, wrap) = (out_shape.clone(), x.shape().to_vec());
    let src = (0..n).map(move |_| {
        let at = idx.iter().zip(&wrap).zip(&in_strides).map(|((&i, &d), &s)| (i % d) * s).sum();
        next_index(&mut idx, &shape);
        at
    });
    gather_iter(x, n, src, out_shape)
}

/// ONNX `Dropout` at inference: output = input; the optional mask is all true. Training mode with
/// a non-zero ratio is random and unsupported.
pub fn dropout(
    ctx: &NodeCtx,
    x: &HostTensor,
    ratio: Option<&HostTensor>,
    training: Option<&HostTensor>,
) -> Result<Vec<HostTensor>, HostError> {
    let training = match training {
        Some(t) => Lanes::of(t)?.to_f64s().first().is_some_and(|&v| v != 0.0),
        None => false,
    };
    let ratio = match ratio {
        Some(r) => strides::scalar_f64(ctx, r, "ratio")?,
        None => 0.5,
    };
    if training && ratio != 0.0 {
        return Err(ctx.unsupported("training-mode Dropout (random masks)"));
    }
    let mask = Lanes::I(vec![1; x.len()]).into_tensor(DType::Bool, x.shape().to_vec())?;
    Ok(vec![x.clone(), mask])
}
