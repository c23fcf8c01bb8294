//! Mamba scan tests: a two-step case by hand, grouped B/C against per-group runs, and carrying the
//! state across a split sequence.

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

/// Slices `[.., lo..hi, ..]` of axis `ax` of a row-major tensor.
fn slice(data: &[f64], shape: &[usize], ax: usize, lo: usize, hi: usize) -> Vec<f64> {
    let inner: usize = shape[ax + 1..].iter().product();
    let outer: usize = shape[..ax].iter().product();
    (0..outer)
        .flat_map(|o| data[(o * shape[ax] + lo) * inner..(o * shape[ax] + hi) * inner].to_vec())
        .collect()
}

#[test]
fn two_steps_by_hand() {
    let ln2 = 2f64.ln();
    let (u, delta) = (tf(&[1, 1, 2], &[1., 2.]), tf(&[1, 1, 2], &[ln2, ln2]));
    let (a, bm, cm, d) =
        (tf(&[1, 1], &[-1.]), tf(&[1, 1, 2], &[1., 3.]), tf(&[1, 1, 2], &[2., 1.]), tf(&[1], &[0.5]));
    let ins = [Some(&u), Some(&delta), Some(&a), Some(&bm), Some(&cm), Some(&d)];
    let y = mamba_scan(&node("MambaScan"), &(), &ins).unwrap();
    let ln2 = ln2 as f32 as f64;
    let want = [2. * ln2 + 0.5, 6.5 * ln2 + 1.];
    assert_close(&vals(&y[0]), &want, 1e-6);
    let out = selective_scan(&node("SelectiveScan"), &SelectiveScan::default(), &ins).unwrap();
    assert_close(&vals(&out[0]), &want, 1e-6);
    assert_close(&vals(&out[1]), &[6.5 * ln2], 1e-6);
    // softplus(0 + 0) = ln 2 reproduces the same scan; z gates the output.
    let (zero, bias, z) = (tf(&[1, 1, 2], &[0., 0.]), tf(&[1], &[0.]), tf(&[1, 1, 2], &[1., -2.]));
    let sp = SelectiveScan { delta_softplus: true };
    let ins = [Some(&u), Some(&zero), Some(&a), Some(&bm), Some(&cm), Some(&d), Some(&z), Some(&bias)];
    let out = selective_scan(&node("SelectiveScan"), &sp, &ins).unwrap();
    let silu = |x: f64| x / (1. + (-x).exp());
    assert_close(
        &vals(&out[0]),
        &[(2. * 2f64.ln() + 0.5) * silu(1.), (6.5 * 2f64.ln() + 1.) * silu(-2.)],
        1e-6,
    );
}

struct Case {
    u: Vec<f64>,
    delta: Vec<f64>,
    a: Vec<f64>,
    bm: Vec<f64>,
    cm: Vec<f64>,
    d: Vec<f64>,
    z: Vec<f64>,
}

fn case(rng: &mut Rng, b: usize, d: usize, n: usize, l: usize, g: usize) -> Case {
    Case {
        u: rng.vec(b * d * l, -1.0, 1.0),
        delta: rng.vec(b * d * l, -1.0, 1.0),
        a: rng.vec(d * n, -2.0, -0.1),
        bm: rng.vec(b * g * n * l, -1.0, 1.0),
        cm: rng.vec(b * g * n * l, -1.0, 1.0),
        d: rng.vec(d, -1.0, 1.0),
        z: rng.vec(b * d * l, -1.0, 1.0),
    }
}

#[test]
fn grouped_b_and_c_equal_per_group_runs() {
    let mut rng = Rng::new(21);
    let (b, d, n, l, g) = (2, 4, 3, 5, 2);
    let c = case(&mut rng, b, d, n, l, g);
    let grouped = [b, g, n, l];
    let ins_all = [
        tf(&[b, d, l], &c.u),
        tf(&[b, d, l], &c.delta),
        tf(&[d, n], &c.a),
        tf(&grouped, &c.bm),
        tf(&grouped, &c.cm),
        tf(&[d], &c.d),
        tf(&[b, d, l], &c.z),
    ];
    let opts: Vec<Option<&HostTensor>> = ins_all.iter().map(Some).collect();
    let sp = SelectiveScan { delta_softplus: true };
    let all = selective_scan(&node("SelectiveScan"), &sp, &opts).unwrap();
    let per = d / g;
    for gi in 0..g {
        let (lo, hi) = (gi * per, (gi + 1) * per);
        let part = [
            tf(&[b, per, l], &slice(&c.u, &[b, d, l], 1, lo, hi)),
            tf(&[b, per, l], &slice(&c.delta, &[b, d, l], 1, lo, hi)),
            tf(&[per, n], &slice(&c.a, &[d, n], 0, lo, hi)),
            tf(&[b, n, l], &slice(&c.bm, &grouped, 1, gi, gi + 1)),
            tf(&[b, n, l], &slice(&c.cm, &grouped, 1, gi, gi + 1)),
            tf(&[per], &c.d[lo..hi]),
            tf(&[b, per, l], &slice(&c.z, &[b, d, l], 1, lo, hi)),
        ];
        let opts: Vec<Option<&HostTensor>> = part.iter().map(Some).collect();
        let one = selective_scan(&node("SelectiveScan"), &sp, &opts).unwrap();
        assert_close(&vals(&one[0]), &slice(&vals(&all[0]), &[b, d, l], 1, lo, hi), 1e-6);
        assert_close(&vals(&one[1]), &slice(&vals(&all[1]), &[b, d, n], 1, lo, hi), 1e-6);
    }
}

#[test]
fn state_carries_across_a_split_sequence() {
    let mut rng = Rng::new(22);
    let (b, d, n, l, cut) = (2, 3, 2, 6, 2);
    let c = case(&mut rng, b, d, n, l, 1);
    let bias = rng.vec(d, -0.5, 0.5);
    let sp = SelectiveScan { delta_softplus: true };
    let run = |lo: usize, hi: usize, init: Option<&HostTensor>| {
        let len = hi - lo;
        let s3 = |v: &[f64]| tf(&[b, d, len], &slice(v, &[b, d, l], 2, lo, hi));
        let sb = |v: &[f64]| tf(&[b, n, len], &slice(v, &[b, n, l], 2, lo, hi));
        let ins = [
            s3(&c.u),
            s3(&c.delta),
            tf(&[d, n], &c.a),
            sb(&c.bm),
            sb(&c.cm),
            tf(&[d], &c.d),
            s3(&c.z),
            tf(&[d], &bias),
        ];
        let mut opts: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
        opts.push(init);
        selective_scan(&node("SelectiveScan"), &sp, &opts).unwrap()
    };
    let whole = run(0, l, None);
    let first = run(0, cut, None);
    let second = run(cut, l, Some(&first[1]));
    let joined: Vec<f64> = (0..b * d)
        .flat_map(|r| {
            let (f, s) = (vals(&first[0]), vals(&second[0]));
            [f[r * cut..(r + 1) * cut].to_vec(), s[r * (l - cut)..(r + 1) * (l - cut)].to_vec()].concat()
        })
        .collect();
    assert_close(&joined, &vals(&whole[0]), 1e-5);
    assert_close(&vals(&second[1]), &vals(&whole[1]), 1e-5);
    assert_eq!(whole[1].dtype(), DType::F32);
}
