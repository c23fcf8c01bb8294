//! The expansions of `decompose` that take more than a few lines: FlexAttention, the training
//! optimizers, BatchNormalization in training mode, TreeEnsemble's tables, and the shapes MatMul
//! and MaxUnpool need.

use super::Expand;
use crate::graph::{Graph, ValueId};
use crate::op::{self, Op};

/// The batch shape two MatMul operands (dims `a`, `b`, both of rank 3 or more) broadcast to, when
/// each has a 1 the other broadcasts over (the GEMM kernels take one broadcast operand only).
pub(super) fn mutual_batch(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    if a.len() < 3 || b.len() < 3 {
        return None;
    }
    let (ab, bb) = (&a[..a.len() - 2], &b[..b.len() - 2]);
    let rank = ab.len().max(bb.len());
    let at = |d: &[usize], k: usize| if k + d.len() >= rank { d[k + d.len() - rank] } else { 1 };
    let (mut a_wide, mut b_wide) = (false, false);
    let mut out = Vec::with_capacity(rank);
    for k in 0..rank {
        let (x, y) = (at(ab, k), at(bb, k));
        match (x, y) {
            _ if x == y => out.push(x),
            (1, _) => {
                b_wide = true;
                out.push(y);
            }
            (_, 1) => {
                a_wide = true;
                out.push(x);
            }
            _ => return None,
        }
    }
    (a_wide && b_wide).then_some(out)
}

/// The f64 table `kernels_gpu::abi::TreeParams` documents, from TreeEnsemble's attributes.
pub(super) fn tree_tables(t: &op::TreeEnsemble) -> Vec<f64> {
    let n = t.nodes_modes.len();
    let flag = |v: &[bool], i: usize| v.get(i).copied().unwrap_or(false) as u8 as f64;
    let at = |v: &[usize], i: usize| v.get(i).map_or(f64::MAX, |&x| x as f64);
    let mut nodes = Vec::with_capacity(n * kernels_gpu::abi::TREE_NODE_WORDS as usize);
    let mut members = Vec::new();
    for i in 0..n {
        let m = t.members.get(i).map_or(&[][..], |m| m.as_slice());
        nodes.extend([
            t.nodes_modes[i] as f64,
            at(&t.nodes_featureids, i),
            t.nodes_splits.get(i).copied().unwrap_or(f64::NAN),
            at(&t.nodes_truenodeids, i),
            flag(&t.nodes_trueleafs, i),
            at(&t.nodes_falsenodeids, i),
            flag(&t.nodes_falseleafs, i),
            flag(&t.nodes_missing_value_tracks_true, i),
            members.len() as f64,
            m.len() as f64,
        ]);
        members.extend_from_slice(m);
    }
    nodes.extend(t.tree_roots.iter().map(|&r| r as f64));
    for (k, &w) in t.leaf_weights.iter().enumerate() {
        nodes.extend([at(&t.leaf_targetids, k), w]);
    }
    nodes.extend(members);
    nodes
}

/// FlexAttention over Q `(B, Hq, L, E)`, K `(B, Hkv, S, E)`, V `(B, Hkv, S, Ev)` as the reference
/// defines it: `prob_mod(softmax(score_mod(scale · Q Kᵀ))) · V`, K and V repeated over the query
/// heads of their group. False (nothing expanded) for other shapes.
pub(super) fn flex_attention(
    e: &mut Expand,
    fa: &op::FlexAttention,
    (ins, q, k, v): (&[ValueId], &[usize], &[usize], &[usize]),
    out: Option<ValueId>,
) -> bool {
    let ([b, hq, _, d], [kb, hkv, s, kd], [vb, vh, vs, ev]) = (q, k, v) else { return false };
    let (b, hq, d, kb, hkv, s, kd, vb, vh, vs, ev) = (*b, *hq, *d, *kb, *hkv, *s, *kd, *vb, *vh, *vs, *ev);
    if b != kb || b != vb || d != kd || hkv != vh || s != vs || hkv == 0 || hq % hkv != 0 {
        return false;
    }
    // The modifiers map one tensor to one (the reference runs them so).
    let one_to_one =
        |g: &Option<Box<Graph>>| g.as_ref().is_none_or(|g| g.inputs.len() == 1 && g.outputs.len() == 1);
    if !one_to_one(&fa.score_mod) || !one_to_one(&fa.prob_mod) {
        return false;
    }
    let group = hq / hkv;
    // K, V with each head repeated over its group: (B, Hkv, 1, S, D) -> (B, Hkv, G, S, D) -> (B, Hq, S, D).
    let repeat = |e: &mut Expand, x: ValueId, size: usize| -> ValueId {
        if group == 1 {
            return x;
        }
        let [b, h, s, g] = [b, hkv, s, group].map(|n| n as i64);
        let five = e.i64s(&[b, h, 1, s, size as i64]);
        let x = e.op(Op::Reshape(Default::default()), &[x, five]);
        let wide = e.i64s(&[b, h, g, s, size as i64]);
        let x = e.op(Op::Expand, &[x, wide]);
        let four = e.i64s(&[b, h * g, s, size as i64]);
        e.op(Op::Reshape(Default::default()), &[x, four])
    };
    let k = repeat(e, ins[1], d);
    let v = repeat(e, ins[2], ev);
    let kt = e.op(Op::Transpose(op::Transpose { perm: Some(vec![0, 1, 3, 2]) }), &[k]);
    let qk = e.op(Op::MatMul, &[ins[0], kt]);
    let scale = fa.scale.unwrap_or((1.0 / (d as f64).sqrt()) as f32);
    let mut scores = e.scale(scale, qk);
    if let Some(g) = &fa.score_mod {
        let modded = e.g.add_value(format!("{}:score_mod", e.name), None);
        let label = format!("{}/score_mod", e.name);
        crate::fold::inline::inline(e.g, g, &[scores], &[Some(modded)], &label);
        scores = modded;
    }
    let mut probs = e.op(Op::Softmax(op::Softmax { axis: -1 }), &[scores]);
    if let Some(g) = &fa.prob_mod {
        let modded = e.g.add_value(format!("{}:prob_mod", e.name), None);
        let label = format!("{}/prob_mod", e.name);
        crate::fold::inline::inline(e.g, g, &[probs], &[Some(modded)], &label);
        probs = modded;
    }
    e.op_into(Op::MatMul, &[probs, v], out);
    true
}

