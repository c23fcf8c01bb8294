//! `Lower`: what a registry constructor sees of the node it converts, and how it emits planner
//! nodes into the current graph.
//!
//! A constructor usually calls [`Lower::emit`] once with the node's own inputs and outputs.
//! Rewrites (legacy Softmax, Upsample, Swish) add helper nodes with [`Lower::push`] and
//! intermediate values from [`Lower::temp`], named `<node>/<suffix>`.

use std::cell::RefCell;
use std::collections::BTreeSet;

use planner::op::Op;
use planner::{ConstTensor, Graph, Node, ValueId};

use crate::error::OnnxError;
use crate::proto::NodeProto;

use super::Converter;
use super::attrs::Attrs;
use super::tensor;

/// Conversion context of one ONNX node.
pub(crate) struct Lower<'c, 'm> {
    cx: &'c mut Converter,
    node: &'m NodeProto,
    label: String,
    /// The model's default-domain opset.
    pub opset: i64,
    inputs: Vec<Option<ValueId>>,
    outputs: Vec<Option<ValueId>>,
    /// The attribute names the constructor looked up (any other the node sets is unknown).
    looked_up: RefCell<BTreeSet<String>>,
}

impl<'c, 'm> Lower<'c, 'm> {
    pub(crate) fn new(
        cx: &'c mut Converter,
        node: &'m NodeProto,
        label: String,
        opset: i64,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<Option<ValueId>>,
    ) -> Self {
        Lower { cx, node, label, opset, inputs, outputs, looked_up: RefCell::default() }
    }

