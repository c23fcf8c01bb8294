//! Bad input, end to end: every class of broken model or run-time input gets a clear error naming
//! the node or input at fault, through the public APIs (`onnx::load_bytes` → `onnx::to_graph` →
//! `planner::shape_infer::infer` → `host::reference::eval`) and through the `ferrofuse` binary.
//! Nothing here may panic, and absurd sizes must fail fast, before anything is allocated.

#[path = "../support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use host::HostTensor;
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};

mod cli;
mod files;
mod fuzz_seeds;
mod limits;
mod runtime;
mod suite;

/// A fresh scratch folder for one test.
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrofuse-bad-input-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch folder");
    dir
}

/// Runs the binary; returns (exit code, stdout, stderr) after checking it did not panic.
pub(crate) fn cli(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(support::ferrofuse_bin()).args(args).output().expect("running ferrofuse");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "ferrofuse {args:?} panicked:\n{stderr}");
    (out.status.code(), stdout, stderr)
}

/// Runs the binary on arguments that must fail; returns stderr.
pub(crate) fn cli_fails(args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(args);
    assert_eq!(code, Some(1), "ferrofuse {args:?} should fail\nstdout: {stdout}\nstderr: {stderr}");
    eprintln!("ferrofuse {args:?}: {stderr}");
    stderr
}

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str().expect("scratch paths are UTF-8")
}

/// `x: f32[2, 3]` → MatMul with `w: f32[3, 4]` (node `mm`) → Relu (node `act`) → `y: f32[2, 4]`.
pub(crate) fn small_model() -> ModelBuilder {
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .initializer_f32("w", &[3, 4], &w)
        .node_with(NodeBuilder::new("MatMul", &["x", "w"], &["xw"]).name("mm"))
        .node_with(NodeBuilder::new("Relu", &["xw"], &["y"]).name("act"))
        .output("y", DataType::Float, &[Dim::from(2), Dim::from(4)])
}

/// Serialises a model; outputs declared with `&[]` get no shape at all (so shape inference decides).
trait Encode {
    fn bytes(self) -> Vec<u8>;
}

impl Encode for ModelBuilder {
    fn bytes(self) -> Vec<u8> {
        use onnx::proto::type_proto::Value;
        use prost::Message;
        let mut proto = self.build();
        for out in proto.graph.iter_mut().flat_map(|g| g.output.iter_mut()) {
            if let Some(Value::TensorType(t)) = out.r#type.as_mut().and_then(|t| t.value.as_mut())
                && t.shape.as_ref().is_some_and(|s| s.dim.is_empty())
            {
                t.shape = None;
            }
        }
        proto.encode_to_vec()
    }
}

/// Load, convert and infer shapes; the first error, as text.
pub(crate) fn front_end(bytes: &[u8]) -> Result<planner::Graph, String> {
    let model = onnx::load_bytes(bytes, None).map_err(|e| e.to_string())?;
    let graph = onnx::to_graph(&model).map_err(|e| e.to_string())?;
    planner::shape_infer::infer(&graph).map_err(|e| e.to_string())?;
    Ok(graph)
}

pub(crate) fn front_end_err(bytes: &[u8]) -> String {
    match front_end(bytes) {
        Ok(_) => panic!("the model should be rejected"),
        Err(e) => {
            eprintln!("rejected: {e}");
            e
        }
    }
}

/// A deterministic byte stream (xorshift).
pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

pub(crate) fn x_input() -> (String, HostTensor) {
    ("x".into(), HostTensor::new(vec![2, 3], vec![0.5f32; 6]).expect("2x3"))
}
