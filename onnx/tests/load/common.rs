//! Shared fixtures: a self-cleaning temporary folder and a small model touching every builder
//! feature.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use onnx::builder::tensor_f32;
use onnx::proto::ModelProto;
use onnx::{DataType, Dim, ExternalDataReason, ModelBuilder, NodeBuilder, OnnxError, TensorIssue};

/// A fresh folder under `std::env::temp_dir()`, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("ferrofuse-onnx-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` to `name` (relative, parents created) and returns the full path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.path.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, bytes).expect("write temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// y = relu(x @ w + b) * c, with a symbolic batch dim, a Constant and every attribute kind.
pub fn sample_model() -> ModelProto {
    ModelBuilder::new(17)
        .opset_import("ai.ferrofuse", 1)
        .graph_name("mlp")
        .input("x", DataType::Float, &[Dim::from("batch"), Dim::from(4)])
        .initializer_f32("w", &[4, 3], &[0.25; 12])
        .initializer_f32("b", &[3], &[1.0, 2.0, 3.0])
        .initializer_i64("shape", &[2], &[-1, 3])
        .node_with(
            NodeBuilder::new("Constant", &[], &["c"]).attr_tensor("value", tensor_f32("", &[], &[0.5])),
        )
        .node_with(
            NodeBuilder::new("Gemm", &["x", "w", "b"], &["h"])
                .name("gemm0")
                .attr_float("alpha", 1.0)
                .attr_int("transB", 0)
                .attr_floats("unused_floats", &[1.5, 2.5])
                .attr_ints("unused_ints", &[1, 2, 3])
                .attr_string("unused_string", "hello"),
        )
        .node("Relu", &["h"], &["r"])
        .node("Mul", &["r", "c"], &["m"])
        .node("Reshape", &["m", "shape"], &["y"])
        .value_info("h", DataType::Float, &[Dim::from("batch"), Dim::from(3)])
        .output("y", DataType::Float, &[Dim::from("batch"), Dim::from(3)])
        .build()
}

/// Asserts `err` is an external-data error for `tensor` and returns its reason.
pub fn external_reason(err: OnnxError, tensor: &str) -> ExternalDataReason {
    match err {
        OnnxError::ExternalData { tensor: t, reason } if t == tensor => reason,
        other => panic!("expected an external-data error for '{tensor}', got {other:?}"),
    }
}

/// Asserts `err` is an invalid-tensor error for `tensor` and returns the issue.
pub fn tensor_issue(err: OnnxError, tensor: &str) -> TensorIssue {
    match err {
        OnnxError::InvalidTensor { tensor: t, issue } if t == tensor => issue,
        other => panic!("expected an invalid-tensor error for '{tensor}', got {other:?}"),
    }
}
