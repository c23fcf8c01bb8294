//! `inspect`: interface, opsets, histogram and parameters, also for models that do not convert.

use onnx::{DataType, Dim, Model, ModelBuilder, NodeBuilder, inspect};
use planner::{DType, Dim as PDim, Shape};

fn model() -> Model {
    let proto = ModelBuilder::new(17)
        .opset_import("ai.ferrofuse", 1)
        .input("x", DataType::Float, &[Dim::from("batch"), Dim::from(4)])
        .input("w", DataType::Float, &[Dim::from(4), Dim::from(3)])
        .initializer_f32("w", &[4, 3], &[0.5; 12])
        .initializer_i64("shape", &[2], &[-1, 3])
        .node("MatMul", &["x", "w"], &["h"])
        .node("Relu", &["h"], &["r"])
        .node("Relu", &["r"], &["r2"])
        .node_with(NodeBuilder::new("Frobnicate", &["r2"], &["f"]).domain("ai.ferrofuse"))
        .node("Reshape", &["f", "shape"], &["y"])
        .output("y", DataType::Float, &[Dim::from("batch"), Dim::from(3)])
        .build();
    Model::from_proto(proto).expect("loads")
}

#[test]
fn summary_of_a_model_that_does_not_convert() {
    let m = model();
    assert!(onnx::to_graph(&m).is_err());
    let s = inspect(&m);
    assert_eq!(s.inputs.len(), 1, "initializers listed as inputs are not inputs");
    assert_eq!(s.inputs[0].name, "x");
    assert_eq!(s.inputs[0].dtype, Some(DType::F32));
    assert_eq!(s.inputs[0].elem_type, "FLOAT");
    assert_eq!(s.inputs[0].shape, Some(Shape(vec![PDim::from("batch"), PDim::Known(4)])));
    assert_eq!(s.outputs[0].shape, Some(Shape(vec![PDim::from("batch"), PDim::Known(3)])));
    assert_eq!(s.parameter_count, 14);
    assert_eq!(s.parameter_bytes, 12 * 4 + 2 * 8);
    assert_eq!(s.node_count, 5);
    assert_eq!(s.op_histogram.get("Relu"), Some(&2));
    assert_eq!(s.op_histogram.get("ai.ferrofuse::Frobnicate"), Some(&1));
    assert_eq!(s.unsupported.len(), 1);
    assert_eq!(
        (s.unsupported[0].op_type.as_str(), s.unsupported[0].domain.as_str()),
        ("Frobnicate", "ai.ferrofuse")
    );
    assert!(s.opsets.iter().all(|o| o.supported));
    assert_eq!(s.ir_version, 8);
    let text = s.to_string();
    for part in ["x: FLOAT [batch,4]", "parameters: 14", "Relu 2", "unsupported (1)", "ai.onnx 17"] {
        assert!(text.contains(part), "{part} missing from:\n{text}");
    }
}

#[test]
fn unsupported_opsets_are_flagged() {
    let proto = ModelBuilder::new(40).input("x", DataType::Float, &[]).node("Relu", &["x"], &["y"]).build();
    let s = inspect(&Model::from_proto(proto).expect("loads"));
    assert_eq!(s.opsets.len(), 1);
    assert!(!s.opsets[0].supported);
    assert!(s.to_string().contains("ai.onnx 40 (unsupported)"));
}

#[test]
fn supported_ops_lists_every_family() {
    let ops = onnx::convert::supported_ops();
    for want in [
        ("", "Conv"),
        ("", "Loop"),
        ("*", "MambaScan"),
        ("ai.ferrofuse", "SSDScan"),
        ("", "RMSNormalization"),
    ] {
        assert!(ops.contains(&want), "{want:?}");
    }
    assert!(ops.len() >= 140, "{}", ops.len());
}
