//! Dtype and shape inference for every operator, with symbolic dims.
//!
//! Nodes are visited in topological order. Each op family has its own file; `dispatch::infer_node` is
//! the one exhaustive `match` on `Op`. Alongside shapes, small integer tensors (shape arithmetic that
//! exporters emit: `Shape -> Gather -> Concat -> Reshape`) are tracked element by element as
//! `PartialValue`s, so a Reshape to `[batch, seq, 12, 64]` keeps its symbols without constant folding.
//!
//! Symbol rules: a dim that cannot be expressed with known sizes and existing symbols (data-dependent
//! sizes, unknown shape inputs) gets a fresh symbol `unk__N`; the engine learns its value only when
//! running. Inference never invents a known size. Declared infos of node outputs are checked against
//! inferred ones (dtype, rank, known dims) and fill in dims that inference could only name freshly.

mod attention;
mod control;
mod ctx;
mod dims;
mod dispatch;
mod einsum;
mod elementwise;
mod index_ops;
mod nn;
mod preview;
mod reduce;
mod sequence;
mod shape_ops;
mod text;
mod training;
mod value;
mod vision;

use std::collections::BTreeSet;

use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::{Graph, Node, ValueId};
use crate::op::Op;
use crate::tensor_info::{Dim, Shape, TensorInfo};
use crate::validate;

pub(crate) use ctx::Ctx;
pub(crate) use dims::slice_range;
pub use value::{PartialValue, SymInt};

/// The result of inference over one graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Inference {
    /// Dtype and shape of every value, indexed by `ValueId`.
    pub infos: Vec<TensorInfo>,
    /// Known contents of small integer tensors (shape values), indexed by `ValueId`.
    pub values: Vec<Option<PartialValue>>,
}

impl Inference {
    /// The info of `v` (which `validate::graph` guarantees exists for a validated graph).
    pub fn info(&self, v: ValueId) -> Option<&TensorInfo> {
        self.infos.get(v.index())
    }
}

/// Infers the dtype and shape of every value of `graph` (validating it first).
pub fn infer(graph: &Graph) -> Result<Vec<TensorInfo>, PlanError> {
    Ok(analyse(graph)?.infos)
}

/// Like [`infer`], and also returns the tracked contents of small integer tensors.
pub fn analyse(graph: &Graph) -> Result<Inference, PlanError> {
    validate::graph(graph)?;
    let mut inputs = Vec::with_capacity(graph.inputs.len());
    for &v in &graph.inputs {
        match graph.value(v).and_then(|vi| vi.info.clone()) {
            Some(info) => inputs.push(info),
            None => return Err(PlanError::MissingInputInfo { value: graph.value_name(v) }),
        }
    }
    let mut syms = SymbolGen::new(graph);
    analyse_scope(graph, &inputs, &[], &mut syms)
}

/// What a subgraph sees of a captured outer value.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    info: TensorInfo,
    value: Option<PartialValue>,
    constant: Option<ConstTensor>,
}

