//! Structural checks of the IR, run before inference and between passes.
//!
//! `graph` checks: value ids in range, exactly one definition per value, every read value and graph
//! output defined, slot counts per op (`Op::arity`), control-flow bodies consistent with their node,
//! and no cycles. `topo_order` gives a deterministic topological order (lowest node index first).

use std::collections::BTreeSet;

use crate::error::PlanError;
use crate::graph::{Definition, Graph, NodeId, ValueId};
use crate::op::Op;

/// Checks the structural invariants of `g` and, recursively, of its subgraphs.
pub fn graph(g: &Graph) -> Result<(), PlanError> {
    check_ids(g)?;
    check_definitions(g)?;
    for (i, node) in g.nodes.iter().enumerate() {
        let id = NodeId(i as u32);
        let label = || g.node_label(id);
        let op = node.op.name();
        if !node.op.arity().accepts(node.inputs.len(), node.outputs.len()) {
            let a = node.op.arity();
            let detail = format!(
                "{} inputs and {} outputs given; accepts {}..={} inputs and {}..={} outputs",
                node.inputs.len(),
                node.outputs.len(),
                a.min_inputs,
                a.max_inputs,
                a.min_outputs,
                a.max_outputs
            );
            return Err(PlanError::Arity { node: label(), op, detail });
        }
        check_body_arity(g, id)?;
        for sub in node.op.subgraphs() {
            for c in &sub.captures {
                if c.outer.index() >= g.values.len() {
                    return Err(PlanError::ValueOutOfRange { node: label(), op, value: c.outer.0 });
                }
            }
            graph(sub)?;
        }
    }
    topo_order(g).map(|_| ())
}

/// A topological order of the nodes. Among ready nodes the lowest index goes first, so a graph
/// already stored in order keeps its order. Fails with `Cycle` naming a node on a cycle.
pub fn topo_order(g: &Graph) -> Result<Vec<NodeId>, PlanError> {
    let defs = g.definitions();
    let preds: Vec<Vec<usize>> = g
        .nodes
        .iter()
        .map(|n| {
            let mut p: Vec<usize> = n
                .uses()
                .iter()
                .filter_map(|v| match defs.get(v.index()).copied().flatten() {
                    Some(Definition::Node { node, .. }) => Some(node.index()),
                    _ => None,
                })
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect();
    let mut succs = vec![Vec::new(); g.nodes.len()];
    let mut missing: Vec<usize> = preds.iter().map(Vec::len).collect();
    for (n, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p].push(n);
        }
    }
    let mut ready: BTreeSet<usize> = (0..g.nodes.len()).filter(|&n| missing[n] == 0).collect();
    let mut order = Vec::with_capacity(g.nodes.len());
    while let Some(n) = ready.pop_first() {
        order.push(NodeId(n as u32));
        for &s in &succs[n] {
            missing[s] -= 1;
            if missing[s] == 0 {
                ready.insert(s);
            }
        }
    }
    if order.len() == g.nodes.len() {
        return Ok(order);
    }
    // Every remaining node has a remaining predecessor; walking predecessors must revisit a node,
    // and the first revisited node lies on a cycle.
    let Some(mut n) = (0..g.nodes.len()).find(|&n| missing[n] > 0) else {
        return Ok(order);
    };
    let mut seen = vec![false; g.nodes.len()];
    while !seen[n] {
        seen[n] = true;
        match preds[n].iter().find(|&&p| missing[p] > 0) {
            Some(&p) => n = p,
            None => break,
        }
    }
    let id = NodeId(n as u32);
    Err(PlanError::Cycle { node: g.node_label(id), op: g.nodes[n].op.name() })
}

fn check_ids(g: &Graph) -> Result<(), PlanError> {
    let n_values = g.values.len();
    let graph_err = |v: ValueId| PlanError::ValueOutOfRange { node: "graph".into(), op: "", value: v.0 };
    let graph_ids = g.inputs.iter().chain(&g.outputs).chain(g.initializers.keys());
    for &v in graph_ids.chain(g.captures.iter().map(|c| &c.inner)) {
        if v.index() >= n_values {
            return Err(graph_err(v));
        }
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for v in node.inputs.iter().chain(&node.outputs).flatten() {
            if v.index() >= n_values {
                let node_label = g.node_label(NodeId(i as u32));
                return Err(PlanError::ValueOutOfRange { node: node_label, op: node.op.name(), value: v.0 });
            }
        }
    }
    Ok(())
}

