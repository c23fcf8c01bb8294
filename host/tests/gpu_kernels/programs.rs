//! Elementwise programs (chains of f32 elementwise ops fused into one `ew_program_f32` launch)
//! against the same graph with fusion off (bit for bit: every op rounds as its single-op kernel)
//! and against the CPU reference: GELU-tanh spelled out as eight ops (GPT-2's exporter form),
//! broadcast inputs of different shapes, scalar constants as immediates, a tree that needs all four
//! registers, LeakyRelu's slope, four inputs.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

fn scalar(g: &mut Graph, name: &str, v: f32) -> ValueId {
    g.initializer(name, ConstTensor::scalar_f32(v))
}

/// Runs `g` fused and unfused on the GPU and on the reference; returns the fused plan's text.
fn check(what: &str, g: Graph, inputs: Vec<(String, HostTensor)>) -> String {
    let unfused = SessionOptions { fuse_elementwise: false, ..SessionOptions::default() };
    fused_matches_unfused(what, g, &inputs, unfused, 1e-5)
}

/// Runs `g` on the GPU with the default options and with `unfused` (a fusion switched off), and
/// on the reference: the fused outputs must equal the unfused ones bit for bit and lie within
/// `tol * (|reference| + 1)` of the reference. Returns the fused plan's text.
pub fn fused_matches_unfused(
    what: &str,
    g: Graph,
    inputs: &[(String, HostTensor)],
    unfused: SessionOptions,
    tol: f64,
) -> String {
    fused_matches_unfused_with(what, g, inputs, SessionOptions::default(), unfused, tol)
}

/// [`fused_matches_unfused`] with the fused session's options given too.
pub fn fused_matches_unfused_with(
    what: &str,
    g: Graph,
    inputs: &[(String, HostTensor)],
    fused: SessionOptions,
    unfused: SessionOptions,
    tol: f64,
) -> String {
    let want = host::reference::eval(&g, inputs).unwrap();
    let mut plain = Session::new(ctx(), g.clone(), unfused).unwrap();
    let base = plain.run(inputs).unwrap();
    let mut s = Session::new(ctx(), g, fused).unwrap();
    let got = s.run(inputs).unwrap();
    assert_eq!(got.len(), want.len(), "{what}: outputs");
    for (((gn, g), (_, b)), (_, w)) in got.iter().zip(&base).zip(&want) {
        let (gv, bv, wv) = (g.f32s("gpu").unwrap(), b.f32s("base").unwrap(), w.data().to_f64s());
        assert_eq!((gv.len(), bv.len()), (wv.len(), wv.len()), "{what}: {gn} length");
        for i in 0..gv.len() {
            assert_eq!(
                gv[i].to_bits(),
                bv[i].to_bits(),
                "{what}: {gn}[{i}]: fused {} unfused {}",
                gv[i],
                bv[i]
            );
            assert!(
                (gv[i] as f64 - wv[i]).abs() <= tol * (wv[i].abs() + 1.0),
                "{what}: {gn}[{i}]: gpu {} reference {}",
                gv[i],
                wv[i]
            );
        }
    }
    s.last_plan().unwrap().to_string()
}

#[test]
fn gelu_tanh_as_eight_ops_is_one_launch() {
    let mut rng = Rng::new(0x6e1);
    for shape in [vec![1, 16, 256], vec![3, 1025], vec![1]] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let (half, three, c, k, one) = (
            scalar(&mut g, "half", 0.5),
            scalar(&mut g, "three", 3.0),
            scalar(&mut g, "c", 0.044715),
            scalar(&mut g, "k", 0.797_884_6),
            scalar(&mut g, "one", 1.0),
        );
        let t1 = g.op1(Op::Mul, &[x, half]);
        let t2 = g.op1(Op::Pow, &[x, three]);
        let t3 = g.op1(Op::Mul, &[t2, c]);
        let t4 = g.op1(Op::Add, &[x, t3]);
        let t5 = g.op1(Op::Mul, &[t4, k]);
        let t6 = g.op1(Op::Tanh, &[t5]);
        let t7 = g.op1(Op::Add, &[t6, one]);
        let y = g.op1(Op::Mul, &[t1, t7]);
        g.output(y);
        let plan = check(&format!("gelu {shape:?}"), g, vec![("x".into(), rng.tensor(&shape, -6.0, 6.0))]);
        assert!(plan.contains("[8 ops] ew_program_f32"), "{plan}");
        assert_eq!(plan.lines().filter(|l| l.starts_with('#')).count(), 1, "{plan}");
    }
}