/// Inference over one scope: `inputs` give the infos of `g.inputs`, `captured` those of
/// `g.captures` (in order). The graph must already be validated.
pub(crate) fn analyse_scope(
    g: &Graph,
    inputs: &[TensorInfo],
    captured: &[Captured],
    syms: &mut SymbolGen,
) -> Result<Inference, PlanError> {
    let n = g.values.len();
    let mut infos: Vec<Option<TensorInfo>> = vec![None; n];
    let mut values: Vec<Option<PartialValue>> = vec![None; n];
    let mut consts: Vec<Option<ConstTensor>> = vec![None; n];
    for (&v, info) in g.inputs.iter().zip(inputs) {
        infos[v.index()] = Some(info.clone());
    }
    for (v, c) in &g.initializers {
        infos[v.index()] = Some(c.info());
        values[v.index()] = PartialValue::from_const(c);
        consts[v.index()] = Some(c.clone());
    }
    for (c, cap) in g.captures.iter().zip(captured) {
        infos[c.inner.index()] = Some(cap.info.clone());
        values[c.inner.index()] = cap.value.clone();
        consts[c.inner.index()] = cap.constant.clone();
    }
    for id in validate::topo_order(g)? {
        let node = &g.nodes[id.index()];
        let label = g.node_label(id);
        // Inputs read as column windows: the op sees each window's own shape.
        let windowed = match node.op.input_windows() {
            Some(w) => window_infos(&label, node, w, &infos)?,
            None => Vec::new(),
        };
        let mut ins = Vec::with_capacity(node.inputs.len());
        for v in &node.inputs {
            ins.push(match v {
                Some(v) => Some(infos[v.index()].as_ref().ok_or_else(|| PlanError::UndefinedValue {
                    node: label.clone(),
                    op: node.op.name(),
                    value: g.value_name(*v),
                })?),
                None => None,
            });
        }
        let mut vals: Vec<Option<&PartialValue>> =
            node.inputs.iter().map(|v| v.and_then(|v| values[v.index()].as_ref())).collect();
        let mut cins: Vec<Option<&ConstTensor>> =
            node.inputs.iter().map(|v| v.and_then(|v| consts[v.index()].as_ref())).collect();
        for (i, info) in &windowed {
            ins[*i] = Some(info);
            vals[*i] = None;
            cins[*i] = None;
        }
        let scope = Scope { infos: &infos, values: &values, consts: &consts };
        let mut ctx = Ctx::new(node, label, ins, vals, cins, scope, syms);
        let mut outs = dispatch::infer_node(&mut ctx)?;
        if outs.len() < node.outputs.len() {
            return Err(ctx.arity(format!(
                "{} outputs given, op produces {}",
                node.outputs.len(),
                outs.len()
            )));
        }
        outs.truncate(node.outputs.len());
        let out_vals = value::eval(&ctx, &outs);
        let label = ctx.label.clone();
        drop(ctx);
        for (slot, v) in node.outputs.iter().enumerate() {
            let Some(v) = v else { continue };
            let declared = g.value(*v).and_then(|vi| vi.info.as_ref());
            let declared = declared.filter(|_| !node.op.data_dependent_shape());
            let info = merge_declared(&outs[slot], declared, syms)
                .map_err(|e| e.into_error(label.clone(), node.op.name(), &g.value_name(*v)))?;
            infos[v.index()] = Some(info);
            values[v.index()] = out_vals.get(slot).cloned().flatten();
            if let Op::Constant(c) = &node.op {
                consts[v.index()] = Some(c.value.clone());
            }
        }
    }
    let mut out = Vec::with_capacity(n);
    for (i, info) in infos.into_iter().enumerate() {
        match info {
            Some(info) => out.push(info),
            None => {
                let value = g.value_name(ValueId(i as u32));
                return Err(PlanError::UndefinedValue { node: "graph".into(), op: "", value });
            }
        }
    }
    Ok(Inference { infos: out, values })
}

/// The shapes `node`'s windowed inputs have as operands: each input's leading dims, then its
/// window's dims. The input's last dim must be known and hold the window.
fn window_infos(
    label: &str,
    node: &Node,
    windows: &crate::op::InputWindows,
    infos: &[Option<TensorInfo>],
) -> Result<Vec<(usize, TensorInfo)>, PlanError> {
    let bad =
        |detail: String| PlanError::ShapeMismatch { node: label.to_string(), op: node.op.name(), detail };
    let mut out = Vec::new();
    for (i, w) in &windows.0 {
        let info = node.inputs.get(*i).copied().flatten().and_then(|v| infos.get(v.index())?.as_ref());
        let Some(info) = info else {
            return Err(bad(format!("input {i} is read through a column window but is absent")));
        };
        let dims = &info.shape.0;
        let holds = match dims.last() {
            Some(Dim::Known(cols)) => w.start.checked_add(w.width()).is_some_and(|end| end <= *cols),
            _ => false,
        };
        if !holds {
            return Err(bad(format!(
                "input {i} ({info}) has no columns {}..{} for its window",
                w.start,
                w.start.saturating_add(w.width())
            )));
        }
        let mut shape: Vec<Dim> = dims[..dims.len() - 1].to_vec();
        shape.extend(w.dims.iter().map(|&d| Dim::Known(d)));
        out.push((*i, TensorInfo { dtype: info.dtype, shape: Shape(shape) }));
    }
    Ok(out)
}

