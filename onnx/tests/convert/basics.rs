//! Graph-level conversion: attributes, initializers (also as inputs), constants, declared infos,
//! symbolic and anonymous dims, node order.

use onnx::builder::{tensor_f32, tensor_i64};
use onnx::proto::TensorProto;
use onnx::proto::type_proto::Value as TypeValue;
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};
use planner::op::Op;
use planner::{DType, Dim as PDim, TensorInfo};

use crate::common::{convert, infer, inferred, node, ops, value};

fn mlp(opset: i64) -> ModelBuilder {
    ModelBuilder::new(opset)
        .input("x", DataType::Float, &[Dim::from("batch"), Dim::from(4)])
        .initializer_f32("w", &[4, 3], &[0.5; 12])
        .initializer_f32("b", &[3], &[1.0, 2.0, 3.0])
        .node_with(
            NodeBuilder::new("Gemm", &["x", "w", "b"], &["h"])
                .name("gemm0")
                .attr_float("alpha", 0.5)
                .attr_int("transB", 0),
        )
        .node_with(NodeBuilder::new("LeakyRelu", &["h"], &["y"]).attr_float("alpha", 0.1))
        .output("y", DataType::Float, &[Dim::from("batch"), Dim::from(3)])
}

#[test]
fn mlp_converts_with_attributes_and_infers() {
    let g = convert(mlp(17).build());
    assert_eq!(ops(&g), ["Gemm", "LeakyRelu"]);
    let Op::Gemm(gemm) = &node(&g, "Gemm").op else { unreachable!() };
    assert_eq!((gemm.alpha, gemm.beta, gemm.trans_a, gemm.trans_b), (0.5, 1.0, false, false));
    assert_eq!(node(&g, "Gemm").name, "gemm0");
    let Op::LeakyRelu(leaky) = &node(&g, "LeakyRelu").op else { unreachable!() };
    assert_eq!(leaky.alpha, 0.1);
    assert_eq!(g.inputs, [value(&g, "x")]);
    assert_eq!(g.outputs, [value(&g, "y")]);
    assert_eq!(g.initializers.len(), 2);
    assert_eq!(g.constant(value(&g, "b")).map(|c| c.to_f64s()), Some(vec![1.0, 2.0, 3.0]));
    let want = TensorInfo::new(DType::F32, [PDim::from("batch"), PDim::Known(3)]);
    assert_eq!(inferred(&g, "y"), want);
}

#[test]
fn initializer_listed_as_input_is_only_an_initializer() {
    let proto = mlp(13).input("w", DataType::Float, &[Dim::from(4), Dim::from(3)]).build();
    let g = convert(proto);
    let w = value(&g, "w");
    assert_eq!(g.inputs, [value(&g, "x")]);
    assert!(g.initializers.contains_key(&w));
    assert_eq!(g.values.iter().filter(|v| v.name == "w").count(), 1);
    infer(&g);
}

#[test]
fn symbolic_and_anonymous_dims() {
    let mut proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from("batch"), Dim::from(4), Dim::from(0)])
        .input("z", DataType::Float, &[Dim::from("batch"), Dim::from(4), Dim::from(0)])
        .node("Add", &["x", "z"], &["y"])
        .output("y", DataType::Float, &[])
        .build();
    let graph = proto.graph.as_mut().expect("graph");
    for input in &mut graph.input {
        let Some(TypeValue::TensorType(t)) = input.r#type.as_mut().and_then(|t| t.value.as_mut()) else {
            unreachable!()
        };
        t.shape.as_mut().expect("shape").dim[2].value = None;
    }
    if let Some(TypeValue::TensorType(t)) = graph.output[0].r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.shape = None;
    }
    let g = convert(proto);
    let x = g.value(value(&g, "x")).and_then(|v| v.info.clone()).expect("declared");
    let z = g.value(value(&g, "z")).and_then(|v| v.info.clone()).expect("declared");
    assert_eq!(x.shape.dims()[..2], [PDim::from("batch"), PDim::Known(4)]);
    let (PDim::Symbol(a), PDim::Symbol(b)) = (&x.shape.dims()[2], &z.shape.dims()[2]) else {
        panic!("anonymous dims become symbols: {x} {z}")
    };
    assert_ne!(a, b, "two anonymous dims are two symbols");
    assert!(g.value(value(&g, "y")).is_some_and(|v| v.info.is_none()), "unknown rank declares nothing");
    assert_eq!(inferred(&g, "y").rank(), 3);
}

#[test]
fn dim_param_is_kept_and_dim_value_zero_is_known() {
    let proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from("n"), Dim::from(0)])
        .node("Relu", &["x"], &["y"])
        .output("y", DataType::Float, &[Dim::from("n"), Dim::from(0)])
        .build();
    let g = convert(proto);
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [PDim::from("n"), PDim::Known(0)]));
    let dims = proto_dims(&g);
    assert_eq!(dims, vec![PDim::from("n"), PDim::Known(0)]);
}

