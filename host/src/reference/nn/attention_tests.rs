//! Attention tests: a hand-computed case, and identities between configurations (3-D vs 4-D, GQA
//! vs repeated heads, past K/V vs concatenated K/V, causal vs truncated keys, bool vs float masks).

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

fn run(attrs: &Attention, ins: &[Option<&HostTensor>]) -> Vec<HostTensor> {
    attention(&node("Attention"), attrs, ins).unwrap()
}

fn rand4(rng: &mut Rng, s: [usize; 4]) -> (Vec<f64>, HostTensor) {
    let v = rng.vec(s.iter().product(), -1.0, 1.0);
    let t = tf(&s, &v);
    (v, t)
}

#[test]
fn one_head_by_hand_with_softcap_and_outputs() {
    let q = tf(&[1, 1, 1, 2], &[1., 0.]);
    let k = tf(&[1, 1, 2, 2], &[1., 0., 0., 1.]);
    let v = tf(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let attrs = Attention { scale: Some(1.0), ..Attention::default() };
    let out = run(&attrs, &[Some(&q), Some(&k), Some(&v)]);
    let e = 1f64.exp();
    let (p0, p1) = (e / (e + 1.), 1. / (e + 1.));
    assert_close(&vals(&out[0]), &[p0 + 3. * p1, 2. * p0 + 4. * p1], 1e-6);
    assert_eq!(vals(&out[1]), vals(&k));
    assert_close(&vals(&out[3]), &[1., 0.], 1e-6);
    let capped =
        Attention { scale: Some(4.0), softcap: 2.0, qk_matmul_output_mode: 1, ..Attention::default() };
    let out = run(&capped, &[Some(&q), Some(&k), Some(&v)]);
    let c = 2.0 * (2.0f64).tanh();
    assert_close(&vals(&out[3]), &[c, 0.], 1e-6);
    let (p0, p1) = (c.exp() / (c.exp() + 1.), 1. / (c.exp() + 1.));
    assert_close(&vals(&out[0]), &[p0 + 3. * p1, 2. * p0 + 4. * p1], 1e-6);
}

#[test]
fn three_d_form_matches_four_d_form() {
    let mut rng = Rng::new(1);
    let (b, hq, hkv, sq, skv, d) = (2, 4, 2, 3, 5, 2);
    let (qv, q4) = rand4(&mut rng, [b, hq, sq, d]);
    let (kv, k4) = rand4(&mut rng, [b, hkv, skv, d]);
    let (vv, v4) = rand4(&mut rng, [b, hkv, skv, d]);
    let to3 = |x: &[f64], h: usize, s: usize| {
        let mut o = vec![0.0; x.len()];
        for bi in 0..b {
            for hi in 0..h {
                for si in 0..s {
                    for di in 0..d {
                        o[((bi * s + si) * h + hi) * d + di] = x[((bi * h + hi) * s + si) * d + di];
                    }
                }
            }
        }
        o
    };
    let q3 = tf(&[b, sq, hq * d], &to3(&qv, hq, sq));
    let k3 = tf(&[b, skv, hkv * d], &to3(&kv, hkv, skv));
    let v3 = tf(&[b, skv, hkv * d], &to3(&vv, hkv, skv));
    let y4 = run(&Attention::default(), &[Some(&q4), Some(&k4), Some(&v4)]);
    let a3 = Attention { q_num_heads: Some(hq), kv_num_heads: Some(hkv), ..Attention::default() };
    let y3 = run(&a3, &[Some(&q3), Some(&k3), Some(&v3)]);
    assert_eq!(y3[0].shape(), &[b, sq, hq * d]);
    assert_close(&vals(&y3[0]), &to3(&vals(&y4[0]), hq, sq), 1e-6);
}

#[test]
fn gqa_equals_mha_with_repeated_kv_heads() {
    let mut rng = Rng::new(2);
    let (b, hq, hkv, s, d) = (1, 6, 2, 4, 3);
    let (_, q) = rand4(&mut rng, [b, hq, s, d]);
    let (kv, k) = rand4(&mut rng, [b, hkv, s, d]);
    let (vv, v) = rand4(&mut rng, [b, hkv, s, d]);
    let rep = |x: &[f64]| -> Vec<f64> { x.chunks(s * d).flat_map(|c| c.repeat(hq / hkv)).collect() };
    let (kr, vr) = (tf(&[b, hq, s, d], &rep(&kv)), tf(&[b, hq, s, d], &rep(&vv)));
    let gqa = run(&Attention::default(), &[Some(&q), Some(&k), Some(&v)]);
    let mha = run(&Attention::default(), &[Some(&q), Some(&kr), Some(&vr)]);
    assert_close(&vals(&gqa[0]), &vals(&mha[0]), 1e-9);
}

#[test]
fn past_kv_equals_concatenated_kv_and_causal_equals_truncated_keys() {
    let mut rng = Rng::new(3);
    let (h, p, s, d) = (2, 3, 2, 2);
    let (_, q) = rand4(&mut rng, [1, h, s, d]);
    let (pkv, pk) = rand4(&mut rng, [1, h, p, d]);
    let (pvv, pv) = rand4(&mut rng, [1, h, p, d]);
    let (kv, k) = rand4(&mut rng, [1, h, s, d]);
    let (vv, v) = rand4(&mut rng, [1, h, s, d]);
    let cat = |a: &[f64], b: &[f64]| -> Vec<f64> {
        (0..h)
            .flat_map(|hi| [&a[hi * p * d..(hi + 1) * p * d], &b[hi * s * d..(hi + 1) * s * d]].concat())
            .collect()
    };
    let (kc, vc) = (tf(&[1, h, p + s, d], &cat(&pkv, &kv)), tf(&[1, h, p + s, d], &cat(&pvv, &vv)));
    let causal = Attention { is_causal: true, ..Attention::default() };
    let with_past = run(&causal, &[Some(&q), Some(&k), Some(&v), None, Some(&pk), Some(&pv)]);
    assert_eq!(vals(&with_past[1]), vals(&kc));
    assert_eq!(vals(&with_past[2]), vals(&vc));
    // Query i (after the p cached keys) sees keys 0..=p+i: build a float mask doing the same.
    let mask: Vec<f64> = (0..s)
        .flat_map(|i| (0..p + s).map(move |j| if j <= p + i { 0.0 } else { f64::NEG_INFINITY }))
        .collect();
    let m = tf(&[s, p + s], &mask);
    let masked = run(&Attention::default(), &[Some(&q), Some(&kc), Some(&vc), Some(&m)]);
    assert_close(&vals(&with_past[0]), &vals(&masked[0]), 1e-9);
    // Without the causal flag, the first query would also see the last key: the results differ.
    let open = run(&Attention::default(), &[Some(&q), Some(&kc), Some(&vc)]);
    assert!(vals(&open[0]).iter().zip(vals(&masked[0])).any(|(a, b)| (a - b).abs() > 1e-6));
}

#[test]
fn bool_mask_false_equals_float_neg_inf_and_short_masks_pad() {
    let mut rng = Rng::new(4);
    let (_, q) = rand4(&mut rng, [2, 1, 2, 2]);
    let (_, k) = rand4(&mut rng, [2, 1, 3, 2]);
    let (_, v) = rand4(&mut rng, [2, 1, 3, 2]);
    let bools = [true, false, true, true, true, false];
    let bm = HostTensor::new(vec![2, 3], bools.to_vec()).unwrap();
    let fm = tf(&[2, 3], &bools.map(|b| if b { 0.0 } else { f64::NEG_INFINITY }));
    let yb = run(&Attention::default(), &[Some(&q), Some(&k), Some(&v), Some(&bm)]);
    let yf = run(&Attention::default(), &[Some(&q), Some(&k), Some(&v), Some(&fm)]);
    assert_close(&vals(&yb[0]), &vals(&yf[0]), 1e-12);
    // A mask shorter than the key sequence masks the missing keys.
    let short = HostTensor::new(vec![2, 2], vec![true, true, true, true]).unwrap();
    let last_off = HostTensor::new(vec![2, 3], vec![true, true, false, true, true, false]).unwrap();
    let ys = run(&Attention::default(), &[Some(&q), Some(&k), Some(&v), Some(&short)]);
    let yl = run(&Attention::default(), &[Some(&q), Some(&k), Some(&v), Some(&last_off)]);
    assert_close(&vals(&ys[0]), &vals(&yl[0]), 1e-12);
    let qk = Attention { qk_matmul_output_mode: 3, ..Attention::default() };
    let probs = vals(&run(&qk, &[Some(&q), Some(&k), Some(&v), Some(&bm)])[3]);
    for row in probs.chunks(3) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }
    assert_eq!(probs[1], 0.0);
}

#[test]
fn rejects_bad_head_counts() {
    let q = tf(&[1, 3, 1, 2], &[0.; 6]);
    let k = tf(&[1, 2, 1, 2], &[0.; 4]);
    assert!(attention(&node("Attention"), &Attention::default(), &[Some(&q), Some(&k), Some(&k)]).is_err());
    let q3 = tf(&[1, 1, 4], &[0.; 4]);
    assert!(
        attention(&node("Attention"), &Attention::default(), &[Some(&q3), Some(&q3), Some(&q3)]).is_err()
    );
}

#[test]
fn nonpad_kv_seqlen_masks_trailing_keys() {
    // One query, two keys; batch 0 sees only key 0, so its output is V[0].
    let q = tf(&[1, 1, 1, 1], &[1.0]);
    let k = tf(&[1, 1, 2, 1], &[1.0, 1.0]);
    let v = tf(&[1, 1, 2, 1], &[3.0, 5.0]);
    let lens = crate::reference::nn::testing::ti(&[1], &[1]);
    let ins = [Some(&q), Some(&k), Some(&v), None, None, None, Some(&lens)];
    let out = attention(&node("Attention"), &Attention::default(), &ins).unwrap();
    assert_eq!(vals(&out[0]), [3.0]);
}
