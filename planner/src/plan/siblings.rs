//! Sibling projections merged: the `MatMul`s of one value by constant weights of the same inner
//! size, each followed by its constant bias `Add` (or none of them), whose results all feed
//! `MatMul`s through views (the Q, K and V projections of an attention, as BERT-style and most
//! dynamo exports write them), become one `MatMul` by the weights concatenated along their
//! columns, one bias `Add` and a `Split` of the result. One GEMM launch instead of several, and
//! the attention fusion reads Q, K and V from the one result through the `Split` as it does for
//! GPT-2's fused `c_attn` projection.
//!
//! The concatenation is a layout of the weights made when the plan is made, as packing is; every
//! column is the same dot product as before.

use std::collections::BTreeMap;

use crate::constant::ConstTensor;
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Op, Split};
use crate::tensor_info::TensorInfo;

/// One projection: its `MatMul` node, the weight, the bias `Add` node and bias (if any), and the
/// value the group's `Split` takes over.
struct Projection {
    weight: ValueId,
    bias: Option<(usize, ValueId)>,
    result: ValueId,
}

/// `graph` with every group of sibling projections merged (module doc); `None` when it has none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<Graph> {
    let readers = super::fuse::reader_counts(graph);
    let consumers = graph.consumers();
    let dims = |v: ValueId| infos.get(v.index()).and_then(|i| i.shape.as_known());
    let mut groups: BTreeMap<(ValueId, usize), Vec<Projection>> = BTreeMap::new();
    for n in &graph.nodes {
        let (Op::MatMul, [Some(a), Some(w)], Some(y)) = (&n.op, n.inputs.as_slice(), n.output(0)) else {
            continue;
        };
        let (Some(wc), Some(ad)) = (graph.constant(*w), dims(*a)) else { continue };
        if wc.dims.len() != 2 || ad.len() < 2 || ad.last() != Some(&wc.dims[0]) || graph.inputs.contains(w) {
            continue;
        }
        let bias = bias_of(graph, (&readers, &consumers), y, wc.dims[1]);
        let result = bias.map_or(y, |(ai, _)| graph.nodes[ai].output(0).unwrap_or(y));
        if graph.outputs.contains(&y)
            || graph.outputs.contains(&result)
            || !feeds_matmuls(graph, &consumers, result, 0)
        {
            continue;
        }
        groups.entry((*a, wc.dims[0])).or_default().push(Projection { weight: *w, bias, result });
    }
    let mut g = graph.clone();
    let mut changed = false;
    // One concatenation per tuple of weights (or biases), also when layers share them.
    let mut merged_constants: BTreeMap<Vec<ValueId>, ValueId> = BTreeMap::new();
    for ((a, _), group) in groups {
        // All with a bias or none, of one weight dtype.
        let dtype = graph.constant(group[0].weight).map(|c| c.dtype);
        let same = group.iter().all(|p| {
            p.bias.is_some() == group[0].bias.is_some() && graph.constant(p.weight).map(|c| c.dtype) == dtype
        });
        if group.len() < 2 || !same {
            continue;
        }
        let Some(merged) = merge(graph, &mut g, a, &group, &mut merged_constants) else { continue };
        // The old nodes lose their readers (dead-node elimination removes them).
        for (p, part) in group.iter().zip(merged) {
            redirect(&mut g, p.result, part);
        }
        changed = true;
    }
    if !changed {
        return None;
    }
    let g = crate::dce::eliminate(&g);
    // The new nodes were appended: put every node in a topological order again.
    let order = crate::validate::topo_order(&g).ok()?;
    let mut sorted = g.clone();
    sorted.nodes = order.iter().map(|id: &NodeId| g.nodes[id.index()].clone()).collect();
    Some(sorted)
}

/// The bias `Add` that alone reads `y` (`[.., n]`), adding a constant of dims `[n]`: its node
/// index and the bias.
fn bias_of(
    g: &Graph,
    (readers, consumers): (&[usize], &[Vec<NodeId>]),
    y: ValueId,
    n: usize,
) -> Option<(usize, ValueId)> {
    if readers[y.index()] != 1 {
        return None;
    }
    let i = consumers[y.index()].first()?.index();
    let node = &g.nodes[i];
    let (Op::Add, [Some(l), Some(r)]) = (&node.op, node.inputs.as_slice()) else { return None };
    let b = if *l == y { *r } else { *l };
    let c = g.constant(b)?;
    (c.dims == [n] && !g.inputs.contains(&b) && b != y).then_some((i, b))
}

