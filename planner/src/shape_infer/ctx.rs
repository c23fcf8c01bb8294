//! `Ctx`: what an op's inference function sees of its node, and the error constructors that name it.

use super::{Captured, PartialValue, Scope, SymInt, SymbolGen};
use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::{Node, ValueId};
use crate::tensor_info::{DType, Dim, TensorInfo};

/// Inference context of one node.
pub(crate) struct Ctx<'a> {
    pub node: &'a Node,
    /// Display name for errors.
    pub label: String,
    ins: Vec<Option<&'a TensorInfo>>,
    vals: Vec<Option<&'a PartialValue>>,
    consts: Vec<Option<&'a ConstTensor>>,
    scope: Scope<'a>,
    pub syms: &'a mut SymbolGen,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        node: &'a Node,
        label: String,
        ins: Vec<Option<&'a TensorInfo>>,
        vals: Vec<Option<&'a PartialValue>>,
        consts: Vec<Option<&'a ConstTensor>>,
        scope: Scope<'a>,
        syms: &'a mut SymbolGen,
    ) -> Self {
        Ctx { node, label, ins, vals, consts, scope, syms }
    }

    /// The ONNX op_type.
    pub fn op(&self) -> &'static str {
        self.node.op.name()
    }

    /// Number of input slots.
    pub fn n_inputs(&self) -> usize {
        self.ins.len()
    }

    /// Required input `i`.
    pub fn input(&self, i: usize) -> Result<&'a TensorInfo, PlanError> {
        self.opt(i).ok_or_else(|| PlanError::MissingInput {
            node: self.label.clone(),
            op: self.op(),
            index: i,
        })
    }

    /// Optional input `i`.
    pub fn opt(&self, i: usize) -> Option<&'a TensorInfo> {
        self.ins.get(i).copied().flatten()
    }

    /// All filled inputs.
    pub fn all_inputs(&self) -> Vec<&'a TensorInfo> {
        self.ins.iter().copied().flatten().collect()
    }

    /// Tracked contents of input `i`.
    pub fn value(&self, i: usize) -> Option<&'a PartialValue> {
        self.vals.get(i).copied().flatten()
    }

    /// Contents of input `i` when every element is a known integer.
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        self.value(i)?.ints()
    }

    /// Contents of input `i` as dims-to-be: known ints, symbols, or `None` per element.
    pub fn sym_ints(&self, i: usize) -> Option<Vec<Option<SymInt>>> {
        self.value(i).map(|v| v.elems.clone())
    }

    /// The constant tensor feeding input `i` (initializer, `Constant` node, or captured constant).
    pub fn constant(&self, i: usize) -> Option<&'a ConstTensor> {
        self.consts.get(i).copied().flatten()
    }

    /// What a subgraph sees of outer value `v`.
    pub fn captured(&self, v: ValueId) -> Option<Captured> {
        self.scope.captured(v)
    }

    /// A fresh symbolic dim.
    pub fn fresh(&mut self) -> Dim {
        self.syms.fresh()
    }

    /// `n` fresh symbolic dims.
    pub fn fresh_dims(&mut self, n: usize) -> Vec<Dim> {
        (0..n).map(|_| self.syms.fresh()).collect()
    }

    /// Normalizes a possibly negative axis against `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize, PlanError> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if (0..r).contains(&a) {
            Ok(a as usize)
        } else {
            Err(self.attr(format!("axis {axis} out of range for rank {rank}")))
        }
    }

    /// Normalizes a list of axes; rejects duplicates.
    pub fn axes(&self, axes: &[i64], rank: usize) -> Result<Vec<usize>, PlanError> {
        let mut out = Vec::with_capacity(axes.len());
        for &a in axes {
            let a = self.axis(a, rank)?;
            if out.contains(&a) {
                return Err(self.attr(format!("axis {a} repeated in {axes:?}")));
            }
            out.push(a);
        }
        Ok(out)
    }

    /// All `infos` share one dtype; returns it.
    pub fn same_dtype(&self, infos: &[&TensorInfo]) -> Result<DType, PlanError> {
        let Some(first) = infos.first() else {
            return Err(self.arity("no inputs".to_string()));
        };
        for t in infos {
            if t.dtype != first.dtype {
                return Err(
                    self.dtype(format!("inputs have different dtypes {} and {}", first.dtype, t.dtype))
                );
            }
        }
        Ok(first.dtype)
    }

    /// Input `i` must have a floating-point dtype.
    pub fn require_float(&self, t: &TensorInfo) -> Result<(), PlanError> {
        if t.dtype.is_float() {
            Ok(())
        } else {
            Err(self.dtype(format!("needs a float input, got {}", t.dtype)))
        }
    }

    /// Input must have rank `rank`.
    pub fn require_rank(&self, t: &TensorInfo, rank: usize, what: &str) -> Result<(), PlanError> {
        if t.rank() == rank {
            Ok(())
        } else {
            Err(self.mismatch(format!("{what} must have rank {rank}, got {t}")))
        }
    }

    /// `a` and `b` must be compatible dims (equal when both known; a known and a symbol is fine);
    /// returns the more specific.
    pub fn unify(&self, a: &Dim, b: &Dim, what: &str) -> Result<Dim, PlanError> {
        match (a, b) {
            (Dim::Known(x), Dim::Known(y)) if x != y => Err(self.mismatch(format!("{what}: {x} vs {y}"))),
            (Dim::Symbol(_), Dim::Known(_)) => Ok(b.clone()),
            _ => Ok(a.clone()),
        }
    }

    /// `ShapeMismatch` for this node.
    pub fn mismatch(&self, detail: impl Into<String>) -> PlanError {
        PlanError::ShapeMismatch { node: self.label.clone(), op: self.op(), detail: detail.into() }
    }

    /// `DTypeMismatch` for this node.
    pub fn dtype(&self, detail: impl Into<String>) -> PlanError {
        PlanError::DTypeMismatch { node: self.label.clone(), op: self.op(), detail: detail.into() }
    }

    /// `InvalidAttribute` for this node.
    pub fn attr(&self, detail: impl Into<String>) -> PlanError {
        PlanError::InvalidAttribute { node: self.label.clone(), op: self.op(), detail: detail.into() }
    }

    /// `Arity` for this node.
    pub fn arity(&self, detail: impl Into<String>) -> PlanError {
        PlanError::Arity { node: self.label.clone(), op: self.op(), detail: detail.into() }
    }

    /// `Unsupported` for this node.
    pub fn unsupported(&self) -> PlanError {
        PlanError::Unsupported { node: self.label.clone(), op: self.op() }
    }
}
