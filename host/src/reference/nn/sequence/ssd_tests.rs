//! SSD tests: the chunked `ssd_minimal_discrete` form (OPS.md) written out independently equals
//! the sequential recurrence; with P = 1 the scan is a Mamba-1 scan; one step by hand.

use super::*;
use crate::reference::nn::sequence::selective_scan;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};
use planner::op::SelectiveScan;

/// `segsum(v)[i][j] = Σ_{k=j+1..=i} v[k]` for `j ≤ i`, −∞ above the diagonal.
fn segsum(v: &[f64]) -> Vec<Vec<f64>> {
    let t = v.len();
    (0..t)
        .map(|i| (0..t).map(|j| if j <= i { v[j + 1..=i].iter().sum() } else { f64::NEG_INFINITY }).collect())
        .collect()
}

/// `ssd_minimal_discrete` for one (batch, head): X `(L, P)` already multiplied by dt, `a` `(L)` =
/// A·dt, B and C `(L, N)`, blocks of `q` steps. Returns Y `(L, P)` and the final state `(P, N)`.
#[allow(clippy::needless_range_loop)]
fn chunked(
    x: &[Vec<f64>],
    a: &[f64],
    bm: &[Vec<f64>],
    cm: &[Vec<f64>],
    q: usize,
    init: &[Vec<f64>],
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let (l, p, n) = (x.len(), x[0].len(), bm[0].len());
    let chunks = l / q;
    let mut y = vec![vec![0.0; p]; l];
    // Per-chunk cumulative sums and end states (step 1 and 2).
    let mut acum = vec![vec![0.0; q]; chunks];
    let mut states = vec![init.to_vec()];
    for c in 0..chunks {
        let r = c * q..(c + 1) * q;
        let seg = segsum(&a[r.clone()]);
        let mut run = 0.0;
        for i in 0..q {
            run += a[c * q + i];
            acum[c][i] = run;
        }
        for i in 0..q {
            for j in 0..=i {
                let cb: f64 = (0..n).map(|k| cm[c * q + i][k] * bm[c * q + j][k]).sum();
                for pp in 0..p {
                    y[c * q + i][pp] += cb * seg[i][j].exp() * x[c * q + j][pp];
                }
            }
        }
        let mut st = vec![vec![0.0; n]; p];
        for j in 0..q {
            let decay = (acum[c][q - 1] - acum[c][j]).exp();
            for pp in 0..p {
                for k in 0..n {
                    st[pp][k] += bm[c * q + j][k] * decay * x[c * q + j][pp];
                }
            }
        }
        states.push(st);
    }
    // Step 3: states between chunks through exp(segsum(pad(chunk totals))).
    let mut totals = vec![0.0];
    totals.extend(acum.iter().map(|c| c[q - 1]));
    let decay_chunk = segsum(&totals);
    let new_states: Vec<Vec<Vec<f64>>> = (0..=chunks)
        .map(|zi| {
            let mut s = vec![vec![0.0; n]; p];
            for ci in 0..=zi {
                let w = decay_chunk[zi][ci].exp();
                for pp in 0..p {
                    for k in 0..n {
                        s[pp][k] += w * states[ci][pp][k];
                    }
                }
            }
            s
        })
        .collect();
    // Step 4: state -> output per chunk.
    for c in 0..chunks {
        for i in 0..q {
            for pp in 0..p {
                let off: f64 = (0..n).map(|k| cm[c * q + i][k] * new_states[c][pp][k]).sum();
                y[c * q + i][pp] += off * acum[c][i].exp();
            }
        }
    }
    (y, new_states[chunks].clone())
}

#[test]
fn chunked_ssd_equals_the_sequential_recurrence() {
    let mut rng = Rng::new(33);
    for (l, q) in [(6, 2), (6, 3), (8, 4), (5, 1)] {
        let (b, h, p, g, n) = (2, 4, 3, 2, 2);
        let x = rng.vec(b * l * h * p, -1.0, 1.0);
        let dt = rng.vec(b * l * h, 0.05, 1.0);
        let a = rng.vec(h, -1.5, -0.1);
        let bm = rng.vec(b * l * g * n, -1.0, 1.0);
        let cm = rng.vec(b * l * g * n, -1.0, 1.0);
        let init = rng.vec(b * h * p * n, -1.0, 1.0);
        let ins = [
            tf(&[b, l, h, p], &x),
            tf(&[b, l, h], &dt),
            tf(&[h], &a),
            tf(&[b, l, g, n], &bm),
            tf(&[b, l, g, n], &cm),
        ];
        let init_t = tf(&[b, h, p, n], &init);
        let mut opts: Vec<Option<&HostTensor>> = ins.iter().map(Some).collect();
        opts.extend([None, None, None, Some(&init_t)]);
        let out = ssd_scan(&node("SSDScan"), &SsdScan::default(), &opts).unwrap();
        let (y, fin) = (vals(&out[0]), vals(&out[1]));
        // Inputs as the tensors hold them (f32-rounded by construction).
        for bi in 0..b {
            for hi in 0..h {
                let gi = hi / (h / g);
                let dts: Vec<f64> = (0..l).map(|t| dt[(bi * l + t) * h + hi]).collect();
                let xs: Vec<Vec<f64>> = (0..l)
                    .map(|t| (0..p).map(|pp| x[((bi * l + t) * h + hi) * p + pp] * dts[t]).collect())
                    .collect();
                let av: Vec<f64> = dts.iter().map(|d| d * a[hi]).collect();
                let bc = |m: &[f64]| -> Vec<Vec<f64>> {
                    (0..l)
                        .map(|t| m[((bi * l + t) * g + gi) * n..((bi * l + t) * g + gi + 1) * n].to_vec())
                        .collect()
                };
                let so = (bi * h + hi) * p * n;
                let st0: Vec<Vec<f64>> =
                    (0..p).map(|pp| init[so + pp * n..so + (pp + 1) * n].to_vec()).collect();
                let (yc, sc) = chunked(&xs, &av, &bc(&bm), &bc(&cm), q, &st0);
                for t in 0..l {
                    let got: Vec<f64> = (0..p).map(|pp| y[((bi * l + t) * h + hi) * p + pp]).collect();
                    assert_close(&got, &yc[t], 1e-5);
                }
                assert_close(&fin[so..so + p * n], &sc.concat(), 1e-5);
            }
        }
    }
}