/// Read-only view of the enclosing scope while one node is inferred (for subgraph captures).
#[derive(Clone, Copy)]
pub(crate) struct Scope<'a> {
    infos: &'a [Option<TensorInfo>],
    values: &'a [Option<PartialValue>],
    consts: &'a [Option<ConstTensor>],
}

impl Scope<'_> {
    /// What a subgraph capturing outer value `v` sees.
    fn captured(&self, v: ValueId) -> Option<Captured> {
        Some(Captured {
            info: self.infos.get(v.index())?.clone()?,
            value: self.values.get(v.index()).cloned().flatten(),
            constant: self.consts.get(v.index()).cloned().flatten(),
        })
    }
}

enum MergeError {
    DType(String),
    Shape(String),
}

impl MergeError {
    fn into_error(self, node: String, op: &'static str, value: &str) -> PlanError {
        match self {
            MergeError::DType(d) => {
                PlanError::DTypeMismatch { node, op, detail: format!("output {value}: {d}") }
            }
            MergeError::Shape(d) => {
                PlanError::ShapeMismatch { node, op, detail: format!("output {value}: {d}") }
            }
        }
    }
}

/// Checks an inferred info against a declared one and fills fresh symbols from it.
fn merge_declared(
    inferred: &TensorInfo,
    declared: Option<&TensorInfo>,
    syms: &SymbolGen,
) -> Result<TensorInfo, MergeError> {
    let Some(declared) = declared else { return Ok(inferred.clone()) };
    if declared.dtype != inferred.dtype {
        return Err(MergeError::DType(format!("inferred {inferred}, declared {declared}")));
    }
    if declared.rank() != inferred.rank() {
        return Err(MergeError::Shape(format!("inferred {inferred}, declared {declared}")));
    }
    let mut dims = Vec::with_capacity(inferred.rank());
    for (i, d) in inferred.shape.dims().iter().zip(declared.shape.dims()) {
        dims.push(match (i, d) {
            (Dim::Known(a), Dim::Known(b)) if a != b => {
                return Err(MergeError::Shape(format!("inferred {inferred}, declared {declared}")));
            }
            (Dim::Symbol(s), _) if syms.is_fresh(s) => d.clone(),
            _ => i.clone(),
        });
    }
    Ok(TensorInfo { dtype: inferred.dtype, shape: dims.into() })
}

/// Generator of fresh symbol names that do not collide with the model's own symbols.
#[derive(Debug, Clone, Default)]
pub(crate) struct SymbolGen {
    next: u32,
    taken: BTreeSet<String>,
    fresh: BTreeSet<String>,
}

impl SymbolGen {
    /// A generator avoiding every symbol declared anywhere in `g` (subgraphs included).
    pub(crate) fn new(g: &Graph) -> Self {
        let mut s = SymbolGen::default();
        s.collect(g);
        s
    }

    fn collect(&mut self, g: &Graph) {
        for v in &g.values {
            if let Some(info) = &v.info {
                self.taken.extend(info.shape.symbols().into_iter().map(String::from));
            }
        }
        for n in &g.nodes {
            for sub in n.op.subgraphs() {
                self.collect(sub);
            }
        }
    }

    /// A new symbol dim.
    pub(crate) fn fresh(&mut self) -> Dim {
        loop {
            let name = format!("unk__{}", self.next);
            self.next += 1;
            if !self.taken.contains(&name) {
                self.fresh.insert(name.clone());
                return Dim::Symbol(name);
            }
        }
    }

    /// True when `name` was made by `fresh`.
    pub(crate) fn is_fresh(&self, name: &str) -> bool {
        self.fresh.contains(name)
    }
}

#[cfg(test)]
mod tests;
