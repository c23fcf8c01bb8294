//! The reduction kernels (`reduce_f32`, `arg_reduce_f32`) through `Session` against the CPU
//! reference: every `Reduce*` op over the last axis with lengths around the warp size and past the
//! warp-per-output limit (thread, warp and block per output), over middle axes (strided reads, a
//! thread per output when outputs are many), over non-adjacent axes (two reduced runs), over all
//! axes and none (`noop_with_empty_axes`), with axes as an attribute and as a constant input,
//! `keepdims` on and off; ArgMax/ArgMin with ties (`select_last_index`) and NaN; GlobalAveragePool
//! and GlobalMaxPool. Max, Min and the arg reductions must match exactly, the others within
//! `1e-5 · (|want| + 1)` (f32 accumulation against the f64 reference).

use host::selftest::Rng;
use host::tensor::TensorData;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{ArgReduce, Op, Reduce};
use planner::{ConstTensor, DType, Dim, Graph};

use crate::ctx;

/// Reduction lengths: 1, short, around a warp, past the warp limit (1024), long.
const LENS: [usize; 8] = [1, 7, 9, 31, 32, 33, 1025, 4096];
/// Dims random shapes are drawn from.
const DIMS: [usize; 8] = [1, 2, 3, 5, 31, 32, 33, 1025];
const MAX_ELEMS: usize = 1 << 19;

/// A `Reduce*` op: its name, constructor and the input range it is tested over.
type ReduceCase = (&'static str, fn(Reduce) -> Op, f32, f32);

/// The ten `Reduce*` ops (LogSum over positive sums; Prod near 1, so long products stay finite).
const OPS: [ReduceCase; 10] = [
    ("ReduceSum", Op::ReduceSum, -1.0, 1.0),
    ("ReduceMean", Op::ReduceMean, -1.0, 1.0),
    ("ReduceMax", Op::ReduceMax, -100.0, 100.0),
    ("ReduceMin", Op::ReduceMin, -100.0, 100.0),
    ("ReduceProd", Op::ReduceProd, 0.97, 1.03),
    ("ReduceL1", Op::ReduceL1, -2.0, 2.0),
    ("ReduceL2", Op::ReduceL2, -2.0, 2.0),
    ("ReduceLogSum", Op::ReduceLogSum, 0.0, 1.0),
    ("ReduceLogSumExp", Op::ReduceLogSumExp, -30.0, 30.0),
    ("ReduceSumSquare", Op::ReduceSumSquare, -2.0, 2.0),
];

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Relative tolerance of the f32 ops that are not exact (f32 accumulation against the f64
/// reference).
const F32_TOL: f64 = 1e-5;

/// The tolerance `op` is held to in f32: 0 (exact) for the selections, else [`F32_TOL`].
fn tol(op: &str) -> f64 {
    if matches!(op, "ReduceMax" | "ReduceMin" | "GlobalMaxPool" | "ArgMax" | "ArgMin") {
        0.0
    } else {
        F32_TOL
    }
}

/// Compares outputs: i64 and a zero `tol` element for element (NaN equal to NaN), else within
/// `tol · (|want| + 1)`.
fn assert_matches(what: &str, tol: f64, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        if let (TensorData::I64(gv), TensorData::I64(wv)) = (g.data(), w.data()) {
            for (i, (a, b)) in gv.iter().zip(wv).enumerate() {
                assert_eq!(a, b, "{what}: {gn}[{i}]: gpu {a}, reference {b}");
            }
            continue;
        }
        let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            let ok = if a.is_nan() || b.is_nan() {
                a.is_nan() && b.is_nan()
            } else if tol == 0.0 || b.is_infinite() {
                a == b
            } else {
                (a - b).abs() <= tol * (b.abs() + 1.0)
            };
            assert!(ok, "{what}: {gn}[{i}]: gpu {a}, reference {b}");
        }
    }
}

/// Runs `g` on input `x` on the GPU and on the reference; returns the plan's text.
fn check(what: &str, tol: f64, g: Graph, x: HostTensor) -> String {
    let inputs = vec![("x".to_owned(), x)];
    let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let got = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: gpu: {e}"));
    assert_matches(what, tol, &got, &want);
    s.last_plan().unwrap().to_string()
}