/// Whether every reader of `v` is a `MatMul`, or a Transpose / reshape whose result does the
/// same (the operands of an attention, read through views); `v` has readers and is no output.
fn feeds_matmuls(g: &Graph, consumers: &[Vec<NodeId>], v: ValueId, depth: usize) -> bool {
    if depth > 8 || g.outputs.contains(&v) {
        return false;
    }
    let mut any = false;
    for n in consumers[v.index()].iter().map(|id| &g.nodes[id.index()]) {
        any = true;
        let ok = match &n.op {
            Op::MatMul => true,
            Op::Transpose(_) | Op::Reshape(_) | Op::Unsqueeze(_) | Op::Squeeze(_) => {
                n.inputs.first() == Some(&Some(v))
                    && n.output(0).is_some_and(|o| feeds_matmuls(g, consumers, o, depth + 1))
            }
            // A scale by a constant scalar (scaled-dot-product attention's, on Q and K).
            Op::Mul | Op::Div => {
                let [Some(l), Some(r)] = n.inputs.as_slice() else { return false };
                // v is the dividend of a Div, either factor of a Mul.
                let other = match (*l == v, *r == v) {
                    (true, false) => *r,
                    (false, true) if matches!(n.op, Op::Mul) => *l,
                    _ => return false,
                };
                let scalar = g.constant(other).is_some_and(|c| c.dims.iter().product::<usize>() == 1);
                scalar && n.output(0).is_some_and(|o| feeds_matmuls(g, consumers, o, depth + 1))
            }
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    any
}

/// Adds to `g` the merged projection of `a` by `group`'s weights (and biases), and returns the
/// values of its `Split`, one per projection. `made` holds the concatenations made so far, by the
/// values concatenated.
fn merge(
    graph: &Graph,
    g: &mut Graph,
    a: ValueId,
    group: &[Projection],
    made: &mut BTreeMap<Vec<ValueId>, ValueId>,
) -> Option<Vec<ValueId>> {
    let first = graph.value_name(group[0].weight);
    let mut concat = |g: &mut Graph, parts: Vec<ValueId>, suffix: &str| -> Option<ValueId> {
        if let Some(&v) = made.get(&parts) {
            return Some(v);
        }
        let tensors: Vec<&ConstTensor> = parts.iter().map(|&p| graph.constant(p)).collect::<Option<_>>()?;
        let v = g.initializer(&format!("{first}.{suffix}{}", made.len()), concat_columns(&tensors)?);
        made.insert(parts, v);
        Some(v)
    };
    let cols: Vec<usize> =
        (group.iter()).map(|p| graph.constant(p.weight).map(|w| w.dims[1])).collect::<Option<_>>()?;
    let wv = concat(g, group.iter().map(|p| p.weight).collect(), "merged")?;
    let mut y = g.push(Op::MatMul, &[a, wv], 1)[0];
    if group[0].bias.is_some() {
        let biases: Vec<ValueId> = group.iter().map(|p| p.bias.map(|(_, b)| b)).collect::<Option<_>>()?;
        let bv = concat(g, biases, "merged_bias")?;
        y = g.push(Op::Add, &[y, bv], 1)[0];
    }
    let sizes: Vec<i64> = cols.iter().map(|&c| c as i64).collect();
    // (One group per projected value: its name makes the sizes' name unique.)
    let split = g.const_i64(&format!("{}.split_sizes", graph.value_name(a)), &[sizes.len()], &sizes);
    let split_op = Op::Split(Split { axis: -1, split: None, num_outputs: None });
    Some(g.push(split_op, &[y, split], group.len()))
}

/// The tensors (each `[.., n_i]`, same leading dims and dtype) side by side along their last
/// axis.
fn concat_columns(parts: &[&ConstTensor]) -> Option<ConstTensor> {
    let first = parts.first()?;
    let lead = &first.dims[..first.dims.len() - 1];
    if parts
        .iter()
        .any(|p| p.dtype != first.dtype || p.dims.len() != first.dims.len() || &p.dims[..lead.len()] != lead)
    {
        return None;
    }
    let size = first.dtype.size_bytes();
    let rows: usize = lead.iter().product();
    let widths: Vec<usize> = parts.iter().map(|p| p.dims[lead.len()] * size).collect();
    let mut bytes = Vec::with_capacity(rows * widths.iter().sum::<usize>());
    for r in 0..rows {
        for (p, &w) in parts.iter().zip(&widths) {
            bytes.extend_from_slice(p.bytes.get(r * w..(r + 1) * w)?);
        }
    }
    let mut dims = lead.to_vec();
    dims.push(parts.iter().map(|p| p.dims[lead.len()]).sum());
    ConstTensor::new(first.dtype, dims, bytes).ok()
}

/// Every read of `old` in `g`'s nodes reads `new` instead.
fn redirect(g: &mut Graph, old: ValueId, new: ValueId) {
    for n in g.nodes.iter_mut() {
        for i in n.inputs.iter_mut().flatten() {
            if *i == old {
                *i = new;
            }
        }
    }
}
