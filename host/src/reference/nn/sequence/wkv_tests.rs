//! WKV tests: with u = 0 and decay 1 the state accumulates k ⊗ v and y reads it through r; SOFIE's
//! exp(u) bonus against the linear one; the two layouts; a hand-computed decaying step; state carry.

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

/// `[B,H,T,N]` -> `[B,T,H,N]`.
fn bhtn_to_bthn(v: &[f64], [b, h, t, n]: [usize; 4]) -> Vec<f64> {
    let mut o = vec![0.0; v.len()];
    for bi in 0..b {
        for hi in 0..h {
            for ti in 0..t {
                for ni in 0..n {
                    o[((bi * t + ti) * h + hi) * n + ni] = v[((bi * h + hi) * t + ti) * n + ni];
                }
            }
        }
    }
    o
}

/// The four sequence tensors followed by u, as an op's input list.
fn with<'a>(ts: &'a [HostTensor], u: &'a HostTensor) -> Vec<Option<&'a HostTensor>> {
    ts.iter().map(Some).chain([Some(u)]).collect()
}

#[test]
fn unit_decay_and_zero_bonus_accumulate_k_outer_v() {
    let mut rng = Rng::new(51);
    let (b, h, t, n) = (1, 2, 4, 3);
    let shape = [b, h, t, n];
    let len = b * h * t * n;
    let (r, k, v) = (rng.vec(len, -1.0, 1.0), rng.vec(len, -1.0, 1.0), rng.vec(len, -1.0, 1.0));
    // exp(-exp(-inf)) = 1: no decay.
    let w = vec![f64::NEG_INFINITY; len];
    let u = tf(&[h, n], &vec![0.0; h * n]);
    let ins = [tf(&shape, &r), tf(&shape, &k), tf(&shape, &v), tf(&shape, &w)];
    let mut opts: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
    opts.push(Some(&u));
    let out = wkv6(&node("WKV6"), &Wkv6 { layout: Wkv6Layout::Bhtn }, &opts).unwrap();
    let (y, s) = (vals(&out[0]), vals(&out[1]));
    for hi in 0..h {
        let at = |m: &[f64], ti: usize, i: usize| m[(hi * t + ti) * n + i];
        let mut acc = vec![0.0; n * n];
        for ti in 0..t {
            // y_t reads the state before this token's k ⊗ v is added (u = 0).
            for j in 0..n {
                let want: f64 = (0..n).map(|i| at(&r, ti, i) * acc[i * n + j]).sum();
                assert_close(&[y[(hi * t + ti) * n + j]], &[want], 1e-5);
            }
            for i in 0..n {
                for j in 0..n {
                    acc[i * n + j] += at(&k, ti, i) * at(&v, ti, j);
                }
            }
        }
        assert_close(&s[hi * n * n..(hi + 1) * n * n], &acc, 1e-5);
    }
}

#[test]
fn one_decaying_step_by_hand() {
    // N = 1: y = r·(u·k·v + S0), S = exp(-exp(w))·S0 + k·v.
    let one = |x: f64| tf(&[1, 1, 1, 1], &[x]);
    let (r, k, v, w) = (one(2.), one(3.), one(0.5), one(0.));
    let (u, s0) = (tf(&[1, 1], &[0.25]), one(4.));
    let out =
        wkv6(&node("WKV6"), &Wkv6::default(), &[Some(&r), Some(&k), Some(&v), Some(&w), Some(&u), Some(&s0)])
            .unwrap();
    assert_close(&vals(&out[0]), &[2. * (0.25 * 3. * 0.5 + 4.)], 1e-6);
    assert_close(&vals(&out[1]), &[(-1f64).exp() * 4. + 1.5], 1e-6);
    let sofie =
        rwkv_wkv6(&node("RWKV_WKV6"), &(), &[Some(&r), Some(&k), Some(&v), Some(&w), Some(&u)]).unwrap();
    assert_close(&vals(&sofie[0]), &[2. * (0.25f64.exp() * 1.5)], 1e-6);
}

#[test]
fn sofie_bonus_is_exp_u_and_layouts_agree_and_state_carries() {
    let mut rng = Rng::new(52);
    let (b, h, t, n) = (2, 2, 5, 3);
    let shape = [b, h, t, n];
    let len = b * h * t * n;
    let draw = |rng: &mut Rng| rng.vec(len, -1.0, 1.0);
    let (r, k, v, w) = (draw(&mut rng), draw(&mut rng), draw(&mut rng), draw(&mut rng));
    let u = rng.vec(h * n, -1.0, 1.0);
    let bhtn: Vec<HostTensor> = [&r, &k, &v, &w].iter().map(|d| tf(&shape, d)).collect();
    let (ut, eu) = (tf(&[h, n], &u), tf(&[h, n], &u.iter().map(|x| x.exp()).collect::<Vec<_>>()));
    let sofie = rwkv_wkv6(&node("RWKV_WKV6"), &(), &with(&bhtn, &ut)).unwrap();
    let lin = wkv6(&node("WKV6"), &Wkv6 { layout: Wkv6Layout::Bhtn }, &with(&bhtn, &eu)).unwrap();
    assert_close(&vals(&sofie[0]), &vals(&lin[0]), 1e-5);
    let bthn: Vec<HostTensor> =
        [&r, &k, &v, &w].iter().map(|d| tf(&[b, t, h, n], &bhtn_to_bthn(d, shape))).collect();
    let other = wkv6(&node("WKV6"), &Wkv6 { layout: Wkv6Layout::Bthn }, &with(&bthn, &eu)).unwrap();
    assert_close(&vals(&other[0]), &bhtn_to_bthn(&vals(&lin[0]), shape), 1e-5);
    assert_close(&vals(&other[1]), &vals(&lin[1]), 1e-5);
    // Split after 2 tokens (layout [B,T,H,N] makes the split a plain slice per batch).
    let cut = 2;
    let part = |d: &HostTensor, lo: usize, hi: usize| {
        let dv = vals(d);
        let per = h * n;
        let data: Vec<f64> =
            (0..b).flat_map(|bi| dv[(bi * t + lo) * per..(bi * t + hi) * per].to_vec()).collect();
        tf(&[b, hi - lo, h, n], &data)
    };
    let first: Vec<HostTensor> = bthn.iter().map(|d| part(d, 0, cut)).collect();
    let second: Vec<HostTensor> = bthn.iter().map(|d| part(d, cut, t)).collect();
    let a = wkv6(&node("WKV6"), &Wkv6::default(), &with(&first, &eu)).unwrap();
    let mut opts = with(&second, &eu);
    opts.push(Some(&a[1]));
    let c = wkv6(&node("WKV6"), &Wkv6::default(), &opts).unwrap();
    assert_close(&vals(&c[1]), &vals(&other[1]), 1e-5);
    assert_close(&vals(&c[0]), &vals(&part(&other[0], cut, t)), 1e-5);
}
