//! GEMMs with an elementwise program in their epilogue (`gemm_program_f32`, `gemv_program_f32`,
//! `gemm_reduce_program_f32`) against the same graph with that fusion off (bit for bit: the
//! program sees the bits the unfused GEMM stores, and every op rounds as its single-op kernel)
//! and against the CPU reference: residual adds on the tiled, split-K and GEMV paths, a broadcast
//! bias row on a batched MatMul, an attention mask broadcast over heads, the eight-op GELU-tanh
//! chain after a Gemm with C, and a residual the output overwrites in place.

use host::selftest::Rng;
use host::{HostTensor, SessionOptions};
use planner::op::{Gemm, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Graph inputs of the given names and shapes, with random data in `[-1, 1)`.
pub fn inputs(
    g: &mut Graph,
    rng: &mut Rng,
    specs: &[(&str, &[usize])],
) -> (Vec<ValueId>, Vec<(String, HostTensor)>) {
    let mut ids = Vec::new();
    let mut feeds = Vec::new();
    for (name, shape) in specs {
        ids.push(g.input(name, DType::F32, known(shape)));
        feeds.push((name.to_string(), rng.tensor(shape, -1.0, 1.0)));
    }
    (ids, feeds)
}

/// Runs `g` with and without the GEMM-epilogue fusion on the GPU and on the reference, with the
/// CUDA-core GEMM kernels (the fused plan must name `kernel`) and with the tensor-core one (where
/// it takes the tiled and split-K shapes: `gemm_tc_program_f32` or its `_pair` twin); returns the
/// first fused plan's text.
fn check(what: &str, g: Graph, feeds: Vec<(String, HostTensor)>, kernel: &str) -> String {
    let cores = SessionOptions { tensor_core_gemm: false, ..SessionOptions::default() };
    let unfused = SessionOptions { fuse_gemm_programs: false, ..cores };
    let plan = crate::programs::fused_matches_unfused_with(what, g.clone(), &feeds, cores, unfused, 1e-4);
    assert!(plan.contains(kernel), "{what}: expected {kernel}:\n{plan}");
    let tc_kernel = kernel
        .replace("gemm_reduce_program_f32", "gemm_tc_program_f32")
        .replace("gemm_program_f32", "gemm_tc_program_f32");
    let unfused = SessionOptions { fuse_gemm_programs: false, ..SessionOptions::default() };
    let tc_plan = crate::programs::fused_matches_unfused(what, g, &feeds, unfused, 1e-4);
    // Few tiles with a long k run as the kernel's `_pair` twin (block pairs, on Hopper).
    let paired = tc_kernel.replace("_f32", "_pair_f32");
    assert!(
        tc_plan.contains(&tc_kernel) || tc_plan.contains(&paired),
        "{what}: expected {tc_kernel}:\n{tc_plan}"
    );
    plan
}

#[test]
fn residual_add_on_the_tiled_split_k_and_gemv_paths() {
    let mut rng = Rng::new(0xe91);
    for (m, k, n, kernel) in [
        (70, 50, 90, "gemm_program_f32"),
        (130, 33, 65, "gemm_program_f32"),
        (128, 1024, 256, "gemm_reduce_program_f32"),
        (100, 700, 70, "gemm_reduce_program_f32"),
        // (At m = 1 the residual is one row: a bias, which becomes the GEMM's C instead.)
        (2, 256, 1000, "gemv_program_f32"),
        (5, 300, 37, "gemv_program_f32"),
    ] {
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[m, k]), ("w", &[k, n]), ("r", &[m, n])]);
        let h = g.matmul(v[0], v[1]);
        let y = g.add(h, v[2]);
        g.output(y);
        let plan = check(&format!("residual {m}x{k}x{n}"), g, feeds, kernel);
        assert!(!plan.contains("add_f32"), "{plan}");
    }
}

#[test]
fn transposed_gemm_operands_keep_their_strides() {
    // Gemm with transA / transB, scaled C and a column-strided B (the GEMV's other layout).
    let mut rng = Rng::new(0x7a5);
    for (m, k, n, kernel) in [(3, 64, 40, "gemv_program_f32"), (66, 40, 72, "gemm_program_f32")] {
        let mut g = Graph::new();
        let (v, feeds) =
            inputs(&mut g, &mut rng, &[("a", &[k, m]), ("b", &[n, k]), ("c", &[n]), ("r", &[m, n])]);
        let attrs = Gemm { alpha: 0.5, beta: 2.0, trans_a: true, trans_b: true };
        let h = g.push(Op::Gemm(attrs), &[v[0], v[1], v[2]], 1)[0];
        let y = g.sub(v[3], h);
        g.output(y);
        check(&format!("transposed {m}x{k}x{n}"), g, feeds, kernel);
    }
}

