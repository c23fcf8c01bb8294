//! ONNX -> planner conversion: [`to_graph`] turns a loaded [`Model`] into a validated
//! `planner::Graph`, and [`inspect()`] summarizes a model without converting it.
//!
//! Stages of [`to_graph`]: check the default-domain opset ([`MIN_OPSET`]..=[`MAX_OPSET`]); list
//! every node the registry cannot map (subgraphs included) and fail with all of them at once;
//! convert the graph; run `planner::validate::graph` on the result.
//!
//! Calls of model-local functions are inlined first (`functions.rs`), so the rules below never see
//! them.
//!
//! Conversion rules, graph by graph (bodies of If/Loop/Scan recursively):
//! - Initializers become `Graph::initializers`. An initializer also listed as a graph input (ONNX:
//!   an input with a default value) is an initializer, recorded in `Graph::defaults` with the
//!   input's declared type (top level only): a run that feeds it turns it into an input first
//!   (`Graph::overriding`), since a value has exactly one definition.
//! - `Constant` nodes become initializers too: one representation for every constant, so later
//!   passes never need to look for `Op::Constant`.
//! - Graph inputs, outputs and `value_info` give declared infos (see `types`); a name a body
//!   reads from an enclosing graph becomes a `Capture` in that body (and, through each level in
//!   between, in every enclosing body).
//! - Node outputs are declared before any node is converted, so node order does not matter.
//!
//! `op_type` strings appear only in `registry::TABLE`; the family files (`math`, `nn`,
//! `shape`, `sequence`, `control`) hold the constructor each entry points to.

mod attrs;
mod control;
mod functions;
mod inspect;
mod lower;
mod math;
mod ml;
mod nn;
mod optional;
mod registry;
mod sequence;
mod shape;
mod tensor;
mod text;
mod training;
mod types;
mod vision;

use std::collections::HashMap;

use planner::{Capture, Graph, ValueId};

pub use inspect::{ModelSummary, OpsetSummary, ValueSummary, inspect};
pub use tensor::{dtype, to_const};

use crate::error::{OnnxError, UnsupportedOp};
use crate::model::Model;
use crate::proto::{GraphProto, NodeProto};
use lower::Lower;
use types::DimNamer;

/// Oldest default-domain (`ai.onnx`) opset [`to_graph`] accepts. Most operators convert only
/// from opset 11; the registry rejects older versions per operator (see `registry::MODERN`).
pub const MIN_OPSET: i64 = 1;
/// Newest default-domain (`ai.onnx`) opset [`to_graph`] converts. Operators whose semantics
/// changed after 23 (such as `Attention`) are limited per operator in the registry.
pub const MAX_OPSET: i64 = 28;

/// Converts `model` to a planner graph, validated with `planner::validate::graph`.
///
/// # Errors
/// [`OnnxError::MissingOpset`] / [`OnnxError::UnsupportedOpset`] for the default-domain import;
/// [`OnnxError::Unsupported`] listing every unmappable node; [`OnnxError::Attribute`],
/// [`OnnxError::InvalidNode`], [`OnnxError::UndefinedValue`], [`OnnxError::UndefinedOutput`],
/// [`OnnxError::DuplicateValue`], [`OnnxError::InvalidType`] and [`OnnxError::InvalidTensor`]
/// naming the node or value at fault; [`OnnxError::InvalidGraph`] when the result fails the
/// planner's structural checks.
pub fn to_graph(model: &Model) -> Result<Graph, OnnxError> {
    let opset = default_opset(model)?;
    let inlined = with_functions_inlined(model)?;
    let main = inlined.as_ref().unwrap_or_else(|| model.graph());
    let unsupported = unsupported_ops(main, opset);
    if !unsupported.is_empty() {
        return Err(OnnxError::Unsupported { ops: unsupported });
    }
    let mut cx = Converter { opset, frames: Vec::new(), dims: DimNamer::for_graph(main) };
    let graph = cx.graph(main)?;
    planner::validate::graph(&graph)?;
    Ok(graph)
}

/// The main graph with the calls of the model's local functions inlined (`functions.rs`); `None`
/// when the model has no local functions.
fn with_functions_inlined(model: &Model) -> Result<Option<GraphProto>, OnnxError> {
    let functions = &model.proto().functions;
    if functions.is_empty() {
        return Ok(None);
    }
    functions::inline(model.graph(), functions).map(Some)
}

