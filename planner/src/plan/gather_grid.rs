//! A GatherND whose indices are the coordinate grid of its own output reads every element where a
//! view would. PyTorch's dynamo export of `mask[:, None, None, :]` broadcast to `[batch, 1, seq,
//! seq]` (transformers' BERT padding mask; GPT-2's causal mask likewise) writes
//!
//! ```text
//! idx = Concat(Unsqueeze(Expand(arange(batch)[:, None, None, None], S), -1),
//!              Unsqueeze(Expand(arange(seq)[None, None, None, :], S), -1), axis = -1)
//! y = GatherND(mask, idx)            # y[b, h, i, j] = mask[b, j]
//! ```
//!
//! and the plan built the index grid and gathered through it at every run. When component `k` of
//! the indices is the coordinate along index axis `a_k` (a `Range(0, n, 1)` carried through
//! Unsqueeze, Expand and integer Casts), the axes `a_k` increase with `k` and each spans all of
//! data's dim `k`, the gather is `data` reshaped with its dims at the axes `a_k` (unit dims
//! between) and expanded to the output: it becomes that Reshape and Expand (views and a broadcast
//! the fusion passes read), and the grid's nodes die. Shapes known, `batch_dims` 0.

use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::TensorInfo;

/// `graph` (of shapes `infos`) with every coordinate-grid GatherND rewritten (module doc), and how
/// many there were; `None` when there is none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::GatherNd(_))) {
        return None;
    }
    let defs = super::fuse::producers(graph);
    let mut g = graph.clone();
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        let Some(target) = view_of(graph, infos, &defs, n) else { continue };
        let (data, y) = (n.inputs[0].expect("view_of read it"), n.outputs[0].expect("view_of read it"));
        let shape = |g: &mut Graph, tag: &str, dims: &[usize]| {
            let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            g.const_i64(&format!("{}:grid:{tag}", n.name), &[dims.len()], &dims)
        };
        let out = infos[y.index()].shape.as_known().expect("view_of checked it");
        let reshape = Op::Reshape(op::Reshape { allowzero: false });
        let s = shape(&mut g, "shape", &target);
        if target == out {
            g.nodes[i] = Node {
                name: n.name.clone(),
                op: reshape,
                inputs: vec![Some(data), Some(s)],
                outputs: n.outputs.clone(),
            };
        } else {
            let viewed = g.add_value(format!("{}:grid:view", n.name), None);
            let e = shape(&mut g, "expand", &out);
            g.nodes[i] = Node {
                name: format!("{}:grid:view", n.name),
                op: reshape,
                inputs: vec![Some(data), Some(s)],
                outputs: vec![Some(viewed)],
            };
            g.nodes.push(Node {
                name: n.name.clone(),
                op: Op::Expand,
                inputs: vec![Some(viewed), Some(e)],
                outputs: n.outputs.clone(),
            });
        }
        count += 1;
    }
    // (The Expands are appended: a graph's nodes need not be in topological order.)
    (count > 0).then(|| (crate::dce::eliminate(&g), count))
}

/// The dims `data` is reshaped to before it is expanded to the output, when GatherND `n` reads a
/// coordinate grid (module doc).
fn view_of(g: &Graph, infos: &[TensorInfo], defs: &[Option<(usize, usize)>], n: &Node) -> Option<Vec<usize>> {
    let Op::GatherNd(a) = &n.op else { return None };
    let (Some(Some(data)), Some(Some(idx)), Some(y)) = (n.inputs.first(), n.inputs.get(1), n.output(0))
    else {
        return None;
    };
    let known = |v: ValueId| infos.get(v.index()).and_then(|i| i.shape.as_known());
    let (dd, id, yd) = (known(*data)?, known(*idx)?, known(y)?);
    let (q, k) = (id.len(), *id.last()?);
    if a.batch_dims != 0 || q < 2 || k == 0 || k > dd.len() {
        return None;
    }
    // The index components: a Concat over the last axis of k unit-width parts, or one part.
    let parts: Vec<ValueId> = match node_of(g, defs, *idx) {
        Some(c) if matches!(c.op, Op::Concat(op::Concat { axis }) if axis == -1 || axis == q as i64 - 1) => {
            c.inputs.iter().copied().collect::<Option<_>>()?
        }
        _ => vec![*idx],
    };
    if parts.len() != k || parts.iter().any(|&p| known(p).and_then(|d| d.last().copied()) != Some(1)) {
        return None;
    }
    // Each part is the coordinate along one index axis, widened by a trailing unit dim.
    let mut axes = Vec::with_capacity(k);
    for &p in &parts {
        let u = node_of(g, defs, p)?;
        let inner = match &u.op {
            Op::Unsqueeze(_) | Op::Reshape(_) => (*u.inputs.first()?)?,
            _ => return None,
        };
        if known(inner)? != id[..q - 1] {
            return None;
        }
        axes.push(coordinate(g, infos, defs, inner, 0)?);
    }
    // A component that is 0 everywhere reads a unit dim of data; the others each span a dim of
    // data along their own index axis, in data's order.
    let spans: Vec<(usize, usize)> = axes
        .iter()
        .enumerate()
        .filter_map(|(c, a)| match a {
            Coord::Axis(ax) => Some((c, *ax)),
            Coord::Zero => None,
        })
        .collect();
    let zeros_unit = axes.iter().enumerate().all(|(c, a)| *a != Coord::Zero || dd[c] == 1);
    let increasing = spans.windows(2).all(|w| w[0].1 < w[1].1);
    if !zeros_unit || !increasing || spans.iter().any(|&(c, ax)| id[ax] != dd[c]) {
        return None;
    }
    // data's dims at the index axes, unit dims between, then the dims it keeps.
    let mut target = vec![1; q - 1];
    for &(c, ax) in &spans {
        target[ax] = dd[c];
    }
    target.extend_from_slice(&dd[k..]);
    (yd.len() == target.len()).then_some(target)
}

