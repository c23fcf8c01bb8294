//! Indexing and padding operators: Gather*, Scatter*, Slice, Pad, Resize, OneHot, Trilu, NonZero.

use super::dims::slice_range;
use super::{Ctx, SymInt};
use crate::error::PlanError;
use crate::op::{Pad, Resize, Slice};
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

fn require_indices(ctx: &Ctx, t: &TensorInfo) -> Result<(), PlanError> {
    if t.dtype == DType::I64 || t.dtype == DType::I32 {
        Ok(())
    } else {
        Err(ctx.dtype(format!("indices must be int32 or int64, got {}", t.dtype)))
    }
}

/// `Gather`: `data[..axis] ++ indices.shape ++ data[axis+1..]`.
pub(crate) fn gather(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let (data, idx) = (ctx.input(0)?, ctx.input(1)?);
    require_indices(ctx, idx)?;
    let axis = ctx.axis(axis, data.rank())?;
    let d = data.shape.dims();
    let mut dims = d[..axis].to_vec();
    dims.extend_from_slice(idx.shape.dims());
    dims.extend_from_slice(&d[axis + 1..]);
    Ok(vec![TensorInfo { dtype: data.dtype, shape: Shape(dims) }])
}

/// A [`crate::op::FusedGather`]: its Gather checked as the Gather would be, its program inputs of
/// the data's dtype, and the output `dims` (holding the gathered elements).
pub(crate) fn fused_gather(ctx: &mut Ctx, f: &crate::op::FusedGather) -> Result<Vec<TensorInfo>, PlanError> {
    let gathered = gather(ctx, f.axis)?.remove(0);
    super::nn::fused_output(ctx, &gathered, 2, &f.dims)
}

/// `GatherElements`: the indices' shape.
pub(crate) fn gather_elements(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let (data, idx) = (ctx.input(0)?, ctx.input(1)?);
    require_indices(ctx, idx)?;
    if data.rank() != idx.rank() {
        return Err(ctx.mismatch(format!("data {data} and indices {idx} differ in rank")));
    }
    ctx.axis(axis, data.rank())?;
    Ok(vec![TensorInfo { dtype: data.dtype, shape: idx.shape.clone() }])
}

/// `GatherND`: `indices.shape[..q-1] ++ data.shape[batch_dims + k..]`, k = last indices dim.
pub(crate) fn gather_nd(ctx: &mut Ctx, batch_dims: usize) -> Result<Vec<TensorInfo>, PlanError> {
    let (data, idx) = (ctx.input(0)?, ctx.input(1)?);
    if idx.dtype != DType::I64 {
        return Err(ctx.dtype(format!("indices must be int64, got {}", idx.dtype)));
    }
    let q = idx.rank();
    let Some(Dim::Known(k)) = idx.shape.dims().last().cloned() else {
        return Err(ctx.unsupported());
    };
    if q == 0 || batch_dims >= q || batch_dims + k > data.rank() {
        return Err(ctx.mismatch(format!("data {data}, indices {idx}, batch_dims {batch_dims}")));
    }
    let mut dims = idx.shape.dims()[..q - 1].to_vec();
    dims.extend_from_slice(&data.shape.dims()[batch_dims + k..]);
    Ok(vec![TensorInfo { dtype: data.dtype, shape: Shape(dims) }])
}

