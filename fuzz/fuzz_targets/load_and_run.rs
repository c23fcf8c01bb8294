//! Fuzzes the CPU reference on arbitrary bytes: loading and conversion as `load_and_infer` does,
//! then every graph input fed zeros of its declared dtype and shape (symbolic dims 2; inputs of
//! more than 4096 elements or undeclared ones skip the case) and the graph run by
//! `host::reference::eval_with` under a 64 MiB memory budget, 2^20 elements per tensor and 1000
//! Loop iterations. Each stage may reject its input with an error; none may panic, hang or
//! allocate past the budget.
#![no_main]

use host::reference::{Limits, eval_with};
use host::HostTensor;
use libfuzzer_sys::fuzz_target;
use planner::{DType, Dim};

/// Zeros of `dtype` and `shape` (every dtype: through a constant of zero codes).
fn zeros(dtype: DType, shape: Vec<usize>) -> Option<HostTensor> {
    let n: usize = shape.iter().product();
    let c = planner::ConstTensor::from_i64s_as(dtype, &shape, &vec![0; n]).ok()?;
    HostTensor::from_const(&c).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(model) = onnx::load_bytes(data, None) else { return };
    let Ok(graph) = onnx::to_graph(&model) else { return };
    let mut inputs = Vec::new();
    for &v in &graph.inputs {
        let Some(value) = graph.values.get(v.index()) else { return };
        let Some(info) = &value.info else { return };
        let shape: Vec<usize> =
            info.shape.dims().iter().map(|d| if let Dim::Known(n) = d { *n } else { 2 }).collect();
        if shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none_or(|n| n > 4096) {
            return;
        }
        let Some(t) = zeros(info.dtype, shape) else { return };
        inputs.push((value.name.clone(), t));
    }
    let limits = Limits { max_tensor_elems: 1 << 20, max_total_bytes: 64 << 20, max_loop_iterations: 1000 };
    let _ = eval_with(&graph, &inputs, limits);
});
