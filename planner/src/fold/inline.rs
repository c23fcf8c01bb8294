//! `If` nodes whose condition is a constant, replaced by the branch they take: its nodes join the
//! enclosing graph (its captures read the outer values, its constants become outer constants, its
//! outputs are the If's). Shape arithmetic written with If (the expanded ONNX functions choose
//! between 2-D and 3-D forms this way) then folds like any other, instead of waiting for a run.

use std::collections::HashMap;

use crate::graph::{Graph, Node, ValueId};
use crate::op::Op;

/// `g` with every `If` whose condition is a constant replaced by its taken branch; `None` when it
/// has none.
pub(super) fn constant_ifs(g: &Graph) -> Option<Graph> {
    let picks: Vec<(usize, bool)> = (g.nodes.iter().enumerate())
        .filter_map(|(i, n)| {
            let Op::If(_) = &n.op else { return None };
            let c = g.initializers.get(&n.input(0)?)?;
            (c.bytes.len() == 1).then(|| (i, c.bytes[0] != 0))
        })
        .collect();
    if picks.is_empty() {
        return None;
    }
    let mut out = g.clone();
    let mut dead = Vec::new();
    for (i, cond) in picks {
        let node = &g.nodes[i];
        let Op::If(iff) = &node.op else { continue };
        let branch = if cond { &iff.then_branch } else { &iff.else_branch };
        if branch.outputs.len() != node.outputs.len() {
            continue;
        }
        let label = g.node_label(crate::graph::NodeId(i as u32));
        inline(&mut out, branch, &[], &node.outputs, &label);
        dead.push(i);
    }
    let mut k = 0;
    out.nodes.retain(|_| {
        k += 1;
        !dead.contains(&(k - 1))
    });
    Some(out)
}

/// Adds the nodes of `branch` (a subgraph of a node of `out`) to `out`: its inputs read `inputs`,
/// its captures the outer values, its constants become `out`'s, and its outputs are written to
/// `outputs` (the node's slots; an omitted slot's value is dropped). Names are prefixed with
/// `label`.
pub(crate) fn inline(
    out: &mut Graph,
    branch: &Graph,
    inputs: &[ValueId],
    outputs: &[Option<ValueId>],
    label: &str,
) {
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    for c in &branch.captures {
        map.insert(c.inner, c.outer);
    }
    for (&b, &o) in branch.inputs.iter().zip(inputs) {
        map.insert(b, o);
    }
    let fresh = |out: &mut Graph, v: ValueId| {
        let info = &branch.values[v.index()];
        out.add_value(format!("{label}/{}", info.name), info.info.clone())
    };
    for (&v, t) in &branch.initializers {
        let id = fresh(out, v);
        out.initializers.insert(id, t.clone());
        map.insert(v, id);
    }
    // A branch output that a branch node defines (first occurrence) is written straight into the
    // If's output; any other (a capture, a constant, a repeat) is copied by an Identity below.
    let mut direct: HashMap<ValueId, ValueId> = HashMap::new();
    let defined: Vec<ValueId> =
        branch.nodes.iter().flat_map(|n| n.outputs.iter().flatten().copied()).collect();
    for (b, o) in branch.outputs.iter().zip(outputs) {
        if let Some(o) = o
            && defined.contains(b)
            && !direct.contains_key(b)
        {
            direct.insert(*b, *o);
        }
    }
    for &v in &defined {
        let id = match direct.get(&v) {
            Some(&o) => o,
            None => fresh(out, v),
        };
        map.insert(v, id);
    }
    for n in &branch.nodes {
        let at = |v: &Option<ValueId>| v.map(|v| map.get(&v).copied().unwrap_or(v));
        let mut op = n.op.clone();
        for body in op.subgraphs_mut() {
            for c in &mut body.captures {
                c.outer = map.get(&c.outer).copied().unwrap_or(c.outer);
            }
        }
        out.add_node(Node {
            name: format!("{label}/{}", n.name),
            op,
            inputs: n.inputs.iter().map(at).collect(),
            outputs: n.outputs.iter().map(at).collect(),
        });
    }
    for (b, o) in branch.outputs.iter().zip(outputs) {
        let Some(o) = o else { continue };
        let src = map.get(b).copied().unwrap_or(*b);
        if src != *o {
            out.add_node(Node {
                name: format!("{label}/output"),
                op: Op::Identity,
                inputs: vec![Some(src)],
                outputs: vec![Some(*o)],
            });
        }
    }
}
