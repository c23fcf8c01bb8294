//! The session's precision on the large-tile tensor-core GEMMs (the `mma.sync` tiles, and on
//! Hopper their `wgmma` twins): `tf32` (their `_tf32` entries)
//! within TF32 error of the reference (‖gpu − ref‖ / ‖ref‖ ≤ 1e-3) and measurably coarser than
//! `exact` (so the mode reached the kernels), `exact` within f32 GEMM error; the small-m kernels
//! stay exact in both. `f16` and `bf16` (the tiles' `_f16` / `_bf16` entries, on every device)
//! within their rounding's error (≤ 2e-3 and ≤ 1.5e-2), bf16 coarser than f16.

use host::selftest::Rng;
use host::{HostTensor, Precision, Session, SessionOptions};
use planner::Graph;

use crate::ctx;
use crate::gemm::weight_gemm;
use crate::gemm_programs::inputs;

/// Runs `g` in `precision` (`wgmma`: Hopper's `gemm_wg_*` entries where they apply, else the
/// `mma.sync` tiles); checks that the plan records it and names `kernel`, and returns the
/// relative Frobenius error against the CPU reference.
fn relative_error(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    (precision, wgmma): (Precision, bool),
    kernel: &str,
) -> f64 {
    let want = host::reference::eval(g, feeds).unwrap();
    let options = SessionOptions { precision, wgmma_gemm: wgmma, ..SessionOptions::default() };
    let mut s = Session::new(ctx(), g.clone(), options).unwrap();
    let got = s.run(feeds).unwrap();
    let plan = s.last_plan().unwrap();
    assert_eq!(plan.precision, precision, "{what}");
    let text = plan.to_string();
    let paired = kernel.replace("_f32", "_pair_f32");
    assert!(text.contains(kernel) || text.contains(&paired), "{what}: expected {kernel}:\n{text}");
    let (gv, wv) = (got[0].1.f32s("gpu").unwrap(), want[0].1.data().to_f64s());
    assert_eq!(gv.len(), wv.len(), "{what}");
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&x, &w) in gv.iter().zip(&wv) {
        assert!(x.is_finite(), "{what} ({precision}): non-finite output");
        diff += (x as f64 - w).powi(2);
        norm += w * w;
    }
    (diff / norm.max(f64::MIN_POSITIVE)).sqrt()
}

#[test]
fn tf32_rounds_the_tensor_core_products_and_exact_keeps_f32_accuracy() {
    let mut rng = Rng::new(0x7f32);
    // (what, graph, feeds, the kernel's name without its precision suffix).
    type Case = (String, Graph, Vec<(String, HostTensor)>, &'static str);
    let mut cases: Vec<Case> = Vec::new();
    // Both tiles, B n- and k-contiguous (MatMul and Gemm transB with C, alpha and beta).
    for ((m, k, n), op, kernel) in [
        ((2050, 300, 1036), 0, "gemm_tc128_n"),
        ((1030, 300, 1028), 0, "gemm_tc64_n"),
        ((2050, 300, 1036), 2, "gemm_tc128_k"),
        ((1030, 300, 1028), 2, "gemm_tc64_k"),
        // Split over k (85 tiles): the chunks' partials summed by the reduction launch.
        ((1030, 1004, 260), 0, "gemm_tc64_n"),
    ] {
        let (g, feeds) = weight_gemm(&mut rng, (m, k, n), op);
        cases.push((format!("{} {m}x{k}x{n}", ["matmul", "", "gemm transB"][op]), g, feeds, kernel));
    }
    // The same on Hopper's wgmma entries (the weights packed, split or rounded).
    let hopper = ctx().flavour() == host::PtxFlavour::Hopper;
    for (what, g, feeds, kernel) in &cases {
        tf32_against_exact(what, g, feeds, false, kernel);
        if hopper {
            let wg = kernel.replace("gemm_tc", "gemm_wg");
            let wg = wg.trim_end_matches("_n").trim_end_matches("_k");
            tf32_against_exact(&format!("{what} (wgmma)"), g, feeds, true, wg);
        }
    }
    // f16 and bf16 on the tiles (no `wgmma` entries: the tiles even where Hopper's apply).
    for (what, g, feeds, kernel) in &cases {
        let exact = relative_error(what, g, feeds, (Precision::Exact, false), &format!("{kernel}_f32"));
        let f16 = relative_error(what, g, feeds, (Precision::F16, hopper), &format!("{kernel}_f16"));
        let bf16 = relative_error(what, g, feeds, (Precision::Bf16, hopper), &format!("{kernel}_bf16"));
        // Operands rounded to 11 (f16) and 8 (bf16) significant bits: about 3e-4 and 2e-3 here.
        // A fragment whose k order differed between A and B would pair the wrong products:
        // errors of order 1.
        assert!(f16 <= 2e-3 && f16 > 20.0 * exact, "{what}: f16 relative error {f16:e} vs exact {exact:e}");
        assert!(bf16 <= 1.5e-2 && bf16 > 2.0 * f16, "{what}: bf16 relative error {bf16:e} vs f16 {f16:e}");
    }
    // The small-m kernels stay exact in tf32 (their TF32 entries are not built yet).
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[100, 300]), ("b", &[300, 256])]);
    let y = g.matmul(v[0], v[1]);
    g.output(y);
    let tf32 = relative_error("matmul 100x300x256", &g, &feeds, (Precision::Tf32, true), "gemm_tc_f32");
    assert!(tf32 <= 1e-5, "small-m in tf32: relative error {tf32:e}");
}