#[test]
fn one_dimensional_heads_are_a_mamba1_scan() {
    let mut rng = Rng::new(34);
    let (b, l, h, n) = (2, 5, 3, 2);
    let x = rng.vec(b * l * h, -1.0, 1.0);
    let dt = rng.vec(b * l * h, -1.0, 1.0);
    let a = rng.vec(h, -1.0, -0.1);
    let (bm, cm) = (rng.vec(b * l * h * n, -1.0, 1.0), rng.vec(b * l * h * n, -1.0, 1.0));
    let d = rng.vec(h, -1.0, 1.0);
    let ssd_ins = [
        tf(&[b, l, h, 1], &x),
        tf(&[b, l, h], &dt),
        tf(&[h], &a),
        tf(&[b, l, h, n], &bm),
        tf(&[b, l, h, n], &cm),
        tf(&[h], &d),
    ];
    let ssd = ssd_scan(
        &node("SSDScan"),
        &SsdScan { dt_softplus: true, ..SsdScan::default() },
        &ssd_ins.iter().map(Some).collect::<Vec<_>>(),
    )
    .unwrap();
    // (B, L, H) -> (B, H, L) and (B, L, H, N) -> (B, H, N, L).
    let bhl = |v: &[f64]| -> Vec<f64> {
        (0..b * h * l).map(|k| v[((k / (h * l)) * l + k % l) * h + (k / l) % h]).collect()
    };
    let bhnl = |v: &[f64]| -> Vec<f64> {
        (0..b * h * n * l)
            .map(|k| {
                let (bi, hi, ni, t) = (k / (h * n * l), (k / (n * l)) % h, (k / l) % n, k % l);
                v[((bi * l + t) * h + hi) * n + ni]
            })
            .collect()
    };
    let a_dn: Vec<f64> = a.iter().flat_map(|&v| [v; 2]).collect();
    let ms_ins = [
        tf(&[b, h, l], &bhl(&x)),
        tf(&[b, h, l], &bhl(&dt)),
        tf(&[h, n], &a_dn),
        tf(&[b, h, n, l], &bhnl(&bm)),
        tf(&[b, h, n, l], &bhnl(&cm)),
        tf(&[h], &d),
    ];
    let sel = selective_scan(
        &node("SelectiveScan"),
        &SelectiveScan { delta_softplus: true },
        &ms_ins.iter().map(Some).collect::<Vec<_>>(),
    )
    .unwrap();
    assert_close(&bhl(&vals(&ssd[0])), &vals(&sel[0]), 1e-6);
    assert_close(&vals(&ssd[1]), &vals(&sel[1]), 1e-6);
}

#[test]
fn one_step_by_hand_with_bias_clamp_d_and_z() {
    let x = tf(&[1, 1, 1, 2], &[1., 2.]);
    let (dt, a) = (tf(&[1, 1, 1], &[0.5]), tf(&[1], &[-1.]));
    let (bm, cm) = (tf(&[1, 1, 1, 1], &[2.]), tf(&[1, 1, 1, 1], &[3.]));
    let (d, z, bias) = (tf(&[2], &[0.5, -1.]), tf(&[1, 1, 1, 2], &[2., 1.]), tf(&[1], &[1.]));
    let init = tf(&[1, 1, 2, 1], &[4., 0.]);
    let attrs = SsdScan { dt_softplus: false, dt_min: None, dt_max: Some(1.25), ..Default::default() };
    let ins =
        [Some(&x), Some(&dt), Some(&a), Some(&bm), Some(&cm), Some(&d), Some(&z), Some(&bias), Some(&init)];
    let out = ssd_scan(&node("SSDScan"), &attrs, &ins).unwrap();
    // dt = min(0.5 + 1, 1.25) = 1.25; S = e^-1.25·S0 + 1.25·x·2.
    let decay = (-1.25f64).exp();
    let s = [decay * 4. + 2.5, 5.];
    let silu = |v: f64| v / (1. + (-v).exp());
    assert_close(&vals(&out[0]), &[(3. * s[0] + 0.5) * silu(2.), (3. * s[1] - 2.) * silu(1.)], 1e-6);
    assert_close(&vals(&out[1]), &s, 1e-6);
}
