//! Bad input through a GPU `Session`: wrong run-time shapes and dtypes, missing and unknown
//! inputs, a symbol two inputs bind to different sizes, a binding whose buffers cannot fit in
//! device memory or in the session's memory budget. Each is a clear error naming the input (or
//! what was being allocated), and the session still runs correct input afterwards.

use host::selftest::Rng;
use host::{HostError, HostTensor, Session, SessionOptions};
use planner::op::Op;
use planner::{Binding, ConstTensor, DType, Dim, Graph};

use crate::ctx;

/// `x [batch, 8] * y [batch, 8] + 1`.
fn two_inputs() -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(8)]);
    let y = g.input("y", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(8)]);
    let one = g.initializer("one", ConstTensor::from_f32(&[1], &[1.0]).unwrap());
    let p = g.op1(Op::Mul, &[x, y]);
    let s = g.op1(Op::Add, &[p, one]);
    g.output(s);
    g
}

fn err_text(r: Result<Vec<(String, HostTensor)>, HostError>) -> String {
    match r {
        Ok(_) => panic!("bad input was accepted"),
        Err(e) => e.to_string(),
    }
}

fn check_runs(s: &mut Session, rng: &mut Rng, batch: usize) {
    let (x, y) = (rng.tensor(&[batch, 8], -1.0, 1.0), rng.tensor(&[batch, 8], -1.0, 1.0));
    let out = s.run(&[("x".into(), x.clone()), ("y".into(), y.clone())]).expect("good input runs");
    let (xv, yv, ov) = (x.data().to_f64s(), y.data().to_f64s(), out[0].1.data().to_f64s());
    for i in 0..xv.len() {
        assert!((ov[i] - (xv[i] * yv[i] + 1.0)).abs() < 1e-6, "element {i}");
    }
}

#[test]
fn wrong_shapes_dtypes_and_names_are_errors_naming_the_input_and_the_session_stays_usable() {
    let mut rng = Rng::new(0xbad1);
    let mut s = Session::new(ctx(), two_inputs(), SessionOptions::default()).unwrap();
    check_runs(&mut s, &mut rng, 3);
    let f = |rng: &mut Rng, shape: &[usize]| rng.tensor(shape, -1.0, 1.0);
    let good_y = f(&mut rng, &[3, 8]);
    // A known dim of the wrong size, the wrong rank, the wrong dtype.
    type Case = (Vec<(String, HostTensor)>, &'static [&'static str]);
    let cases: Vec<Case> = vec![
        (vec![("x".into(), f(&mut rng, &[3, 9])), ("y".into(), good_y.clone())], &["`x`", "[3, 9]"]),
        (vec![("x".into(), f(&mut rng, &[24])), ("y".into(), good_y.clone())], &["`x`", "[24]"]),
        (
            vec![
                ("x".into(), HostTensor::new(vec![3, 8], vec![1i64; 24]).unwrap()),
                ("y".into(), good_y.clone()),
            ],
            &["`x`", "int64"],
        ),
        // A missing input, an unknown one.
        (vec![("y".into(), good_y.clone())], &["`x`", "missing"]),
        (
            vec![
                ("x".into(), f(&mut rng, &[3, 8])),
                ("y".into(), good_y.clone()),
                ("z".into(), good_y.clone()),
            ],
            &["`z`", "no input"],
        ),
        // `batch` bound to 3 by x and to 5 by y: both inputs are named.
        (
            vec![("x".into(), f(&mut rng, &[3, 8])), ("y".into(), f(&mut rng, &[5, 8]))],
            &["`batch`", "`x`", "`y`", "3", "5"],
        ),
    ];
    for (inputs, want) in cases {
        let text = err_text(s.run(&inputs));
        for w in want {
            assert!(text.contains(w), "error {text:?} should mention {w}");
        }
        // Still usable, at the old and at a new size.
        check_runs(&mut s, &mut rng, 3);
    }
    check_runs(&mut s, &mut rng, 17);
}