#[test]
fn bias_row_and_residual_on_a_batched_matmul() {
    // [2, 37, 48] @ [48, 80] (batch folded into rows) + bias [80] + residual [2, 37, 80].
    let mut rng = Rng::new(0xb1a5);
    let mut g = Graph::new();
    let (v, feeds) = inputs(
        &mut g,
        &mut rng,
        &[("x", &[2, 37, 48]), ("w", &[48, 80]), ("bias", &[80]), ("r", &[2, 37, 80])],
    );
    let h = g.matmul(v[0], v[1]);
    let a = g.add(h, v[2]);
    let y = g.add(a, v[3]);
    g.output(y);
    // The bias row is the MatMul's C; the residual add stays the program.
    let plan = check("bias + residual", g, feeds, "MatMul+Bias+Sum[1 ops] gemm_program_f32");
    assert_eq!(plan.lines().filter(|l| l.starts_with('#')).count(), 1, "{plan}");
}

#[test]
fn attention_mask_broadcast_over_heads() {
    // Scores [2, 4, 16, 16] = q @ k^T (a true batch of 8), scaled, plus a mask [2, 1, 1, 16].
    let mut rng = Rng::new(0x3a5c);
    let mut g = Graph::new();
    let (v, feeds) =
        inputs(&mut g, &mut rng, &[("q", &[2, 4, 16, 8]), ("kt", &[2, 4, 8, 16]), ("mask", &[2, 1, 1, 16])]);
    let s = g.matmul(v[0], v[1]);
    let scale = g.initializer("scale", ConstTensor::scalar_f32(0.35));
    let t = g.mul(s, scale);
    let y = g.add(t, v[2]);
    g.output(y);
    check("masked scores", g, feeds, "MatMul+Sum[2 ops] gemm_program_f32");
}

/// `0.5 h (1 + tanh(kk (h + 0.044715 h^3)))` after `h = Gemm(x, w, b)` with x `[m, k]`: GELU-tanh
/// when `kk` is `sqrt(2 / pi)`, an eight-op program otherwise.
fn gelu_like(rng: &mut Rng, (m, k, n): (usize, usize, usize), kk: f32) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, rng, &[("x", &[m, k]), ("w", &[k, n]), ("b", &[n])]);
    let h = g.push(Op::Gemm(Gemm::default()), &[v[0], v[1], v[2]], 1)[0];
    let mut s = |name: &str, x: f32| g.initializer(name, ConstTensor::scalar_f32(x));
    let (half, three, c, kk, one) =
        (s("half", 0.5), s("three", 3.0), s("c", 0.044715), s("k", kk), s("one", 1.0));
    let t1 = g.mul(h, half);
    let t2 = g.op1(Op::Pow, &[h, three]);
    let t3 = g.mul(t2, c);
    let t4 = g.add(h, t3);
    let t5 = g.mul(t4, kk);
    let t6 = g.op1(Op::Tanh, &[t5]);
    let t7 = g.add(t6, one);
    let y = g.mul(t1, t7);
    g.output(y);
    (g, feeds)
}

#[test]
fn an_eight_op_chain_after_a_gemm_with_bias() {
    // Not GELU (the tanh's scale is off): it stays an interpreted program.
    let mut rng = Rng::new(0x6e1a);
    for (m, k, n, kernel) in [
        (16, 64, 256, "gemm_program_f32"),
        (128, 512, 128, "gemm_reduce_program_f32"),
        (2, 64, 96, "gemv_program_f32"),
    ] {
        let (g, feeds) = gelu_like(&mut rng, (m, k, n), 0.79);
        let plan = check(&format!("chain {m}x{k}x{n}"), g, feeds, kernel);
        assert!(plan.contains("Gemm+Sum[8 ops]"), "{plan}");
    }
}