/// A `Reduce*` graph; `axes_input` passes the axes as a constant input 1 (opset 18) instead of
/// the attribute.
fn reduce_graph(
    dtype: DType,
    op: fn(Reduce) -> Op,
    shape: &[usize],
    axes: Option<Vec<i64>>,
    axes_input: bool,
    keepdims: bool,
    noop: bool,
) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", dtype, known(shape));
    let attrs = |axes| Reduce { axes, keepdims, noop_with_empty_axes: noop };
    let y = match (axes, axes_input) {
        (Some(a), true) => {
            let t = g.initializer("axes", ConstTensor::from_i64(&[a.len()], &a).unwrap());
            g.op1(op(attrs(None)), &[x, t])
        }
        (a, _) => g.op1(op(attrs(a)), &[x]),
    };
    g.output(y);
    g
}

fn pick<T: Copy>(rng: &mut Rng, from: &[T]) -> T {
    from[(rng.next_u64() % from.len() as u64) as usize]
}

fn coin(rng: &mut Rng) -> bool {
    rng.next_u64() & 1 == 1
}

/// A random shape of `rank` dims from [`DIMS`] with at most [`MAX_ELEMS`] elements.
fn random_shape(rng: &mut Rng, rank: usize) -> Vec<usize> {
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        let left = MAX_ELEMS / shape.iter().product::<usize>().max(1);
        let fits: Vec<usize> = DIMS.iter().copied().filter(|&d| d <= left).collect();
        shape.push(pick(rng, &fits));
    }
    shape
}

#[test]
fn every_reduction_over_the_last_axis_matches_the_reference() {
    let mut rng = Rng::new(0x4ed0);
    for (name, op, lo, hi) in OPS {
        for len in LENS {
            let shape = [1 + (rng.next_u64() % 9) as usize, len];
            let what = format!("{name} {shape:?} axis -1");
            let g =
                reduce_graph(DType::F32, op, &shape, Some(vec![-1]), coin(&mut rng), coin(&mut rng), false);
            let plan = check(&what, tol(name), g, rng.tensor(&shape, lo, hi));
            // A sum over one element is a copy (`plan::contract`).
            let copy = name == "ReduceSum" && len == 1;
            assert!(plan.contains("reduce_f32") != copy, "{plan}");
        }
    }
}

#[test]
fn reductions_over_middle_split_and_all_axes_match_the_reference() {
    let mut rng = Rng::new(0x3a1d);
    let cases: [(&[usize], Option<Vec<i64>>); 12] = [
        // One middle axis: few outputs (warp per output, strided) and many (thread per output).
        (&[3, 33, 5], Some(vec![1])),
        (&[64, 100, 70], Some(vec![1])),
        (&[2, 1025, 3], Some(vec![-2])),
        // The leading axis of a wide matrix: a thread per column.
        (&[1025, 300], Some(vec![0])),
        // Two reduced runs (general offsets), and the kept dims split around them.
        (&[4, 5, 6, 7], Some(vec![0, 2])),
        (&[2, 3, 4, 5, 6], Some(vec![1, 3])),
        (&[6, 32, 5, 33], Some(vec![0, 1, 3])),
        // NCHW spatial mean, and everything.
        (&[2, 64, 7, 7], Some(vec![2, 3])),
        (&[3, 31, 33], None),
        (&[1, 1, 1], Some(vec![0, 1, 2])),
        // More outputs than the capped grid has warps or blocks: the grid-stride loops.
        (&[20000, 40], Some(vec![1])),
        (&[2200, 1100], Some(vec![-1])),
    ];
    for (shape, axes) in cases {
        for (name, op, lo, hi) in OPS {
            let keep = coin(&mut rng);
            let what = format!("{name} {shape:?} axes {axes:?} keepdims {keep}");
            let g = reduce_graph(DType::F32, op, shape, axes.clone(), coin(&mut rng), keep, false);
            check(&what, tol(name), g, rng.tensor(shape, lo, hi));
        }
    }
    // noop_with_empty_axes: each element on its own (|x| for L1/L2, x² for SumSquare, ln x).
    for (name, op, lo, hi) in OPS {
        let shape = [5, 33];
        let g = reduce_graph(DType::F32, op, &shape, None, false, true, true);
        check(&format!("{name} noop"), tol(name), g, rng.tensor(&shape, lo, hi));
    }
}

