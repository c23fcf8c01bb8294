//! Recurrent-layer tests. With weights constant within each gate every hidden unit follows the
//! same scalar recurrence, which the tests spell out by hand (distinct values per gate, so a gate
//! order mistake shows); then identities between directions, layouts and sequence lengths.

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

const XS: [[f64; 2]; 3] = [[1., 2.], [3., 4.], [5., 6.]];

fn common(hidden: usize, direction: RnnDirection) -> Recurrent {
    Recurrent {
        activation_alpha: vec![],
        activation_beta: vec![],
        activations: vec![],
        clip: None,
        direction,
        hidden_size: hidden,
        layout: RnnLayout::SeqFirst,
    }
}

/// `(1, gates·H, cols)` filled with `per_gate[g]` in gate g's rows.
fn per_gate(per_gate: &[f64], hidden: usize, cols: usize) -> HostTensor {
    let v: Vec<f64> = per_gate.iter().flat_map(|&g| vec![g; hidden * cols]).collect();
    tf(&[1, per_gate.len() * hidden, cols], &v)
}

fn xs() -> HostTensor {
    tf(&[3, 1, 2], &XS.concat())
}

#[test]
fn lstm_with_gate_constant_weights_follows_the_scalar_recurrence() {
    let hs = 3;
    let (w, r, wb, rb) =
        ([0.1, 0.2, -0.3, 0.4], [0.05, -0.1, 0.15, 0.2], [0.1, 0.0, 0.2, -0.1], [0.0, 0.1, 0.1, 0.0]);
    let p = [0.3, -0.2, 0.1];
    let b: Vec<f64> = [wb, rb].iter().flat_map(|v| v.iter().flat_map(|&g| vec![g; hs])).collect();
    let pt = tf(&[1, 3 * hs], &p.iter().flat_map(|&v| vec![v; hs]).collect::<Vec<_>>());
    let bt = tf(&[1, 8 * hs], &b);
    let (wt, rt) = (per_gate(&w, hs, 2), per_gate(&r, hs, hs));
    for input_forget in [false, true] {
        let attrs = Lstm { common: common(hs, RnnDirection::Forward), input_forget };
        let ins = [Some(&xs()), Some(&wt), Some(&rt), Some(&bt), None, None, None, Some(&pt)];
        let out = lstm(&node("LSTM"), &attrs, &ins).unwrap();
        assert_eq!(out[0].shape(), &[3, 1, 1, hs]);
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let (mut h, mut c) = (0.0f64, 0.0f64);
        for (t, x) in XS.iter().enumerate() {
            let pre = |g: usize| w[g] * (x[0] + x[1]) + r[g] * hs as f64 * h + wb[g] + rb[g];
            let i = sig(pre(0) + p[0] * c);
            let f = if input_forget { 1.0 - i } else { sig(pre(2) + p[2] * c) };
            c = f * c + i * pre(3).tanh();
            h = sig(pre(1) + p[1] * c) * c.tanh();
            assert_close(&vals(&out[0])[t * hs..(t + 1) * hs], &[h; 3], 1e-6);
        }
        assert_close(&vals(&out[1]), &[h; 3], 1e-6);
        assert_close(&vals(&out[2]), &[c; 3], 1e-6);
    }
}

#[test]
fn gru_with_gate_constant_weights_in_both_reset_modes() {
    let hs = 2;
    let (w, r, wb, rb) = ([0.1, -0.2, 0.3], [0.2, 0.1, -0.3], [0.05, 0.1, -0.1], [0.1, -0.05, 0.4]);
    let b: Vec<f64> = [wb, rb].iter().flat_map(|v| v.iter().flat_map(|&g| vec![g; hs])).collect();
    let (wt, rt, bt) = (per_gate(&w, hs, 2), per_gate(&r, hs, hs), tf(&[1, 6 * hs], &b));
    let mut finals = Vec::new();
    for lbr in [false, true] {
        let attrs = Gru { common: common(hs, RnnDirection::Forward), linear_before_reset: lbr };
        let out = gru(&node("GRU"), &attrs, &[Some(&xs()), Some(&wt), Some(&rt), Some(&bt)]).unwrap();
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let mut h = 0.0f64;
        for (t, x) in XS.iter().enumerate() {
            let sx = x[0] + x[1];
            let z = sig(w[0] * sx + r[0] * hs as f64 * h + wb[0] + rb[0]);
            let rr = sig(w[1] * sx + r[1] * hs as f64 * h + wb[1] + rb[1]);
            let rec =
                if lbr { rr * (r[2] * hs as f64 * h + rb[2]) } else { r[2] * hs as f64 * rr * h + rb[2] };
            let cand = (w[2] * sx + rec + wb[2]).tanh();
            h = (1.0 - z) * cand + z * h;
            assert_close(&vals(&out[0])[t * hs..(t + 1) * hs], &[h; 2], 1e-6);
        }
        assert_close(&vals(&out[1]), &[h; 2], 1e-6);
        finals.push(h);
    }
    assert!((finals[0] - finals[1]).abs() > 1e-4, "linear_before_reset must matter here");
}

#[test]
fn rnn_by_hand_with_custom_activation_alpha() {
    let x = tf(&[2, 1, 1], &[1., -4.]);
    let (w, r) = (tf(&[1, 1, 1], &[0.5]), tf(&[1, 1, 1], &[0.5]));
    let out =
        rnn(&node("RNN"), &Rnn { common: common(1, RnnDirection::Forward) }, &[Some(&x), Some(&w), Some(&r)])
            .unwrap();
    let h1 = 0.5f64.tanh();
    assert_close(&vals(&out[0]), &[h1, (-2.0 + 0.5 * h1).tanh()], 1e-6);
    let mut c = common(1, RnnDirection::Forward);
    c.activations = vec![RnnActivation::LeakyRelu];
    c.activation_alpha = vec![0.25];
    let out = rnn(&node("RNN"), &Rnn { common: c }, &[Some(&x), Some(&w), Some(&r)]).unwrap();
    assert_close(&vals(&out[0]), &[0.5, 0.25 * (-2.0 + 0.25)], 1e-6);
}

