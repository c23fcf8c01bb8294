//! Model-local functions (`ModelProto.functions`): calls inlined before conversion, attribute
//! references bound from the call or the function's defaults, nested calls, omitted outputs, and a
//! recursive function refused by name.

use onnx::proto::{AttributeProto, FunctionProto, ModelProto, NodeProto, OperatorSetIdProto};
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder, OnnxError};

use crate::common::{convert, convert_err, ops};

fn node(op: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeBuilder::new(op, ins, outs).build()
}

fn function(name: &str, ins: &[&str], outs: &[&str], nodes: Vec<NodeProto>) -> FunctionProto {
    FunctionProto {
        name: name.into(),
        domain: "local.fn".into(),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        node: nodes,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 17 }],
        ..Default::default()
    }
}

/// `y = MyBlock(x)` (and a second call), `MyBlock(a) = LeakyRelu(MyScale(a), alpha = @alpha)`,
/// `MyScale(a) = a * a`; `functions` are the model's.
fn model(functions: Vec<FunctionProto>, call_alpha: Option<f32>) -> ModelProto {
    let d = [Dim::from(2), Dim::from(3)];
    let mut call = NodeBuilder::new("MyBlock", &["x"], &["h"]).domain("local.fn");
    if let Some(a) = call_alpha {
        call = call.attr_float("alpha", a);
    }
    let mut proto = ModelBuilder::new(17)
        .opset_import("local.fn", 1)
        .input("x", DataType::Float, &d)
        .node_with(call)
        .node_with(NodeBuilder::new("MyBlock", &["h"], &["y"]).domain("local.fn"))
        .output("y", DataType::Float, &d)
        .build();
    proto.functions = functions;
    proto
}

fn block_and_scale() -> Vec<FunctionProto> {
    let mut leaky = node("LeakyRelu", &["s"], &["out"]);
    leaky.attribute.push(AttributeProto {
        name: "alpha".into(),
        ref_attr_name: "alpha".into(),
        ..Default::default()
    });
    let mut block = function(
        "MyBlock",
        &["a"],
        &["out"],
        vec![NodeBuilder::new("MyScale", &["a"], &["s"]).domain("local.fn").build(), leaky],
    );
    block.attribute = vec!["alpha".into()];
    block.attribute_proto = Vec::new();
    let scale = function("MyScale", &["a"], &["p"], vec![node("Mul", &["a", "a"], &["p"])]);
    vec![block, scale]
}

/// The alpha of every LeakyRelu of `g`, in order.
fn alphas(g: &planner::Graph) -> Vec<f32> {
    g.nodes
        .iter()
        .filter_map(|n| match &n.op {
            planner::Op::LeakyRelu(l) => Some(l.alpha),
            _ => None,
        })
        .collect()
}

#[test]
fn calls_of_local_functions_become_their_bodies() {
    let g = convert(model(block_and_scale(), Some(0.25)));
    assert_eq!(ops(&g), ["Mul", "LeakyRelu", "Mul", "LeakyRelu"]);
    // The call's alpha reaches the first call's body; the second call gives none and the function
    // has no default, so LeakyRelu's own default (0.01) applies.
    assert_eq!(alphas(&g), [0.25, 0.01]);
    // Both calls' internal values are renamed apart.
    let names: Vec<&str> = g.values.iter().map(|v| v.name.as_str()).collect();
    assert!(names.contains(&"h") && names.contains(&"y"), "{names:?}");
    assert_eq!(names.iter().filter(|n| n.ends_with("/s")).count(), 2, "{names:?}");
}

#[test]
fn a_functions_default_attribute_applies_when_the_call_gives_none() {
    let mut functions = block_and_scale();
    functions[0].attribute.clear();
    functions[0].attribute_proto =
        vec![AttributeProto { name: "alpha".into(), f: 0.5, r#type: 1, ..Default::default() }];
    let g = convert(model(functions, None));
    assert_eq!(alphas(&g), [0.5, 0.5]);
}

#[test]
fn a_recursive_function_is_refused_by_name() {
    let f = function(
        "Loopy",
        &["a"],
        &["b"],
        vec![NodeBuilder::new("Loopy", &["a"], &["b"]).domain("local.fn").build()],
    );
    let d = [Dim::from(2)];
    let mut proto = ModelBuilder::new(17)
        .opset_import("local.fn", 1)
        .input("x", DataType::Float, &d)
        .node_with(NodeBuilder::new("Loopy", &["x"], &["y"]).domain("local.fn"))
        .output("y", DataType::Float, &d)
        .build();
    proto.functions = vec![f];
    let e = convert_err(proto);
    assert!(matches!(&e, OnnxError::InvalidNode { op_type, .. } if op_type == "local.fn::Loopy"), "{e}");
    assert!(e.to_string().contains("recursive"), "{e}");
}

#[test]
fn without_the_function_the_call_is_an_unsupported_op() {
    let e = convert_err(model(Vec::new(), None));
    assert!(matches!(e, OnnxError::Unsupported { .. }), "{e}");
}

#[test]
fn functions_that_double_at_every_level_are_refused_before_they_blow_up() {
    // F0(a) = Relu(a), Fk(a) = F(k-1)(F(k-1)(a)): F30 would inline 2^30 nodes.
    let mut functions = vec![function("F0", &["a"], &["b"], vec![node("Relu", &["a"], &["b"])])];
    for k in 1..=30 {
        let prev = format!("F{}", k - 1);
        let call = |i: &str, o: &str| NodeBuilder::new(&prev, &[i], &[o]).domain("local.fn").build();
        functions.push(function(&format!("F{k}"), &["a"], &["b"], vec![call("a", "m"), call("m", "b")]));
    }
    let d = [Dim::from(2)];
    let mut proto = ModelBuilder::new(17)
        .opset_import("local.fn", 1)
        .input("x", DataType::Float, &d)
        .node_with(NodeBuilder::new("F30", &["x"], &["y"]).domain("local.fn"))
        .output("y", DataType::Float, &d)
        .build();
    proto.functions = functions;
    let e = convert_err(proto);
    assert!(e.to_string().contains("more than 1048576 nodes"), "{e}");
}
