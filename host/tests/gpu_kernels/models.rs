//! End-to-end models on the GPU against the CPU reference (and, through the fixtures, PyTorch): the
//! GPT-2-style and BERT-style transformers and the small CNN exported from PyTorch
//! (`tests/fixtures/pytorch`) and the bundled physics MLP (`models/demo`), within 1e-4 relative
//! error (‖gpu − ref‖ / ‖ref‖, and no element off by more than 1e-4 · max |ref|). The files are
//! embedded at build time, so the packed suite carries them. A warm run allocates nothing and a
//! replayed CUDA graph gives the same bits as the eager run, and so do runs without programmatic
//! dependent launch.

use host::{HostTensor, Session, SessionOptions};

use crate::ctx;

macro_rules! fixture {
    ($file:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/pytorch/", $file)).as_slice()
    };
}

fn npy(bytes: &[u8]) -> HostTensor {
    host::npy::read(bytes).expect("fixture .npy decodes")
}

/// Relative and worst-element error of `got` against `want`.
fn errors(got: &HostTensor, want: &HostTensor) -> (f64, f64, f64) {
    let (g, w) = (got.data().to_f64s(), want.data().to_f64s());
    let diff = g.iter().zip(&w).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    let norm = w.iter().map(|b| b * b).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
    let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let scale = w.iter().fold(0.0f64, |m, b| m.max(b.abs()));
    (diff / norm, worst, scale)
}

/// Checks the model; returns the plan's text.
fn check_model(name: &str, onnx_bytes: &[u8], feeds: Vec<(String, HostTensor)>) -> String {
    let model = onnx::load_bytes(onnx_bytes, None).expect("model loads");
    let graph = onnx::to_graph(&model).expect("model converts");
    let want = host::reference::eval(&graph, &feeds).expect("reference runs");
    let mut s = Session::new(ctx(), graph, SessionOptions::default()).expect("session");
    let eager = s.run(&feeds).unwrap_or_else(|e| panic!("{name}: {e}"));
    let allocations = s.allocation_count();
    let replay = s.run(&feeds).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(s.allocation_count(), allocations, "{name}: a warm run allocated device memory");
    assert_eq!(eager.len(), want.len(), "{name}");
    for (((name_g, g), (_, r)), (name_w, w)) in eager.iter().zip(&replay).zip(&want) {
        assert_eq!((name_g, g.shape()), (name_w, w.shape()), "{name}");
        assert!(g.data() == r.data(), "{name}: `{name_g}` replay differs from the eager run");
        let (rel, worst, scale) = errors(g, w);
        println!(
            "{name} `{name_g}`: relative error {rel:.2e}, worst element {worst:.2e} (max |ref| {scale:.2e})"
        );
        assert!(rel <= 1e-4, "{name} `{name_g}`: relative error {rel:e} > 1e-4");
        assert!(worst <= 1e-4 * scale.max(1e-30), "{name} `{name_g}`: element error {worst:e}");
    }
    // Programmatic dependent launch (on by default) changes when blocks start, never the bits.
    let serial = SessionOptions { programmatic_launch: false, ..SessionOptions::default() };
    let graph = onnx::to_graph(&onnx::load_bytes(onnx_bytes, None).expect("model loads")).expect("converts");
    let mut plain = Session::new(ctx(), graph, serial).expect("session");
    for run in 0..2 {
        let got = plain.run(&feeds).unwrap_or_else(|e| panic!("{name}: {e}"));
        for ((output, g), (_, e)) in got.iter().zip(&eager) {
            assert!(g.data() == e.data(), "{name}: `{output}` differs without PDL (run {run})");
        }
    }
    println!("{name}: {} steps\n{}", s.last_plan().unwrap().steps.len(), s.last_plan().unwrap());
    s.last_plan().unwrap().to_string()
}

#[test]
fn gpt2_style_runs_on_the_gpu() {
    let feeds = vec![("input_ids".to_string(), npy(fixture!("gpt2.in.input_ids.npy")))];
    let plan = check_model("gpt2", fixture!("gpt2.onnx"), feeds);
    assert_eq!(plan.matches("attention_f32").count(), 2, "each attention is one fused launch:\n{plan}");
}

#[test]
fn bert_style_runs_on_the_gpu() {
    let feeds = vec![
        ("input_ids".to_string(), npy(fixture!("bert.in.input_ids.npy"))),
        ("attention_mask".to_string(), npy(fixture!("bert.in.attention_mask.npy"))),
        ("token_type_ids".to_string(), npy(fixture!("bert.in.token_type_ids.npy"))),
    ];
    let plan = check_model("bert", fixture!("bert.onnx"), feeds);
    assert_eq!(plan.matches("attention_f32").count(), 2, "each attention is one fused launch:\n{plan}");
}

#[test]
fn small_cnn_runs_on_the_gpu() {
    let feeds = vec![("x".to_string(), npy(fixture!("cnn.in.x.npy")))];
    check_model("cnn", fixture!("cnn.onnx"), feeds);
}

#[test]
fn physics_mlp_runs_on_the_gpu_at_several_batches() {
    let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/demo/physics_mlp.onnx"));
    let model = onnx::load_bytes(bytes, None).expect("demo loads");
    let graph = onnx::to_graph(&model).expect("demo converts");
    let input = graph.values[graph.inputs[0].index()].name.clone();
    let mut rng = host::selftest::Rng::new(0x9475);
    for batch in [1, 7, 64, 300] {
        let feeds = vec![(input.clone(), rng.tensor(&[batch, 64], -2.0, 2.0))];
        check_model(&format!("physics mlp batch {batch}"), bytes, feeds);
    }
}
