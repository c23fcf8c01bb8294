//! The fused MLP kernel (`mlp_f32`, one thread-block cluster per chain of small-`m` GEMM layers)
//! through `Session` against the CPU reference: both weight layouts (k-contiguous `transB` Gemm
//! weights and column-contiguous MatMul / Gemm weights), widths that do not divide by the cluster,
//! the warp or the 4-column groups, every row count up to the kernel's limit, biases broadcast
//! along rows or full, alpha / beta, every activation the epilogue knows, and chains longer than
//! one launch takes.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

fn weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize], scale: f32) -> ValueId {
    let data: Vec<f32> = (0..dims.iter().product()).map(|_| rng.uniform(-scale, scale)).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
}

/// How a layer is expressed in the graph.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// Gemm, `transB = 1` (W is `[n, k]`: k contiguous), bias `[n]`.
    GemmTransB,
    /// Gemm, W `[k, n]` (columns contiguous), full bias `[m, n]`, alpha and beta.
    GemmFull,
    /// MatMul, W `[k, n]`, no bias.
    MatMul,
}

/// An MLP of `widths.len() - 1` layers on `m` rows; layer `l` has form `forms[l % forms.len()]`
/// and activation `acts[l % acts.len()]` (None: none).
fn mlp(rng: &mut Rng, m: usize, widths: &[usize], forms: &[Form], acts: &[Option<Op>]) -> Graph {
    let mut g = Graph::new();
    let mut h = g.input("x", DType::F32, vec![Dim::Known(m), Dim::Known(widths[0])]);
    for l in 0..widths.len() - 1 {
        let (k, n) = (widths[l], widths[l + 1]);
        let scale = 1.5 / (k as f32).sqrt();
        h = match forms[l % forms.len()] {
            Form::GemmTransB => {
                let w = weight(&mut g, rng, &format!("w{l}"), &[n, k], scale);
                let b = weight(&mut g, rng, &format!("b{l}"), &[n], 0.5);
                let attrs = op::Gemm { trans_b: true, ..op::Gemm::default() };
                g.op1(Op::Gemm(attrs), &[h, w, b])
            }
            Form::GemmFull => {
                let w = weight(&mut g, rng, &format!("w{l}"), &[k, n], scale);
                let b = weight(&mut g, rng, &format!("b{l}"), &[m, n], 0.5);
                let attrs = op::Gemm { alpha: 0.75, beta: -1.25, ..op::Gemm::default() };
                g.op1(Op::Gemm(attrs), &[h, w, b])
            }
            Form::MatMul => {
                let w = weight(&mut g, rng, &format!("w{l}"), &[k, n], scale);
                g.op1(Op::MatMul, &[h, w])
            }
        };
        if let Some(act) = &acts[l % acts.len()] {
            h = g.op1(act.clone(), &[h]);
        }
    }
    g.output(h);
    g
}

/// Runs `g` on the GPU and the reference (input `[m, k0]` in [-1, 1)); asserts
/// `|gpu - ref| <= 1e-4 (|ref| + 1)` and returns the plan's text.
fn check(what: &str, g: Graph, rng: &mut Rng, m: usize, k0: usize) -> String {
    let inputs = vec![("x".to_owned(), rng.tensor(&[m, k0], -1.0, 1.0))];
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    for run in 0..2 {
        let got: Vec<(String, HostTensor)> = s.run(&inputs).unwrap();
        let (g, w) = (got[0].1.data().to_f64s(), want[0].1.data().to_f64s());
        assert_eq!((got[0].1.shape(), g.len()), (want[0].1.shape(), w.len()), "{what}");
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (b.abs() + 1.0),
                "{what} (run {run}): y[{i}]: gpu {a}, reference {b}"
            );
        }
    }
    s.last_plan().unwrap().to_string()
}

fn fused_launches(plan: &str) -> usize {
    plan.lines().filter(|l| l.contains(" mlp_f32 ")).count()
}

#[test]
fn mlp_chains_match_the_reference() {
    let mut rng = Rng::new(0x3199);
    let acts = [
        Some(Op::Relu),
        Some(Op::Tanh),
        None,
        Some(Op::Sigmoid),
        Some(Op::LeakyRelu(op::LeakyRelu { alpha: 0.1 })),
        Some(Op::Gelu(op::Gelu::default())),
    ];
    let cases: [(&[usize], &[Form]); 5] = [
        // The physics MLP's shape.
        (&[64, 256, 256, 256, 256, 1], &[Form::GemmTransB]),
        // Widths that divide by nothing the kernel tiles by.
        (&[37, 300, 9, 61, 1000, 3], &[Form::GemmTransB, Form::MatMul]),
        // Column-contiguous weights only, with alpha / beta and full biases.
        (&[128, 33, 512, 17], &[Form::GemmFull, Form::MatMul]),
        // Width 1 inside the chain, a wide input.
        (&[1024, 1, 40, 8], &[Form::MatMul, Form::GemmTransB, Form::GemmFull]),
        (&[5, 7], &[Form::GemmTransB]),
    ];
    for (widths, forms) in cases {
        for m in 1..=4 {
            let g = mlp(&mut rng, m, widths, forms, &acts);
            let what = format!("widths {widths:?} forms {forms:?} m {m}");
            let plan = check(&what, g, &mut rng, m, widths[0]);
            // A single layer stays a GEMV; a chain is one launch.
            let want = usize::from(widths.len() > 2);
            assert_eq!(fused_launches(&plan), want, "{what}\n{plan}");
            if widths.len() > 2 {
                assert_eq!(plan.lines().filter(|l| l.starts_with('#')).count(), 1, "{what}\n{plan}");
            }
        }
    }
}

#[test]
fn long_mlp_chains_take_several_launches() {
    let mut rng = Rng::new(0x10c4);
    // 19 layers: launches of 8, 8 and 3.
    let widths: Vec<usize> = (0..20).map(|i| [48, 200, 96][i % 3]).collect();
    let g = mlp(&mut rng, 2, &widths, &[Form::GemmTransB, Form::MatMul], &[Some(Op::Tanh)]);
    let plan = check("19 layers", g, &mut rng, 2, widths[0]);
    assert_eq!(fused_launches(&plan), 3, "{plan}");
}

#[test]
fn mlp_chains_stop_where_the_kernel_cannot_follow() {
    let mut rng = Rng::new(0x57e9);
    // Five rows: past the kernel's limit, so the GEMV path runs every layer.
    let g = mlp(&mut rng, 5, &[64, 128, 128, 1], &[Form::GemmTransB], &[Some(Op::Relu)]);
    let plan = check("m 5", g, &mut rng, 5, 64);
    assert_eq!(fused_launches(&plan), 0, "{plan}");
    // An activation wider than the shared-memory buffers (m * width > 4096) breaks the chain:
    // 64 -> 2048 -> 16 fuses, 16 -> 3000 -> 16 (m 2: 6000 values) do not, and the lone
    // 16 -> 1 stays a GEMV.
    let widths = [64, 2048, 16, 3000, 16, 1];
    let g = mlp(&mut rng, 2, &widths, &[Form::GemmTransB], &[Some(Op::Relu)]);
    let plan = check("wide hidden layer", g, &mut rng, 2, 64);
    assert_eq!(fused_launches(&plan), 1, "{plan}");
    assert_eq!(plan.lines().filter(|l| l.starts_with('#')).count(), 4, "{plan}");
}