/// Every `(domain, op_type)` [`to_graph`] maps: domain `""` is the default ONNX domain (subject
/// to per-operator opset ranges), `"ai.ferrofuse"` ferrofuse's own, and `"*"` SOFIE's operators,
/// accepted from any domain.
pub fn supported_ops() -> Vec<(&'static str, &'static str)> {
    registry::supported().collect()
}

/// The default-domain opset the model imports (0 when it imports none and uses no ONNX op).
fn default_opset(model: &Model) -> Result<i64, OnnxError> {
    match model.opset_version("") {
        Some(version) if (MIN_OPSET..=MAX_OPSET).contains(&version) => Ok(version),
        Some(version) => Err(OnnxError::UnsupportedOpset { version, min: MIN_OPSET, max: MAX_OPSET }),
        None if uses_default_domain(model.graph()) => Err(OnnxError::MissingOpset),
        None => Ok(0),
    }
}

fn uses_default_domain(graph: &GraphProto) -> bool {
    graph.node.iter().any(|n| {
        registry::is_default_domain(&n.domain)
            || n.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs)).any(uses_default_domain)
    })
}

/// Every node of `graph` (subgraphs included, in graph order) the registry cannot map under
/// default-domain opset `opset`.
pub(crate) fn unsupported_ops(graph: &GraphProto, opset: i64) -> Vec<UnsupportedOp> {
    let mut out = Vec::new();
    collect_unsupported(graph, opset, &mut out);
    out
}

fn collect_unsupported(graph: &GraphProto, opset: i64, out: &mut Vec<UnsupportedOp>) {
    for (i, node) in graph.node.iter().enumerate() {
        if let Err(reason) = registry::find(&node.domain, &node.op_type, opset) {
            out.push(UnsupportedOp {
                node: label(node, i),
                op_type: node.op_type.clone(),
                domain: node.domain.clone(),
                reason,
            });
        }
        for a in &node.attribute {
            for g in a.g.iter().chain(&a.graphs) {
                collect_unsupported(g, opset, out);
            }
        }
    }
}

/// A node's name for errors: its own, or `#index` within its graph when it has none.
pub(crate) fn label(node: &NodeProto, index: usize) -> String {
    if node.name.is_empty() { format!("#{index}") } else { node.name.clone() }
}

/// One graph under conversion: the planner graph so far and its name scope.
struct Frame {
    graph: Graph,
    names: HashMap<String, ValueId>,
    name: String,
}

/// Conversion state: the stack of graphs being converted (the main graph at the bottom, the
/// innermost body on top).
pub(crate) struct Converter {
    opset: i64,
    frames: Vec<Frame>,
    dims: DimNamer,
}

impl Converter {
    /// Converts `g` as a new innermost scope and returns it (its captures filled in).
    pub(crate) fn graph(&mut self, g: &GraphProto) -> Result<Graph, OnnxError> {
        self.frames.push(Frame { graph: Graph::new(), names: HashMap::new(), name: g.name.clone() });
        let result = self.fill(g);
        let frame = self.frames.pop().expect("invariant: pushed above");
        result.map(|()| frame.graph)
    }

    fn frame(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("invariant: a frame is pushed while converting")
    }

    /// Adds a value named `name` to the innermost graph's scope.
    fn define(&mut self, name: &str) -> Result<ValueId, OnnxError> {
        let frame = self.frame();
        if frame.names.contains_key(name) {
            return Err(OnnxError::DuplicateValue { graph: frame.name.clone(), value: name.to_owned() });
        }
        let id = frame.graph.add_value(name, None);
        frame.names.insert(name.to_owned(), id);
        Ok(id)
    }

