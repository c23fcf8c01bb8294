//! Control flow: If/Loop/Scan bodies converted recursively, outer reads recorded as captures
//! (through every nesting level).

use onnx::builder::value_info;
use onnx::proto::{GraphProto, NodeProto};
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};
use planner::op::Op;
use planner::{Capture, DType, Graph, TensorInfo};

use crate::common::{convert, inferred, node, value};

fn body(name: &str, nodes: Vec<NodeProto>, inputs: &[(&str, DataType)], outputs: &[&str]) -> GraphProto {
    GraphProto {
        name: name.into(),
        node: nodes,
        input: inputs.iter().map(|(n, t)| value_info(n, *t, &[])).collect(),
        output: outputs.iter().map(|n| value_info(n, DataType::Undefined, &[])).collect(),
        ..GraphProto::default()
    }
}

fn capture_of(body: &Graph, name: &str) -> Capture {
    let inner = crate::common::value(body, name);
    *body.captures.iter().find(|c| c.inner == inner).unwrap_or_else(|| panic!("{name} is not captured"))
}

#[test]
fn if_branches_capture_outer_values() {
    let then_branch = body("then", vec![NodeBuilder::new("Add", &["x", "w"], &["t"]).build()], &[], &["t"]);
    let else_branch = body("else", vec![], &[], &["x"]);
    let proto = ModelBuilder::new(17)
        .input("cond", DataType::Bool, &[])
        .input("x", DataType::Float, &[Dim::from("n")])
        .initializer_f32("w", &[1], &[2.0])
        .node_with(
            NodeBuilder::new("If", &["cond"], &["y"])
                .attr_graph("then_branch", then_branch)
                .attr_graph("else_branch", else_branch),
        )
        .output("y", DataType::Float, &[Dim::from("n")])
        .build();
    let g = convert(proto);
    let Op::If(iff) = &node(&g, "If").op else { unreachable!() };
    assert_eq!(iff.then_branch.captures.len(), 2);
    assert_eq!(capture_of(&iff.then_branch, "x").outer, value(&g, "x"));
    assert_eq!(capture_of(&iff.then_branch, "w").outer, value(&g, "w"));
    let else_x = capture_of(&iff.else_branch, "x");
    assert_eq!(else_x.outer, value(&g, "x"));
    assert_eq!(iff.else_branch.outputs, [else_x.inner], "a body may output a captured value");
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, ["n"]));
}

#[test]
fn loop_with_nested_if_captures_through_each_level() {
    let inner_then =
        body("inner_then", vec![NodeBuilder::new("Mul", &["v", "w"], &["o"]).build()], &[], &["o"]);
    let inner_else =
        body("inner_else", vec![NodeBuilder::new("Identity", &["v"], &["o"]).build()], &[], &["o"]);
    let loop_body = body(
        "loop_body",
        vec![
            NodeBuilder::new("Identity", &["cond_in"], &["cond_out"]).build(),
            NodeBuilder::new("If", &["cond_in"], &["v_out"])
                .attr_graph("then_branch", inner_then)
                .attr_graph("else_branch", inner_else)
                .build(),
        ],
        &[("i", DataType::Int64), ("cond_in", DataType::Bool), ("v", DataType::Undefined)],
        &["cond_out", "v_out"],
    );
    let proto = ModelBuilder::new(13)
        .input("x", DataType::Float, &[Dim::from(3)])
        .initializer_i64("trips", &[], &[4])
        .initializer(onnx::builder::tensor_raw("go", DataType::Bool, &[], vec![1]))
        .initializer_f32("w", &[3], &[1.0, 2.0, 3.0])
        .node_with(NodeBuilder::new("Loop", &["trips", "go", "x"], &["y"]).attr_graph("body", loop_body))
        .output("y", DataType::Float, &[Dim::from(3)])
        .build();
    let g = convert(proto);
    let Op::Loop(l) = &node(&g, "Loop").op else { unreachable!() };
    assert_eq!(l.body.inputs.len(), 3);
    let body_w = capture_of(&l.body, "w");
    assert_eq!(body_w.outer, value(&g, "w"));
    let Op::If(iff) = &node(&l.body, "If").op else { unreachable!() };
    let then_w = capture_of(&iff.then_branch, "w");
    assert_eq!(then_w.outer, body_w.inner, "the inner branch captures the body's capture");
    assert_eq!(capture_of(&iff.then_branch, "v").outer, crate::common::value(&l.body, "v"));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [3usize]));
}

#[test]
fn scan_attributes_and_body() {
    let scan_body = body(
        "scan_body",
        vec![
            NodeBuilder::new("Add", &["acc", "row"], &["acc_out"]).build(),
            NodeBuilder::new("Identity", &["acc_out"], &["out"]).build(),
        ],
        &[("acc", DataType::Undefined), ("row", DataType::Undefined)],
        &["acc_out", "out"],
    );
    let proto = ModelBuilder::new(17)
        .input("init", DataType::Float, &[Dim::from(2)])
        .input("xs", DataType::Float, &[Dim::from("t"), Dim::from(2)])
        .node_with(
            NodeBuilder::new("Scan", &["init", "xs"], &["final", "all"])
                .attr_graph("body", scan_body)
                .attr_int("num_scan_inputs", 1)
                .attr_ints("scan_output_directions", &[1]),
        )
        .output("final", DataType::Float, &[Dim::from(2)])
        .output("all", DataType::Float, &[Dim::from("t"), Dim::from(2)])
        .build();
    let g = convert(proto);
    let Op::Scan(s) = &node(&g, "Scan").op else { unreachable!() };
    assert_eq!((s.num_scan_inputs, s.scan_output_directions.clone()), (1, vec![1]));
    assert!(s.scan_input_axes.is_empty() && s.body.captures.is_empty());
    assert_eq!(
        inferred(&g, "all"),
        TensorInfo::new(DType::F32, [planner::Dim::from("t"), planner::Dim::Known(2)])
    );
}
