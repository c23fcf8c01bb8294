//! The row kernels (softmax, log-softmax, LayerNormalization, RMSNormalization) through `Session`
//! against the CPU reference: row lengths around the warp size and past the warp-per-row limit
//! (block per row), reductions over a non-last axis (thread per row), large-magnitude softmax inputs,
//! broadcast scale and bias, several row counts.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

/// Row lengths: 1, around a warp, past the warp-per-row limit (1024), and long.
const LENS: [usize; 6] = [1, 31, 32, 33, 1025, 4096];

/// `|got - want| <= 1e-5 * (|want| + 1)` elementwise: f32 statistics against the f64 reference.
fn assert_close(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len());
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!((a - b).abs() <= 1e-5 * (b.abs() + 1.0), "{what}: {gn}[{i}]: gpu {a}, reference {b}");
        }
    }
}

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

fn weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize], lo: f32, hi: f32) -> ValueId {
    let data: Vec<f32> = (0..dims.iter().product()).map(|_| rng.uniform(lo, hi)).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
}

/// Runs `g` (one input `x` of `shape`, values in `[lo, hi)`) on the GPU and on the reference;
/// returns the plan's text.
fn check(what: &str, g: Graph, rng: &mut Rng, shape: &[usize], lo: f32, hi: f32) -> String {
    let inputs = vec![("x".to_owned(), rng.tensor(shape, lo, hi))];
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    assert_close(what, &s.run(&inputs).unwrap(), &want);
    s.last_plan().unwrap().to_string()
}

fn softmax_graph(shape: &[usize], axis: i64, log: bool) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(shape));
    let attrs = op::Softmax { axis };
    let y = g.op1(if log { Op::LogSoftmax(attrs) } else { Op::Softmax(attrs) }, &[x]);
    g.output(y);
    g
}

fn outer(rng: &mut Rng) -> usize {
    1 + (rng.next_u64() % 9) as usize
}

#[test]
fn softmax_over_the_last_axis_matches_the_reference() {
    let mut rng = Rng::new(0x50f7);
    for len in LENS {
        for log in [false, true] {
            let shape = [outer(&mut rng), len];
            let what = format!("{}softmax {shape:?}", if log { "log-" } else { "" });
            let plan = check(&what, softmax_graph(&shape, -1, log), &mut rng, &shape, -80.0, 80.0);
            let symbol = if log { "log_softmax_f32" } else { "softmax_f32" };
            assert!(plan.contains(symbol), "{plan}");
        }
    }
    // Many rows (a grid-stride over more rows than the grid has warps), a 3-D input.
    let shape = [40, 100, 33];
    check("softmax many rows", softmax_graph(&shape, 2, false), &mut rng, &shape, -80.0, 80.0);
}

#[test]
fn masked_softmax_rows_match_the_reference() {
    // A causal-style mask: -inf at the start of rows, where a thread's first elements (and for
    // short rows all of them) are -inf; also whole -inf rows (NaN, as in the reference).
    for (len, axis) in [(6, -1), (33, -1), (1025, -1), (5, 0)] {
        let (rows, width) = if axis == 0 { (len, 4) } else { (4, len) };
        let v: Vec<f32> = (0..rows * width)
            .map(|i| {
                let (r, c) = (i / width, i % width);
                let (row, col) = if axis == 0 { (c, r) } else { (r, c) };
                if row == 3 || col + 2 < len.min(3 * row + 2) {
                    f32::NEG_INFINITY
                } else {
                    (i % 7) as f32 - 3.0
                }
            })
            .collect();
        for log in [false, true] {
            let shape = [rows, width];
            let inputs = vec![("x".to_owned(), HostTensor::new(shape.to_vec(), v.clone()).unwrap())];
            let g = softmax_graph(&shape, axis, log);
            let want = host::reference::eval(&g, &inputs).unwrap();
            let got = Session::new(ctx(), g, SessionOptions::default()).unwrap().run(&inputs).unwrap();
            let (gv, wv) = (got[0].1.data().to_f64s(), want[0].1.data().to_f64s());
            for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
                let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-5 * (b.abs() + 1.0);
                assert!(same, "masked softmax len {len} axis {axis} log {log}: [{i}] gpu {a}, reference {b}");
            }
        }
    }
}

#[test]
fn softmax_over_an_inner_axis_matches_the_reference() {
    let mut rng = Rng::new(0xa815);
    let cases: [(&[usize], i64); 6] = [
        (&[3, 33, 5], 1),
        (&[2, 1025, 3], 1),
        (&[4, 1, 7], -2),
        (&[31, 6], 0),
        (&[2, 32, 4, 3], 1),
        (&[5, 4096, 2], -2),
    ];
    for (shape, axis) in cases {
        for log in [false, true] {
            let what = format!("softmax {shape:?} axis {axis} log {log}");
            check(&what, softmax_graph(shape, axis, log), &mut rng, shape, -80.0, 80.0);
        }
    }
}

fn layer_norm_graph(
    rng: &mut Rng,
    shape: &[usize],
    axis: i64,
    scale: &[usize],
    bias: Option<&[usize]>,
) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(shape));
    let s = weight(&mut g, rng, "scale", scale, 0.5, 1.5);
    let b = bias.map(|b| weight(&mut g, rng, "bias", b, -1.0, 1.0));
    let attrs = op::LayerNormalization { axis, epsilon: 1e-5, ..Default::default() };
    let y = g.push_opt(Op::LayerNormalization(attrs), vec![Some(x), Some(s), b], 1)[0];
    g.output(y);
    g
}

