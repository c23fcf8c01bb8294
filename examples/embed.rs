//! Embedding ferrofuse in a Rust program: load an ONNX model, run it on the GPU when there is one
//! (a `Session`: compiled plan, one arena, CUDA-graph replay), else on the CPU reference executor.
//!
//! `cargo run --release --example embed`

use ferrofuse::host::{Context, HostTensor, Session, SessionOptions, reference};

fn main() -> anyhow::Result<()> {
    let model = ferrofuse::onnx::load_bytes(ferrofuse::demo::PHYSICS_MLP_ONNX, None)?;
    let graph = ferrofuse::onnx::to_graph(&model)?;
    let inputs = [("features".to_string(), HostTensor::new(vec![1, 64], vec![0.5f32; 64])?)];
    let outputs = match Context::new(0) {
        Ok(ctx) => Session::new(&ctx, graph, SessionOptions::default())?.run(&inputs)?,
        Err(no_gpu) => {
            eprintln!("{no_gpu}; using the CPU reference executor");
            reference::eval(&graph, &inputs)?
        }
    };
    for (name, t) in &outputs {
        println!("{name}: {:?} {:?}", t.shape(), t.data());
    }
    Ok(())
}
