//! Models on the GPU: the PyTorch-exported CNN fixture (`tests/fixtures/pytorch/cnn.onnx`: Conv +
//! Relu, MaxPool, Conv + Relu, ReduceMean, Gemm) runs through `host::Session` and matches the CPU
//! reference and PyTorch's own output within 1e-4 relative error (‖gpu − want‖ / ‖want‖), with no
//! element off by more than 1e-4 · max |want|; so do the two small Mamba2 exports (transformers'
//! chunked SSD lifted to `SSDScan`, symbolic batch and sequence) with the lift on and off, and a
//! small RecurrentGemma and Llama-style decoder with their rotary embeddings lifted and not. Built
//! only with the `gpu` feature; fails (never skips) without a GPU.

mod support;

use std::path::{Path, PathBuf};

use host::{Context, HostTensor, Session, SessionOptions};

fn fixtures() -> PathBuf {
    support::repo_dir().join("tests/fixtures/pytorch")
}

fn npy(path: &Path) -> HostTensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    host::npy::read(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_close(what: &str, got: &HostTensor, want: &HostTensor) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.data().to_f64s(), want.data().to_f64s());
    let diff = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    let norm = w.iter().map(|b| b * b).sum::<f64>().sqrt();
    let scale = w.iter().fold(0.0f64, |m, b| m.max(b.abs()));
    let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    println!("{what}: relative error {:.2e}, worst element {worst:.2e}", diff / norm);
    assert!(diff <= 1e-4 * norm, "{what}: relative error {:e} > 1e-4", diff / norm);
    assert!(worst <= 1e-4 * scale, "{what}: element error {worst:e} > 1e-4 * {scale:e}");
}

#[test]
fn small_cnn_on_the_gpu_matches_the_reference_and_pytorch() {
    let ctx = Context::new(0).unwrap_or_else(|e| panic!("this test needs an NVIDIA GPU: {e}"));
    let dir = fixtures();
    let model = onnx::load_path(&dir.join("cnn.onnx")).expect("model loads");
    let graph = onnx::to_graph(&model).expect("model converts");
    let feeds = vec![("x".to_owned(), npy(&dir.join("cnn.in.x.npy")))];
    let want = host::reference::eval(&graph, &feeds).expect("reference runs");
    let mut session = Session::new(&ctx, graph, SessionOptions::default()).expect("session");
    // Twice: the eager first run and the CUDA-graph replay.
    for run in 0..2 {
        let got = session.run(&feeds).expect("gpu run");
        assert_eq!(got.len(), 1);
        assert_close(&format!("run {run} vs reference"), &got[0].1, &want[0].1);
        assert_close(&format!("run {run} vs pytorch"), &got[0].1, &npy(&dir.join("cnn.out.0.npy")));
    }
    let plan = session.last_plan().expect("compiled").to_string();
    let conv = if ctx.flavour() == host::PtxFlavour::Hopper { "conv_wg" } else { "conv_gemm_f32" };
    assert!(plan.contains(conv) && plan.contains("pool_f32"), "{plan}");
}

/// Token-id fixture `name` on the GPU with a lift on and off (`options(on)`): two runs each
/// match the reference and PyTorch, and the plan launches `kernel` exactly when the lift is on.
fn lifted_or_not(ctx: &Context, name: &str, switch: &str, options: fn(bool) -> SessionOptions, kernel: &str) {
    let dir = fixtures();
    let model = onnx::load_path(&dir.join(format!("{name}.onnx"))).expect("model loads");
    let graph = onnx::to_graph(&model).expect("model converts");
    let feeds = vec![("input_ids".to_owned(), npy(&dir.join(format!("{name}.in.input_ids.npy"))))];
    let want = host::reference::eval(&graph, &feeds).expect("reference runs");
    let torch = npy(&dir.join(format!("{name}.out.0.npy")));
    for on in [true, false] {
        let mut session = Session::new(ctx, graph.clone(), options(on)).expect("session");
        for run in 0..2 {
            let got = session.run(&feeds).expect("gpu run");
            let what = format!("{name}, {switch} {on}, run {run}");
            assert_close(&format!("{what} vs reference"), &got[0].1, &want[0].1);
            assert_close(&format!("{what} vs pytorch"), &got[0].1, &torch);
        }
        let plan = session.last_plan().expect("compiled").to_string();
        assert_eq!(plan.contains(kernel), on, "{name}, {switch} {on}:\n{plan}");
    }
}

/// transformers' Mamba2 (`mamba2`: two layers, 64 steps in 4 chunks; `mamba2_pad`: two groups of
/// B / C, 40 steps padded to 48) on the GPU, its chunked SSD lifted to `ssd_chunk_f32` (64 and 40
/// steps: the chunked kernel) and (with `lift_ssd` off) as the chunked contractions: both match
/// the reference and PyTorch.
#[test]
fn mamba2_on_the_gpu_matches_the_reference_and_pytorch_lifted_or_not() {
    let ctx = Context::new(0).unwrap_or_else(|e| panic!("this test needs an NVIDIA GPU: {e}"));
    for name in ["mamba2", "mamba2_pad"] {
        let options = |on| SessionOptions { lift_ssd: on, ..SessionOptions::default() };
        lifted_or_not(&ctx, name, "lift_ssd", options, "ssd_chunk_f32");
    }
}

/// A small RecurrentGemma (its RG-LRU loop unrolled, a partial rotary embedding spelled out) and
/// a small Llama-style decoder (rotary over whole heads, grouped-query attention) on the GPU, the
/// rotations lifted to `rotary_f32` and (with `lift_rotary` off) spelled out: both match the
/// reference and PyTorch.
#[test]
fn recurrentgemma_and_llama_on_the_gpu_match_the_reference_and_pytorch_lifted_or_not() {
    let ctx = Context::new(0).unwrap_or_else(|e| panic!("this test needs an NVIDIA GPU: {e}"));
    for name in ["recurrentgemma", "llama"] {
        let options = |on| SessionOptions { lift_rotary: on, ..SessionOptions::default() };
        lifted_or_not(&ctx, name, "lift_rotary", options, "rotary_f32");
    }
}