/// The node producing `v` (its first output), if any.
fn node_of<'g>(g: &'g Graph, defs: &[Option<(usize, usize)>], v: ValueId) -> Option<&'g Node> {
    match defs.get(v.index())? {
        Some((i, 0)) => g.nodes.get(*i),
        _ => None,
    }
}

/// What an integer tensor's elements are, as a function of their coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Coord {
    /// The coordinate along this axis (`v[i..] == i[axis]`), an axis longer than 1.
    Axis(usize),
    /// 0 everywhere (the coordinate along any unit axis: an `arange(1)`, broadcast).
    Zero,
}

/// A constant of `dims`: zeros, or every element equal to its coordinate along its one axis
/// longer than 1 (an `arange` the binding's shapes folded, viewed along its axis).
fn constant_coordinate(dims: &[usize], values: &[i64]) -> Option<Coord> {
    if values.iter().all(|&x| x == 0) {
        return Some(Coord::Zero);
    }
    let mut long = (0..dims.len()).filter(|&a| dims[a] > 1);
    let axis = long.next()?;
    if long.next().is_some() {
        return None;
    }
    // Only `axis` is longer than 1: the flat index is the coordinate along it.
    values.iter().enumerate().all(|(i, &x)| x == i as i64).then_some(Coord::Axis(axis))
}

/// What integer value `v` is as a function of its coordinates ([`Coord`]), traced through a
/// `Range(0, n, 1)` (or the constant it folded to), Unsqueeze, Expand and integer Casts.
fn coordinate(
    g: &Graph,
    infos: &[TensorInfo],
    defs: &[Option<(usize, usize)>],
    v: ValueId,
    depth: usize,
) -> Option<Coord> {
    let info = infos.get(v.index())?;
    if depth > 16 || !info.dtype.is_int() {
        return None;
    }
    let known = |v: ValueId| infos.get(v.index()).and_then(|i| i.shape.as_known());
    if let Some(t) = g.initializers.get(&v) {
        return constant_coordinate(&t.dims, &t.to_i64s()?);
    }
    // A coordinate along a unit axis is 0.
    let unit = |c: Coord| match c {
        Coord::Axis(a) if known(v)?.get(a) == Some(&1) => Some(Coord::Zero),
        c => Some(c),
    };
    let n = node_of(g, defs, v)?;
    let input = |i: usize| n.inputs.get(i).copied().flatten();
    let scalar = |v: Option<ValueId>| -> Option<i64> {
        let t = g.initializers.get(&v?)?;
        match t.to_i64s()?.as_slice() {
            [x] => Some(*x),
            _ => None,
        }
    };
    match &n.op {
        Op::Range => {
            unit((scalar(input(0)) == Some(0) && scalar(input(2)) == Some(1)).then_some(Coord::Axis(0))?)
        }
        Op::Cast(c) if c.to.is_int() => coordinate(g, infos, defs, input(0)?, depth + 1),
        Op::Unsqueeze(u) => {
            let x = input(0)?;
            let Coord::Axis(axis) = coordinate(g, infos, defs, x, depth + 1)? else {
                return Some(Coord::Zero);
            };
            let rank = known(v)?.len() as i64;
            let axes = match (&u.axes, input(1)) {
                (Some(a), _) => a.clone(),
                (None, Some(a)) => g.initializers.get(&a)?.to_i64s()?,
                _ => return None,
            };
            let mut inserted: Vec<usize> =
                axes.iter().map(|&a| if a < 0 { a + rank } else { a }).map(|a| a as usize).collect();
            inserted.sort_unstable();
            // The input's axes fill the output's positions that were not inserted, in order.
            (0..rank as usize).filter(|p| !inserted.contains(p)).nth(axis).map(Coord::Axis)
        }
        Op::Expand => {
            let x = input(0)?;
            let Coord::Axis(axis) = coordinate(g, infos, defs, x, depth + 1)? else {
                return Some(Coord::Zero);
            };
            let (xd, yd) = (known(x)?, known(v)?);
            let at = axis + yd.len().checked_sub(xd.len())?;
            // Broadcast along its own axis, the coordinate would be 0, not the output's.
            (xd[axis] == yd[at]).then_some(Coord::Axis(at))
        }
        _ => None,
    }
}