/// MaxUnpool's output dims before `output_shape`: `(in - 1) * stride + kernel - pads` per
/// spatial dim, as the reference computes them.
pub(super) fn unpooled_dims(u: &op::MaxUnpool, xd: &[usize]) -> Option<Vec<usize>> {
    let s = u.kernel_shape.len();
    if xd.len() != s + 2 {
        return None;
    }
    let mut out = xd[..2].to_vec();
    for d in 0..s {
        let stride = u.strides.get(d).copied().unwrap_or(1);
        let pads = u.pads.get(d).copied().unwrap_or(0) + u.pads.get(d + s).copied().unwrap_or(0);
        let full = xd[d + 2].saturating_sub(1) * stride + u.kernel_shape[d];
        out.push(full.checked_sub(pads)?);
    }
    Some(out)
}

/// Expands an optimizer whose operands come in `groups` lists (`X…, G…, states…`) after `R` and
/// `T`: `update(e, R, T, operands of one tensor, its outputs (X', then each state'))`. False
/// (nothing expanded) when the lists are uneven.
pub(super) fn optimizer(
    e: &mut Expand,
    ins: &[ValueId],
    outs: &[Option<ValueId>],
    groups: usize,
    update: impl Fn(&mut Expand, ValueId, ValueId, &[ValueId], &[Option<ValueId>]),
) -> bool {
    let rest = ins.len() - 2;
    if rest == 0 || !rest.is_multiple_of(groups) {
        return false;
    }
    let n = rest / groups;
    if outs.len() > n * (groups - 1) {
        return false;
    }
    for k in 0..n {
        let operands: Vec<ValueId> = (0..groups).map(|j| ins[2 + j * n + k]).collect();
        // Output list 0 is X', list j > 0 state j + 1 (after G).
        let out: Vec<Option<ValueId>> =
            (0..groups - 1).map(|j| outs.get(j * n + k).copied().flatten()).collect();
        update(e, ins[0], ins[1], &operands, &out);
    }
    true
}

/// BatchNormalization with `training_mode`: the batch statistics over every axis but 1 (biased
/// variance) normalize X; the running statistics are `old · momentum + batch · (1 − momentum)`.
pub(super) fn batch_norm_training(
    e: &mut Expand,
    bn: &op::BatchNormalization,
    ins: &[ValueId],
    outs: &[Option<ValueId>],
    rank: usize,
) {
    let (x, scale, bias, mean, var) = (ins[0], ins[1], ins[2], ins[3], ins[4]);
    let axes: Vec<i64> = std::iter::once(0).chain(2..rank as i64).collect();
    let reduce = || {
        Op::ReduceMean(op::Reduce { axes: Some(axes.clone()), keepdims: true, noop_with_empty_axes: false })
    };
    let mut per_channel = vec![1i64; rank];
    per_channel[1] = -1;
    let per_channel = e.i64s(&per_channel);
    let reshape = |e: &mut Expand, v: ValueId| e.op(Op::Reshape(Default::default()), &[v, per_channel]);
    let m = e.op(reduce(), &[x]);
    let d = e.sub(x, m);
    let d2 = e.mul(d, d);
    let v = e.op(reduce(), &[d2]);
    let eps = e.f32(bn.epsilon);
    let ve = e.add(v, eps);
    let sd = e.sqrt(ve);
    let s = reshape(e, scale);
    let b = reshape(e, bias);
    let sx = e.mul(s, d);
    let norm = e.div(sx, sd);
    e.op_into(Op::Add, &[norm, b], outs.first().copied().flatten());
    let flat = e.i64s(&[-1]);
    for (old, batch, out) in [(mean, m, outs.get(1)), (var, v, outs.get(2))] {
        let Some(&Some(out)) = out else { continue };
        let batch = e.op(Op::Reshape(Default::default()), &[batch, flat]);
        let kept = e.scale(bn.momentum, old);
        let new = e.scale(1.0 - bn.momentum, batch);
        e.op_into(Op::Add, &[kept, new], Some(out));
    }
}