fn rms_norm_graph(rng: &mut Rng, shape: &[usize], axis: i64, scale: &[usize]) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(shape));
    let s = weight(&mut g, rng, "scale", scale, 0.5, 1.5);
    let attrs = op::RmsNormalization { axis, epsilon: 1e-6, ..Default::default() };
    let y = g.op1(Op::RmsNormalization(attrs), &[x, s]);
    g.output(y);
    g
}

#[test]
fn layer_norm_matches_the_reference() {
    let mut rng = Rng::new(0x1a7e);
    for len in LENS {
        let shape = [outer(&mut rng), len];
        let g = layer_norm_graph(&mut rng, &shape, -1, &[len], Some(&[len]));
        // An offset mean checks the two-pass variance.
        let plan = check(&format!("layer norm {shape:?}"), g, &mut rng, &shape, -2.0, 6.0);
        assert!(plan.contains("layer_norm_f32"), "{plan}");
    }
    // Normalising over two dims; scale broadcasting over the first of them; no bias; scalar bias.
    let shape = [3, 4, 40];
    let g = layer_norm_graph(&mut rng, &shape, 1, &[40], None);
    check("layer norm axis 1", g, &mut rng, &shape, -3.0, 3.0);
    let shape = [2, 8, 300];
    let g = layer_norm_graph(&mut rng, &shape, -2, &[8, 300], Some(&[1]));
    check("layer norm axis -2", g, &mut rng, &shape, -3.0, 3.0);
}

#[test]
fn rms_norm_matches_the_reference() {
    let mut rng = Rng::new(0x0e75);
    for len in LENS {
        let shape = [outer(&mut rng), len];
        let g = rms_norm_graph(&mut rng, &shape, -1, &[len]);
        let plan = check(&format!("rms norm {shape:?}"), g, &mut rng, &shape, -4.0, 4.0);
        assert!(plan.contains("rms_norm_f32"), "{plan}");
    }
    let shape = [5, 3, 700];
    let g = rms_norm_graph(&mut rng, &shape, 1, &[700]);
    check("rms norm axis 1", g, &mut rng, &shape, -4.0, 4.0);
}

#[test]
fn layer_norm_writes_mean_and_inv_std_dev_when_asked() {
    let mut rng = Rng::new(0x5ead);
    for (shape, axis) in [(vec![3, 33], -1i64), (vec![2, 5, 1025], 1), (vec![7, 4, 6], -2)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let a = (if axis < 0 { axis + shape.len() as i64 } else { axis }) as usize;
        let s = weight(&mut g, &mut rng, "s", &shape[a..], 0.5, 1.5);
        let attrs = op::LayerNormalization { axis, ..op::LayerNormalization::default() };
        let outs = g.push_opt(Op::LayerNormalization(attrs), vec![Some(x), Some(s), None], 3);
        for o in outs {
            g.output(o);
        }
        let plan = check(&format!("layer norm stats {shape:?} axis {axis}"), g, &mut rng, &shape, -3.0, 3.0);
        assert!(plan.contains("layer_norm_f32"), "{plan}");
    }
}

/// Rows of 128 to 1024 elements (multiples of 128) run `layer_norm_f32` / `rms_norm_f32`'s vector
/// path (`rows::norm_vec_rows`: the row in registers, 16-byte loads and stores); many rows so
/// warps grid-stride; with and without a bias, the statistics outputs too.
#[test]
fn normalizations_of_vector_rows_match_the_reference() {
    let mut rng = Rng::new(0x7ec7);
    for len in [128, 256, 384, 512, 1024] {
        let rows = if len == 256 { 4099 } else { outer(&mut rng) };
        let shape = [rows, len];
        let g = layer_norm_graph(&mut rng, &shape, -1, &[len], Some(&[len]));
        let plan = check(&format!("layer norm {shape:?}"), g, &mut rng, &shape, -2.0, 6.0);
        assert!(plan.contains("layer_norm_f32"), "{plan}");
        let g = layer_norm_graph(&mut rng, &shape, -1, &[len], None);
        check(&format!("layer norm without bias {shape:?}"), g, &mut rng, &shape, -3.0, 3.0);
        let g = rms_norm_graph(&mut rng, &shape, -1, &[len]);
        let plan = check(&format!("rms norm {shape:?}"), g, &mut rng, &shape, -4.0, 4.0);
        assert!(plan.contains("rms_norm_f32"), "{plan}");
    }
    // The per-row statistics outputs from the vector path.
    let shape = [37, 512];
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&shape));
    let s = weight(&mut g, &mut rng, "s", &[512], 0.5, 1.5);
    let b = weight(&mut g, &mut rng, "b", &[512], -1.0, 1.0);
    let attrs = op::LayerNormalization { axis: -1, ..op::LayerNormalization::default() };
    for o in g.push_opt(Op::LayerNormalization(attrs), vec![Some(x), Some(s), Some(b)], 3) {
        g.output(o);
    }
    check("layer norm stats, vector rows", g, &mut rng, &shape, -3.0, 3.0);
}