#[test]
fn negative_dim_value_is_an_anonymous_dim() {
    let proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(-1), Dim::from(2)])
        .node("Relu", &["x"], &["y"])
        .output("y", DataType::Undefined, &[])
        .build();
    let g = convert(proto);
    assert_eq!(proto_dims(&g), vec![PDim::from("x_dim0"), PDim::Known(2)]);
    assert_eq!(inferred(&g, "y").shape.dims()[0], PDim::from("x_dim0"));
}

#[test]
fn question_mark_dims_are_anonymous_and_distinct() {
    // PaddleOCR writes `?` for both height and width, which differ at run time.
    let proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(1), Dim::from(3), Dim::from("?"), Dim::from("?")])
        .node("Relu", &["x"], &["y"])
        .output("y", DataType::Float, &[Dim::from(1), Dim::from(3), Dim::from("?"), Dim::from("?")])
        .build();
    let g = convert(proto);
    let dims = proto_dims(&g);
    let (PDim::Symbol(h), PDim::Symbol(w)) = (&dims[2], &dims[3]) else { panic!("{dims:?}") };
    assert!(h != "?" && w != "?" && h != w, "{dims:?}");
    // Shapes infer with the two bound to different sizes.
    let b = planner::Binding::new().with(h, 2).with(w, 5);
    let y = inferred(&g, "y").shape.bind(&b).expect("binds");
    assert_eq!(y, [1, 3, 2, 5]);
}

fn proto_dims(g: &planner::Graph) -> Vec<PDim> {
    let info = g.value(g.inputs[0]).and_then(|v| v.info.clone()).expect("declared");
    info.shape.0
}

#[test]
fn constants_become_initializers() {
    let proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(6)])
        .node_with(NodeBuilder::new("Constant", &[], &["shape"]).attr_ints("value_ints", &[3, 4]))
        .node_with(NodeBuilder::new("Constant", &[], &["half"]).attr_float("value_float", 0.5))
        .node_with(NodeBuilder::new("Constant", &[], &["one"]).attr_int("value_int", 1))
        .node_with(
            NodeBuilder::new("Constant", &[], &["t"]).attr_tensor("value", tensor_f32("", &[1], &[2.0])),
        )
        .node("Reshape", &["x", "shape"], &["r"])
        .node("Mul", &["r", "half"], &["m"])
        .node("Mul", &["m", "t"], &["y"])
        .output("y", DataType::Float, &[Dim::from(3), Dim::from(4)])
        .output("one", DataType::Int64, &[])
        .build();
    let g = convert(proto);
    assert_eq!(ops(&g), ["Reshape", "Mul", "Mul"]);
    let shape = g.constant(value(&g, "shape")).expect("initializer");
    assert_eq!((shape.dtype, shape.to_i64s()), (DType::I64, Some(vec![3, 4])));
    assert_eq!(g.constant(value(&g, "half")).map(|c| (c.dtype, c.dims.len())), Some((DType::F32, 0)));
    assert_eq!(g.constant(value(&g, "t")).map(|c| c.to_f64s()), Some(vec![2.0]));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [3usize, 4]));
    assert_eq!(inferred(&g, "one"), TensorInfo::scalar(DType::I64));
}

#[test]
fn value_info_declares_intermediate_infos() {
    let proto = mlp(17).value_info("h", DataType::Float, &[Dim::from("batch"), Dim::from(3)]).build();
    let g = convert(proto);
    let want = TensorInfo::new(DType::F32, [PDim::from("batch"), PDim::Known(3)]);
    assert_eq!(g.value(value(&g, "h")).and_then(|v| v.info.clone()), Some(want.clone()));
    assert_eq!(g.value(value(&g, "y")).and_then(|v| v.info.clone()), Some(want));
    infer(&g);
}

#[test]
fn nodes_need_not_be_sorted() {
    let proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node("Relu", &["a"], &["y"])
        .node("Neg", &["x"], &["a"])
        .output("y", DataType::Float, &[Dim::from(2)])
        .build();
    let g = convert(proto);
    assert_eq!(ops(&g), ["Relu", "Neg"]);
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize]));
}

#[test]
fn typed_field_initializers_and_omitted_optional_inputs() {
    let w = TensorProto {
        name: "w".into(),
        data_type: DataType::Float as i32,
        dims: vec![2],
        float_data: vec![1.0, 2.0],
        ..TensorProto::default()
    };
    let proto = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2)])
        .initializer(w)
        .initializer(tensor_i64("", &[1], &[7]))
        .initializer(tensor_f32("hi", &[], &[1.5]))
        .node("Add", &["x", "w"], &["s"])
        .node("Clip", &["s", "", "hi"], &["y"])
        .output("y", DataType::Float, &[Dim::from(2)])
        .build();
    let g = convert(proto);
    assert_eq!(g.constant(value(&g, "w")).map(|c| c.to_f64s()), Some(vec![1.0, 2.0]));
    let clip = node(&g, "Clip");
    assert_eq!(clip.inputs, [Some(value(&g, "s")), None, Some(value(&g, "hi"))]);
    assert_eq!(g.initializers.len(), 2, "the unnamed initializer cannot be referenced and is dropped");
    infer(&g);
}
