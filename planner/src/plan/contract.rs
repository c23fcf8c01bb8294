//! Broadcast products that are summed, `ReduceSum(Mul(a, b), axes)`, become the `Einsum` they
//! are, which the decomposition then computes as batched MatMuls (`decompose/einsum.rs`). This is
//! how NumPy-style code spells a contraction without `einsum` or `matmul`, and how transformers'
//! reference Mamba2 (SSD) scan is written: `(C[..., None, :] * B[..., None, :, :]).sum(-1)`
//! materialises a `[b, c, l, l, h, n]` product (hundreds of MB at sequence 256) only to sum it
//! over `n`. The rewrite applies where the product is at least twice the size of either operand
//! (it broadcasts, so the unfused form writes and reads more than its operands hold) and a
//! reduced axis is longer than 1; a same-shape product summed (a row-wise dot product) stays the
//! fused elementwise-and-reduce it already is.
//!
//! Each axis of the product gets a label; an operand of lower rank takes the labels of the
//! trailing axes (broadcasting is right-aligned), and its size-1 axes where the product is longer
//! are what the einsum decomposition sums out of it (a size-1 sum: the broadcast). The output's
//! labels are the kept axes; a Reshape gives the result the ReduceSum's shape (with `keepdims`, the
//! reduced axes as size 1).

use crate::constant::ConstTensor;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{self, Op};
use crate::shape_infer;
use crate::tensor_info::DType;

/// The most labels an equation has (ASCII letters).
const LABELS: &[u8; 52] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// `graph` with every summed broadcast product rewritten (module doc), and every sum over size-1
/// axes only (`x[..., None].sum(-1)`, a copy; not a sum over an empty axis, which is zeros) a
/// Reshape; `None` when it has neither. Shapes must
/// be known (a bound graph); sums of unknown shape stay as they are, and so does a graph whose
/// shapes do not infer (compiling it reports why).
pub(super) fn run(graph: &Graph) -> Option<Graph> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::ReduceSum(_))) {
        return None;
    }
    let infos = shape_infer::infer(graph).ok()?;
    let readers = super::fuse::reader_counts(graph);
    let defs = super::fuse::producers(graph);
    let dims = |v: ValueId| infos.get(v.index()).and_then(|i| i.shape.as_known());
    let mut g = graph.clone();
    // Nodes to insert before node `i` (an Einsum operand's Reshape).
    let mut before: Vec<Vec<Node>> = vec![Vec::new(); graph.nodes.len()];
    let mut changed = false;
    for (i, n) in graph.nodes.iter().enumerate() {
        let (Op::ReduceSum(r), Some(Some(m)), Some(y)) = (&n.op, n.inputs.first(), n.output(0)) else {
            continue;
        };
        // The reduced axes (from the attribute or the constant input 1).
        let axes = match (&r.axes, n.input(1)) {
            (Some(axes), _) => axes.clone(),
            (None, Some(v)) => match graph.constant(v).and_then(ConstTensor::to_i64s) {
                Some(axes) => axes,
                None => continue,
            },
            (None, None) => Vec::new(),
        };
        let (Some(md), Some(yd)) = (dims(*m), dims(y)) else { continue };
        if infos[m.index()].dtype != DType::F32 {
            continue;
        }
        let Some(reduced) = reduced_axes(md.len(), &axes, r.noop_with_empty_axes) else { continue };
        if (0..md.len()).all(|k| !reduced[k] || md[k] == 1) {
            g.nodes[i] = reshape(&mut g, *m, &yd, n.name.clone(), Some(y)).0;
            changed = true;
            continue;
        }
        let Some((mi, 0)) = defs[m.index()] else { continue };
        let mn = &graph.nodes[mi];
        let (Op::Mul, [Some(a), Some(b)]) = (&mn.op, mn.inputs.as_slice()) else { continue };
        let (Some(ad), Some(bd)) = (dims(*a), dims(*b)) else { continue };
        if readers[m.index()] != 1 || graph.outputs.contains(m) {
            continue;
        }
        let Some((terms, out)) = equation(&ad, &bd, &md, &reduced) else { continue };
        // The Mul becomes the Einsum (its operands are defined before it; a reshaped operand's
        // Reshape goes before it) and the ReduceSum a Reshape of its result to the reduced shape
        // (the kept size-1 axes with `keepdims`).
        let name = graph.node_label(NodeId(i as u32));
        let mut operand = |g: &mut Graph, x: ValueId, (_, d): &Term, tag: &str| match d {
            Some(d) => {
                let (node, v) = reshape(g, x, d, format!("{name}:contracted:{tag}"), None);
                before[mi].push(node);
                v
            }
            None => x,
        };
        let (a2, b2) = (operand(&mut g, *a, &terms[0], "a"), operand(&mut g, *b, &terms[1], "b"));
        let into = g.add_value(format!("{name}:contracted"), None);
        g.nodes[mi] = Node {
            name: format!("{name}:contracted"),
            op: Op::Einsum(op::Einsum { equation: format!("{},{}->{out}", terms[0].0, terms[1].0) }),
            inputs: vec![Some(a2), Some(b2)],
            outputs: vec![Some(into)],
        };
        g.nodes[i] = reshape(&mut g, into, &yd, n.name.clone(), Some(y)).0;
        changed = true;
    }
    if !changed {
        return None;
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes
        .into_iter()
        .zip(before)
        .flat_map(|(n, mut b)| {
            b.push(n);
            b
        })
        .collect();
    Some(crate::dce::eliminate(&g))
}