/// `g` in exact and in tf32 on `kernel`'s `_f32` and `_tf32` entries: exact within f32 GEMM
/// error, tf32 within TF32's and measurably coarser.
fn tf32_against_exact(what: &str, g: &Graph, feeds: &[(String, HostTensor)], wgmma: bool, kernel: &str) {
    let exact = relative_error(what, g, feeds, (Precision::Exact, wgmma), &format!("{kernel}_f32"));
    let tf32 = relative_error(what, g, feeds, (Precision::Tf32, wgmma), &format!("{kernel}_tf32"));
    // 3xTF32 keeps f32 accuracy: the f32 GEMM error of a 300-long dot product.
    assert!(exact <= 1e-5, "{what}: exact relative error {exact:e}");
    assert!(tf32 <= 1e-3, "{what}: tf32 relative error {tf32:e}");
    // TF32 keeps 10 of f32's 23 mantissa bits: about 3e-4 here, far above exact's 2e-6.
    assert!(tf32 >= 1e-5 && tf32 > 20.0 * exact, "{what}: tf32 error {tf32:e} vs exact {exact:e}");
}

/// A quantized model's products multiply integers of at most 255 (`quant::scale_out`), which
/// TF32 holds exactly: on the TF32 `wgmma` entries (`tf32_integer_products`, on Hopper) the QDQ
/// MatMul and Conv (`selftest::qdq_wide_matmul_graph`, `qdq_conv_graph`) give bit for bit what
/// the exact entries give, and match the reference.
#[test]
fn quantized_products_on_the_tf32_entries_equal_the_exact_ones_bit_for_bit() {
    let mut rng = Rng::new(0x1e33);
    let hopper = ctx().flavour() == host::PtxFlavour::Hopper;
    for (what, (g, feeds)) in [
        ("QDQ MatMul", host::selftest::qdq_wide_matmul_graph(&mut rng, 4096)),
        ("QDQ Conv", host::selftest::qdq_conv_graph(&mut rng, 8)),
    ] {
        let want = host::reference::eval(&g, &feeds).unwrap();
        let run = |on: bool| {
            let options = SessionOptions { tf32_integer_products: on, ..SessionOptions::default() };
            let mut s = Session::new(ctx(), g.clone(), options).unwrap();
            let got = s.run(&feeds).unwrap();
            (got[0].1.f32s("gpu").unwrap().to_vec(), s.last_plan().unwrap().to_string())
        };
        let ((tf32, plan), (exact, _)) = (run(true), run(false));
        if hopper {
            assert!(plan.contains("wg64_tf32") || plan.contains("wg32_tf32"), "{what}:\n{plan}");
        }
        let differ = tf32.iter().zip(&exact).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "{what}: {differ} outputs differ between the TF32 and exact entries");
        for (i, (&a, b)) in tf32.iter().zip(want[0].1.data().to_f64s()).enumerate() {
            assert!((a as f64 - b).abs() <= 1e-5 * (1.0 + b.abs()), "{what}[{i}]: gpu {a}, reference {b}");
        }
    }
}
