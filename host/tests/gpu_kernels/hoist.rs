//! Hoisted steps (`Plan::hoisted`: values of the weights alone, run once per binding): a session
//! matches the CPU reference on every run, also when bindings alternate in the one arena (each
//! binding's hoisted results are overwritten by the other's steps and must be computed again),
//! with graph replay and eager launches, and with hoisting off; and when one binding's plan
//! hoists nothing (its table is past the kept-bytes budget) but its steps overwrite the other's.

use host::selftest::{Rng, position_table_graph};
use host::{HostTensor, Session, SessionOptions};
use planner::plan::Step;

use crate::ctx;

/// `|got - want| <= 1e-4 * (|want| + 1)`: the table is a running sum of up to 1000 sines in f32
/// against the f64 reference.
fn assert_close(got: &[(String, HostTensor)], want: &[(String, HostTensor)], what: &str) {
    for ((_, g), (_, w)) in got.iter().zip(want) {
        assert_eq!(g.shape(), w.shape(), "{what}");
        for (i, (a, b)) in g.data().to_f64s().iter().zip(w.data().to_f64s()).enumerate() {
            assert!((a - b).abs() <= 1e-4 * (b.abs() + 1.0), "{what}: y[{i}] gpu {a}, reference {b}");
        }
    }
}

#[test]
fn hoisted_steps_are_computed_again_after_another_binding_used_the_arena() {
    let g = position_table_graph();
    let mut rng = Rng::new(0x40157);
    let eager = SessionOptions { cuda_graph: false, ..SessionOptions::default() };
    let off = SessionOptions { hoist_constants: false, ..SessionOptions::default() };
    for (name, options) in
        [("graph replay", SessionOptions::default()), ("eager", eager), ("hoisting off", off)]
    {
        let mut s = Session::new(ctx(), g.clone(), options).unwrap();
        // 40 -> 1000 grows the arena; 1000 -> 40 reuses it over the 40 plan's hoisted results.
        for seq in [40, 40, 1000, 40, 1000, 1000, 7, 40] {
            let inputs = vec![("x".to_string(), rng.tensor(&[1, seq], -1.0, 1.0))];
            let want = host::reference::eval(&g, &inputs).unwrap();
            assert_close(&s.run(&inputs).unwrap(), &want, &format!("{name}, seq {seq}"));
            // Executions after the first replay without the hoisted steps.
            s.execute().unwrap();
            assert_close(&s.run(&inputs).unwrap(), &want, &format!("{name}, seq {seq}, again"));
        }
        let plan = s.last_plan().unwrap();
        let text = plan.to_string();
        if options.hoist_constants {
            let labels: Vec<&str> = (plan.steps[..plan.hoisted].iter())
                .filter_map(
                    |st| if let Step::Kernel { label, .. } = st { Some(label.as_str()) } else { None },
                )
                .collect();
            assert!(labels.iter().any(|l| l.contains("CumSum")), "{name}: CumSum hoisted:\n{text}");
            assert!(plan.steps.len() - plan.hoisted <= 2, "{name}: the rest is the x program:\n{text}");
        } else {
            assert_eq!(plan.hoisted, 0, "{name}:\n{text}");
        }
    }
}

/// `x [n, n]` plus `CumSum(Expand(0.5, Shape(x)), axis 1)`: the table is hoisted while it fits
/// the 16 MiB budget (n = 300: 360 kB), computed every run past it (n = 2100: 17.6 MB).
fn expanded_table_graph() -> planner::Graph {
    use planner::op::{CumSum, Op, ShapeOf};
    use planner::{ConstTensor, DType, Dim, Graph};
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into()), Dim::Symbol("n".into())]);
    let shape = g.op1(Op::Shape(ShapeOf::default()), &[x]);
    let w = g.initializer("w", ConstTensor::scalar_f32(0.5));
    let e = g.op1(Op::Expand, &[w, shape]);
    let axis = g.const_i64("axis", &[], &[1]);
    let c = g.op1(Op::CumSum(CumSum::default()), &[e, axis]);
    let y = g.add(x, c);
    g.output(y);
    g
}

