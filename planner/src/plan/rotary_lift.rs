//! Rotary position embeddings spelled out become the `RotaryEmbedding` they compute (one launch
//! instead of the Slices, Neg, Concats and products, each a copy through memory). Transformers'
//! `apply_rotary_pos_emb` (Llama, Gemma, Mistral, Qwen, RecurrentGemma, Phi, GPT-NeoX and their
//! relatives) computes `x·cos + rotate_half(x)·sin`; exporters write it as
//!
//! ```text
//! r = Concat(Neg(x[..., h:2h]), x[..., :h], axis = -1)          rotate_half (or Mul(·, -1))
//! y = Add(Mul(x, cos), Mul(r, sin))                             operands in either order
//! ```
//!
//! with `x` of dims `(B, H, S, 2h)` and the halves unit-step `Slice`s or `Split` parts of its
//! last axis. With `cos` and `sin` broadcasting to `x` (their last dim `2h`: a value per
//! feature, whatever they hold), `y` becomes `RotaryEmbedding(x, cos, sin)` with full-width caches
//! (`RotaryEmbedding::full_caches`) — the same products and sum, so no assumption on the caches'
//! values. Two spellings around it are taken too:
//!
//! - partial rotation (RecurrentGemma, Phi, GPT-NeoX): `x` is the first `2h` features of a wider
//!   `t` and `Concat(y, t[..., 2h:])` puts the rest back: the Concat becomes the op on `t`, with
//!   rotary dim `2h`;
//! - the head split: the rotated tensor is `Transpose(Reshape(z, (B, S, H, D)), (0, 2, 1, 3))` of a
//!   `(B, S, H·D)` projection: the op runs on `z` in its 3-D form (`num_heads` H), and the Reshape
//!   and Transpose follow it (the attention reads through them; no transpose is copied).
//!
//! Intermediates read elsewhere stay computed for their other readers (dead-node elimination
//! removes the rest). f32, shapes known.

use crate::graph::{Definition, Graph, Node, ValueId};
use crate::op::{self, Op, RotaryEmbedding};
use crate::tensor_info::{DType, TensorInfo};

/// `graph` (of shapes `infos`) with every spelled-out rotary embedding replaced (module doc), and
/// how many there were; `None` when there is none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::Concat(_))) {
        return None;
    }
    let cx = Cx { g: graph, infos, defs: graph.definitions(), consumers: graph.consumers() };
    let mut g = graph.clone();
    let mut taken = vec![false; graph.nodes.len()];
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        let Some(m) = cx.spelled(n) else { continue };
        let (root, t, rot) = cx.partial(i, &m).unwrap_or((i, m.x, 2 * m.half));
        let Some(out) = graph.nodes[root].output(0) else { continue };
        if std::mem::replace(&mut taken[root], true) {
            continue;
        }
        let name = &graph.nodes[root].name;
        let attrs = RotaryEmbedding {
            rotary_embedding_dim: rot,
            full_caches: true,
            num_heads: None,
            interleaved: false,
        };
        g.nodes[root] = match cx.head_split(t) {
            Some(h) => {
                let three = RotaryEmbedding { num_heads: Some(h.heads), ..attrs };
                let r3 = g.add_value(format!("{name}:rotary"), None);
                g.add_node(Node {
                    name: format!("{name}:rotary"),
                    op: Op::RotaryEmbedding(three),
                    inputs: vec![Some(h.z), Some(m.cos), Some(m.sin)],
                    outputs: vec![Some(r3)],
                });
                let r4 = g.add_value(format!("{name}:rotary:heads"), None);
                g.add_node(Node {
                    inputs: vec![Some(r3), h.reshape.input(1)],
                    outputs: vec![Some(r4)],
                    ..h.reshape
                });
                Node { inputs: vec![Some(r4)], outputs: vec![Some(out)], ..h.transpose }
            }
            None => Node {
                name: name.clone(),
                op: Op::RotaryEmbedding(attrs),
                inputs: vec![Some(t), Some(m.cos), Some(m.sin)],
                outputs: vec![Some(out)],
            },
        };
        count += 1;
    }
    if count == 0 {
        return None;
    }
    // The nodes added at the end run before the ones that took their place.
    let order = crate::validate::topo_order(&g).ok()?;
    g.nodes = order.into_iter().map(|id| g.nodes[id.index()].clone()).collect();
    Some((crate::dce::eliminate(&g), count))
}

/// A spelled-out rotation `x·cos + rotate_half(x)·sin` of features `0..2·half` of `x`.
struct Spelled {
    x: ValueId,
    cos: ValueId,
    sin: ValueId,
    half: usize,
}

/// The head split a rotated tensor comes from: `Transpose(Reshape(z))` (module doc).
struct HeadSplit {
    z: ValueId,
    heads: usize,
    reshape: Node,
    transpose: Node,
}

struct Cx<'g> {
    g: &'g Graph,
    infos: &'g [TensorInfo],
    defs: Vec<Option<Definition>>,
    consumers: Vec<Vec<crate::graph::NodeId>>,
}

