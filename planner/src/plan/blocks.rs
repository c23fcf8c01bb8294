//! Lowerings of TensorScatter and Det (`kernels_gpu::blocks`), and of TreeEnsemble
//! (`kernels_gpu::tree`).

use kernels_gpu::abi::{
    DET_MAX_M, DetParams, KernelId, TREE_NODE_WORDS, TensorScatterParams, TreeParams, tree_aggregate,
};

use super::lower::{Lowered, dims};
use super::movement::{MoveNode, by_size, step};
use super::{Arg, PlanOptions, PlannedValue};
use crate::op::{TensorScatter, TreeAggregate, TreeEnsemble};
use crate::tensor_info::DType;

/// ONNX TensorScatter: the cache with each batch entry's update rows written along the sequence
/// axis from its offset (`write_indices`, optional).
pub(super) fn tensor_scatter(
    n: &MoveNode,
    a: &TensorScatter,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (cache, update, y) = (n.input(0)?, n.input(1)?, n.output()?);
    let ((cd, dtype), (ud, ut)) = (dims(values, cache)?, dims(values, update)?);
    let rank = cd.len() as i64;
    let ax = if a.axis < 0 { a.axis + rank } else { a.axis };
    if !(1..rank).contains(&ax) {
        return Err(format!("axis {} of a rank-{rank} cache (the batch axis 0 cannot be it)", a.axis));
    }
    let ax = ax as usize;
    let fits =
        ud.len() == cd.len() && (0..cd.len()).all(|d| if d == ax { ud[d] <= cd[d] } else { ud[d] == cd[d] });
    if !fits || ut != dtype {
        return Err(format!("update {ud:?} {ut} does not fit cache {cd:?} {dtype} along axis {ax}"));
    }
    let offsets = n.ins.get(2).copied().flatten();
    if let Some(w) = offsets {
        let (wd, wt) = dims(values, w)?;
        if wt != DType::I64 || wd != [cd[0]] {
            return Err(format!("write_indices {wd:?} {wt} must be ({}) int64", cd[0]));
        }
    }
    let outer = cd[..ax].iter().product::<usize>() as u64;
    let p = TensorScatterParams {
        outer,
        len: cd[ax] as u64,
        ulen: ud[ax] as u64,
        inner: cd[ax + 1..].iter().product::<usize>() as u64,
        per_batch: (outer / cd[0].max(1) as u64).max(1),
        circular: a.circular as u32,
        has_offsets: offsets.is_some() as u32,
    };
    let kernel = by_size(
        dtype,
        [None, None, Some(KernelId::TensorScatterB4), Some(KernelId::TensorScatterB8)],
        "TensorScatter",
    )?;
    let work = p.outer * p.len * p.inner;
    let args =
        vec![Arg::Value(cache), Arg::Value(update), offsets.map_or(Arg::Null, Arg::Value), Arg::Value(y)];
    Ok(step(n.id, n.label.clone(), kernel, &p, work, o, args))
}

/// ONNX Det of f32 matrices of at most [`DET_MAX_M`] rows.
pub(super) fn det(n: &MoveNode, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let r = xd.len();
    if dtype != DType::F32 {
        return Err(format!("X is {dtype}; the GPU kernel takes f32"));
    }
    if r < 2 || xd[r - 1] != xd[r - 2] {
        return Err(format!("X {xd:?} must end in square matrices"));
    }
    if xd[r - 1] > DET_MAX_M as usize {
        return Err(format!("matrices of {} rows (the kernel takes up to {DET_MAX_M})", xd[r - 1]));
    }
    let p = DetParams { batch: xd[..r - 2].iter().product::<usize>() as u64, m: xd[r - 1] as u32, _pad: 0 };
    Ok(step(n.id, n.label.clone(), KernelId::DetF32, &p, p.batch, o, vec![Arg::Value(x), Arg::Value(y)]))
}

/// ai.onnx.ml TreeEnsemble of f32 rows, its tables packed by `decompose` into input 1.
pub(super) fn tree_ensemble(
    n: &MoveNode,
    t: &TreeEnsemble,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let tables =
        n.input(1).map_err(|_| "the ensemble's tables were not packed (an f32 X is needed)".to_string())?;
    let ((xd, xt), (td, tt)) = (dims(values, x)?, dims(values, tables)?);
    if xt != DType::F32 || tt != DType::F64 {
        return Err(format!("X is {xt}; the GPU kernel takes f32"));
    }
    let &[rows, features] = xd else { return Err(format!("X {xd:?} must be (N, F)")) };
    let (nodes, trees, leaves) =
        (t.nodes_modes.len() as u64, t.tree_roots.len() as u64, t.leaf_weights.len() as u64);
    let members: usize = t.members.iter().map(Vec::len).sum();
    if td != [(nodes * TREE_NODE_WORDS + trees + 2 * leaves) as usize + members] {
        return Err(format!("tables {td:?} do not hold the ensemble"));
    }
    let (lowest, largest) = (f32::MIN as f64, f32::MAX as f64);
    let (aggregate, init) = match t.aggregate {
        TreeAggregate::Sum => (tree_aggregate::SUM, 0.0),
        TreeAggregate::Average => (tree_aggregate::AVERAGE, 0.0),
        TreeAggregate::Min => (tree_aggregate::MIN, largest),
        TreeAggregate::Max => (tree_aggregate::MAX, lowest),
    };
    let p = TreeParams {
        rows: rows as u64,
        features: features as u64,
        targets: t.n_targets as u64,
        nodes,
        trees,
        leaves,
        aggregate,
        _pad: 0,
        init,
    };
    let work = p.rows * p.targets;
    Ok(step(
        n.id,
        n.label.clone(),
        KernelId::TreeEnsembleF32,
        &p,
        work,
        o,
        vec![Arg::Value(x), Arg::Value(tables), Arg::Value(y)],
    ))
}
