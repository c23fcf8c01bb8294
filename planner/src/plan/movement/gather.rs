//! Lowering of the gathers: Gather along one axis (and fused with the elementwise program reading
//! it) and GatherND.

use kernels_gpu::abi::{GatherNdParams, GatherParams, KernelId, MAX_RANK};

use super::super::lower::{Lowered, dims};
use super::super::{Arg, PlanOptions, PlannedValue, Step};
use super::{MoveNode, by_size, contiguous, static_dims, step};
use crate::graph::{NodeId, ValueId};
use crate::tensor_info::DType;

/// ONNX Gather of 1-, 4- or 8-byte data by i64 indices along `axis`, static shapes.
#[allow(clippy::too_many_arguments)]
pub(in crate::plan) fn gather(
    id: NodeId,
    label: String,
    data: ValueId,
    indices: ValueId,
    out: ValueId,
    axis: i64,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (d, dtype) = dims(values, data)?;
    // int64 or int32 indices.
    let index_dtype = if values[indices.index()].dtype == DType::I32 { DType::I32 } else { DType::I64 };
    let n_idx = static_dims(values, indices, index_dtype)?.iter().product::<usize>() as u64;
    let kernel = by_size(
        dtype,
        [Some(KernelId::GatherB1), None, Some(KernelId::GatherF32), Some(KernelId::GatherB8)],
        "Gather",
    )?;
    let r = d.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) {
        return Err(format!("axis {axis} is out of range for rank {r}"));
    }
    let a = a as usize;
    let prod = |s: &[usize]| s.iter().product::<usize>() as u64;
    let index_bytes = index_dtype.size_bytes() as u32;
    let p = GatherParams {
        outer: prod(&d[..a]),
        axis_len: d[a] as u64,
        inner: prod(&d[a + 1..]),
        n_idx,
        index_bytes,
        _pad: 0,
    };
    let work = p.outer * p.n_idx * p.inner;
    let args = vec![Arg::Value(data), Arg::Value(indices), Arg::Value(out)];
    Ok(step(id, label, kernel, &p, work, o, args))
}

/// [`gather`] of f32 data whose result goes through the elementwise program `e` (its inputs 1..
/// `extras`) before it is stored (`gather_program_f32`).
#[allow(clippy::too_many_arguments)]
pub(in crate::plan) fn gather_program(
    id: NodeId,
    label: String,
    (data, indices, extras): (ValueId, ValueId, &[ValueId]),
    out: ValueId,
    axis: i64,
    e: kernels_gpu::abi::EwProgramParams,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let mut steps = gather(id, label, data, indices, out, axis, values, o)?;
    let [Step::Kernel { kernel, grid, args, .. }] = steps.as_mut_slice() else {
        return Err("a gather lowers to one launch".into());
    };
    if *kernel != KernelId::GatherF32 || extras.len() >= kernels_gpu::abi::EW_MAX_INPUTS {
        return Err("a fused gather takes f32 data and at most three program inputs".into());
    }
    *kernel = KernelId::GatherProgramF32;
    // One output element a thread (the program is over the output: `e.elems` of them), with
    // 32-bit offsets where they fit.
    *grid = super::super::lower::one_thread_each(e.elems)?;
    let e = e.with_fast_division();
    // (params, data, indices, out) -> (params, program, data, indices, x1, x2, x3, out)
    let out_arg = args.pop().ok_or("a gather launch without its output")?;
    args.insert(1, Arg::Params(super::super::lower::bytes_of(&e)));
    for k in 0..kernels_gpu::abi::EW_MAX_INPUTS - 1 {
        args.push(extras.get(k).map_or(Arg::Null, |&v| Arg::Value(v)));
    }
    args.push(out_arg);
    Ok(steps)
}

/// ONNX GatherND with `batch_dims`.
pub(in crate::plan) fn gather_nd(
    n: &MoveNode,
    batch_dims: usize,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, idx, y) = (n.input(0)?, n.input(1)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let id = static_dims(values, idx, DType::I64)?;
    let k = *id.last().ok_or("indices must have rank >= 1")?;
    if k == 0 || k > MAX_RANK || batch_dims + k > xd.len() || batch_dims >= id.len() {
        return Err(format!("indices {id:?} with batch_dims {batch_dims} on data {xd:?}"));
    }
    let prod = |s: &[usize]| s.iter().product::<usize>() as u64;
    let strides = contiguous(xd);
    let mut p = GatherNdParams {
        batch: prod(&xd[..batch_dims]),
        n: prod(&id[batch_dims..id.len() - 1]),
        slice: prod(&xd[batch_dims + k..]),
        batch_stride: prod(&xd[batch_dims..]),
        k: k as u32,
        ..GatherNdParams::default()
    };
    for t in 0..k {
        (p.dims[t], p.strides[t]) = (xd[batch_dims + t] as u64, strides[batch_dims + t] as u64);
    }
    let work = p.batch * p.n * p.slice;
    if work == 0 {
        return Ok(Vec::new());
    }
    let mut kernel = by_size(
        dtype,
        [Some(KernelId::GatherNdB1), None, Some(KernelId::GatherNdB4), Some(KernelId::GatherNdB8)],
        "GatherND",
    )?;
    // Slices of whole 16-byte vectors (rows of four or more f32) move as vectors: the view
    // counted in vectors, a quarter of the elements (or less) to index.
    let size = dtype.size_bytes() as u64;
    let vectors = |e: u64| (e * size).is_multiple_of(16);
    let mut work = work;
    if size > 1 && vectors(p.slice) && vectors(p.batch_stride) && (0..k).all(|t| vectors(p.strides[t])) {
        let per = 16 / size;
        (p.slice, p.batch_stride) = (p.slice / per, p.batch_stride / per);
        for s in &mut p.strides[..k] {
            *s /= per;
        }
        (kernel, work) = (KernelId::GatherNdB16, work / per);
    }
    Ok(step(n.id, n.label.clone(), kernel, &p, work, o, vec![Arg::Value(x), Arg::Value(idx), Arg::Value(y)]))
}