/// Runs an LSTM with random weights; returns (Y, Y_h).
fn lstm_run(
    c: Recurrent,
    x: &HostTensor,
    w: &HostTensor,
    r: &HostTensor,
    lens: Option<&HostTensor>,
) -> (Vec<f64>, Vec<f64>) {
    let out = lstm(
        &node("LSTM"),
        &Lstm { common: c, input_forget: false },
        &[Some(x), Some(w), Some(r), None, lens],
    )
    .unwrap();
    (vals(&out[0]), vals(&out[1]))
}

#[test]
fn bidirectional_layouts_and_sequence_lengths_agree() {
    let mut rng = Rng::new(6);
    let (seq, batch, input, hs) = (4, 2, 3, 2);
    let x = rng.vec(seq * batch * input, -1.0, 1.0);
    let w = rng.vec(2 * 4 * hs * input, -0.5, 0.5);
    let r = rng.vec(2 * 4 * hs * hs, -0.5, 0.5);
    let xt = tf(&[seq, batch, input], &x);
    let half = |v: &[f64], d: usize, n: usize| tf(&[1, 4 * hs, n], &v[d * 4 * hs * n..(d + 1) * 4 * hs * n]);
    let (wt, rt) = (tf(&[2, 4 * hs, input], &w), tf(&[2, 4 * hs, hs], &r));
    let (y_bi, yh_bi) = lstm_run(common(hs, RnnDirection::Bidirectional), &xt, &wt, &rt, None);
    let (y_f, yh_f) =
        lstm_run(common(hs, RnnDirection::Forward), &xt, &half(&w, 0, input), &half(&r, 0, hs), None);
    let (y_r, yh_r) =
        lstm_run(common(hs, RnnDirection::Reverse), &xt, &half(&w, 1, input), &half(&r, 1, hs), None);
    let bh = batch * hs;
    for t in 0..seq {
        assert_close(&y_bi[(2 * t) * bh..(2 * t + 1) * bh], &y_f[t * bh..(t + 1) * bh], 1e-9);
        assert_close(&y_bi[(2 * t + 1) * bh..(2 * t + 2) * bh], &y_r[t * bh..(t + 1) * bh], 1e-9);
    }
    assert_close(&yh_bi, &[yh_f.clone(), yh_r].concat(), 1e-9);
    // layout 1: X (batch, seq, input), Y (batch, seq, dirs, H), Y_h (batch, dirs, H).
    let xb: Vec<f64> = (0..batch)
        .flat_map(|b| (0..seq).flat_map(move |t| (0..input).map(move |i| (t, b, i))))
        .map(|(t, b, i)| x[(t * batch + b) * input + i])
        .collect();
    let mut cb = common(hs, RnnDirection::Bidirectional);
    cb.layout = RnnLayout::BatchFirst;
    let (y_b, yh_b) = lstm_run(cb, &tf(&[batch, seq, input], &xb), &wt, &rt, None);
    for (b, t, d, j) in (0..batch).flat_map(|b| {
        (0..seq).flat_map(move |t| (0..2).flat_map(move |d| (0..hs).map(move |j| (b, t, d, j))))
    }) {
        let got = y_b[((b * seq + t) * 2 + d) * hs + j];
        assert_close(&[got], &[y_bi[((t * 2 + d) * batch + b) * hs + j]], 1e-9);
    }
    for (b, d, j) in (0..batch).flat_map(|b| (0..2).flat_map(move |d| (0..hs).map(move |j| (b, d, j)))) {
        assert_close(&[yh_b[(b * 2 + d) * hs + j]], &[yh_bi[(d * batch + b) * hs + j]], 1e-9);
    }
    // Batch entry 1 stops after 2 steps: its Y is zero afterwards and Y_h is the step-2 state.
    let lens = crate::reference::nn::testing::ti(&[batch], &[4, 2]);
    let (y_l, yh_l) =
        lstm_run(common(hs, RnnDirection::Forward), &xt, &half(&w, 0, input), &half(&r, 0, hs), Some(&lens));
    assert_close(&y_l[bh..2 * bh], &y_f[bh..2 * bh], 1e-9);
    assert_eq!(&y_l[2 * bh + hs..3 * bh], &[0.0; 2]);
    assert_close(&yh_l[hs..], &y_f[bh + hs..2 * bh], 1e-9);
    assert_close(&yh_l[..hs], &yh_f[..hs], 1e-9);
}

#[test]
fn rejects_bad_weight_shapes_and_lengths() {
    let w = tf(&[1, 4, 1], &[0.; 4]);
    let c = common(1, RnnDirection::Forward);
    let r_bad = tf(&[1, 4, 2], &[0.; 8]);
    assert!(
        lstm(
            &node("LSTM"),
            &Lstm { common: c.clone(), input_forget: false },
            &[Some(&xs()), Some(&w), Some(&r_bad)]
        )
        .is_err()
    );
    let lens = crate::reference::nn::testing::ti(&[1], &[5]);
    let w2 = tf(&[1, 1, 2], &[0.; 2]);
    let r1 = tf(&[1, 1, 1], &[0.]);
    assert!(
        rnn(&node("RNN"), &Rnn { common: c }, &[Some(&xs()), Some(&w2), Some(&r1), None, Some(&lens)])
            .is_err()
    );
}