impl<'g> Cx<'g> {
    /// The dims of `v` when it is f32 with a known shape.
    fn dims(&self, v: ValueId) -> Option<Vec<usize>> {
        self.infos.get(v.index()).filter(|i| i.dtype == DType::F32)?.shape.as_known()
    }

    /// The node defining `v` (and the output slot).
    fn def(&self, v: ValueId) -> Option<(&'g Node, usize)> {
        match self.defs.get(v.index())? {
            Some(Definition::Node { node, slot }) => Some((&self.g.nodes[node.index()], *slot)),
            _ => None,
        }
    }

    /// The node defining `v` as its first output when its op is `want`.
    fn def_of(&self, v: ValueId, want: fn(&Op) -> bool) -> Option<&'g Node> {
        self.def(v).filter(|(n, slot)| *slot == 0 && want(&n.op)).map(|(n, _)| n)
    }

    /// `n` is `Add(Mul(x, cos), Mul(rotate_half(x), sin))` (module doc).
    fn spelled(&self, n: &Node) -> Option<Spelled> {
        let (Op::Add, [Some(p), Some(q)]) = (&n.op, n.inputs.as_slice()) else { return None };
        [(*p, *q), (*q, *p)].into_iter().find_map(|(plain, turned)| {
            let (x, half, sin) = self.times_rotated(turned)?;
            let cos = self.times(plain, x)?;
            let dims = self.dims(x)?;
            let [b, h, s, w] = dims[..] else { return None };
            let fits = |c: ValueId| {
                self.dims(c).is_some_and(|cd| RotaryEmbedding::full_cache_strides(&cd, [b, h, s, w]).is_ok())
            };
            (w == 2 * half && fits(cos) && fits(sin) && self.dims(n.output(0)?)? == dims).then_some(Spelled {
                x,
                cos,
                sin,
                half,
            })
        })
    }

    /// `v = Mul(x, c)` in either order: c.
    fn times(&self, v: ValueId, x: ValueId) -> Option<ValueId> {
        let m = self.def_of(v, |o| matches!(o, Op::Mul))?;
        match m.inputs.as_slice() {
            [Some(a), Some(c)] if *a == x => Some(*c),
            [Some(c), Some(a)] if *a == x => Some(*c),
            _ => None,
        }
    }

    /// `v = Mul(rotate_half(x), s)` in either order: x, half and s.
    fn times_rotated(&self, v: ValueId) -> Option<(ValueId, usize, ValueId)> {
        let m = self.def_of(v, |o| matches!(o, Op::Mul))?;
        let [Some(a), Some(b)] = m.inputs[..] else { return None };
        [(a, b), (b, a)].into_iter().find_map(|(r, s)| {
            let (x, half) = self.rotate_half(r)?;
            Some((x, half, s))
        })
    }

    /// `r = Concat(-x[..., h:2h], x[..., :h])` on the last axis: x and h.
    fn rotate_half(&self, r: ValueId) -> Option<(ValueId, usize)> {
        let c = self.def_of(r, |o| matches!(o, Op::Concat(_)))?;
        let Op::Concat(op::Concat { axis }) = c.op else { return None };
        let rank = self.dims(r)?.len() as i64;
        let [Some(neg), Some(lo)] = c.inputs[..] else { return None };
        if axis != -1 && axis != rank - 1 {
            return None;
        }
        let hi = self.negated(neg)?;
        let ((x, s_hi, w_hi), (x_lo, s_lo, w_lo)) = (self.part(hi)?, self.part(lo)?);
        let full = *self.dims(x)?.last()?;
        (x == x_lo && s_lo == 0 && w_lo == w_hi && s_hi == w_lo && full == 2 * w_lo).then_some((x, w_lo))
    }

    /// `v = Neg(u)` or `Mul(u, -1)` (either order): u.
    fn negated(&self, v: ValueId) -> Option<ValueId> {
        let (n, slot) = self.def(v)?;
        let minus_one = |c: ValueId| self.g.constant(c).is_some_and(|t| t.to_f64s() == [-1.0]);
        match (&n.op, n.inputs.as_slice()) {
            (_, _) if slot != 0 => None,
            (Op::Neg, [Some(u)]) => Some(*u),
            (Op::Mul, [Some(u), Some(c)]) | (Op::Mul, [Some(c), Some(u)]) if minus_one(*c) => Some(*u),
            _ => None,
        }
    }

    /// `v` is columns `start..start + width` of the last axis of `src` (a unit-step `Slice` or
    /// a `Split` part, the other dims the same): (src, start, width).
    fn part(&self, v: ValueId) -> Option<(ValueId, usize, usize)> {
        let (n, slot) = self.def(v)?;
        let src = n.input(0)?;
        let (sd, vd) = (self.dims(src)?, self.dims(v)?);
        let last = sd.len().checked_sub(1)?;
        let start =
            super::row_views::last_axis_start(self.g, n, slot, &sd, |o| self.dims(o)?.last().copied())?;
        let width = *vd.last()?;
        (vd.len() == sd.len() && vd[..last] == sd[..last] && start + width <= sd[last])
            .then_some((src, start, width))
    }

    /// The partial form around the rotation `m` at node `i`: `Concat(y, t[..., 2h:])` as the only
    /// reader of y, with `x = t[..., :2h]`: the Concat's node, t and the rotary dim.
    fn partial(&self, i: usize, m: &Spelled) -> Option<(usize, ValueId, usize)> {
        let y = self.g.nodes[i].output(0)?;
        let (t, start, width) = self.part(m.x)?;
        let [reader] = self.consumers[y.index()][..] else { return None };
        let c = &self.g.nodes[reader.index()];
        let Op::Concat(op::Concat { axis }) = c.op else { return None };
        let td = self.dims(t)?;
        let [Some(first), Some(rest)] = c.inputs[..] else { return None };
        let (t_rest, rest_start, rest_width) = self.part(rest)?;
        let last = td.len() as i64 - 1;
        let fits = (axis == -1 || axis == last)
            && first == y
            && start == 0
            && t_rest == t
            && rest_start == width
            && width + rest_width == *td.last()?
            && self.dims(c.output(0)?)? == td;
        fits.then_some((reader.index(), t, width))
    }

    /// `t = Transpose(Reshape(z, (B, S, H, D)), (0, 2, 1, 3))` with z `(B, S, H·D)`.
    fn head_split(&self, t: ValueId) -> Option<HeadSplit> {
        let tr = self.def_of(t, |o| matches!(o, Op::Transpose(_)))?;
        let Op::Transpose(op::Transpose { perm: Some(perm) }) = &tr.op else { return None };
        let u = tr.input(0)?;
        let rs = self.def_of(u, |o| matches!(o, Op::Reshape(_)))?;
        let z = rs.input(0)?;
        let (zd, ud) = (self.dims(z)?, self.dims(u)?);
        let fits = perm == &[0, 2, 1, 3]
            && zd.len() == 3
            && ud.len() == 4
            && zd[..2] == ud[..2]
            && zd[2] == ud[2] * ud[3];
        fits.then(|| HeadSplit { z, heads: ud[2], reshape: rs.clone(), transpose: tr.clone() })
    }
}

