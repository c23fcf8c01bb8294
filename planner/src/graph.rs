//! The graph IR: values, nodes, inputs, outputs, initializers, and subgraph captures.
//!
//! Invariants (checked by `validate::graph`): every `ValueId` indexes `values`; every value has exactly
//! one definition (a graph input, an initializer, a capture, or one node output slot); the nodes form
//! a DAG. Nodes need not be stored in topological order; `validate::topo_order` gives one.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::constant::ConstTensor;
use crate::op::Op;
use crate::tensor_info::TensorInfo;

/// Index of a node in `Graph::nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// Index of a value in `Graph::values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueId(pub u32);

impl NodeId {
    /// The index into `Graph::nodes`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl ValueId {
    /// The index into `Graph::values`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// A value: its name (from the model, or generated) and the dtype/shape declared by the model, if any.
/// Inferred infos live in the result of `shape_infer::infer`, not here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueInfo {
    /// Name, unique within its graph by convention (not enforced).
    pub name: String,
    /// Declared dtype and shape (required for graph inputs; optional elsewhere).
    pub info: Option<TensorInfo>,
}

/// One operator application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Name from the model (may be empty).
    pub name: String,
    /// Operator and attributes.
    pub op: Op,
    /// Input slots; `None` is an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Output slots; `None` is an omitted optional output.
    pub outputs: Vec<Option<ValueId>>,
}

impl Node {
    /// The input at `slot`, if the slot exists and is filled.
    pub fn input(&self, slot: usize) -> Option<ValueId> {
        self.inputs.get(slot).copied().flatten()
    }

    /// The output at `slot`, if the slot exists and is filled.
    pub fn output(&self, slot: usize) -> Option<ValueId> {
        self.outputs.get(slot).copied().flatten()
    }

    /// Values of the enclosing graph this node reads: its filled inputs, then the outer values its
    /// subgraphs capture (which must be defined before the node, like inputs).
    pub fn uses(&self) -> Vec<ValueId> {
        let mut out: Vec<ValueId> = self.inputs.iter().flatten().copied().collect();
        for g in self.op.subgraphs() {
            out.extend(g.captures.iter().map(|c| c.outer));
        }
        out
    }
}

/// A subgraph's read of a value of its enclosing graph: inside the body the value is `inner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capture {
    /// The value id inside the subgraph (defined by this capture).
    pub inner: ValueId,
    /// The value id in the enclosing graph.
    pub outer: ValueId,
}

/// Where a value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Definition {
    /// Graph input number `.0`.
    Input(usize),
    /// An initializer (constant).
    Initializer,
    /// Capture number `.0` of a subgraph.
    Capture(usize),
    /// Output slot `slot` of `node`.
    Node {
        /// The producing node.
        node: NodeId,
        /// Its output slot.
        slot: usize,
    },
}

