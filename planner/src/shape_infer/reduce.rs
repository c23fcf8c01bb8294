//! Reductions (`Reduce*`, `ArgMax`, `ArgMin`), `CumSum` and `TopK`.
//!
//! Reduction axes come from the legacy attribute or from constant input 1. When input 1 is not
//! constant, the output rank is still known (keepdims, or the axes tensor's length), but which dims
//! shrink is not, so every dim that is not already 1 gets a fresh symbol.

use super::Ctx;
use crate::error::PlanError;
use crate::op::{ArgReduce, Reduce, TopK};
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// `ReduceSum`, `ReduceMean`, ...
pub(crate) fn reduce(ctx: &mut Ctx, r: &Reduce) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let rank = x.rank();
    let axes: Vec<i64> = match (&r.axes, ctx.opt(1)) {
        (Some(a), _) => a.clone(),
        (None, None) => Vec::new(),
        (None, Some(t)) => match ctx.ints(1) {
            Some(a) => a,
            None => return unknown_axes(ctx, x, r.keepdims, t),
        },
    };
    if axes.is_empty() && r.noop_with_empty_axes {
        return Ok(vec![x.clone()]);
    }
    let axes = if axes.is_empty() { (0..rank).collect() } else { ctx.axes(&axes, rank)? };
    Ok(vec![TensorInfo { dtype: x.dtype, shape: reduced(&x.shape, &axes, r.keepdims) }])
}

fn unknown_axes(
    ctx: &mut Ctx,
    x: &TensorInfo,
    keepdims: bool,
    axes: &TensorInfo,
) -> Result<Vec<TensorInfo>, PlanError> {
    let rank = if keepdims {
        x.rank()
    } else {
        match axes.shape.known_elems() {
            Some(k) if k <= x.rank() => x.rank() - k,
            _ => return Err(ctx.unsupported()),
        }
    };
    let dims = (0..rank)
        .map(|i| if keepdims && x.shape.dims()[i] == Dim::Known(1) { Dim::Known(1) } else { ctx.fresh() })
        .collect();
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

fn reduced(shape: &Shape, axes: &[usize], keepdims: bool) -> Shape {
    let mut dims = Vec::with_capacity(shape.rank());
    for (i, d) in shape.dims().iter().enumerate() {
        if !axes.contains(&i) {
            dims.push(d.clone());
        } else if keepdims {
            dims.push(Dim::Known(1));
        }
    }
    Shape(dims)
}

/// `ArgMax`, `ArgMin`: `I64` indices.
pub(crate) fn arg_reduce(ctx: &mut Ctx, a: &ArgReduce) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(a.axis, x.rank())?;
    Ok(vec![TensorInfo { dtype: DType::I64, shape: reduced(&x.shape, &[axis], a.keepdims) }])
}

/// `CumSum`: same info; the axis input is a 0-D or 1-element integer tensor.
pub(crate) fn cumsum(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, axis) = (ctx.input(0)?, ctx.input(1)?);
    if !axis.dtype.is_int() || axis.rank() > 1 {
        return Err(ctx.mismatch(format!("axis must be an integer scalar, got {axis}")));
    }
    if let Some(&[a]) = ctx.ints(1).as_deref() {
        ctx.axis(a, x.rank())?;
    }
    Ok(vec![x.clone()])
}

/// `TopK`: values and `I64` indices with the axis dim replaced by k.
pub(crate) fn top_k(ctx: &mut Ctx, t: &TopK) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(t.axis, x.rank())?;
    let k = match t.k {
        Some(k) => Some(k),
        None => {
            ctx.input(1)?;
            match ctx.ints(1).as_deref() {
                Some(&[k]) => Some(k),
                Some(other) => return Err(ctx.mismatch(format!("K must hold one value, got {other:?}"))),
                None => None,
            }
        }
    };
    let mut dims = x.shape.0.clone();
    dims[axis] = match k {
        Some(k) => {
            let k = usize::try_from(k).map_err(|_| ctx.attr(format!("k = {k} is negative")))?;
            if let Dim::Known(n) = dims[axis]
                && k > n
            {
                return Err(ctx.mismatch(format!("k = {k} exceeds axis size {n}")));
            }
            Dim::Known(k)
        }
        None => ctx.fresh(),
    };
    let shape = Shape(dims);
    Ok(vec![TensorInfo { dtype: x.dtype, shape: shape.clone() }, TensorInfo { dtype: DType::I64, shape }])
}
