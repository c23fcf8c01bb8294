//! Visits every `TensorProto` a model holds, wherever it sits: graph initializers, sparse
//! initializers, node attributes (`t`, `tensors`, sparse tensors), subgraphs of control-flow
//! nodes, model-local functions and training graphs.
//!
//! Recursion follows subgraph nesting; decoded models are bounded by prost's recursion limit.

use crate::error::OnnxError;
use crate::proto::{GraphProto, ModelProto, NodeProto, SparseTensorProto, TensorProto};

/// Where a tensor sits, used to name unnamed tensors in errors.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Site<'a> {
    /// An entry of `GraphProto.initializer` or `sparse_initializer`.
    Initializer {
        /// The graph's name.
        graph: &'a str,
    },
    /// A tensor-valued attribute of a node.
    Attribute {
        /// The node's name.
        node: &'a str,
        /// The node's op_type.
        op_type: &'a str,
        /// The attribute's name.
        attr: &'a str,
    },
}

impl Site<'_> {
    /// The tensor's name, or a description of where it sits when it has none.
    pub(crate) fn label(&self, tensor: &TensorProto) -> String {
        if !tensor.name.is_empty() {
            return tensor.name.clone();
        }
        match self {
            Site::Initializer { graph } => format!("<unnamed initializer of graph '{graph}'>"),
            Site::Attribute { node, op_type, attr } => {
                format!("<node '{node}' ({op_type}) attribute '{attr}'>")
            }
        }
    }
}

/// The callback [`model`] runs on every tensor.
pub(crate) type Visitor<'v> = dyn FnMut(&mut TensorProto, Site<'_>) -> Result<(), OnnxError> + 'v;

/// Calls `visit` on every tensor in the model, stopping at the first error.
pub(crate) fn model(model: &mut ModelProto, visit: &mut Visitor<'_>) -> Result<(), OnnxError> {
    if let Some(g) = model.graph.as_mut() {
        graph(g, visit)?;
    }
    for function in &mut model.functions {
        for n in &mut function.node {
            node(n, visit)?;
        }
    }
    for training in &mut model.training_info {
        for g in [training.initialization.as_mut(), training.algorithm.as_mut()].into_iter().flatten() {
            graph(g, visit)?;
        }
    }
    Ok(())
}

fn graph(g: &mut GraphProto, visit: &mut Visitor<'_>) -> Result<(), OnnxError> {
    let site = Site::Initializer { graph: &g.name };
    for t in &mut g.initializer {
        visit(t, site)?;
    }
    for s in &mut g.sparse_initializer {
        sparse(s, site, visit)?;
    }
    for n in &mut g.node {
        node(n, visit)?;
    }
    Ok(())
}

fn node(n: &mut NodeProto, visit: &mut Visitor<'_>) -> Result<(), OnnxError> {
    for a in &mut n.attribute {
        let site = Site::Attribute { node: &n.name, op_type: &n.op_type, attr: &a.name };
        for t in a.t.iter_mut().chain(a.tensors.iter_mut()) {
            visit(t, site)?;
        }
        for s in a.sparse_tensor.iter_mut().chain(a.sparse_tensors.iter_mut()) {
            sparse(s, site, visit)?;
        }
        for g in a.g.iter_mut().chain(a.graphs.iter_mut()) {
            graph(g, visit)?;
        }
    }
    Ok(())
}

fn sparse(s: &mut SparseTensorProto, site: Site<'_>, visit: &mut Visitor<'_>) -> Result<(), OnnxError> {
    for t in s.values.iter_mut().chain(s.indices.iter_mut()) {
        visit(t, site)?;
    }
    Ok(())
}