    fn fill(&mut self, g: &GraphProto) -> Result<(), OnnxError> {
        if let Some(s) = g.sparse_initializer.first() {
            let name = s.values.as_ref().map(|v| v.name.as_str()).filter(|n| !n.is_empty());
            let tensor = name.unwrap_or("<sparse initializer>").to_owned();
            let issue = crate::error::TensorIssue::Unsupported { what: "a sparse initializer" };
            return Err(OnnxError::InvalidTensor { tensor, issue });
        }
        for (i, t) in g.initializer.iter().enumerate() {
            let label = format!("<initializer {i} of graph '{}'>", g.name);
            let value = tensor::to_const_labelled(t, if t.name.is_empty() { &label } else { &t.name })?;
            // An unnamed initializer cannot be referenced (an empty input name means "omitted").
            if !t.name.is_empty() {
                let id = self.define(&t.name)?;
                self.frame().graph.initializers.insert(id, value);
            }
        }
        for vi in &g.input {
            if g.initializer.iter().any(|t| t.name == vi.name) {
                // An input with a default value: a constant unless a run feeds it (top level).
                if self.frames.len() == 1 && !vi.name.is_empty() {
                    let info = types::declared(vi, &mut self.dims)
                        .map_err(|detail| OnnxError::InvalidType { value: vi.name.clone(), detail })?;
                    if let Some(id) = self.frame().names.get(&vi.name).copied() {
                        self.frame().graph.defaults.insert(id, info);
                    }
                }
                continue;
            }
            let info = types::declared(vi, &mut self.dims)
                .map_err(|detail| OnnxError::InvalidType { value: vi.name.clone(), detail })?;
            let id = self.define(&vi.name)?;
            let frame = self.frame();
            frame.graph.values[id.index()].info = info;
            frame.graph.inputs.push(id);
        }
        for node in &g.node {
            for out in node.output.iter().filter(|o| !o.is_empty()) {
                self.define(out)?;
            }
        }
        self.declare_infos(g)?;
        for (i, node) in g.node.iter().enumerate() {
            self.node(node, i)?;
        }
        for vi in &g.output {
            let id = self.lookup(&vi.name).ok_or_else(|| OnnxError::UndefinedOutput {
                graph: g.name.clone(),
                value: vi.name.clone(),
            })?;
            self.frame().graph.outputs.push(id);
        }
        Ok(())
    }

    /// Declared infos of node outputs, from `value_info` (ignored where unusable) and the
    /// graph's outputs (rejected where not a tensor of a planner dtype).
    fn declare_infos(&mut self, g: &GraphProto) -> Result<(), OnnxError> {
        let outputs = g.output.iter().map(|vi| (vi, true));
        for (vi, strict) in g.value_info.iter().map(|vi| (vi, false)).chain(outputs) {
            let info = match types::declared(vi, &mut self.dims) {
                Ok(info) => info,
                Err(detail) if strict => {
                    return Err(OnnxError::InvalidType { value: vi.name.clone(), detail });
                }
                Err(_) => None,
            };
            let frame = self.frame();
            let Some(&id) = frame.names.get(&vi.name) else { continue };
            let is_node_output =
                !frame.graph.inputs.contains(&id) && !frame.graph.initializers.contains_key(&id);
            let slot = &mut frame.graph.values[id.index()].info;
            if is_node_output && slot.is_none() {
                *slot = info;
            }
        }
        Ok(())
    }

    /// Resolves `name` in the innermost scope, capturing it from enclosing scopes if needed.
    fn lookup(&mut self, name: &str) -> Option<ValueId> {
        let depth = self.frames.len().checked_sub(1)?;
        self.lookup_at(depth, name)
    }

    fn lookup_at(&mut self, depth: usize, name: &str) -> Option<ValueId> {
        if let Some(&id) = self.frames.get(depth)?.names.get(name) {
            return Some(id);
        }
        let outer = self.lookup_at(depth.checked_sub(1)?, name)?;
        let frame = self.frames.get_mut(depth)?;
        let inner = frame.graph.add_value(name, None);
        frame.graph.captures.push(Capture { inner, outer });
        frame.names.insert(name.to_owned(), inner);
        Some(inner)
    }

    fn node(&mut self, node: &NodeProto, index: usize) -> Result<(), OnnxError> {
        let label = label(node, index);
        let entry = registry::find(&node.domain, &node.op_type, self.opset).map_err(|reason| {
            let op = UnsupportedOp {
                node: label.clone(),
                op_type: node.op_type.clone(),
                domain: node.domain.clone(),
                reason,
            };
            OnnxError::Unsupported { ops: vec![op] }
        })?;
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            inputs.push(match name.as_str() {
                "" => None,
                name => Some(self.lookup(name).ok_or_else(|| OnnxError::UndefinedValue {
                    node: label.clone(),
                    op_type: node.op_type.clone(),
                    value: name.to_owned(),
                })?),
            });
        }
        let frame = self.frame();
        let outputs =
            node.output.iter().map(|o| frame.names.get(o).copied().filter(|_| !o.is_empty())).collect();
        let opset = self.opset;
        let mut lower = Lower::new(self, node, label, opset, inputs, outputs);
        (entry.build)(&mut lower)?;
        lower.refuse_unknown_attributes()
    }
}
