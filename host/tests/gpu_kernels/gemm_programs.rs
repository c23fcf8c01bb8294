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
fn inputs(
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

/// Runs `g` with and without the GEMM-epilogue fusion on the GPU and on the reference; returns
/// the fused plan's text, which must name `kernel`.
fn check(what: &str, g: Graph, feeds: Vec<(String, HostTensor)>, kernel: &str) -> String {
    let unfused = SessionOptions { fuse_gemm_programs: false, ..SessionOptions::default() };
    let plan = crate::programs::fused_matches_unfused(what, g, &feeds, unfused, 1e-4);
    assert!(plan.contains(kernel), "{what}: expected {kernel}:\n{plan}");
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
        (1, 256, 1000, "gemv_program_f32"),
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
    let plan = check("bias + residual", g, feeds, "MatMul+Sum[2 ops] gemm_program_f32");
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

#[test]
fn gelu_tanh_chain_after_a_gemm_with_bias() {
    let mut rng = Rng::new(0x6e1a);
    for (m, k, n, kernel) in [
        (16, 64, 256, "gemm_program_f32"),
        (128, 512, 128, "gemm_reduce_program_f32"),
        (2, 64, 96, "gemv_program_f32"),
    ] {
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[m, k]), ("w", &[k, n]), ("b", &[n])]);
        let h = g.push(Op::Gemm(Gemm::default()), &[v[0], v[1], v[2]], 1)[0];
        let mut s = |name: &str, x: f32| g.initializer(name, ConstTensor::scalar_f32(x));
        let (half, three, c, kk, one) =
            (s("half", 0.5), s("three", 3.0), s("c", 0.044715), s("k", 0.797_884_6), s("one", 1.0));
        let t1 = g.mul(h, half);
        let t2 = g.op1(Op::Pow, &[h, three]);
        let t3 = g.mul(t2, c);
        let t4 = g.add(h, t3);
        let t5 = g.mul(t4, kk);
        let t6 = g.op1(Op::Tanh, &[t5]);
        let t7 = g.add(t6, one);
        let y = g.mul(t1, t7);
        g.output(y);
        let plan = check(&format!("gelu {m}x{k}x{n}"), g, feeds, kernel);
        assert!(plan.contains("Gemm+Sum[8 ops]"), "{plan}");
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
