//! Dead-node elimination and value-table compaction.
//!
//! A node is live when one of its outputs is (transitively) needed by a graph output. Graph inputs
//! and captures are the graph's interface and always stay; unused initializers are dropped. Surviving
//! values are renumbered densely in their old order, so `ValueId`s change but relative order does not.
//! Subgraph bodies are kept as they are (only their capture references are renumbered).

use std::collections::BTreeMap;

use crate::graph::{Definition, Graph, ValueId};

/// Returns `g` without dead nodes, unused initializers and unreferenced values.
pub fn eliminate(g: &Graph) -> Graph {
    let defs = g.definitions();
    let mut live_value = vec![false; g.values.len()];
    let mut live_node = vec![false; g.nodes.len()];
    let mut stack: Vec<ValueId> = g.outputs.clone();
    while let Some(v) = stack.pop() {
        let Some(flag) = live_value.get_mut(v.index()) else { continue };
        if std::mem::replace(flag, true) {
            continue;
        }
        if let Some(Some(Definition::Node { node, .. })) = defs.get(v.index())
            && !std::mem::replace(&mut live_node[node.index()], true)
        {
            stack.extend(g.nodes[node.index()].uses());
        }
    }
    let mut keep = vec![false; g.values.len()];
    let mark = |keep: &mut Vec<bool>, v: ValueId| {
        if let Some(k) = keep.get_mut(v.index()) {
            *k = true;
        }
    };
    for &v in g.inputs.iter().chain(&g.outputs).chain(g.captures.iter().map(|c| &c.inner)) {
        mark(&mut keep, v);
    }
    for &v in g.initializers.keys() {
        if live_value.get(v.index()).copied().unwrap_or(false) {
            mark(&mut keep, v);
        }
    }
    for (n, node) in g.nodes.iter().enumerate() {
        if live_node[n] {
            for &v in node.outputs.iter().flatten() {
                mark(&mut keep, v);
            }
        }
    }
    let mut remap: BTreeMap<ValueId, ValueId> = BTreeMap::new();
    let mut out = Graph::new();
    for (i, vi) in g.values.iter().enumerate() {
        if keep[i] {
            let new = out.add_value(vi.name.clone(), vi.info.clone());
            remap.insert(ValueId(i as u32), new);
        }
    }
    let map = |v: ValueId| remap.get(&v).copied().unwrap_or(v);
    out.inputs = g.inputs.iter().map(|&v| map(v)).collect();
    out.outputs = g.outputs.iter().map(|&v| map(v)).collect();
    out.captures =
        g.captures.iter().map(|c| crate::graph::Capture { inner: map(c.inner), outer: c.outer }).collect();
    for (v, t) in &g.initializers {
        if keep.get(v.index()).copied().unwrap_or(false) {
            out.initializers.insert(map(*v), t.clone());
        }
    }
    for (n, node) in g.nodes.iter().enumerate() {
        if !live_node[n] {
            continue;
        }
        let mut node = node.clone();
        for slot in node.inputs.iter_mut().chain(node.outputs.iter_mut()).flatten() {
            *slot = map(*slot);
        }
        for sub in node.op.subgraphs_mut() {
            for c in &mut sub.captures {
                c.outer = map(c.outer);
            }
        }
        out.nodes.push(node);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_info::DType;
    use crate::validate;

    #[test]
    fn removes_dead_nodes_and_compacts() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4usize]);
        let unused = g.input("unused", DType::F32, [4usize]);
        let w = g.initializer("w", crate::ConstTensor::from_f32(&[4], &[1.0; 4]).unwrap());
        let dead = g.relu(x);
        let _dead2 = g.mul(dead, w);
        let y = g.sigmoid(x);
        g.output(y);
        let out = eliminate(&g);
        validate::graph(&out).unwrap();
        assert_eq!(out.nodes.len(), 1);
        assert_eq!(out.values.len(), 3);
        assert!(out.initializers.is_empty());
        assert_eq!(out.inputs.len(), 2);
        assert_eq!(out.value_name(out.inputs[1]), g.value_name(unused));
        assert_eq!(out.value_name(out.outputs[0]), g.value_name(y));
    }
}