/// A Reshape node named `name` of `x` to `dims` (its shape a new constant) into `out` or a new
/// value, and that value.
pub(super) fn reshape(
    g: &mut Graph,
    x: ValueId,
    dims: &[usize],
    name: String,
    out: Option<ValueId>,
) -> (Node, ValueId) {
    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let s = g.const_i64(&format!("{name}:shape"), &[shape.len()], &shape);
    let y = out.unwrap_or_else(|| g.add_value(name.clone(), None));
    let op = Op::Reshape(op::Reshape { allowzero: false });
    (Node { name, op, inputs: vec![Some(x), Some(s)], outputs: vec![Some(y)] }, y)
}

/// Which of `rank` axes a ReduceSum over `axes` sums (ONNX semantics: negative from the end;
/// none: every axis, unless `noop`, then none: `None`, as for an axis out of range).
fn reduced_axes(rank: usize, axes: &[i64], noop: bool) -> Option<Vec<bool>> {
    if axes.is_empty() && noop {
        return None;
    }
    let mut reduced = vec![axes.is_empty(); rank];
    for &x in axes {
        let x = if x < 0 { x + rank as i64 } else { x };
        *reduced.get_mut(usize::try_from(x).ok()?)? = true;
    }
    Some(reduced)
}

/// An operand of the Einsum: its labels, and the dims it is reshaped to first when its broadcast
/// axes are dropped (`None`: used as it is).
type Term = (String, Option<Vec<usize>>);

/// The Einsum of `Mul(a, b)` (product dims `md`) summed over the `reduced` axes, when the rewrite
/// applies (module doc): each operand's term, and the output's labels.
fn equation(ad: &[usize], bd: &[usize], md: &[usize], reduced: &[bool]) -> Option<([Term; 2], String)> {
    let r = md.len();
    if r > LABELS.len() || ad.len() > r || bd.len() > r {
        return None;
    }
    let size = |d: &[usize]| d.iter().product::<usize>();
    if size(md) == 0 || size(md) < 2 * size(ad).max(size(bd)) {
        return None;
    }
    let label = |i: usize| LABELS[i] as char;
    // An operand's axis `j` is the product's `r - len + j`; the axes where it broadcasts (size 1
    // against a longer product axis) are dropped: Einsum labels do not broadcast.
    let term = |d: &[usize]| -> Term {
        let at = r - d.len();
        let kept: Vec<usize> = (0..d.len()).filter(|&j| d[j] == md[at + j]).collect();
        let labels = kept.iter().map(|&j| label(at + j)).collect();
        let dims = (kept.len() < d.len()).then(|| kept.iter().map(|&j| d[j]).collect());
        (labels, dims)
    };
    let out: String = (0..r).filter(|&i| !reduced[i]).map(label).collect();
    Some(([term(ad), term(bd)], out))
}

#[cfg(test)]
mod tests {
    use super::{equation, reduced_axes};

    #[test]
    fn summed_broadcast_products_are_the_einsum_they_spell() {
        let eq = |a: &[usize], b: &[usize], m: &[usize], axes: &[i64], noop: bool| {
            equation(a, b, m, &reduced_axes(m.len(), axes, noop)?)
                .map(|([(ta, da), (tb, db)], out)| (format!("{ta},{tb}->{out}"), da, db))
        };
        // Mamba2's `(C[:, :, :, None] * B[:, :, None]).sum(-1)`: [1, 2, 64, 1, 4, 16] x
        // [1, 2, 1, 64, 4, 16] summed over the state dim; the broadcast axes dropped.
        let (c, b, m) = ([1, 2, 64, 1, 4, 16], [1, 2, 1, 64, 4, 16], [1, 2, 64, 64, 4, 16]);
        let want =
            ("abcef,abdef->abcde".to_string(), Some(vec![1, 2, 64, 4, 16]), Some(vec![1, 2, 64, 4, 16]));
        assert_eq!(eq(&c, &b, &m, &[-1], false), Some(want));
        // A lower-rank operand takes the trailing labels; several axes; none given: all of them.
        let want = ("ac,bc->b".to_string(), Some(vec![64, 8]), None);
        assert_eq!(eq(&[64, 1, 8], &[64, 8], &[64, 64, 8], &[0, 2], false), Some(want));
        let want = ("a,b->".to_string(), Some(vec![64]), Some(vec![64]));
        assert_eq!(eq(&[64, 1], &[1, 64], &[64, 64], &[], false), Some(want));
        // Not rewritten: a same-shape product (a row-wise dot), no axes with
        // noop_with_empty_axes, an axis out of range.
        assert_eq!(eq(&[64, 32], &[64, 32], &[64, 32], &[1], false), None);
        assert_eq!(reduced_axes(3, &[-1, 0], false), Some(vec![true, false, true]));
        assert_eq!(eq(&[64, 1], &[1, 64], &[64, 64], &[], true), None);
        assert_eq!(eq(&[64, 1], &[1, 64], &[64, 64], &[2], false), None);
    }
}
