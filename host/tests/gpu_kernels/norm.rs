//! The channel normalizations (`batch_norm_f32`, `group_norm_f32`) through `Session` against the
//! CPU reference: BatchNormalization over ranks 2 to 5; GroupNormalization (per-channel and
//! per-group affine) and InstanceNormalization with rows short enough for a thread or a warp and
//! long enough for a block, offset means (the two-pass variance), within `1e-5 · (|want| + 1)`.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

fn weight(g: &mut Graph, rng: &mut Rng, name: &str, n: usize, lo: f32, hi: f32) -> ValueId {
    let data: Vec<f32> = (0..n).map(|_| rng.uniform(lo, hi)).collect();
    g.initializer(name, ConstTensor::from_f32(&[n], &data).unwrap())
}

/// Runs `g` on `x` (values in `[lo, hi)`) on the GPU and on the reference; returns the plan text.
fn check(what: &str, g: Graph, rng: &mut Rng, shape: &[usize], lo: f32, hi: f32) -> String {
    let inputs = vec![("x".to_owned(), rng.tensor(shape, lo, hi))];
    let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let got: Vec<(String, HostTensor)> = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: gpu: {e}"));
    assert_eq!(got.len(), want.len());
    for ((gn, g), (wn, w)) in got.iter().zip(&want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!((a - b).abs() <= 1e-5 * (b.abs() + 1.0), "{what}: {gn}[{i}]: gpu {a}, reference {b}");
        }
    }
    s.last_plan().unwrap().to_string()
}

#[test]
fn batch_norm_matches_the_reference() {
    let mut rng = Rng::new(0xba7c);
    let shapes: [&[usize]; 5] = [&[2, 3], &[1, 16, 7, 7], &[2, 5, 33], &[3, 4, 2, 3, 5], &[1, 300, 1, 1]];
    for shape in shapes {
        let c = shape[1];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(shape));
        let scale = weight(&mut g, &mut rng, "scale", c, -2.0, 2.0);
        let bias = weight(&mut g, &mut rng, "bias", c, -1.0, 1.0);
        let mean = weight(&mut g, &mut rng, "mean", c, -1.0, 1.0);
        let var = weight(&mut g, &mut rng, "var", c, 0.1, 3.0);
        let attrs = op::BatchNormalization { epsilon: 1e-3, ..op::BatchNormalization::default() };
        let y = g.op1(Op::BatchNormalization(attrs), &[x, scale, bias, mean, var]);
        g.output(y);
        let plan = check(&format!("BatchNormalization {shape:?}"), g, &mut rng, shape, -3.0, 3.0);
        assert!(plan.contains("batch_norm_f32"), "{plan}");
    }
}

/// GroupNormalization of `shape` in `groups` groups; `per_group` gives scale and bias one value
/// per group (the opset-18 form).
fn group_norm_graph(rng: &mut Rng, shape: &[usize], groups: usize, per_group: bool) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(shape));
    let n = if per_group { groups } else { shape[1] };
    let scale = weight(&mut g, rng, "scale", n, 0.5, 1.5);
    let bias = weight(&mut g, rng, "bias", n, -1.0, 1.0);
    let attrs = op::GroupNormalization { epsilon: 1e-5, num_groups: groups, stash_type: DType::F32 };
    let y = g.op1(Op::GroupNormalization(attrs), &[x, scale, bias]);
    g.output(y);
    g
}

#[test]
fn group_norm_matches_the_reference() {
    let mut rng = Rng::new(0x960f);
    // (shape, groups): rows of 2 (a thread per row), 31..33 and 1024 (a warp), and 1025..12544
    // elements (a block).
    let cases: [(&[usize], usize); 8] = [
        (&[2, 4], 2),
        (&[3, 6, 31], 6),
        (&[2, 8, 4, 4], 4),
        (&[1, 32, 33], 32),
        (&[2, 4, 256], 1),
        (&[1, 6, 1025], 3),
        (&[2, 32, 56, 56], 8),
        (&[2, 12, 3, 5, 7], 4),
    ];
    for (shape, groups) in cases {
        for per_group in [false, true] {
            if per_group && groups == shape[1] {
                continue;
            }
            let g = group_norm_graph(&mut rng, shape, groups, per_group);
            let what = format!("GroupNormalization {shape:?} groups {groups} per_group {per_group}");
            // An offset mean checks the two-pass variance.
            let plan = check(&what, g, &mut rng, shape, -2.0, 6.0);
            assert!(plan.contains("group_norm_f32"), "{plan}");
        }
    }
}

#[test]
fn instance_norm_matches_the_reference() {
    let mut rng = Rng::new(0x1257);
    let shapes: [&[usize]; 5] = [&[2, 3, 1], &[1, 4, 32], &[2, 3, 33, 33], &[1, 8, 1025], &[2, 2, 3, 4, 5]];
    for shape in shapes {
        let c = shape[1];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(shape));
        let scale = weight(&mut g, &mut rng, "scale", c, 0.5, 1.5);
        let bias = weight(&mut g, &mut rng, "bias", c, -1.0, 1.0);
        let y =
            g.op1(Op::InstanceNormalization(op::InstanceNormalization { epsilon: 1e-5 }), &[x, scale, bias]);
        g.output(y);
        let plan = check(&format!("InstanceNormalization {shape:?}"), g, &mut rng, shape, -3.0, 5.0);
        assert!(plan.contains("group_norm_f32"), "{plan}");
    }
}

#[test]
fn lrn_matches_the_reference() {
    let mut rng = Rng::new(0x1e4);
    for (shape, size, alpha, beta, bias) in [
        (vec![2, 5, 3, 4], 3, 1e-4, 0.75, 1.0),
        (vec![1, 8, 7], 4, 0.02, 0.5, 2.0),
        (vec![3, 2], 5, 0.5, 1.5, 0.5),
    ] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, crate::indexing::known(&shape));
        let y = g.op1(Op::Lrn(planner::op::Lrn { alpha, beta, bias, size }), &[x]);
        g.output(y);
        let inputs = vec![("x".to_string(), rng.tensor(&shape, -3.0, 3.0))];
        let plan = crate::indexing::compare(&format!("LRN {shape:?} size {size}"), g, &inputs, 1e-5);
        assert!(plan.contains("lrn_f32"), "{plan}");
    }
}