#[test]
fn a_binding_that_hoists_nothing_still_takes_the_arena_from_one_that_does() {
    let g = expanded_table_graph();
    let mut rng = Rng::new(0x2100);
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    for n in [2100, 300, 2100, 300] {
        let inputs = vec![("x".to_string(), rng.tensor(&[n, n], -1.0, 1.0))];
        let want = host::reference::eval(&g, &inputs).unwrap();
        assert_close(&s.run(&inputs).unwrap(), &want, &format!("n {n}"));
        let plan = s.last_plan().unwrap();
        assert_eq!(plan.hoisted > 0, n == 300, "n {n}:\n{plan}");
    }
}

/// Weights the model dequantizes (`selftest::dequantized_gemms_graph`, `dequantized_conv_graph`)
/// are packed on the device for the tensor cores (`pack_weights_f32`, hoisted): the `wgmma` GEMMs
/// and convolution (on Hopper) and the small-m tensor-core GEMMs match the reference, on every
/// run, as bindings alternate in one arena (each binding packs again), with graph replay, eager
/// launches and hoisting off (the packing then runs every run); and in TF32 (one plane packed,
/// rounded) within TF32 error.
#[test]
fn weights_the_device_dequantizes_are_packed_on_the_device_and_match_the_reference() {
    let mut rng = Rng::new(0x9ac4);
    let gemms = host::selftest::dequantized_gemms_graph(&mut rng);
    let conv = host::selftest::dequantized_conv_graph(&mut rng);
    let eager = SessionOptions { cuda_graph: false, ..SessionOptions::default() };
    let off = SessionOptions { hoist_constants: false, ..SessionOptions::default() };
    let tf32 = SessionOptions { precision: host::Precision::Tf32, ..SessionOptions::default() };
    let unpacked = SessionOptions { pack_computed_weights: false, ..SessionOptions::default() };
    let cases = [
        ("graph replay", SessionOptions::default()),
        ("eager", eager),
        ("hoisting off", off),
        ("tf32", tf32),
    ];
    // Every case runs and reports its largest error before the test fails: which switch a
    // discrepancy follows (packing, hoisting, graph replay) is the diagnosis.
    let mut failures = Vec::new();
    for (name, options) in cases.into_iter().chain([("not packed", unpacked)]) {
        for (what, g, sizes, width) in
            [("gemms", &gemms, [4096, 64, 2, 4096, 64], 256), ("conv", &conv, [8, 1, 8, 2, 8], 0)]
        {
            let mut s = Session::new(ctx(), g.clone(), options).unwrap();
            for size in sizes {
                let shape = if width > 0 { vec![size, width] } else { vec![size, 32, 12, 12] };
                let inputs = vec![("x".to_string(), rng.tensor(&shape, -1.0, 1.0))];
                let want = host::reference::eval(g, &inputs).unwrap();
                let what = format!("{name}, {what} {size}");
                let before = failures.len();
                for again in [false, true] {
                    let got = s.run(&inputs).unwrap();
                    let (gv, wv) = (got[0].1.data().to_f64s(), want[0].1.data().to_f64s());
                    assert_eq!(got[0].1.shape(), want[0].1.shape(), "{what}");
                    if options.precision == host::Precision::Tf32 {
                        let diff: f64 = gv.iter().zip(&wv).map(|(a, b)| (a - b).powi(2)).sum();
                        let norm: f64 = wv.iter().map(|b| b * b).sum();
                        let error = (diff / norm).sqrt();
                        if error > 3e-3 {
                            failures.push(format!("{what} (again {again}): relative error {error:e}"));
                        }
                    } else {
                        // f32 accuracy: each element within 1e-5 of the output's largest
                        // magnitude. The outputs are sums of hundreds of products of magnitude
                        // ~5 (|y| ~ 100 typically), so an element that cancels to ~1 carries the
                        // f32 rounding of its terms; TF32 errors are ~1e-3 of that scale.
                        let scale = wv.iter().fold(f64::MIN_POSITIVE, |m, b| m.max(b.abs()));
                        let worst = (gv.iter().zip(&wv).enumerate())
                            .map(|(i, (a, b))| (i, (a - b).abs() / scale))
                            .fold((0, 0.0f64), |m, e| if e.1 > m.1 || e.1.is_nan() { e } else { m });
                        if worst.1.is_nan() || worst.1 > 1e-5 {
                            let (i, e) = worst;
                            failures.push(format!(
                                "{what} (again {again}): y[{i}] gpu {} reference {} (error {e:e} of {scale})",
                                gv[i], wv[i]
                            ));
                        }
                    }
                }
                let plan = s.last_plan().unwrap();
                let packs = plan.steps.iter().filter(|st| {
                    matches!(st, Step::Kernel { kernel, .. } if *kernel == kernels_gpu::abi::KernelId::PackWeightsF32)
                });
                // Nothing packs for the GEMVs of m 2 or when packing is off; the rest packs each
                // weight.
                let expect = if what.ends_with("gemms 2") || name == "not packed" {
                    0
                } else if what.contains("conv") {
                    1
                } else {
                    2
                };
                if packs.count() != expect {
                    failures.push(format!("{what}: not {expect} packing steps"));
                }
                if failures.len() > before {
                    failures.push(format!("{what}: the plan:\n{plan}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The rotary frequency table as torch 2.11 exports transformers' Llama rotary embedding:
/// `inv_freq (1, F, 1) @ positions (1, 1, S)` (a contraction of length 1), transposed,
/// concatenated with itself, its cos and sin (values of the weights alone: hoisted) applied to an
/// input. The GPU's Llama output was 6 % off PyTorch through this table (sessions 41–42: the
/// GEMM wrote its result through the transpose and the transpose also ran, so the table was
/// transposed twice; `benches/results/2026-12-07-h100-llama-transpose-fix.md`); this holds the
/// chain against the reference.
#[test]
fn a_rotary_table_from_a_length_one_matmul_matches_the_reference() {
    use planner::{ConstTensor, DType, Graph, Op};
    for (f, s) in [(4usize, 10usize), (16, 16), (16, 128)] {
        let mut g = Graph::new();
        let q = g.input("q", DType::F32, [2usize, s, 2 * f]);
        let inv: Vec<f32> = (0..f).map(|i| 10000f32.powf(-(i as f32) / f as f32)).collect();
        let inv = g.initializer("inv_freq", ConstTensor::from_f32(&[1, f, 1], &inv).unwrap());
        let pos: Vec<f32> = (0..s).map(|i| i as f32).collect();
        let pos = g.initializer("positions", ConstTensor::from_f32(&[1, 1, s], &pos).unwrap());
        let freqs = g.op1(Op::MatMul, &[inv, pos]);
        let t = g.op1(Op::Transpose(planner::op::Transpose { perm: Some(vec![0, 2, 1]) }), &[freqs]);
        let emb = g.op1(Op::Concat(planner::op::Concat { axis: -1 }), &[t, t]);
        let (cos, sin) = (g.op1(Op::Cos, &[emb]), g.op1(Op::Sin, &[emb]));
        let (a, b) = (g.op1(Op::Mul, &[q, cos]), g.op1(Op::Mul, &[q, sin]));
        let y = g.op1(Op::Add, &[a, b]);
        g.output(y);
        let inputs = vec![("q".to_string(), Rng::new(0x11).tensor(&[2, s, 2 * f], -1.0, 1.0))];
        crate::indexing::compare(&format!("rotary table F {f} S {s}"), g, &inputs, 1e-5);
    }
}