    /// The node's attributes.
    pub(crate) fn attrs(&self) -> Attrs<'_> {
        Attrs::recorded(self.node, &self.label, &self.looked_up)
    }

    /// Fails naming the first attribute of the node that the constructor never looked up.
    pub(crate) fn refuse_unknown_attributes(&self) -> Result<(), OnnxError> {
        self.attrs().unknown(&self.looked_up.borrow(), self.opset)
    }

    /// An [`OnnxError::InvalidNode`] about this node.
    pub(crate) fn invalid(&self, detail: impl Into<String>) -> OnnxError {
        OnnxError::InvalidNode {
            node: self.label.clone(),
            op_type: self.node.op_type.clone(),
            detail: detail.into(),
        }
    }

    /// Input slot `i`, if present and filled.
    pub(crate) fn input(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }

    /// Input slot `i`, which the operator requires.
    pub(crate) fn required_input(&self, i: usize) -> Result<ValueId, OnnxError> {
        self.input(i).ok_or_else(|| self.invalid(format!("required input {i} is missing")))
    }

    /// Input slots `first..` (filled or not).
    pub(crate) fn inputs_from(&self, first: usize) -> Vec<Option<ValueId>> {
        self.inputs.iter().skip(first).copied().collect()
    }

    /// The node's display label.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Number of input slots (filled or not).
    pub(crate) fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Output slot `i`, if present and filled.
    pub(crate) fn output(&self, i: usize) -> Option<ValueId> {
        self.outputs.get(i).copied().flatten()
    }

    /// Output slot `i`, which must be present.
    pub(crate) fn required_output(&self, i: usize) -> Result<ValueId, OnnxError> {
        self.output(i).ok_or_else(|| self.invalid(format!("output {i} is missing")))
    }

    /// Fails unless every input slot from `first` on is empty: at this opset the operator has
    /// no such input (`why` says where the data comes from instead).
    pub(crate) fn no_inputs_from(&self, first: usize, why: &str) -> Result<(), OnnxError> {
        if self.inputs.iter().skip(first).any(Option::is_some) {
            return Err(self.invalid(format!("input {first} is not accepted at opset {}: {why}", self.opset)));
        }
        Ok(())
    }

    /// Fails when the node sets `attr`, which this opset takes as an input instead.
    pub(crate) fn no_attr(&self, attr: &str, since: i64) -> Result<(), OnnxError> {
        if self.attrs().has(attr) {
            let detail = format!("'{attr}' is an input since opset {since}, not an attribute");
            return Err(self.attrs().invalid(attr, detail));
        }
        Ok(())
    }

    /// Emits the operator with the node's own inputs and outputs.
    pub(crate) fn emit(&mut self, op: Op) -> Result<(), OnnxError> {
        let inputs = self.inputs.clone();
        self.emit_with_inputs(op, inputs)
    }

    /// Emits the operator under the node's name and outputs, with other inputs.
    pub(crate) fn emit_with_inputs(&mut self, op: Op, inputs: Vec<Option<ValueId>>) -> Result<(), OnnxError> {
        let node = Node { name: self.node.name.clone(), op, inputs, outputs: self.outputs.clone() };
        self.graph().add_node(node);
        Ok(())
    }

    /// Emits a helper node named `<node>/<suffix>`.
    pub(crate) fn push(&mut self, suffix: &str, op: Op, inputs: &[Option<ValueId>], outputs: &[ValueId]) {
        let name = format!("{}/{suffix}", self.label);
        let outputs = outputs.iter().copied().map(Some).collect();
        self.graph().add_node(Node { name, op, inputs: inputs.to_vec(), outputs });
    }

    /// A fresh intermediate value named `<node>/<suffix>`.
    pub(crate) fn temp(&mut self, suffix: &str) -> ValueId {
        let name = format!("{}/{suffix}", self.label);
        self.graph().add_value(name, None)
    }

    /// A fresh initializer named `<node>/<suffix>`.
    pub(crate) fn constant(&mut self, suffix: &str, value: ConstTensor) -> ValueId {
        let id = self.temp(suffix);
        self.graph().initializers.insert(id, value);
        id
    }

    /// Makes output 0 an initializer holding `value` (no node is emitted).
    pub(crate) fn define_constant(&mut self, value: ConstTensor) -> Result<(), OnnxError> {
        if self.n_inputs() != 0 || self.outputs.len() != 1 {
            return Err(self.invalid("a constant takes no inputs and has exactly one output"));
        }
        let out = self.required_output(0)?;
        self.graph().initializers.insert(out, value);
        Ok(())
    }

    /// The rank of `v` when the model declares it (input, `value_info`, output or initializer).
    pub(crate) fn declared_rank(&mut self, v: ValueId) -> Option<usize> {
        let g = self.graph();
        if let Some(c) = g.constant(v) {
            return Some(c.dims.len());
        }
        g.value(v)?.info.as_ref().map(|i| i.rank())
    }

    /// The constant value of `v`, if it is an initializer of the current graph converted so far.
    pub(crate) fn known_constant(&mut self, v: ValueId) -> Option<ConstTensor> {
        self.graph().constant(v).cloned()
    }

    /// A tensor attribute converted to a constant (unnamed tensors are named after the node).
    pub(crate) fn tensor_attr(&self, attr: &str) -> Result<Option<ConstTensor>, OnnxError> {
        let Some(t) = self.attrs().tensor(attr)? else { return Ok(None) };
        let label = format!("<node '{}' ({}) attribute '{attr}'>", self.label, self.node.op_type);
        tensor::to_const_labelled(t, if t.name.is_empty() { &label } else { &t.name }).map(Some)
    }

    /// Converts the `GRAPH` attribute `attr` (required) as a body nested in the current graph.
    pub(crate) fn subgraph(&mut self, attr: &str) -> Result<Box<Graph>, OnnxError> {
        // Borrow the node (not `self`) so the body can be converted through `self.cx`.
        let (node, label) = (self.node, self.label.clone());
        self.looked_up.borrow_mut().insert(attr.to_owned());
        let attrs = Attrs::new(node, &label);
        let g = attrs.required(attr, attrs.graph(attr)?)?;
        Ok(Box::new(self.cx.graph(g)?))
    }

    /// The graph attribute `attr` converted as a nested scope, if the node has it.
    pub(crate) fn optional_subgraph(&mut self, attr: &str) -> Result<Option<Box<Graph>>, OnnxError> {
        let (node, label) = (self.node, self.label.clone());
        self.looked_up.borrow_mut().insert(attr.to_owned());
        match Attrs::new(node, &label).graph(attr)? {
            Some(g) => Ok(Some(Box::new(self.cx.graph(g)?))),
            None => Ok(None),
        }
    }

    fn graph(&mut self) -> &mut Graph {
        &mut self.cx.frame().graph
    }
}