fn check_definitions(g: &Graph) -> Result<(), PlanError> {
    let mut defined = vec![false; g.values.len()];
    let mut define = |v: ValueId, node: String, op: &'static str| {
        if std::mem::replace(&mut defined[v.index()], true) {
            return Err(PlanError::DuplicateDefinition { node, op, value: g.value_name(v) });
        }
        Ok(())
    };
    for &v in g.inputs.iter().chain(g.initializers.keys()).chain(g.captures.iter().map(|c| &c.inner)) {
        define(v, "graph".into(), "")?;
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in node.outputs.iter().flatten() {
            define(v, g.node_label(NodeId(i as u32)), node.op.name())?;
        }
    }
    for (i, node) in g.nodes.iter().enumerate() {
        for &v in node.inputs.iter().flatten() {
            if !defined[v.index()] {
                let node_label = g.node_label(NodeId(i as u32));
                return Err(PlanError::UndefinedValue {
                    node: node_label,
                    op: node.op.name(),
                    value: g.value_name(v),
                });
            }
        }
    }
    for &v in &g.outputs {
        if !defined[v.index()] {
            return Err(PlanError::UndefinedOutput { value: g.value_name(v) });
        }
    }
    // A value nobody defines and nobody reads is still an error: inference indexes every value.
    if let Some(v) = defined.iter().position(|d| !d) {
        let value = g.value_name(ValueId(v as u32));
        return Err(PlanError::UndefinedValue { node: "graph".into(), op: "", value });
    }
    Ok(())
}

/// Checks that a control-flow node's slot counts match its bodies.
fn check_body_arity(g: &Graph, id: NodeId) -> Result<(), PlanError> {
    let node = &g.nodes[id.index()];
    let (n_in, n_out) = (node.inputs.len(), node.outputs.len());
    let detail = match &node.op {
        Op::If(x) if x.then_branch.outputs.len() != x.else_branch.outputs.len() => format!(
            "then branch has {} outputs, else branch {}",
            x.then_branch.outputs.len(),
            x.else_branch.outputs.len()
        ),
        Op::Loop(x) if x.body.inputs.len() != n_in || x.body.outputs.len() != n_out + 1 => format!(
            "node has {n_in} inputs/{n_out} outputs; body has {}/{} (needs {n_in}/{})",
            x.body.inputs.len(),
            x.body.outputs.len(),
            n_out + 1
        ),
        Op::Scan(x)
            if x.body.inputs.len() != n_in || x.body.outputs.len() != n_out || x.num_scan_inputs > n_in =>
        {
            format!(
                "node has {n_in} inputs/{n_out} outputs, body {}/{}, num_scan_inputs {}",
                x.body.inputs.len(),
                x.body.outputs.len(),
                x.num_scan_inputs
            )
        }
        _ => return Ok(()),
    };
    Err(PlanError::Arity { node: g.node_label(id), op: node.op.name(), detail })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Node;
    use crate::tensor_info::DType;

    #[test]
    fn accepts_simple_chain() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        let y = g.relu(x);
        let z = g.add(y, x);
        g.output(z);
        graph(&g).unwrap();
        assert_eq!(topo_order(&g).unwrap(), vec![NodeId(0), NodeId(1)]);
    }

    #[test]
    fn orders_unsorted_nodes() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        let y = g.relu(x);
        let z = g.relu(y);
        g.output(z);
        g.nodes.swap(0, 1);
        assert_eq!(topo_order(&g).unwrap(), vec![NodeId(1), NodeId(0)]);
    }

    #[test]
    fn rejects_cycle_naming_node() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        let a = g.add_value("a", None);
        let b = g.add_value("b", None);
        g.add_node(Node {
            name: "first".into(),
            op: Op::Add,
            inputs: vec![Some(x), Some(b)],
            outputs: vec![Some(a)],
        });
        g.add_node(Node {
            name: "second".into(),
            op: Op::Relu,
            inputs: vec![Some(a)],
            outputs: vec![Some(b)],
        });
        g.output(b);
        match graph(&g) {
            Err(PlanError::Cycle { node, op }) => {
                assert!(node == "first" || node == "second");
                assert!(op == "Add" || op == "Relu");
            }
            other => panic!("expected a cycle, got {other:?}"),
        }
    }

    #[test]
    fn rejects_undefined_input_naming_node() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        let ghost = g.add_value("ghost", None);
        let y = g.add_value("y", None);
        g.add_node(Node {
            name: "adder".into(),
            op: Op::Add,
            inputs: vec![Some(x), Some(ghost)],
            outputs: vec![Some(y)],
        });
        g.output(y);
        let err = graph(&g).unwrap_err();
        assert_eq!(err, PlanError::UndefinedValue { node: "adder".into(), op: "Add", value: "ghost".into() });
        assert!(err.to_string().contains("adder") && err.to_string().contains("ghost"));
    }

    #[test]
    fn rejects_bad_arity_and_ids() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        let y = g.op1(Op::Add, &[x]);
        g.output(y);
        assert!(matches!(graph(&g), Err(PlanError::Arity { op: "Add", .. })));
        g.nodes[0].inputs.push(Some(ValueId(99)));
        assert!(matches!(graph(&g), Err(PlanError::ValueOutOfRange { value: 99, .. })));
    }

    #[test]
    fn rejects_duplicate_definition() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        g.add_node(Node { name: "dup".into(), op: Op::Relu, inputs: vec![Some(x)], outputs: vec![Some(x)] });
        assert!(matches!(graph(&g), Err(PlanError::DuplicateDefinition { op: "Relu", .. })));
    }
}
