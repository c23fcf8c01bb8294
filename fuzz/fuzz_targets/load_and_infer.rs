//! Fuzzes the front half of the pipeline on arbitrary bytes: protobuf decoding and model checks
//! (`onnx::load_bytes`), conversion to the IR (`onnx::to_graph`), shape inference
//! (`planner::shape_infer::infer`) and constant folding (`planner::fold::run`). Each stage may
//! reject its input with an error; none may panic, hang or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = onnx::load_bytes(data, None) else { return };
    let _ = onnx::inspect(&model);
    let Ok(graph) = onnx::to_graph(&model) else { return };
    if planner::shape_infer::infer(&graph).is_ok() {
        let _ = planner::fold::run(&graph);
    }
});
