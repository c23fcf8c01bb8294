//! FlexAttention tests: a hand-computed case with and without modifier graphs, and GQA against
//! repeated K/V heads.

use planner::{Graph, Node, Op};

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

const NO_VALUES: &[Option<Cow<'static, HostTensor>>] = &[];

fn run(attrs: &FlexAttention, ins: [&HostTensor; 3]) -> Vec<f64> {
    let out =
        flex_attention(&node("FlexAttention"), attrs, &ins.map(Some), Scope { values: NO_VALUES }).unwrap();
    vals(&out[0])
}

/// A one-node graph computing `Neg(x)`.
fn neg_graph() -> Box<Graph> {
    let mut g = Graph::new();
    let (x, y) = (g.add_value("x", None), g.add_value("y", None));
    g.add_node(Node { name: "neg".into(), op: Op::Neg, inputs: vec![Some(x)], outputs: vec![Some(y)] });
    g.inputs.push(x);
    g.outputs.push(y);
    Box::new(g)
}

#[test]
fn one_head_by_hand_with_and_without_mods() {
    let q = tf(&[1, 1, 1, 2], &[1., 0.]);
    let k = tf(&[1, 1, 2, 2], &[1., 0., 0., 1.]);
    let v = tf(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let e = 1f64.exp();
    // scores [1, 0] -> probs [e, 1] / (e + 1).
    let plain = FlexAttention { scale: Some(1.0), score_mod: None, prob_mod: None };
    let (p0, p1) = (e / (e + 1.), 1. / (e + 1.));
    assert_close(&run(&plain, [&q, &k, &v]), &[p0 + 3. * p1, 2. * p0 + 4. * p1], 1e-6);
    // Default scale 1/sqrt(2): scores [1/sqrt 2, 0].
    let default = FlexAttention { scale: None, ..plain.clone() };
    let s = 0.5f64.sqrt().exp();
    let (d0, d1) = (s / (s + 1.), 1. / (s + 1.));
    assert_close(&run(&default, [&q, &k, &v]), &[d0 + 3. * d1, 2. * d0 + 4. * d1], 1e-6);
    // score_mod = Neg: scores [-1, 0] -> probs [1, e] / (e + 1); prob_mod = Neg negates them.
    let modded = FlexAttention { score_mod: Some(neg_graph()), prob_mod: Some(neg_graph()), ..plain };
    let (m0, m1) = (1. / (e + 1.), e / (e + 1.));
    assert_close(&run(&modded, [&q, &k, &v]), &[-(m0 + 3. * m1), -(2. * m0 + 4. * m1)], 1e-6);
}

#[test]
fn gqa_equals_repeated_kv_heads() {
    let mut rng = Rng::new(3);
    let q = tf(&[1, 4, 3, 2], &rng.vec(24, -1.0, 1.0));
    let (kd, vd) = (rng.vec(8, -1.0, 1.0), rng.vec(12, -1.0, 1.0));
    let (k, v) = (tf(&[1, 2, 2, 2], &kd), tf(&[1, 2, 2, 3], &vd));
    let rep = |d: &[f64], per: usize| -> Vec<f64> {
        d.chunks(per).flat_map(|h| h.iter().chain(h).copied().collect::<Vec<_>>()).collect()
    };
    let (k4, v4) = (tf(&[1, 4, 2, 2], &rep(&kd, 4)), tf(&[1, 4, 2, 3], &rep(&vd, 6)));
    let attrs = FlexAttention { scale: None, score_mod: None, prob_mod: None };
    assert_close(&run(&attrs, [&q, &k, &v]), &run(&attrs, [&q, &k4, &v4]), 1e-12);
}
