//! Index-driven writes: ONNX ScatterElements (and the deprecated Scatter, which is
//! ScatterElements without reduction) and ScatterND, with the reductions none/add/mul/max/min.
//!
//! The output starts as a copy of `data`; updates are applied in row-major order of `indices`, so
//! with reduction `none` and duplicate indices the last update wins (ONNX leaves this undefined).
//! Floats combine in f64 and round once at the end (exact for none/max/min).

use planner::op::ScatterReduction;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::index::check_elementwise_indices;
use crate::reference::lanes::Lanes;
use crate::reference::strides::{self, count, index, ints, ravel, same_dtype};
use crate::tensor::HostTensor;

/// Combines `old` with `new` under `reduction`, on floats.
fn combine_f(reduction: ScatterReduction, old: f64, new: f64) -> f64 {
    match reduction {
        ScatterReduction::None => new,
        ScatterReduction::Add => old + new,
        ScatterReduction::Mul => old * new,
        ScatterReduction::Max if old.is_nan() || new.is_nan() => f64::NAN,
        ScatterReduction::Max => old.max(new),
        ScatterReduction::Min if old.is_nan() || new.is_nan() => f64::NAN,
        ScatterReduction::Min => old.min(new),
    }
}

/// Combines `old` with `new` under `reduction`, on integers (wrapping).
fn combine_i(reduction: ScatterReduction, old: i64, new: i64) -> i64 {
    match reduction {
        ScatterReduction::None => new,
        ScatterReduction::Add => old.wrapping_add(new),
        ScatterReduction::Mul => old.wrapping_mul(new),
        ScatterReduction::Max => old.max(new),
        ScatterReduction::Min => old.min(new),
    }
}

/// Applies `writes` (pairs of output offset and update offset) to a copy of `data`, reading the
/// updates in place (only the output is held widened, to combine in f64 / i64).
fn apply(
    ctx: &NodeCtx,
    data: &HostTensor,
    updates: &HostTensor,
    writes: impl Iterator<Item = (usize, usize)>,
    reduction: ScatterReduction,
) -> Result<HostTensor, HostError> {
    same_dtype(ctx, data, updates)?;
    let u = updates.data();
    let out = match Lanes::of(data)? {
        Lanes::F(mut d) => {
            for (to, from) in writes {
                d[to] = combine_f(reduction, d[to], u.float_at(from));
            }
            Lanes::F(d)
        }
        Lanes::I(mut d) => {
            for (to, from) in writes {
                d[to] = combine_i(reduction, d[to], u.int_at(from));
            }
            Lanes::I(d)
        }
    };
    out.into_tensor(data.dtype(), data.shape().to_vec())
}

/// ONNX `ScatterElements` (and `Scatter`): for every position `p` of `indices` (shape of
/// `updates`), `out[p with p[axis] = indices[p]] (reduction)= updates[p]`.
pub fn scatter_elements(
    ctx: &NodeCtx,
    data: &HostTensor,
    indices: &HostTensor,
    updates: &HostTensor,
    axis: i64,
    reduction: ScatterReduction,
) -> Result<HostTensor, HostError> {
    let axis = strides::axis(ctx, axis, data.shape().len())?;
    if indices.shape() != updates.shape() {
        return Err(ctx.err(format!(
            "indices shape {:?} differs from updates shape {:?}",
            indices.shape(),
            updates.shape()
        )));
    }
    check_elementwise_indices(ctx, data.shape(), indices.shape(), axis)?;
    let idx = ints(ctx, indices, "indices")?;
    let ds = strides::strides(data.shape());
    let mut writes = crate::tensor::try_with_capacity(idx.len(), "a working buffer")?;
    let mut p = vec![0usize; indices.shape().len()];
    for &i in &idx {
        let mut at = p.clone();
        at[axis] = index(ctx, i, data.shape()[axis])?;
        writes.push(ravel(&at, &ds));
        strides::next_index(&mut p, indices.shape());
    }
    apply(ctx, data, updates, writes.into_iter().enumerate().map(|(from, to)| (to, from)), reduction)
}

/// ONNX `ScatterND`: indices `[..., k]` address slices `data[i0..ik-1, ...]`; updates have shape
/// `indices.shape[..-1] ++ data.shape[k..]`.
pub fn scatter_nd(
    ctx: &NodeCtx,
    data: &HostTensor,
    indices: &HostTensor,
    updates: &HostTensor,
    reduction: ScatterReduction,
) -> Result<HostTensor, HostError> {
    let (ds, is) = (data.shape(), indices.shape());
    let Some(&k) = is.last() else {
        return Err(ctx.err("indices must have rank at least 1"));
    };
    if k > ds.len() {
        return Err(ctx.err(format!("index tuples of length {k} exceed data rank {}", ds.len())));
    }
    let mut expected = is[..is.len() - 1].to_vec();
    expected.extend_from_slice(&ds[k..]);
    if updates.shape() != expected.as_slice() {
        return Err(ctx.err(format!("updates shape {:?} should be {expected:?}", updates.shape())));
    }
    let idx = ints(ctx, indices, "indices")?;
    let tuples = count(ctx, &is[..is.len() - 1])?;
    let slice = count(ctx, &ds[k..])?;
    let addressed_strides = strides::strides(&ds[..k]);
    // One offset per index tuple; the writes of its slice follow from it.
    let mut starts = crate::tensor::try_with_capacity(tuples, "a working buffer")?;
    for t in 0..tuples {
        let mut at = 0;
        for ((&i, &n), &s) in idx[t * k..][..k].iter().zip(&ds[..k]).zip(&addressed_strides) {
            at += index(ctx, i, n)? * s;
        }
        starts.push(at * slice);
    }
    let writes =
        starts.iter().enumerate().flat_map(|(t, &at)| (0..slice).map(move |e| (at + e, t * slice + e)));
    apply(ctx, data, updates, writes, reduction)
}