#[cfg(test)]
mod tests {
    use crate::constant::ConstTensor;
    use crate::graph::{Graph, ValueId};
    use crate::op::{self, Op};
    use crate::tensor_info::DType;

    /// `x·cos + rotate_half(x)·sin` over x `(2, 3, 5, 8)`, the halves cut by a Split and negated
    /// by `Mul(·, -1)`, the products' operands swapped; `swap` puts the halves the wrong way
    /// round (not a rotation).
    fn spelled(swap: bool) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2usize, 3, 5, 8]);
        let cache = |g: &mut Graph, name| {
            let v: Vec<f32> = (0..40).map(|i| i as f32 / 40.0).collect();
            g.initializer(name, ConstTensor::from_f32(&[1, 1, 5, 8], &v).unwrap())
        };
        let (cos, sin) = (cache(&mut g, "cos"), cache(&mut g, "sin"));
        let sizes = g.const_i64("sizes", &[2], &[4, 4]);
        let split = op::Split { axis: -1, split: None, num_outputs: None };
        let halves = g.push(Op::Split(split), &[x, sizes], 2);
        let minus = g.initializer("minus", ConstTensor::from_f32(&[], &[-1.0]).unwrap());
        let neg = g.op1(Op::Mul, &[minus, halves[1]]);
        let parts = if swap { [halves[0], neg] } else { [neg, halves[0]] };
        let r = g.op1(Op::Concat(op::Concat { axis: 3 }), &parts);
        let (a, b) = (g.op1(Op::Mul, &[sin, r]), g.op1(Op::Mul, &[cos, x]));
        let y = g.op1(Op::Add, &[a, b]);
        g.output(y);
        g
    }

    fn lifted(g: &Graph) -> Option<(Graph, usize)> {
        super::run(g, &crate::shape_infer::infer(g).unwrap())
    }

    #[test]
    fn a_split_rotation_negated_by_a_product_lifts() {
        let (g, n) = lifted(&spelled(false)).expect("lifted");
        assert_eq!(n, 1);
        let [node] = &g.nodes[..] else { panic!("one node left: {:?}", g.nodes) };
        let Op::RotaryEmbedding(r) = &node.op else { panic!("{:?}", node.op) };
        assert_eq!(
            (r.full_caches, r.num_heads, r.rotary_embedding_dim, r.interleaved),
            (true, None, 8, false)
        );
        assert_eq!(node.inputs[0], Some(g.inputs[0]));
        assert!(g.outputs.iter().all(|o: &ValueId| node.outputs.contains(&Some(*o))));
    }

    #[test]
    fn halves_the_wrong_way_round_stay_spelled_out() {
        assert!(lifted(&spelled(true)).is_none());
    }
}