/// A computation graph (the top-level model, or a control-flow body).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// Operators (any order; see `validate::topo_order`).
    pub nodes: Vec<Node>,
    /// Value table, indexed by `ValueId`.
    pub values: Vec<ValueInfo>,
    /// Graph inputs, in order (their declared infos are required by shape inference).
    pub inputs: Vec<ValueId>,
    /// Graph outputs, in order.
    pub outputs: Vec<ValueId>,
    /// Constant values (weights, folded constants).
    pub initializers: BTreeMap<ValueId, ConstTensor>,
    /// Outer values read by this graph when it is a subgraph (empty at the top level).
    pub captures: Vec<Capture>,
    /// Initializers the model also lists as graph inputs (ONNX's inputs with a default value),
    /// with the type the input declares: constants unless a run feeds them, which turns them
    /// into inputs ([`Graph::overriding`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub defaults: BTreeMap<ValueId, Option<TensorInfo>>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Graph::default()
    }

    /// The names of the initializers a run may feed ([`Graph::defaults`]).
    pub fn default_names(&self) -> Vec<String> {
        self.defaults.keys().map(|&v| self.value_name(v)).collect()
    }

    /// This graph with the initializers named `names` made graph inputs, appended after the
    /// others with the type the model declares for them (or, where it declares none, the
    /// initializer's dtype and dims): a run then feeds them. A name that is not one of
    /// [`Graph::defaults`] is an error naming it.
    pub fn overriding(&self, names: &[&str]) -> Result<Graph, String> {
        let mut g = self.clone();
        for &name in names {
            let Some((&v, info)) = self.defaults.iter().find(|&(&v, _)| self.value_name(v) == name) else {
                return Err(format!("`{name}` is not an initializer the model lets a run override"));
            };
            let Some(c) = g.initializers.remove(&v) else {
                return Err(format!("`{name}` is given twice"));
            };
            let info = info.clone().unwrap_or_else(|| TensorInfo::new(c.dtype, c.dims.iter().copied()));
            g.values[v.index()].info = Some(info);
            g.inputs.push(v);
            g.defaults.remove(&v);
        }
        Ok(g)
    }

    /// Appends a value and returns its id.
    pub fn add_value(&mut self, name: impl Into<String>, info: Option<TensorInfo>) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(ValueInfo { name: name.into(), info });
        id
    }

    /// Appends a node and returns its id.
    pub fn add_node(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(node);
        id
    }

    /// The node with this id, if in range.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The value with this id, if in range.
    pub fn value(&self, id: ValueId) -> Option<&ValueInfo> {
        self.values.get(id.index())
    }

    /// The value's name, or `v<id>` when out of range or unnamed.
    pub fn value_name(&self, id: ValueId) -> String {
        match self.value(id) {
            Some(v) if !v.name.is_empty() => v.name.clone(),
            _ => id.to_string(),
        }
    }

    /// Name used in errors: the node's name, or `#<index>` when it has none.
    pub fn node_label(&self, id: NodeId) -> String {
        match self.node(id) {
            Some(n) if !n.name.is_empty() => n.name.clone(),
            _ => id.to_string(),
        }
    }

    /// The constant value of `id`, if it is an initializer.
    pub fn constant(&self, id: ValueId) -> Option<&ConstTensor> {
        self.initializers.get(&id)
    }

    /// Definition of every value (indexed by `ValueId`); `None` for undefined values. When a value is
    /// defined twice, the last definition wins (`validate::graph` reports duplicates).
    pub fn definitions(&self) -> Vec<Option<Definition>> {
        let mut defs = vec![None; self.values.len()];
        let mut set = |v: ValueId, d: Definition| {
            if let Some(slot) = defs.get_mut(v.index()) {
                *slot = Some(d);
            }
        };
        for (i, &v) in self.inputs.iter().enumerate() {
            set(v, Definition::Input(i));
        }
        for &v in self.initializers.keys() {
            set(v, Definition::Initializer);
        }
        for (i, c) in self.captures.iter().enumerate() {
            set(c.inner, Definition::Capture(i));
        }
        for (n, node) in self.nodes.iter().enumerate() {
            for (slot, v) in node.outputs.iter().enumerate() {
                if let Some(v) = v {
                    set(*v, Definition::Node { node: NodeId(n as u32), slot });
                }
            }
        }
        defs
    }

    /// For every value, the nodes that read it (inputs or captures), in node order.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.values.len()];
        for (n, node) in self.nodes.iter().enumerate() {
            for v in node.uses() {
                if let Some(list) = out.get_mut(v.index())
                    && !list.contains(&NodeId(n as u32))
                {
                    list.push(NodeId(n as u32));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::{self, Op};
    use crate::tensor_info::{DType, Dim};

    #[test]
    fn serde_round_trip_with_initializers_and_subgraphs() {
        let mut g = Graph::new();
        let cond = g.input("cond", DType::Bool, [1usize]);
        let x = g.input("x", DType::F16, [Dim::from("batch"), Dim::Known(8)]);
        let w = g.initializer("w", ConstTensor::from_f64s(DType::F16, &[8], &[0.5; 8]).unwrap());
        let mut body = Graph::new();
        let inner = body.add_value("x", None);
        body.captures.push(Capture { inner, outer: x });
        let r = body.relu(inner);
        body.output(r);
        let branch = Box::new(body);
        let y = g.op1(Op::If(op::If { then_branch: branch.clone(), else_branch: branch }), &[cond]);
        let z = g.mul(y, w);
        g.output(z);
        let json = serde_json::to_string_pretty(&g).unwrap();
        let back: Graph = serde_json::from_str(&json).unwrap();
        assert_eq!(back, g);
        assert_eq!(back.constant(w).map(|c| c.elems()), Some(8));
    }

    #[test]
    fn definitions_and_consumers() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2usize]);
        let y = g.relu(x);
        let z = g.add(x, y);
        g.output(z);
        let defs = g.definitions();
        assert_eq!(defs[x.index()], Some(Definition::Input(0)));
        assert_eq!(defs[z.index()], Some(Definition::Node { node: NodeId(1), slot: 0 }));
        assert_eq!(g.consumers()[x.index()], vec![NodeId(0), NodeId(1)]);
        assert_eq!(g.node_label(NodeId(7)), "#7");
    }
}
