//! Rows gathered from one table and concatenated side by side, `cat([x[src], x[dst]], -1)` (a
//! message-passing layer's edge features, as PyTorch Geometric-style code and TICL's GNNs write
//! them), become one gather of the stacked indices: `x[stack([src, dst], -1)]` reshaped. The
//! unfused form writes every gathered row twice (the gather, then the Concat's copy) and reads it
//! once more; one gather writes each row once, into its place.
//!
//! Applies to a Concat whose inputs are each read only by it and are all `GatherND` (no batch
//! dims) or all `Gather` along axis 0, of one data tensor, with indices of one shape, concatenated
//! along the first axis of the gathered slices (so that the stacked axis merges with it): the
//! indices are reshaped with a size-1 axis there and concatenated along it, gathered once, and
//! the result reshaped to the Concat's shape.

use super::contract::reshape;
use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::TensorInfo;

/// `graph` (of shapes `infos`) with every concatenation of gathers from one table rewritten
/// (module doc) and how many; `None` when there is none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::Concat(_))) {
        return None;
    }
    let readers = super::fuse::reader_counts(graph);
    let defs = super::fuse::producers(graph);
    let dims = |v: ValueId| infos.get(v.index()).and_then(|i| i.shape.as_known());
    let mut g = graph.clone();
    // Nodes that replace node `i` (the Concat).
    let mut replaced: Vec<Option<Vec<Node>>> = vec![None; graph.nodes.len()];
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        let (Op::Concat(c), Some(y)) = (&n.op, n.output(0)) else { continue };
        if n.inputs.len() < 2 || graph.outputs.iter().any(|o| n.inputs.contains(&Some(*o))) {
            continue;
        }
        // Each input's gather node.
        let Some(gathers) = n
            .inputs
            .iter()
            .map(|v| {
                let v = (*v)?;
                let (node, 0) = defs[v.index()]? else { return None };
                (readers[v.index()] == 1).then_some(&graph.nodes[node])
            })
            .collect::<Option<Vec<&Node>>>()
        else {
            continue;
        };
        let first = gathers[0];
        let (Some(x), Some(i0)) = (first.input(0), first.input(1)) else { continue };
        let nd = match &first.op {
            Op::GatherNd(op::GatherNd { batch_dims: 0 }) => true,
            Op::Gather(op::Gather { axis: 0 }) => false,
            _ => continue,
        };
        let (Some(xd), Some(id), Some(yd)) = (dims(x), dims(i0), dims(y)) else { continue };
        let same = gathers.iter().all(|gn| {
            gn.op == first.op
                && gn.input(0) == Some(x)
                && gn.input(1).and_then(dims).as_deref() == Some(&id[..])
        });
        // The leading output dims (the indices' own), then the slice; the Concat must be along
        // the slice's first axis.
        let lead = if nd { id.len().saturating_sub(1) } else { id.len() };
        let k = if nd { id.last().copied().unwrap_or(0) } else { 1 };
        let axis = if c.axis < 0 { c.axis + yd.len() as i64 } else { c.axis };
        if !same || k == 0 || xd.len() <= k || axis != lead as i64 || (nd && id.is_empty()) {
            continue;
        }
        let name = graph.node_label(crate::graph::NodeId(i as u32));
        let mut nodes = Vec::new();
        // Each index tensor with a size-1 axis at `lead`, concatenated along it.
        let mut with_axis = id.clone();
        with_axis.insert(lead, 1);
        let stacked_parts: Vec<Option<ValueId>> = gathers
            .iter()
            .enumerate()
            .map(|(j, gn)| {
                let (node, v) = reshape(&mut g, gn.input(1)?, &with_axis, format!("{name}:indices{j}"), None);
                nodes.push(node);
                Some(v)
            })
            .collect();
        let stacked = g.add_value(format!("{name}:indices"), None);
        nodes.push(Node {
            name: format!("{name}:indices"),
            op: Op::Concat(op::Concat { axis: lead as i64 }),
            inputs: stacked_parts,
            outputs: vec![Some(stacked)],
        });
        let gathered = g.add_value(format!("{name}:gathered"), None);
        nodes.push(Node {
            name: format!("{name}:gathered"),
            op: first.op.clone(),
            inputs: vec![Some(x), Some(stacked)],
            outputs: vec![Some(gathered)],
        });
        nodes.push(reshape(&mut g, gathered, &yd, n.name.clone(), Some(y)).0);
        replaced[i] = Some(nodes);
        count += 1;
    }
    if count == 0 {
        return None;
    }
    let old = std::mem::take(&mut g.nodes);
    g.nodes = old.into_iter().zip(replaced).flat_map(|(n, r)| r.unwrap_or_else(|| vec![n])).collect();
    Some((crate::dce::eliminate(&g), count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_info::{DType, Dim};

    /// `Concat([gather(x, i0), gather(x, i1)], axis)` of `x` `[10, 4]` and indices `[6]` (Gather)
    /// or `[6, 1]` (GatherND).
    fn concat_of_gathers(nd: bool, axis: i64, other_table: bool) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [10, 4].map(Dim::Known));
        let x2 = g.input("x2", DType::F32, [10, 4].map(Dim::Known));
        let shape: &[usize] = if nd { &[6, 1] } else { &[6] };
        let i0 = g.input("i0", DType::I64, shape.iter().map(|&d| Dim::Known(d)));
        let i1 = g.input("i1", DType::I64, shape.iter().map(|&d| Dim::Known(d)));
        let op = if nd { Op::GatherNd(op::GatherNd::default()) } else { Op::Gather(op::Gather { axis: 0 }) };
        let a = g.op1(op.clone(), &[x, i0]);
        let b = g.op1(op, &[if other_table { x2 } else { x }, i1]);
        let y = g.op1(Op::Concat(op::Concat { axis }), &[a, b]);
        let y = g.relu(y);
        g.output(y);
        g
    }

    fn rewritten(g: &Graph) -> Option<Graph> {
        run(g, &crate::shape_infer::infer(g).unwrap()).map(|(g, _)| g)
    }

    #[test]
    fn gathers_of_one_table_side_by_side_become_one_gather() {
        for nd in [false, true] {
            for axis in [1, -1] {
                let g = rewritten(&concat_of_gathers(nd, axis, false)).expect("rewritten");
                let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
                let gather = if nd { "GatherND" } else { "Gather" };
                assert_eq!(ops, ["Reshape", "Reshape", "Concat", gather, "Reshape", "Relu"], "nd {nd}");
                let infos = crate::shape_infer::infer(&g).unwrap();
                let out = g.nodes[4].output(0).unwrap();
                assert_eq!(infos[out.index()].shape.as_known(), Some(vec![6, 8]));
            }
            // Along the rows, or from two tables: kept.
            assert!(rewritten(&concat_of_gathers(nd, 0, false)).is_none());
            assert!(rewritten(&concat_of_gathers(nd, 1, true)).is_none());
        }
    }
}
