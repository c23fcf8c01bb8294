//! Shape inference tests, one file per op family, plus property tests over random DAGs.

mod control;
mod elementwise;
mod nn;
mod preview;
mod proptests;
mod sequence;
mod shape_ops;
mod vision;

use crate::graph::{Graph, ValueId};
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// Dims from a compact spec: `"b,3,4"` (numbers are known, names are symbols; `""` is a scalar).
pub(super) fn dims(spec: &str) -> Vec<Dim> {
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse::<usize>().map(Dim::Known).unwrap_or_else(|_| Dim::from(s.trim())))
        .collect()
}

/// An info from a dtype and a dims spec.
pub(super) fn info(dtype: DType, spec: &str) -> TensorInfo {
    TensorInfo { dtype, shape: Shape(dims(spec)) }
}

/// Infers `g` and returns the info of `v`.
pub(super) fn infer_one(g: &Graph, v: ValueId) -> TensorInfo {
    let infos = super::infer(g).unwrap_or_else(|e| panic!("inference failed: {e}"));
    infos[v.index()].clone()
}

/// True when `d` is a symbol made by inference (not declared by the model).
pub(super) fn is_fresh(d: &Dim) -> bool {
    matches!(d, Dim::Symbol(s) if s.starts_with("unk__"))
}