#[test]
fn random_reductions_match_the_reference() {
    let mut rng = Rng::new(0x7777);
    for case in 0..60 {
        let rank = 1 + (rng.next_u64() % 5) as usize;
        let shape = random_shape(&mut rng, rank);
        let mut axes: Vec<i64> = (0..rank as i64).filter(|_| coin(&mut rng)).collect();
        if axes.is_empty() {
            axes.push((rng.next_u64() % rank as u64) as i64);
        }
        // Some axes counted from the back.
        let axes: Vec<i64> =
            axes.into_iter().map(|a| if coin(&mut rng) { a - rank as i64 } else { a }).collect();
        let (name, op, lo, hi) = pick(&mut rng, &OPS);
        let keep = coin(&mut rng);
        let what = format!("case {case}: {name} {shape:?} axes {axes:?} keepdims {keep}");
        let g = reduce_graph(DType::F32, op, &shape, Some(axes), coin(&mut rng), keep, false);
        check(&what, tol(name), g, rng.tensor(&shape, lo, hi));
    }
}

/// `x` as f64, with the last few elements replaced by special values.
fn as_f64(x: &HostTensor, specials: &[f64]) -> HostTensor {
    let mut v = x.data().to_f64s();
    let n = v.len();
    for (slot, &s) in v[n.saturating_sub(specials.len())..].iter_mut().zip(specials) {
        *slot = s;
    }
    HostTensor::new(x.shape().to_vec(), v).unwrap()
}

#[test]
fn f64_reductions_and_unary_ops_match_the_reference() {
    // f64 folds in another order than the reference: within 1e-12 relative.
    const F64_TOL: f64 = 1e-12;
    let mut rng = Rng::new(0xf64);
    for case in 0..30 {
        let rank = 1 + (rng.next_u64() % 4) as usize;
        let shape = random_shape(&mut rng, rank);
        let axes: Vec<i64> = (0..rank as i64).filter(|_| coin(&mut rng)).collect();
        let (name, op, lo, hi) = OPS[case % OPS.len()];
        let keep = coin(&mut rng);
        let what = format!("case {case}: f64 {name} {shape:?} axes {axes:?} keepdims {keep}");
        let g = reduce_graph(DType::F64, op, &shape, Some(axes), coin(&mut rng), keep, false);
        let tol = if tol(name) == 0.0 { 0.0 } else { F64_TOL };
        let plan = check(&what, tol, g, as_f64(&rng.tensor(&shape, lo, hi), &[]));
        assert!(plan.contains("reduce_f64"), "{plan}");
    }
    // An empty reduced axis: each op's identity (ReduceLogSumExp of the node test: -inf).
    for (name, op, _, _) in OPS {
        let g = reduce_graph(DType::F64, op, &[2, 0, 4], Some(vec![1]), false, true, false);
        check(
            &format!("f64 {name} over an empty axis"),
            0.0,
            g,
            HostTensor::new(vec![2, 0, 4], Vec::<f64>::new()).unwrap(),
        );
    }
    let specials =
        [0.0, -0.0, -1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-310, 1e300, 700.0, -745.5];
    for (name, op) in [
        ("Relu", Op::Relu),
        ("Exp", Op::Exp),
        ("Log", Op::Log),
        ("Sqrt", Op::Sqrt),
        ("Abs", Op::Abs),
        ("Neg", Op::Neg),
    ] {
        let shape = [3, 1 + (rng.next_u64() % 3000) as usize];
        let (lo, hi) = if matches!(name, "Log" | "Sqrt") { (0.0, 50.0) } else { (-50.0, 50.0) };
        let x = as_f64(&rng.tensor(&shape, lo, hi), &specials);
        let mut g = Graph::new();
        let xi = g.input("x", DType::F64, known(&shape));
        let y = g.op1(op, &[xi]);
        g.output(y);
        // libm's exp and log are below 1 ulp, as the reference's: within 2 ulp of each other.
        let tol = if matches!(name, "Exp" | "Log") { 5e-16 } else { 0.0 };
        let plan = check(&format!("f64 {name}"), tol, g, x);
        assert!(plan.contains("_f64"), "{plan}");
    }
}

#[test]
fn max_min_and_log_sum_exp_propagate_nan_and_infinities() {
    let mut rng = Rng::new(0x0a0a);
    let shape = [6, 40];
    let mut data: Vec<f32> = (0..240).map(|_| rng.uniform(-5.0, 5.0)).collect();
    data[3] = f32::NAN; // row 0
    data[40 + 39] = f32::INFINITY; // row 1
    data[80..120].fill(f32::NEG_INFINITY); // row 2: all -inf
    data[120 + 7] = f32::NEG_INFINITY; // row 3: one -inf
    let x = HostTensor::new(shape.to_vec(), data).unwrap();
    for (name, op) in [("ReduceMax", Op::ReduceMax as fn(Reduce) -> Op), ("ReduceMin", Op::ReduceMin)] {
        check(name, 0.0, reduce_graph(DType::F32, op, &shape, Some(vec![1]), false, true, false), x.clone());
    }
    let g = reduce_graph(DType::F32, Op::ReduceLogSumExp, &shape, Some(vec![1]), false, true, false);
    check("ReduceLogSumExp with NaN and infinities", F32_TOL, g, x.clone());
    let g = reduce_graph(DType::F32, Op::ReduceSum, &shape, Some(vec![1]), true, false, false);
    check("ReduceSum with NaN and infinities", F32_TOL, g, x);
}

