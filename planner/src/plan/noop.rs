//! Ops that change nothing, as exporters write them, removed before the lifts read the graph:
//! their readers read the input instead. Without the ONNX optimizer, PyTorch's dynamo export
//! writes `key[:, t]` as a `Slice` of every element before the `Gather`, and `out[:, t] = x` as a
//! `ScatterElements` into such a Slice followed by a `ScatterND` writing the whole result back
//! (`slice_scatter` of a full slice): each step then reads a different node, and no lockstep walk
//! sees one loop.
//!
//! Removed: `Identity`; a `Slice` of steps 1 whose output has its input's shape (it takes every
//! element); a `Reshape` or `Expand` to the input's own shape; a `Cast` to the input's own type;
//! a `Pad` of constant zero pads;
//! a `ScatterND` (no reduction) whose constant indices list every position of the data's leading
//! dims in row-major order, its updates of the data's shape (its output is the updates). A graph
//! output keeps a node: an `Identity` of what it passes on.

use crate::graph::{Graph, ValueId};
use crate::op::{Op, ScatterReduction};
use crate::tensor_info::TensorInfo;

/// `graph` (of shapes `infos`) with every op that changes nothing removed (module doc); `None`
/// when there is none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<Graph> {
    let info = |v: ValueId| infos.get(v.index());
    let dims = |v: ValueId| info(v).and_then(|i| i.shape.as_known());
    let same = |x: ValueId, y: ValueId| {
        let (Some(a), Some(b)) = (info(x), info(y)) else { return false };
        a.dtype == b.dtype && dims(x).is_some_and(|d| Some(d) == dims(y))
    };
    let mut alias: Vec<Option<ValueId>> = vec![None; graph.values.len()];
    // Graph outputs' nodes become Identity of what they pass on (their other inputs unread).
    let mut identity = Vec::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        let (Some(y), 1) = (n.output(0), n.outputs.len()) else { continue };
        let Some(x) = n.input(0) else { continue };
        let src = match &n.op {
            Op::Identity => Some(x),
            Op::Reshape(_) | Op::Expand | Op::Cast(_) if same(x, y) => Some(x),
            // Padding of zero on every side (a sequence already a multiple of the chunk).
            Op::Pad(p) if same(x, y) => {
                let pads = match &p.pads {
                    Some(pads) => Some(pads.clone()),
                    None => n.input(1).and_then(|p| graph.constant(p)).and_then(|c| c.to_i64s()),
                };
                pads.is_some_and(|p| p.iter().all(|&v| v == 0)).then_some(x)
            }
            Op::Slice(_) if same(x, y) => {
                let unit = match n.input(4) {
                    None => true,
                    Some(s) => {
                        graph.constant(s).and_then(|c| c.to_i64s()).is_some_and(|s| s.iter().all(|&v| v == 1))
                    }
                };
                unit.then_some(x)
            }
            Op::ScatterNd(s) if s.reduction == ScatterReduction::None => {
                let (Some(i), Some(u)) = (n.input(1), n.input(2)) else { continue };
                (same(x, y) && same(u, y) && enumerates(graph, i, &dims(x).unwrap_or_default())).then_some(u)
            }
            _ => None,
        };
        match src {
            Some(_) if matches!(n.op, Op::Identity) && graph.outputs.contains(&y) => {}
            Some(s) if graph.outputs.contains(&y) => identity.push((i, s)),
            Some(s) => alias[y.index()] = Some(s),
            None => {}
        }
    }
    if identity.is_empty() && alias.iter().all(Option::is_none) {
        return None;
    }
    // Through chains of removed ops (each step goes to an earlier value: no cycle).
    let resolve = |mut v: ValueId| {
        for _ in 0..alias.len() {
            match alias[v.index()] {
                Some(x) => v = x,
                None => break,
            }
        }
        v
    };
    let mut g = graph.clone();
    for (i, s) in identity {
        let n = &mut g.nodes[i];
        n.op = Op::Identity;
        n.inputs = vec![Some(s)];
    }
    for n in &mut g.nodes {
        for v in n.inputs.iter_mut().flatten() {
            *v = resolve(*v);
        }
        for body in n.op.subgraphs_mut() {
            for c in &mut body.captures {
                c.outer = resolve(c.outer);
            }
        }
    }
    Some(crate::dce::eliminate(&g))
}

