//! The session's precision on the tensor-core GEMMs: `tf32` within TF32 error of the reference
//! (‖gpu − ref‖ / ‖ref‖ ≤ 1e-3) and measurably coarser than `exact` (so the mode reached the
//! kernels), `exact` within f32 GEMM error, on every tensor-core GEMM kernel family.

use host::selftest::Rng;
use host::{HostTensor, Precision, Session, SessionOptions};
use planner::Graph;

use crate::ctx;
use crate::gemm::weight_gemm;
use crate::gemm_programs::inputs;

/// Runs `g` in `precision`; checks that the plan records it and names `kernel`, and returns the
/// relative Frobenius error against the CPU reference.
fn relative_error(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    precision: Precision,
    kernel: &str,
) -> f64 {
    let want = host::reference::eval(g, feeds).unwrap();
    let options = SessionOptions { precision, ..SessionOptions::default() };
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
    let mut cases: Vec<(String, Graph, Vec<(String, HostTensor)>, &str)> = Vec::new();
    // The large-tile kernels (both tiles, B n- and k-contiguous) and the small-m packed kernel.
    for ((m, k, n), kernel) in [
        ((2050, 300, 1036), "gemm_tc128_n_f32"),
        ((1030, 300, 1028), "gemm_tc64_n_f32"),
        ((100, 300, 256), "gemm_tc_packed_f32"),
    ] {
        let (g, feeds) = weight_gemm(&mut rng, (m, k, n), 0);
        cases.push((format!("matmul {m}x{k}x{n}"), g, feeds, kernel));
    }
    let (g, feeds) = weight_gemm(&mut rng, (1030, 300, 1028), 2);
    cases.push(("gemm transB 1030x300x1028".into(), g, feeds, "gemm_tc64_k_f32"));
    // Both operands inputs: the small-m kernel that splits B itself.
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[100, 300]), ("b", &[300, 256])]);
    let y = g.matmul(v[0], v[1]);
    g.output(y);
    cases.push(("matmul of two inputs 100x300x256".into(), g, feeds, "gemm_tc_f32"));
    for (what, g, feeds, kernel) in &cases {
        let exact = relative_error(what, g, feeds, Precision::Exact, kernel);
        let tf32 = relative_error(what, g, feeds, Precision::Tf32, kernel);
        assert!(exact <= 2e-6, "{what}: exact relative error {exact:e}");
        assert!(tf32 <= 1e-3, "{what}: tf32 relative error {tf32:e}");
        // TF32 keeps 10 of f32's 23 mantissa bits: about 3e-4 here, far above exact's 1e-7.
        assert!(tf32 >= 1e-5 && tf32 > 20.0 * exact, "{what}: tf32 error {tf32:e} vs exact {exact:e}");
    }
}