#[test]
fn gelu_tanh_spelled_out_runs_as_the_built_in_activation() {
    // GPT-2's GELU: the epilogue's GeluTanh (no program), within f32 tolerance of the reference
    // (not bit for bit with the unfused chain, which rounds after each op).
    let mut rng = Rng::new(0x6e1b);
    for (m, k, n, kernel) in
        [(16, 64, 256, "gemm_tc_f32"), (128, 1024, 1024, "gemm_tc_f32"), (2, 64, 96, "gemv_f32")]
    {
        let (g, feeds) = gelu_like(&mut rng, (m, k, n), 0.797_884_6);
        let want = host::reference::eval(&g, &feeds).unwrap();
        let mut s = host::Session::new(ctx(), g, SessionOptions::default()).unwrap();
        let got = s.run(&feeds).unwrap();
        let plan = s.last_plan().unwrap().to_string();
        assert!(plan.contains(&format!("Gemm+GeluTanh {kernel}")), "{plan}");
        let (gv, wv) = (got[0].1.f32s("gpu").unwrap(), want[0].1.data().to_f64s());
        for (i, (&x, &w)) in gv.iter().zip(&wv).enumerate() {
            assert!((x as f64 - w).abs() <= 1e-4 * (w.abs() + 1.0), "[{i}] gpu {x} reference {w}\n{plan}");
        }
    }
}

#[test]
fn a_residual_overwritten_in_place() {
    // r = softmax(e) lives in the arena and dies at the fused GEMM, which writes its output over
    // it; the next softmax keeps the sum in the arena. Tiled, split-K and GEMV.
    let mut rng = Rng::new(0x1a9c);
    for (m, k, n, kernel) in [
        (64, 64, 64, "gemm_program_f32"),
        (128, 1024, 128, "gemm_reduce_program_f32"),
        (4, 128, 64, "gemv_program_f32"),
    ] {
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[m, k]), ("w", &[k, n]), ("e", &[m, n])]);
        let r = g.softmax(v[2], -1);
        let h = g.matmul(v[0], v[1]);
        let sum = g.add(h, r);
        let y = g.softmax(sum, -1);
        g.output(y);
        let plan = check(&format!("in place {m}x{k}x{n}"), g.clone(), feeds, kernel);
        let o = planner::plan::PlanOptions { sm_count: ctx().info().sm_count, ..Default::default() };
        let p = planner::plan::compile(&g, &planner::Binding::new(), &o).unwrap();
        assert_eq!(
            p.memory.in_place.len(),
            1,
            "the fused GEMM writes over r: {:?}\n{plan}",
            p.memory.in_place
        );
    }
}

#[test]
fn a_bias_row_as_c_then_gelu_as_the_activation_on_every_gemm_path() {
    // dynamo's nn.Linear + GELU over 3-D inputs: MatMul, Add(bias [n]), Gelu. The bias becomes
    // the GEMM's C and the GELU its activation (no program), on the small-m tensor-core kernel
    // (2 x 37 rows), the tile kernel split over k (1030 x 1004 x 260: four chunks, the
    // reduction applying C and the activation) and the CUDA-core kernel; each against the unfused
    // plan and the reference.
    let mut rng = Rng::new(0xb1a6);
    for (rows, k, n) in [(37, 48, 80), (515, 1004, 260)] {
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[2, rows, k]), ("w", &[k, n]), ("bias", &[n])]);
        let h = g.matmul(v[0], v[1]);
        let a = g.add(v[2], h);
        let y = g.op1(Op::Gelu(planner::op::Gelu::default()), &[a]);
        g.output(y);
        let what = format!("matmul {rows}x{k}x{n} + bias + gelu");
        let unfused = SessionOptions { fuse_gemm_programs: false, ..SessionOptions::default() };
        let plan = crate::programs::fused_matches_unfused(&what, g.clone(), &feeds, unfused, 1e-4);
        assert!(plan.contains("MatMul+Bias+GeluErf") && !plan.contains("program"), "{what}:\n{plan}");
        if rows == 515 {
            assert!(plan.contains("gemm_tc64_n_f32") && plan.contains("gemm_reduce_f32"), "{what}:\n{plan}");
        }
        let cores = SessionOptions { tensor_core_gemm: false, ..SessionOptions::default() };
        let unfused = SessionOptions { fuse_gemm_programs: false, ..cores };
        crate::programs::fused_matches_unfused_with(&what, g, &feeds, cores, unfused, 1e-4);
    }
}
