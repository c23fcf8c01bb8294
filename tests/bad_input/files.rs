//! Malformed and inconsistent model files: truncation, garbage, unknown ops, undefined values, cycles, shape mismatches.

use crate::*;
use host::reference::eval;
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};

#[test]
fn truncated_model_files_are_rejected_without_panicking() {
    let bytes = small_model().bytes();
    assert!(front_end(&bytes).is_ok());
    let mut rejected = 0;
    for len in 0..bytes.len() {
        // A prefix may end on a field boundary and still decode; then it must still not panic.
        match front_end(&bytes[..len]) {
            Err(e) => {
                assert!(!e.is_empty());
                rejected += 1;
            }
            Ok(g) => {
                let _ = eval(&g, &[x_input()]);
            }
        }
    }
    assert!(rejected > bytes.len() / 2, "only {rejected} of {} prefixes rejected", bytes.len());
    let dir = scratch("truncated");
    let path = dir.join("half.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("writing");
    let stderr = cli_fails(&["inspect", path_str(&path)]);
    assert!(stderr.contains("half.onnx"), "{stderr}");
}

#[test]
fn garbage_bytes_are_rejected() {
    for seed in 1..64u64 {
        let bytes = noise(seed, 16 + seed as usize * 37);
        assert!(front_end(&bytes).is_err(), "garbage seed {seed} was accepted");
    }
    let dir = scratch("garbage");
    let path = dir.join("garbage.onnx");
    std::fs::write(&path, noise(7, 4096)).expect("writing");
    let stderr = cli_fails(&["inspect", path_str(&path)]);
    assert!(stderr.contains("garbage.onnx") && stderr.contains("decode"), "{stderr}");
    let stderr = cli_fails(&["run", path_str(&path)]);
    assert!(stderr.contains("garbage.onnx"), "{stderr}");
    let stderr = cli_fails(&["inspect", path_str(&dir.join("absent.onnx"))]);
    assert!(stderr.contains("absent.onnx"), "{stderr}");
    // Each cause is printed once, even when the error's own message already quotes it.
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
}

#[test]
fn unknown_ops_are_listed_with_their_nodes() {
    let bytes = small_model()
        .node_with(NodeBuilder::new("FrobnicateTensor", &["y"], &["z"]).name("mystery_node"))
        .output("z", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("FrobnicateTensor") && e.contains("mystery_node"), "{e}");
    let dir = scratch("unknown-op");
    let path = dir.join("m.onnx");
    std::fs::write(&path, &bytes).expect("writing");
    let stderr = cli_fails(&["run", path_str(&path), "--input", "x=unused.npy"]);
    assert!(stderr.contains("FrobnicateTensor"), "{stderr}");
}

#[test]
fn undefined_inputs_and_missing_initializers_name_the_node() {
    // `w` is used but neither an input, an initializer nor a node output.
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .node_with(NodeBuilder::new("MatMul", &["x", "w"], &["y"]).name("mm"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("mm") && e.contains("'w'"), "{e}");
    // An output nobody defines.
    let bytes = small_model().output("ghost", DataType::Float, &[]).bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("ghost"), "{e}");
}

#[test]
fn cycles_are_rejected_naming_a_node() {
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node_with(NodeBuilder::new("Add", &["x", "b"], &["a"]).name("first"))
        .node_with(NodeBuilder::new("Relu", &["a"], &["b"]).name("second"))
        .output("b", DataType::Float, &[Dim::from(2)])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("first") || e.contains("second"), "{e}");
    assert!(e.contains("cycle") || e.contains("not defined") || e.contains("before"), "{e}");
}

#[test]
fn shape_mismatches_name_the_node() {
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .initializer_f32("w", &[4, 5], &[0.0; 20])
        .node_with(NodeBuilder::new("MatMul", &["x", "w"], &["y"]).name("bad_matmul"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("bad_matmul"), "{e}");
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .input("z", DataType::Float, &[Dim::from(4), Dim::from(3)])
        .node_with(NodeBuilder::new("Add", &["x", "z"], &["y"]).name("bad_add"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("bad_add"), "{e}");
}

#[test]
fn data_dependent_ranks_are_explained() {
    // The output rank of ConstantOfShape is the length of its shape input, unknown here.
    let bytes = ModelBuilder::new(17)
        .input("s", DataType::Int64, &[Dim::from("n")])
        .node_with(NodeBuilder::new("ConstantOfShape", &["s"], &["y"]).name("dyn_fill"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("dyn_fill") && e.contains("run-time"), "{e}");
}

#[test]
fn unknown_or_malformed_session_options_are_named() {
    let e = crate::cli_fails(&["run", "--set", "tensor_core_attentoin=false"]);
    assert!(e.contains("tensor_core_attentoin") && e.contains("known: fusion, cuda_graph"), "{e}");
    // inspect takes the same options.
    let e = crate::cli_fails(&["inspect", "--set", "fuse_atention=false", "--plan", "no-such.onnx"]);
    assert!(e.contains("fuse_atention") && e.contains("known: fusion"), "{e}");
    let e = crate::cli_fails(&["run", "--set", "cuda_graph=maybe"]);
    assert!(e.contains("true or false"), "{e}");
    let e = crate::cli_fails(&["run", "--set", "cuda_graph"]);
    assert!(e.contains("NAME=true"), "{e}");
    // Precisions: an unknown one named, the known ones listed.
    let e = crate::cli_fails(&["run", "--precision", "fp4"]);
    assert!(e.contains("`fp4`") && e.contains("exact, tf32, f16, bf16"), "{e}");
    let e = crate::cli_fails(&["inspect", "x.onnx", "--precision", "fp8"]);
    assert!(e.contains("fp8") && e.contains("exact, tf32"), "{e}");
}