fn arg_graph(max: bool, shape: &[usize], axis: i64, keepdims: bool, select_last_index: bool) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(shape));
    let attrs = ArgReduce { axis, keepdims, select_last_index };
    let y = g.op1(if max { Op::ArgMax(attrs) } else { Op::ArgMin(attrs) }, &[x]);
    g.output(y);
    g
}

/// Small integers, so that equal extremes (ties) are common.
fn tied(rng: &mut Rng, shape: &[usize]) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::new(shape.to_vec(), (0..n).map(|_| rng.uniform(-4.0, 4.0).floor()).collect::<Vec<f32>>())
        .unwrap()
}

#[test]
fn arg_max_and_arg_min_match_the_reference_exactly() {
    let mut rng = Rng::new(0xa68a);
    for len in LENS {
        for max in [true, false] {
            for last in [false, true] {
                let shape = [1 + (rng.next_u64() % 7) as usize, len];
                let what = format!("arg max {max} last {last} {shape:?}");
                let plan = check(
                    &what,
                    0.0,
                    arg_graph(max, &shape, 1, coin(&mut rng), last),
                    tied(&mut rng, &shape),
                );
                assert!(plan.contains("arg_reduce_f32"), "{plan}");
            }
        }
    }
    for case in 0..40 {
        let rank = 1 + (rng.next_u64() % 4) as usize;
        let shape = random_shape(&mut rng, rank);
        let axis = (rng.next_u64() % rank as u64) as i64 - if coin(&mut rng) { rank as i64 } else { 0 };
        let (max, last, keep) = (coin(&mut rng), coin(&mut rng), coin(&mut rng));
        let what = format!("case {case}: arg max {max} last {last} {shape:?} axis {axis} keepdims {keep}");
        let x = if coin(&mut rng) { tied(&mut rng, &shape) } else { rng.tensor(&shape, -1.0, 1.0) };
        check(&what, 0.0, arg_graph(max, &shape, axis, keep, last), x);
    }
    // NaN is the extreme for both (the first one, or the last with select_last_index).
    let shape = [4, 50];
    let mut data = vec![1.0f32; 200];
    data[10] = f32::NAN;
    data[20] = f32::NAN;
    data[50 + 49] = f32::NAN;
    data[100 + 3] = 2.0;
    let x = HostTensor::new(shape.to_vec(), data).unwrap();
    for (max, last) in [(true, false), (true, true), (false, false), (false, true)] {
        let what = format!("arg max {max} last {last} with NaN");
        check(&what, 0.0, arg_graph(max, &shape, 1, true, last), x.clone());
    }
}

#[test]
fn global_pools_match_the_reference() {
    let mut rng = Rng::new(0x610b);
    let shapes: [&[usize]; 5] =
        [&[2, 3, 7, 7], &[1, 64, 32, 32], &[4, 5, 1025], &[2, 3, 4, 5, 6], &[3, 7, 1, 1]];
    for shape in shapes {
        for (name, op) in [("GlobalAveragePool", Op::GlobalAveragePool), ("GlobalMaxPool", Op::GlobalMaxPool)]
        {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(shape));
            let y = g.op1(op, &[x]);
            g.output(y);
            let plan = check(&format!("{name} {shape:?}"), tol(name), g, rng.tensor(shape, -3.0, 3.0));
            assert!(plan.contains("reduce_f32"), "{plan}");
        }
    }
    // GlobalMaxPool skips NaN, as the reference does.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[1, 2, 3, 3]));
    let y = g.op1(Op::GlobalMaxPool, &[x]);
    g.output(y);
    let mut data: Vec<f32> = (0..18).map(|i| i as f32).collect();
    data[4] = f32::NAN;
    check("GlobalMaxPool with NaN", 0.0, g, HostTensor::new(vec![1, 2, 3, 3], data).unwrap());
}