#[test]
fn broadcast_inputs_immediates_and_register_pressure() {
    let mut rng = Rng::new(0xb0ad);
    // ((a * b + c) - (a / (d + 2))) then LeakyRelu, max with 0.25: a [4, 33, 7], b [33, 1],
    // c [7], d [4, 1, 1] — four inputs of four shapes, a tree with three live values.
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, known(&[4, 33, 7]));
    let b = g.input("b", DType::F32, known(&[33, 1]));
    let c = g.input("c", DType::F32, known(&[7]));
    let d = g.input("d", DType::F32, known(&[4, 1, 1]));
    let two = scalar(&mut g, "two", 2.0);
    let quarter = scalar(&mut g, "quarter", 0.25);
    let ab = g.op1(Op::Mul, &[a, b]);
    let abc = g.op1(Op::Add, &[ab, c]);
    let d2 = g.op1(Op::Add, &[d, two]);
    let q = g.op1(Op::Div, &[a, d2]);
    let diff = g.op1(Op::Sub, &[abc, q]);
    let lr = g.op1(Op::LeakyRelu(op::LeakyRelu { alpha: 0.3 }), &[diff]);
    let y = g.op1(Op::Max, &[lr, quarter]);
    g.output(y);
    let inputs = vec![
        ("a".into(), rng.tensor(&[4, 33, 7], -3.0, 3.0)),
        ("b".into(), rng.tensor(&[33, 1], -3.0, 3.0)),
        ("c".into(), rng.tensor(&[7], -3.0, 3.0)),
        ("d".into(), rng.tensor(&[4, 1, 1], 0.5, 3.0)),
    ];
    let plan = check("tree", g, inputs);
    assert!(plan.contains("ew_program_f32"), "{plan}");
}

#[test]
fn a_value_read_outside_the_chain_splits_it() {
    let mut rng = Rng::new(0x5b17);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[2, 300]));
    let s = g.op1(Op::Sigmoid, &[x]);
    let m = g.op1(Op::Mul, &[x, s]); // silu spelled out
    let e = g.op1(Op::Exp, &[m]);
    g.output(e);
    g.output(m); // m is a graph output: it must be written, so the chain ends there
    let plan = check("split chain", g, vec![("x".into(), rng.tensor(&[2, 300], -5.0, 5.0))]);
    assert!(plan.contains("[2 ops] ew_program_f32"), "{plan}");
}

#[test]
fn ops_without_their_own_kernel_run_as_programs() {
    // Each op alone (a one-node program) and chained after an Add (fused into it), against the
    // reference: rounding, trigonometric and hyperbolic functions, the parameterised activations,
    // Clip with constant bounds.
    let mut rng = Rng::new(0x0b5);
    let ops: Vec<(Op, f32, f32)> = vec![
        (Op::Floor, -5.0, 5.0),
        (Op::Ceil, -5.0, 5.0),
        (Op::Round, -5.0, 5.0),
        (Op::Reciprocal, 0.5, 4.0),
        (Op::Sin, -4.0, 4.0),
        (Op::Cos, -4.0, 4.0),
        (Op::Tan, -1.0, 1.0),
        (Op::Asin, -0.9, 0.9),
        (Op::Acos, -0.9, 0.9),
        (Op::Atan, -4.0, 4.0),
        (Op::Sinh, -4.0, 4.0),
        (Op::Cosh, -4.0, 4.0),
        (Op::Asinh, -4.0, 4.0),
        (Op::Acosh, 1.5, 4.0),
        (Op::Atanh, -0.9, 0.9),
        (Op::Sign, -4.0, 4.0),
        (Op::Softsign, -4.0, 4.0),
        (Op::HardSwish, -5.0, 5.0),
        (Op::Mish, -4.0, 4.0),
        (Op::Elu(op::Elu { alpha: 0.7 }), -4.0, 4.0),
        (Op::Selu(op::Selu::default()), -4.0, 4.0),
        (Op::Celu(op::Celu { alpha: 1.5 }), -4.0, 4.0),
        (Op::ThresholdedRelu(op::ThresholdedRelu { alpha: 0.5 }), -2.0, 2.0),
        (Op::HardSigmoid(op::HardSigmoid::default()), -5.0, 5.0),
        (Op::Clip(op::Clip { min: Some(-0.5), max: Some(0.75) }), -2.0, 2.0),
    ];
    for (o, lo, hi) in ops {
        // Alone.
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[3, 77]));
        let y = g.op1(o.clone(), &[x]);
        g.output(y);
        let inputs = vec![("x".to_string(), rng.tensor(&[3, 77], lo, hi))];
        let want = host::reference::eval(&g, &inputs).unwrap();
        let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
        let got = s.run(&inputs).unwrap();
        let (gv, wv) = (got[0].1.data().to_f64s(), want[0].1.data().to_f64s());
        for i in 0..gv.len() {
            assert!(
                (gv[i] - wv[i]).abs() <= 2e-6 * (wv[i].abs() + 1.0),
                "{}: [{i}] gpu {} reference {}",
                o.name(),
                gv[i],
                wv[i]
            );
        }
        assert!(s.last_plan().unwrap().to_string().contains("ew_program_f32"), "{}", o.name());
        // After an Add of zero-ish bias (fused with it).
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[3, 77]));
        let b = g.input("b", DType::F32, known(&[77]));
        let t = g.op1(Op::Add, &[x, b]);
        let y = g.op1(o.clone(), &[t]);
        g.output(y);
        let inputs = vec![
            ("x".to_string(), rng.tensor(&[3, 77], lo, hi)),
            ("b".to_string(), rng.tensor(&[77], -0.01, 0.01)),
        ];
        check(o.name(), g, inputs);
    }
}
