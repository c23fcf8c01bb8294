//! Index-driven reads: ONNX Gather, GatherElements and GatherND. Indices are I64 or I32, may be
//! negative (counting from the end of the indexed dimension), and an index out of range is an
//! error naming the node. Gather and GatherND copy whole rows ([`TensorData::take_runs`]);
//! GatherElements computes, for every output element, the offset of the input element it
//! copies, then copies through [`gather_elems`]. Both copy in the data's own dtype.

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::gather_elems;
use crate::reference::reduce::split_at_axis;
use crate::reference::strides::{self, count, index, ints, next_index, ravel};
use crate::tensor::HostTensor;
#[cfg(doc)]
use crate::tensor::TensorData;

/// ONNX `Gather`: output shape `data.shape[..axis] ++ indices.shape ++ data.shape[axis+1..]`;
/// `out[a, i, b] = data[a, indices[i], b]`.
pub fn gather(
    ctx: &NodeCtx,
    data: &HostTensor,
    indices: &HostTensor,
    axis: i64,
) -> Result<HostTensor, HostError> {
    let axis = strides::axis(ctx, axis, data.shape().len())?;
    let (outer, len, inner) = split_at_axis(data.shape(), axis);
    let idx: Vec<usize> =
        ints(ctx, indices, "indices")?.iter().map(|&i| index(ctx, i, len)).collect::<Result<_, _>>()?;
    let mut shape = data.shape()[..axis].to_vec();
    shape.extend_from_slice(indices.shape());
    shape.extend_from_slice(&data.shape()[axis + 1..]);
    let n = count(ctx, &shape)?;
    let rows =
        (0..outer).flat_map(|o| idx.iter().map(move |&k| (o * len + k) * inner..(o * len + k + 1) * inner));
    HostTensor::new(shape, data.data().take_runs(n, rows)?)
}

/// ONNX `GatherElements`: output shape is `indices.shape`; `out[p] = data[p with p[axis] =
/// indices[p]]`. Indices must have data's rank and fit inside data on the other axes.
pub fn gather_elements(
    ctx: &NodeCtx,
    data: &HostTensor,
    indices: &HostTensor,
    axis: i64,
) -> Result<HostTensor, HostError> {
    let rank = data.shape().len();
    let axis = strides::axis(ctx, axis, rank)?;
    check_elementwise_indices(ctx, data.shape(), indices.shape(), axis)?;
    let idx = ints(ctx, indices, "indices")?;
    let ds = strides::strides(data.shape());
    let mut pos = vec![0usize; rank];
    let mut src = crate::tensor::try_with_capacity(idx.len(), "a working buffer")?;
    for &i in &idx {
        let mut p = pos.clone();
        p[axis] = index(ctx, i, data.shape()[axis])?;
        src.push(ravel(&p, &ds));
        next_index(&mut pos, indices.shape());
    }
    gather_elems(data, &src, indices.shape().to_vec())
}

/// Checks that `indices` has `data`'s rank and is no larger on every axis but `axis`.
pub fn check_elementwise_indices(
    ctx: &NodeCtx,
    data: &[usize],
    indices: &[usize],
    axis: usize,
) -> Result<(), HostError> {
    let fits = data.len() == indices.len()
        && data.iter().zip(indices).enumerate().all(|(d, (&n, &m))| d == axis || m <= n);
    if !fits {
        return Err(
            ctx.err(format!("indices shape {indices:?} does not fit data shape {data:?} (axis {axis})"))
        );
    }
    Ok(())
}

/// ONNX `GatherND` with `batch_dims = b`: indices `[..., k]` address the first `k` non-batch dims
/// of data; output shape `indices.shape[..-1] ++ data.shape[b+k..]`.
pub fn gather_nd(
    ctx: &NodeCtx,
    data: &HostTensor,
    indices: &HostTensor,
    batch_dims: usize,
) -> Result<HostTensor, HostError> {
    let (ds, is) = (data.shape(), indices.shape());
    let Some(&k) = is.last() else {
        return Err(ctx.err("indices must have rank at least 1"));
    };
    if batch_dims >= is.len()
        || batch_dims >= ds.len()
        || ds[..batch_dims] != is[..batch_dims]
        || batch_dims + k > ds.len()
    {
        return Err(ctx.err(format!(
            "indices shape {is:?} does not fit data shape {ds:?} with batch_dims {batch_dims}"
        )));
    }
    let idx = ints(ctx, indices, "indices")?;
    let batches = count(ctx, &ds[..batch_dims])?;
    let tuples_per_batch = count(ctx, &is[batch_dims..is.len() - 1])?;
    let slice = count(ctx, &ds[batch_dims + k..])?;
    let per_batch = count(ctx, &ds[batch_dims..])?;
    let addressed = &ds[batch_dims..batch_dims + k];
    let as_ = strides::strides(addressed);
    let mut shape = is[..is.len() - 1].to_vec();
    shape.extend_from_slice(&ds[batch_dims + k..]);
    let n = count(ctx, &shape)?;
    let mut starts = crate::tensor::try_with_capacity(batches * tuples_per_batch, "a working buffer")?;
    for b in 0..batches {
        for t in 0..tuples_per_batch {
            let tuple = &idx[(b * tuples_per_batch + t) * k..][..k];
            let mut at = 0;
            for ((&i, &n), &s) in tuple.iter().zip(addressed).zip(&as_) {
                at += index(ctx, i, n)? * s;
            }
            starts.push(b * per_batch + at * slice);
        }
    }
    HostTensor::new(shape, data.data().take_runs(n, starts.iter().map(|&s| s..s + slice))?)
}