#[test]
fn a_binding_too_large_for_device_memory_is_an_out_of_memory_error_and_the_session_recovers() {
    // 40 outputs of [batch, 4096] f32: at batch 2^18 each is 4 GiB, 160 GiB in all, more than any
    // GPU has (the H200: 141 GB).
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(4096)]);
    for i in 0..40 {
        let c = g.initializer(&format!("c{i}"), ConstTensor::from_f32(&[1], &[i as f32]).unwrap());
        let y = g.op1(Op::Mul, &[x, c]);
        g.output(y);
    }
    let total = ctx().info().total_memory_bytes as u64;
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    let batch = 1usize << 18;
    assert!(40 * (batch as u64) * 4096 * 4 > total, "the test needs a binding larger than the device");
    let e = s.required_arena_bytes(&Binding::new().with("batch", batch)).expect_err("cannot fit");
    assert!(matches!(e, HostError::OutOfMemory { .. }), "{e}");
    assert!(e.to_string().contains("bytes"), "{e}");
    // Nothing of the failed binding stays allocated, and a small one runs.
    let mut rng = Rng::new(7);
    let xs = rng.tensor(&[2, 4096], -1.0, 1.0);
    let out = s.run(&[("x".into(), xs.clone())]).expect("a small binding runs after the failure");
    assert_eq!(out.len(), 40);
    let (xv, o3) = (xs.data().to_f64s(), out[3].1.data().to_f64s());
    assert!(xv.iter().zip(&o3).all(|(a, b)| (a * 3.0 - b).abs() < 1e-6));
    assert!(s.device_bytes() < 1 << 30, "{} bytes held after the failed binding", s.device_bytes());
}

#[test]
fn a_session_memory_budget_refuses_allocations_past_it_naming_them() {
    // x [batch, 1024] @ w [1024, 256] (1 MiB of weights), then Relu.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(1024)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[1024, 256], &vec![0.5; 1024 * 256]).unwrap());
    let y = g.op1(Op::MatMul, &[x, w]);
    let z = g.op1(Op::Relu, &[y]);
    g.output(z);
    let budget = |max: u64| SessionOptions { max_memory: Some(max), ..SessionOptions::default() };
    let mut rng = Rng::new(11);
    let small = vec![("x".to_string(), rng.tensor(&[4, 1024], -1.0, 1.0))];
    // 64 KiB cannot hold the weights: refused before the allocation, naming them.
    let mut s = Session::new(ctx(), g.clone(), budget(64 << 10)).unwrap();
    let e = s.run(&small).expect_err("1 MiB of weights in a 64 KiB budget");
    assert!(matches!(&e, HostError::Budget { what, .. } if what.contains("weights")), "{e}");
    assert!(e.to_string().contains("65536"), "{e}");
    // 32 MiB holds batch 4, not batch 16384 (its input alone is 64 MiB).
    let mut s = Session::new(ctx(), g, budget(32 << 20)).unwrap();
    s.run(&small).expect("batch 4 fits");
    assert!(s.device_bytes() <= 32 << 20, "{} bytes", s.device_bytes());
    let big = vec![("x".to_string(), rng.tensor(&[16384, 1024], -1.0, 1.0))];
    let e = s.run(&big).expect_err("64 MiB of input in a 32 MiB budget");
    assert!(matches!(&e, HostError::Budget { .. }), "{e}");
    assert!(e.to_string().contains("input `x`") || e.to_string().contains("arena"), "{e}");
    // The session still runs what fits, within the budget.
    s.run(&small).expect("batch 4 after the refusal");
    assert!(s.device_bytes() <= 32 << 20, "{} bytes", s.device_bytes());
}

#[test]
fn token_ids_are_never_folded_on_the_host_to_make_a_plan_compile() {
    // A Mamba2-like front: token ids [2, 16] gathered from an embedding table, then a CumSum
    // over the sequence. The ids are small enough for the old rule to specialize on (and the
    // host then computed the whole graph); they are data, so the plan computes on the GPU or the
    // run fails naming the nodes without a GPU kernel.
    use planner::op;
    let mut g = Graph::new();
    let ids = g.input("ids", DType::I64, [2usize, 16]);
    let data: Vec<f32> = (0..40).map(|i| i as f32 * 0.25).collect();
    let table = g.initializer("table", ConstTensor::from_f32(&[10, 4], &data).unwrap());
    let emb = g.push(Op::Gather(op::Gather::default()), &[table, ids], 1)[0];
    let axis = g.initializer("axis", ConstTensor::from_i64s_as(DType::I64, &[], &[1]).unwrap());
    let cs = g.push(Op::CumSum(op::CumSum::default()), &[emb, axis], 1)[0];
    g.output(cs);
    let ids_t = HostTensor::new(vec![2, 16], (0..32).map(|i| i % 10).collect::<Vec<i64>>()).unwrap();
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    match s.run(&[("ids".into(), ids_t.clone())]) {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("CumSum") && text.contains("no GPU kernel"), "{text}");
        }
        Ok(out) => {
            // A GPU kernel computes the CumSum, on these very ids.
            let plan = s.last_plan().expect("one plan");
            assert!(plan.to_string().contains("CumSum"), "{plan}");
            let want = host::reference::eval(&g, &[("ids".into(), ids_t)]).unwrap();
            assert_eq!(out[0].1.shape(), want[0].1.shape());
        }
    }
}
