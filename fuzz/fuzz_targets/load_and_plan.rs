//! Fuzzes the whole planning pipeline on arbitrary bytes: loading and conversion as
//! `load_and_infer` does, then every symbolic input dim bound to 2 and the GPU plan compiled
//! (`planner::plan::compile`: binding, folding, the contraction and decomposition rewrites, the
//! fusion passes, lowering to kernels, memory planning and its verification) with the default
//! options of a 132-SM Hopper device. Each stage may reject its input with an error; none may
//! panic, hang or allocate without bound. Nothing runs on a device.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::{Binding, Dim};

fuzz_target!(|data: &[u8]| {
    let Ok(model) = onnx::load_bytes(data, None) else { return };
    let Ok(graph) = onnx::to_graph(&model) else { return };
    let mut binding = Binding::new();
    for &v in &graph.inputs {
        let Some(info) = graph.values.get(v.index()).and_then(|v| v.info.as_ref()) else { continue };
        for d in info.shape.dims() {
            if let Dim::Symbol(s) = d {
                binding.set(s, 2);
            }
        }
    }
    let _ = planner::plan::compile(&graph, &binding, &planner::plan::PlanOptions::default());
});