/// `Scatter`, `ScatterElements`, `ScatterND`: the data's info.
pub(crate) fn scatter(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (data, idx, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    require_indices(ctx, idx)?;
    ctx.same_dtype(&[data, upd])?;
    Ok(vec![data.clone()])
}

/// `Slice` with constant (or symbolically known) starts, ends, axes and steps.
pub(crate) fn slice(ctx: &mut Ctx, s: &Slice) -> Result<Vec<TensorInfo>, PlanError> {
    let data = ctx.input(0)?;
    let rank = data.rank();
    let as_sym = |v: &[i64]| v.iter().map(|&x| Some(SymInt::Int(x))).collect::<Vec<_>>();
    // Outer `None`: not knowable; inner `None`: the input is absent (ONNX default).
    let optional = |i: usize| if ctx.opt(i).is_none() { Some(None) } else { ctx.ints(i).map(Some) };
    let (starts, ends, axes, steps) = match (&s.starts, &s.ends) {
        (Some(st), Some(en)) => (Some(as_sym(st)), Some(as_sym(en)), Some(s.axes.clone()), Some(None)),
        (None, None) => {
            ctx.input(1)?;
            ctx.input(2)?;
            (ctx.sym_ints(1), ctx.sym_ints(2), optional(3), optional(4))
        }
        _ => return Err(ctx.attr("legacy starts and ends must both be set")),
    };
    let mut dims = data.shape.0.clone();
    let (Some(starts), Some(ends), Some(axes), Some(steps)) = (starts, ends, axes.clone(), steps) else {
        // Unknown parameters: every axis that may be sliced gets a fresh size.
        let sliced = match axes.flatten() {
            Some(a) => ctx.axes(&a, rank)?,
            None => (0..rank).collect(),
        };
        for a in sliced {
            dims[a] = ctx.fresh();
        }
        return Ok(vec![TensorInfo { dtype: data.dtype, shape: Shape(dims) }]);
    };
    let n = starts.len();
    let axes = match axes {
        Some(a) => ctx.axes(&a, rank)?,
        None => (0..n).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n || n > rank {
        let lens = format!("{n}/{}/{}/{}", ends.len(), axes.len(), steps.len());
        return Err(ctx.mismatch(format!("starts/ends/axes/steps lengths {lens} for rank {rank}")));
    }
    for i in 0..n {
        let a = axes[i];
        dims[a] = slice_dim(ctx, &dims[a], starts[i].as_ref(), ends[i].as_ref(), steps[i])?;
    }
    Ok(vec![TensorInfo { dtype: data.dtype, shape: Shape(dims) }])
}

/// One sliced dim. Symbolic dims stay symbolic only for `[0 : end-or-beyond : 1]`.
fn slice_dim(
    ctx: &mut Ctx,
    d: &Dim,
    start: Option<&SymInt>,
    end: Option<&SymInt>,
    step: i64,
) -> Result<Dim, PlanError> {
    if step == 0 {
        return Err(ctx.attr("slice step is 0"));
    }
    match (d, start, end) {
        (Dim::Known(len), Some(SymInt::Int(s)), Some(SymInt::Int(e))) => {
            let len = i64::try_from(*len).map_err(|_| ctx.mismatch("dim too large"))?;
            let (_, count) = slice_range(len, *s, *e, step).ok_or_else(|| ctx.attr("slice step is 0"))?;
            Ok(Dim::Known(count))
        }
        (Dim::Symbol(sym), Some(SymInt::Int(0)), Some(end)) if step == 1 => match end {
            // Exporters write "to the end" as INT_MAX (i32 or i64); no real dim reaches 2^31.
            SymInt::Int(e) if *e >= i64::from(i32::MAX) => Ok(d.clone()),
            SymInt::Sym(s) if s == sym => Ok(d.clone()),
            SymInt::Int(0) => Ok(Dim::Known(0)),
            _ => Ok(ctx.fresh()),
        },
        (_, Some(SymInt::Int(s)), Some(SymInt::Int(e))) if step > 0 && *s >= 0 && e <= s => Ok(Dim::Known(0)),
        _ => Ok(ctx.fresh()),
    }
}

/// `Pad`: each padded dim grows by its begin and end pads (which may be negative).
pub(crate) fn pad(ctx: &mut Ctx, p: &Pad) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let pads = match &p.pads {
        Some(v) => Some(v.clone()),
        None => {
            ctx.input(1)?;
            ctx.ints(1)
        }
    };
    if let Some(v) = ctx.opt(2) {
        ctx.same_dtype(&[x, v])?;
    }
    let axes = match ctx.opt(3) {
        None => Some((0..rank).collect()),
        Some(_) => match ctx.ints(3) {
            Some(a) => Some(ctx.axes(&a, rank)?),
            None => None,
        },
    };
    let mut dims = x.shape.0.clone();
    let (Some(pads), Some(axes)) = (pads, axes.clone()) else {
        for a in axes.unwrap_or_else(|| (0..rank).collect()) {
            dims[a] = ctx.fresh();
        }
        return Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }]);
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.attr(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let n = axes.len();
    for (i, &a) in axes.iter().enumerate() {
        let grow = pads[i].saturating_add(pads[n + i]);
        dims[a] = match &dims[a] {
            Dim::Known(d) => {
                let out = (*d as i64).checked_add(grow).unwrap_or(-1);
                if out < 0 {
                    return Err(ctx.mismatch(format!("pads {pads:?} shrink axis {a} of size {d} below 0")));
                }
                Dim::Known(out as usize)
            }
            s if grow == 0 => s.clone(),
            _ => ctx.fresh(),
        };
    }
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// `Resize` by constant `sizes` (input 3) or `scales` (input 2).
pub(crate) fn resize(ctx: &mut Ctx, r: &Resize) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let axes = match &r.axes {
        Some(a) => ctx.axes(a, rank)?,
        None => (0..rank).collect(),
    };
    let nonempty = |i: usize| ctx.opt(i).is_some_and(|t| t.shape.known_elems() != Some(0));
    let mut dims = x.shape.0.clone();
    if nonempty(3) {
        let Some(sizes) = ctx.ints(3) else {
            return Ok(vec![fresh_axes(ctx, x, &axes)]);
        };
        if sizes.len() != axes.len() || sizes.iter().any(|&s| s < 0) {
            return Err(ctx.attr(format!("sizes {sizes:?} for {} axes", axes.len())));
        }
        // keep_aspect_ratio_policy: one scale for every resized axis, the smallest (not_larger)
        // or largest (not_smaller) of size / input extent; needs the input extents.
        let policy = r.keep_aspect_ratio_policy;
        let extents: Option<Vec<usize>> = axes.iter().map(|&a| dims[a].known()).collect();
        match (policy, extents) {
            (crate::op::KeepAspectRatioPolicy::Stretch, _) => {
                for (&a, &s) in axes.iter().zip(&sizes) {
                    dims[a] = Dim::Known(s as usize);
                }
            }
            (_, None) => return Ok(vec![fresh_axes(ctx, x, &axes)]),
            (p, Some(ext)) => {
                if ext.contains(&0) {
                    return Err(ctx.attr("sizes with a keep_aspect_ratio_policy need non-empty axes"));
                }
                let ratios = sizes.iter().zip(&ext).map(|(&s, &e)| s as f64 / e as f64);
                let common = if p == crate::op::KeepAspectRatioPolicy::NotLarger {
                    ratios.fold(f64::INFINITY, f64::min)
                } else {
                    ratios.fold(0.0, f64::max)
                };
                for (&a, &e) in axes.iter().zip(&ext) {
                    dims[a] = Dim::Known((common * e as f64 + 0.5).floor() as usize);
                }
            }
        }
    } else if nonempty(2) {
        let Some(scales) = ctx.constant(2).map(|c| c.to_f64s()) else {
            return Ok(vec![fresh_axes(ctx, x, &axes)]);
        };
        if scales.len() != axes.len() || scales.iter().any(|&s| s <= 0.0) {
            return Err(ctx.attr(format!("scales {scales:?} for {} axes", axes.len())));
        }
        for (&a, &s) in axes.iter().zip(&scales) {
            dims[a] = match &dims[a] {
                Dim::Known(d) => Dim::Known((*d as f64 * s).floor() as usize),
                sym if s == 1.0 => sym.clone(),
                _ => ctx.fresh(),
            };
        }
    } else {
        return Err(ctx.attr("Resize needs scales or sizes"));
    }
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

fn fresh_axes(ctx: &mut Ctx, x: &TensorInfo, axes: &[usize]) -> TensorInfo {
    let mut dims = x.shape.0.clone();
    for &a in axes {
        dims[a] = ctx.fresh();
    }
    TensorInfo { dtype: x.dtype, shape: Shape(dims) }
}

/// `OneHot`: a depth-sized axis inserted at `axis`; dtype of `values`.
pub(crate) fn one_hot(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let (idx, depth, values) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if depth.shape.known_elems() != Some(1) || values.shape.known_elems() != Some(2) {
        return Err(
            ctx.mismatch(format!("depth {depth} must be a scalar and values {values} have two elements"))
        );
    }
    let axis = ctx.axis(axis, idx.rank() + 1)?;
    let d = match ctx.ints(1).as_deref() {
        Some(&[n]) if n > 0 => Dim::Known(n as usize),
        Some(other) => return Err(ctx.attr(format!("depth {other:?} must be positive"))),
        None => match ctx.constant(1).map(|c| c.to_f64s()).as_deref() {
            Some(&[n]) if n >= 1.0 => Dim::Known(n as usize),
            _ => ctx.fresh(),
        },
    };
    let mut dims = idx.shape.0.clone();
    dims.insert(axis, d);
    Ok(vec![TensorInfo { dtype: values.dtype, shape: Shape(dims) }])
}

/// `Trilu`: same info; rank >= 2.
pub(crate) fn trilu(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.mismatch(format!("input must have rank >= 2, got {x}")));
    }
    Ok(vec![x.clone()])
}

/// `NonZero`: `[rank, count]` with a data-dependent (fresh) count; a scalar counts as shape `[1]`
/// (as numpy's `nonzero`, which the ONNX reference calls).
pub(crate) fn non_zero(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let count = ctx.fresh();
    Ok(vec![TensorInfo { dtype: DType::I64, shape: Shape(vec![Dim::Known(x.rank().max(1)), count]) }])
}