/// Whether constant `indices` (`[d0, .., dk-1, k]`) lists every position of `data`'s first `k`
/// dims once, in row-major order.
fn enumerates(g: &Graph, indices: ValueId, data: &[usize]) -> bool {
    let Some(c) = g.constant(indices) else { return false };
    let Some(&k) = c.dims.last() else { return false };
    if k == 0 || k > data.len() || c.dims[..c.dims.len() - 1] != data[..k] {
        return false;
    }
    let Some(idx) = c.to_i64s() else { return false };
    let mut pos = vec![0i64; k];
    for chunk in idx.chunks(k) {
        if chunk != pos.as_slice() {
            return false;
        }
        // The next position, row-major.
        for d in (0..k).rev() {
            pos[d] += 1;
            if pos[d] < data[d] as i64 {
                break;
            }
            pos[d] = 0;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op;
    use crate::tensor_info::{DType, Dim};

    fn ops(g: &Graph) -> Vec<&'static str> {
        g.nodes.iter().map(|n| n.op.name()).collect()
    }

    fn removed(g: &Graph) -> Option<Graph> {
        run(g, &crate::shape_infer::infer(g).unwrap())
    }

    /// `relu(Slice(x, 0, end, axis 0, steps))` of `x` `[4, 3]`.
    fn sliced(end: i64, step: Option<i64>) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [4, 3].map(Dim::Known));
        let (s, e, a) =
            (g.const_i64("s", &[1], &[0]), g.const_i64("e", &[1], &[end]), g.const_i64("a", &[1], &[0]));
        let mut ins = vec![x, s, e, a];
        if let Some(st) = step {
            ins.push(g.const_i64("st", &[1], &[st]));
        }
        let v = g.op1(Op::Slice(op::Slice::default()), &ins);
        let y = g.relu(v);
        g.output(y);
        g
    }

    #[test]
    fn slices_of_every_element_are_removed_and_others_kept() {
        for (end, step) in [(i64::MAX, None), (4, Some(1)), (100, None)] {
            let g = removed(&sliced(end, step)).expect("removed");
            assert_eq!(ops(&g), ["Relu"], "end {end} step {step:?}");
            assert_eq!(g.nodes[0].input(0), Some(g.inputs[0]));
        }
        // Reversed, or a part: kept.
        assert!(removed(&sliced(i64::MAX, Some(-1))).is_none_or(|g| ops(&g).contains(&"Slice")));
        assert!(removed(&sliced(3, None)).is_none());
    }

    /// `ScatterND(buf, rows, u)` of `buf` and `u` `[3, 2]`, then relu when `inner`.
    fn scattered(rows: &[i64], inner: bool) -> Graph {
        let mut g = Graph::new();
        let buf = g.input("buf", DType::F32, [3, 2].map(Dim::Known));
        let u = g.input("u", DType::F32, [3, 2].map(Dim::Known));
        let idx = g.const_i64("rows", &[rows.len(), 1], rows);
        let y = g.op1(Op::ScatterNd(op::ScatterNd::default()), &[buf, idx, u]);
        let y = if inner { g.relu(y) } else { y };
        g.output(y);
        g
    }

    #[test]
    fn a_scatter_nd_writing_everything_in_order_is_its_updates() {
        let g = removed(&scattered(&[0, 1, 2], true)).unwrap();
        assert_eq!(ops(&g), ["Relu"]);
        assert_eq!(g.nodes[0].input(0), Some(g.inputs[1]));
        // A graph output keeps a node, an Identity of the updates: the buffer is no longer read.
        let g = removed(&scattered(&[0, 1, 2], false)).unwrap();
        assert_eq!(ops(&g), ["Identity"]);
        assert_eq!(g.nodes[0].inputs, [Some(g.inputs[1])]);
        // Out of order: a permutation, kept.
        assert!(removed(&scattered(&[1, 0, 2], true)).is_none());
    }

    #[test]
    fn casts_reshapes_and_identities_to_the_same_are_removed() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2, 3].map(Dim::Known));
        let c = g.cast(x, DType::F32);
        let shape = g.const_i64("shape", &[2], &[2, 3]);
        let r = g.op1(Op::Reshape(op::Reshape::default()), &[c, shape]);
        let i = g.op1(Op::Identity, &[r]);
        let to = g.const_i64("to", &[2], &[3, 2]);
        let moved = g.op1(Op::Reshape(op::Reshape::default()), &[i, to]);
        let y = g.relu(moved);
        g.output(y);
        let g = removed(&g).unwrap();
        assert_eq!(ops(&g), ["Reshape", "Relu"]);
        assert_eq!(g.nodes[0].input(0), Some(g.inputs[0]));
    }

    #[test]
    fn a_pad_of_zeros_is_removed_and_a_shift_kept() {
        // Pads [begin.., end..] of `x` [2, 3]: zeros, or one in front and one off the end (a
        // shift: the same shape, other values).
        let padded = |pads: &[i64]| {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, [2, 3].map(Dim::Known));
            let p = g.const_i64("pads", &[4], pads);
            let v = g.op1(Op::Pad(op::Pad::default()), &[x, p]);
            let y = g.relu(v);
            g.output(y);
            g
        };
        let g = removed(&padded(&[0, 0, 0, 0])).unwrap();
        assert_eq!(ops(&g), ["Relu"]);
        assert!(removed(&padded(&[0, 1, 0, -1])).is_none());
    }
}
