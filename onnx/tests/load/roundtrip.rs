//! Builder -> bytes -> loader round trips.

use onnx::proto::attribute_proto::AttributeType;
use onnx::proto::tensor_shape_proto::dimension::Value as DimValue;
use onnx::proto::type_proto::Value as TypeValue;
use onnx::{DataType, Model, ModelBuilder, load_bytes, load_path};

use crate::common::{TempDir, f32_bytes, sample_model};

#[test]
fn bytes_round_trip_preserves_the_model() {
    let built = sample_model();
    let model = load_bytes(&prost::Message::encode_to_vec(&built), None).expect("load");
    assert_eq!(model.proto(), &built);
    assert_eq!(Model::from_proto(built.clone()).expect("from_proto").proto(), &built);
    assert_eq!(load_bytes(&model.to_bytes(), None).expect("reload"), model);
}

#[test]
fn model_helpers_report_opsets_and_initializers() {
    let model = Model::from_proto(sample_model()).expect("valid");
    assert_eq!(model.ir_version(), 8);
    assert_eq!(model.opset_version(""), Some(17));
    assert_eq!(model.opset_version("ai.onnx"), Some(17));
    assert_eq!(model.opset_version("ai.ferrofuse"), Some(1));
    assert_eq!(model.opset_version("com.microsoft"), None);
    assert_eq!(model.graph().name, "mlp");
    let b = model.initializer("b").expect("b exists");
    assert_eq!(b.raw_data, f32_bytes(&[1.0, 2.0, 3.0]));
    assert_eq!(b.data_type, DataType::Float as i32);
    assert!(model.initializer("nope").is_none());
}

#[test]
fn builder_writes_symbolic_dims_and_typed_attributes() {
    let model = Model::from_proto(sample_model()).expect("valid");
    let graph = model.graph();
    let Some(TypeValue::TensorType(x)) = graph.input[0].r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        panic!("input x is not a tensor: {:?}", graph.input[0]);
    };
    assert_eq!(x.elem_type, DataType::Float as i32);
    let dims: Vec<_> = x.shape.as_ref().expect("shape").dim.iter().map(|d| d.value.clone()).collect();
    assert_eq!(dims, [Some(DimValue::DimParam("batch".into())), Some(DimValue::DimValue(4))]);

    let gemm = graph.node.iter().find(|n| n.op_type == "Gemm").expect("gemm");
    assert_eq!(gemm.name, "gemm0");
    assert_eq!(gemm.input, ["x", "w", "b"]);
    let kinds: Vec<_> = gemm.attribute.iter().map(|a| (a.name.as_str(), a.r#type)).collect();
    assert_eq!(
        kinds,
        [
            ("alpha", AttributeType::Float as i32),
            ("transB", AttributeType::Int as i32),
            ("unused_floats", AttributeType::Floats as i32),
            ("unused_ints", AttributeType::Ints as i32),
            ("unused_string", AttributeType::String as i32),
        ]
    );
    assert_eq!(gemm.attribute[4].s, b"hello");
    let constant = graph.node.iter().find(|n| n.op_type == "Constant").expect("constant");
    assert_eq!(constant.name, "c", "a node is named after its first output by default");
    assert_eq!(constant.attribute[0].r#type, AttributeType::Tensor as i32);
    assert_eq!(constant.attribute[0].t.as_ref().map(|t| t.raw_data.clone()), Some(f32_bytes(&[0.5])));
}

#[test]
fn file_round_trip() {
    let dir = TempDir::new("roundtrip");
    let bytes =
        ModelBuilder::new(21).input("x", DataType::Float, &[]).node("Relu", &["x"], &["y"]).to_bytes();
    let path = dir.write("model.onnx", &bytes);
    let model = load_path(&path).expect("load");
    assert_eq!(model.to_bytes(), bytes);
    assert_eq!(model.ir_version(), 10);
}

#[test]
fn ir_version_follows_the_opset_table() {
    use onnx::builder::ir_version_for_opset;
    assert_eq!(ir_version_for_opset(7), 3);
    assert_eq!(ir_version_for_opset(13), 7);
    assert_eq!(ir_version_for_opset(17), 8);
    assert_eq!(ir_version_for_opset(21), 10);
    assert_eq!(ModelBuilder::new(13).ir_version(9).build().ir_version, 9);
}
