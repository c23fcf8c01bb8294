//! Exporter spellings rewritten into the form the fusion passes read: a transpose that an exporter
//! wrote through merged leading dims, `Reshape(x [a, b, ..] -> [a·b, ..]) -> Transpose(perm with
//! perm[0] = 0) -> Reshape(-> [a, b, ..])` (PyTorch's dynamo export of `k.transpose(-2, -1)` in
//! scaled-dot-product attention), becomes the one Transpose of `x` it is. The merged form is a view
//! of `x` only when the merged dims are contiguous, which a head split of a projection is not at
//! batch above 1: the attention fusion could not trace K through it and the plan copied it.
//!
//! A Transpose that moves only axes of extent 1 (`[seq, 1, d] -> [1, seq, d]`, which
//! sequence-first exports such as `nn.MultiheadAttention` write around attention at batch 1)
//! keeps every element where it is: it becomes the Reshape it is, a view that moves nothing.

use crate::graph::{Graph, Node};
use crate::op::{Op, Transpose};
use crate::tensor_info::TensorInfo;

/// `graph` with every merged-dims transpose rewritten (module doc); `None` when it has none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<Graph> {
    let readers = super::fuse::reader_counts(graph);
    let defs = super::fuse::producers(graph);
    let dims = |v: crate::graph::ValueId| infos.get(v.index()).and_then(|i| i.shape.as_known());
    let private = |v: crate::graph::ValueId| readers[v.index()] == 1 && !graph.outputs.contains(&v);
    let mut g = graph.clone();
    // Nodes whose output a rewrite stopped reading (dead-node elimination removes them).
    let mut dropped = vec![false; graph.nodes.len()];
    let mut changed = false;
    for (i, n) in graph.nodes.iter().enumerate() {
        let (Op::Reshape(_), Some(Some(t)), Some(y)) = (&n.op, n.inputs.first(), n.output(0)) else {
            continue;
        };
        let Some((ti, 0)) = defs[t.index()] else { continue };
        let tn = &graph.nodes[ti];
        let (Op::Transpose(tr), Some(Some(m))) = (&tn.op, tn.inputs.first()) else { continue };
        let Some((mi, 0)) = defs[m.index()] else { continue };
        let mn = &graph.nodes[mi];
        let (Op::Reshape(_), Some(Some(x))) = (&mn.op, mn.inputs.first()) else { continue };
        if dropped[ti] || dropped[mi] || !private(*t) || !private(*m) {
            continue;
        }
        let (Some(xd), Some(md), Some(td), Some(yd)) = (dims(*x), dims(*m), dims(*t), dims(y)) else {
            continue;
        };
        let Some(perm) = transpose_of(&xd, &md, tr.perm.as_deref(), &td, &yd) else { continue };
        g.nodes[i] = Node {
            name: n.name.clone(),
            op: Op::Transpose(Transpose { perm: Some(perm) }),
            inputs: vec![Some(*x)],
            outputs: n.outputs.clone(),
        };
        dropped[ti] = true;
        dropped[mi] = true;
        changed = true;
    }
    for (i, n) in graph.nodes.iter().enumerate() {
        let (Op::Transpose(tr), Some(Some(x)), Some(y)) = (&n.op, n.inputs.first(), n.output(0)) else {
            continue;
        };
        let (Some(xd), Some(yd)) = (dims(*x), dims(y)) else { continue };
        let default: Vec<usize> = (0..xd.len()).rev().collect();
        let perm = tr.perm.as_deref().unwrap_or(&default);
        let moved: Vec<usize> =
            perm.iter().copied().filter(|&p| xd.get(p).is_some_and(|&d| d != 1)).collect();
        let identity = perm.iter().enumerate().all(|(i, &p)| i == p);
        // (A 0 in a Reshape's shape would mean "copy the input dim".)
        if perm.len() != xd.len() || !moved.is_sorted() || identity || yd.contains(&0) {
            continue;
        }
        let shape: Vec<i64> = yd.iter().map(|&d| d as i64).collect();
        let name = format!("{}.unit_transpose_shape", graph.value_name(y));
        let shape = g.const_i64(&name, &[shape.len()], &shape);
        g.nodes[i] = Node {
            name: n.name.clone(),
            op: Op::Reshape(Default::default()),
            inputs: vec![Some(*x), Some(shape)],
            outputs: n.outputs.clone(),
        };
        changed = true;
    }
    changed.then(|| crate::dce::eliminate(&g))
}

/// The permutation of `x` (dims `xd`) that `Reshape(x -> md) -> Transpose(perm) -> Reshape(-> yd)`
/// computes, when `md` merges the first `k >= 2` dims of `xd` into one, `perm` keeps that dim
/// first, and `yd` splits it back (the transposed dims `td` otherwise unchanged).
fn transpose_of(
    xd: &[usize],
    md: &[usize],
    perm: Option<&[usize]>,
    td: &[usize],
    yd: &[usize],
) -> Option<Vec<usize>> {
    let r = md.len();
    let k = xd.len().checked_sub(r)? + 1;
    if k < 2 || md.first()? != &xd[..k].iter().product::<usize>() || md[1..] != xd[k..] {
        return None;
    }
    let default: Vec<usize> = (0..r).rev().collect();
    let perm = perm.unwrap_or(&default);
    if perm.len() != r || perm[0] != 0 || td.len() != r {
        return None;
    }
    let mut want = xd[..k].to_vec();
    want.extend(&td[1..]);
    if yd != want.as_slice() {
        return None;
    }
    let mut out: Vec<usize> = (0..k).collect();
    out.extend(perm[1..].iter().map(|&p| k - 1 + p));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::transpose_of;

    #[test]
    fn a_transpose_through_merged_leading_dims_is_a_transpose() {
        // [b, h, s, d] -> [b·h, s, d] -> (0, 2, 1) -> [b, h, d, s]: the last two dims swapped.
        let (xd, md, td, yd) = ([16, 4, 128, 64], [64, 128, 64], [64, 64, 128], [16, 4, 64, 128]);
        assert_eq!(transpose_of(&xd, &md, Some(&[0, 2, 1]), &td, &yd), Some(vec![0, 1, 3, 2]));
        // Not split back the same way, the merged dim moved, or no merge: not this pattern.
        assert_eq!(transpose_of(&xd, &md, Some(&[0, 2, 1]), &td, &[4, 16, 64, 128]), None);
        assert_eq!(transpose_of(&xd, &md, Some(&[1, 0, 2]), &[128, 64, 64], &[128, 16, 4, 64]), None);
        assert_eq!(transpose_of(&[2, 3], &[2, 3], Some(&[1, 0]), &[3, 2], &[3, 2]), None);
    }
}
