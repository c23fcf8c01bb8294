//! The bundled demo model: a small physics-style MLP (jet-tagging shape: 64 input features, four
//! hidden layers of 256 with ReLU, one sigmoid score), written with the ONNX builder.
//!
//! `models/demo/physics_mlp.onnx` is this function's output, checked in and embedded in the binary
//! (`ferrofuse run` with no model runs it); `tests/demo_model.rs` checks that the two agree, so the
//! file cannot drift from its source. Weights are deterministic (He-scaled uniform from a fixed seed).

use onnx::builder::{Dim, ModelBuilder, NodeBuilder};
use onnx::proto::tensor_proto::DataType;

/// Input features per event.
pub const FEATURES: usize = 64;
/// Width of each hidden layer.
pub const HIDDEN: usize = 256;
/// Hidden layers.
pub const LAYERS: usize = 4;
/// Name of the model's input (`[batch, 64]` f32).
pub const INPUT: &str = "features";
/// Name of the model's output (`[batch, 1]` f32, in (0, 1)).
pub const OUTPUT: &str = "score";

/// The embedded demo model file.
pub const PHYSICS_MLP_ONNX: &[u8] = include_bytes!("../models/demo/physics_mlp.onnx");

/// SplitMix64 stream mapped to uniform f32 in [-1, 1).
fn uniform(seed: &mut u64) -> f32 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// Builds the demo model (opset 17, `Gemm` + `Relu` layers, `Sigmoid` head).
pub fn physics_mlp() -> Vec<u8> {
    let mut seed = 0x00f3_110f_u64;
    let mut b = ModelBuilder::new(17)
        .graph_name("physics_mlp")
        .input(INPUT, DataType::Float, &[Dim::from("batch"), Dim::from(FEATURES as i64)])
        .output(OUTPUT, DataType::Float, &[Dim::from("batch"), Dim::from(1)]);
    let mut x = INPUT.to_owned();
    let widths = [FEATURES].into_iter().chain([HIDDEN; LAYERS]).chain([1]).collect::<Vec<_>>();
    for (layer, pair) in widths.windows(2).enumerate() {
        let (fan_in, fan_out) = (pair[0], pair[1]);
        let scale = (6.0 / fan_in as f32).sqrt();
        let w: Vec<f32> = (0..fan_in * fan_out).map(|_| uniform(&mut seed) * scale).collect();
        let bias: Vec<f32> = (0..fan_out).map(|_| uniform(&mut seed) * 0.1).collect();
        let (wn, bn, yn) = (format!("w{layer}"), format!("b{layer}"), format!("h{layer}"));
        b = b
            .initializer_f32(&wn, &[fan_in as i64, fan_out as i64], &w)
            .initializer_f32(&bn, &[fan_out as i64], &bias)
            .node_with(NodeBuilder::new("Gemm", &[&x, &wn, &bn], &[&yn]).name(&format!("dense{layer}")));
        let last = layer == widths.len() - 2;
        let act = if last { OUTPUT.to_owned() } else { format!("a{layer}") };
        let op = if last { "Sigmoid" } else { "Relu" };
        b = b.node_with(NodeBuilder::new(op, &[&yn], &[&act]).name(&format!("{}{layer}", op.to_lowercase())));
        x = act;
    }
    b.to_bytes()
}

/// A deterministic `[batch, 64]` input for the demo.
pub fn sample_input(batch: usize) -> Vec<f32> {
    let mut seed = 0x5eed_u64;
    (0..batch * FEATURES).map(|_| uniform(&mut seed) * 2.0).collect()
}
