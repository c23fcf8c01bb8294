//! Errors: every unsupported node at once, attribute problems naming node/op/attribute, undefined
//! and duplicate values naming the value, opset problems, bad tensors and types.

use onnx::builder::value_info;
use onnx::proto::{GraphProto, TensorProto};
use onnx::{AttrIssue, DataType, Dim, ModelBuilder, NodeBuilder, OnnxError, TensorIssue};

use crate::common::convert_err;

fn with_x(opset: i64) -> ModelBuilder {
    ModelBuilder::new(opset).input("x", DataType::Float, &[Dim::from(2), Dim::from(2)])
}

#[test]
fn every_unsupported_operator_is_listed_at_once() {
    let branch = GraphProto {
        name: "then".into(),
        node: vec![NodeBuilder::new("NotAnOp", &["x"], &["t"]).name("deep").build()],
        output: vec![value_info("t", DataType::Undefined, &[])],
        ..GraphProto::default()
    };
    let proto = with_x(17)
        .input("c", DataType::Bool, &[])
        .node_with(NodeBuilder::new("RandomUniformLike", &["x"], &["a"]).name("rnd0"))
        .node_with(NodeBuilder::new("FusedMatMul", &["a", "x"], &["b"]).domain("com.microsoft"))
        .node("Relu", &["b"], &["r"])
        .node_with(
            NodeBuilder::new("If", &["c"], &["y"])
                .attr_graph("then_branch", branch.clone())
                .attr_graph("else_branch", branch),
        )
        .node("Bernoulli", &["r"], &["u"])
        .output("y", DataType::Float, &[])
        .build();
    let err = convert_err(proto);
    let OnnxError::Unsupported { ops } = &err else { panic!("expected Unsupported, got {err}") };
    let names: Vec<(&str, &str)> = ops.iter().map(|o| (o.node.as_str(), o.op_type.as_str())).collect();
    assert_eq!(
        names,
        [
            ("rnd0", "RandomUniformLike"),
            ("b", "FusedMatMul"),
            ("deep", "NotAnOp"),
            ("deep", "NotAnOp"),
            ("u", "Bernoulli")
        ]
    );
    let message = err.to_string();
    for part in ["rnd0", "com.microsoft::FusedMatMul", "NotAnOp", "Bernoulli"] {
        assert!(message.contains(part), "{message}");
    }
}

#[test]
fn attribute_errors_name_node_op_and_attribute() {
    let cases = [
        (NodeBuilder::new("Gemm", &["x", "x"], &["y"]).name("g").attr_int("alpha", 2), "alpha", "wrong type"),
        (NodeBuilder::new("Concat", &["x", "x"], &["y"]).name("g"), "axis", "missing"),
        (
            NodeBuilder::new("Pad", &["x", "p"], &["y"]).name("g").attr_string("mode", "mirror"),
            "mode",
            "invalid",
        ),
        (
            NodeBuilder::new("Cast", &["x"], &["y"]).name("g").attr_int("to", DataType::Complex64 as i64),
            "to",
            "invalid",
        ),
        (
            NodeBuilder::new("Conv", &["x", "x"], &["y"]).name("g").attr_ints("strides", &[-1]),
            "strides",
            "invalid",
        ),
        (NodeBuilder::new("Flatten", &["x"], &["y"]).name("g").attr_ints("axis", &[1]), "axis", "wrong type"),
        (NodeBuilder::new("LSTM", &["x", "x", "x"], &["y"]).name("g"), "hidden_size", "missing"),
        (
            NodeBuilder::new("Scan", &["x"], &["y"]).name("g").attr_int("num_scan_inputs", 1),
            "body",
            "missing",
        ),
        (
            // Two 1-grams in the pool, three output columns named.
            NodeBuilder::new("TfIdfVectorizer", &["x"], &["y"])
                .name("g")
                .attr_string("mode", "TF")
                .attr_int("min_gram_length", 1)
                .attr_int("max_gram_length", 1)
                .attr_int("max_skip_count", 0)
                .attr_ints("ngram_counts", &[0])
                .attr_ints("ngram_indexes", &[0, 1, 2])
                .attr_ints("pool_int64s", &[7, 9]),
            "ngram_indexes",
            "invalid",
        ),
        (
            NodeBuilder::new("TfIdfVectorizer", &["x"], &["y"])
                .name("g")
                .attr_int("min_gram_length", 1)
                .attr_int("max_gram_length", 1)
                .attr_int("max_skip_count", 0)
                .attr_ints("ngram_counts", &[0])
                .attr_ints("ngram_indexes", &[0])
                .attr_ints("pool_int64s", &[7]),
            "mode",
            "missing",
        ),
        // Attributes the operator does not have: refused, not ignored (a typo, or a setting
        // ferrofuse would silently drop).
        (NodeBuilder::new("Relu", &["x"], &["y"]).name("g").attr_int("alpha", 1), "alpha", "unknown"),
        (NodeBuilder::new("Softmax", &["x"], &["y"]).name("g").attr_int("axsi", 0), "axsi", "unknown"),
    ];
    for (node, attr_name, kind) in cases {
        let op = node.clone().build().op_type;
        let err = convert_err(
            with_x(17)
                .initializer_i64("p", &[4], &[0; 4])
                .node_with(node)
                .output("y", DataType::Undefined, &[])
                .build(),
        );
        let OnnxError::Attribute { node, op_type, attr, issue } = &err else {
            panic!("{op}: expected an attribute error, got {err}")
        };
        assert_eq!((node.as_str(), op_type.as_str(), attr.as_str()), ("g", op.as_str(), attr_name), "{err}");
        let matches = match kind {
            "wrong type" => matches!(issue, AttrIssue::WrongType { .. }),
            "missing" => matches!(issue, AttrIssue::Missing),
            "unknown" => matches!(issue, AttrIssue::Unknown { opset: 17 }),
            _ => matches!(issue, AttrIssue::Invalid { .. }),
        };
        assert!(matches, "{op}: {err}");
        assert!(err.to_string().contains(&format!("'{attr_name}'")), "{err}");
    }
}

#[test]
fn undefined_and_duplicate_values_are_named() {
    let err = convert_err(
        with_x(17).node_with(NodeBuilder::new("Add", &["x", "ghost"], &["y"]).name("adder")).build(),
    );
    assert!(
        matches!(&err, OnnxError::UndefinedValue { node, value, .. } if node == "adder" && value == "ghost"),
        "{err}"
    );
    let err =
        convert_err(with_x(17).node("Relu", &["x"], &["y"]).output("nowhere", DataType::Float, &[]).build());
    assert!(matches!(&err, OnnxError::UndefinedOutput { value, .. } if value == "nowhere"), "{err}");
    let err = convert_err(with_x(17).node("Relu", &["x"], &["y"]).node("Neg", &["x"], &["y"]).build());
    assert!(matches!(&err, OnnxError::DuplicateValue { value, .. } if value == "y"), "{err}");
    let err = convert_err(with_x(17).node("Relu", &["x"], &["x"]).build());
    assert!(matches!(&err, OnnxError::DuplicateValue { value, .. } if value == "x"), "{err}");
    let unnamed = convert_err(ModelBuilder::new(17).node("Relu", &["a"], &["b"]).build());
    assert!(
        matches!(&unnamed, OnnxError::UndefinedValue { node, .. } if node == "b"),
        "builder names nodes after outputs"
    );
}

#[test]
fn opset_problems() {
    let relu = |b: ModelBuilder| b.input("x", DataType::Float, &[]).node("Relu", &["x"], &["y"]).build();
    // Opsets before 11 are judged per operator: Relu-6 differs from Relu-14 only in types, but
    // the registry converts Relu from opset 11.
    assert!(matches!(
        convert_err(relu(ModelBuilder::new(9))),
        OnnxError::Unsupported { ops } if ops.len() == 1
    ));
    assert!(matches!(
        convert_err(relu(ModelBuilder::new(0))),
        OnnxError::UnsupportedOpset { version: 0, .. }
    ));
    assert!(matches!(
        convert_err(relu(ModelBuilder::new(40))),
        OnnxError::UnsupportedOpset { version: 40, .. }
    ));
    let mut proto = relu(ModelBuilder::new(17));
    proto.opset_import.clear();
    assert!(matches!(convert_err(proto), OnnxError::MissingOpset));
}

#[test]
fn bad_tensors_and_types_are_named() {
    let short = TensorProto {
        name: "w".into(),
        data_type: DataType::Float as i32,
        dims: vec![3],
        float_data: vec![1.0],
        ..TensorProto::default()
    };
    let err = convert_err(with_x(17).initializer(short).build());
    assert!(
        matches!(&err, OnnxError::InvalidTensor { tensor, issue: TensorIssue::FieldLenMismatch { .. } } if tensor == "w"),
        "{err}"
    );
    let err = convert_err(ModelBuilder::new(17).input("s", DataType::Complex128, &[Dim::from(1)]).build());
    assert!(matches!(&err, OnnxError::InvalidType { value, .. } if value == "s"), "{err}");
    let constant = NodeBuilder::new("Constant", &[], &["c"])
        .name("k")
        .attr_ints("value_ints", &[1])
        .attr_int("value_int", 1);
    let err = convert_err(ModelBuilder::new(17).node_with(constant).build());
    assert!(
        matches!(&err, OnnxError::InvalidNode { node, op_type, .. } if node == "k" && op_type == "Constant"),
        "{err}"
    );
    let string = NodeBuilder::new("Constant", &[], &["c"]).attr_string("value_string", "hi");
    assert!(matches!(
        convert_err(ModelBuilder::new(17).node_with(string).build()),
        OnnxError::Attribute { .. }
    ));
}

#[test]
fn planner_validation_failures_are_wrapped() {
    let proto = with_x(17).node("Add", &["x"], &["y"]).output("y", DataType::Float, &[]).build();
    let err = convert_err(proto);
    assert!(matches!(err, OnnxError::InvalidGraph { source: planner::PlanError::Arity { .. } }), "{err}");
}

#[test]
fn old_opsets_convert_per_operator() {
    let and = ModelBuilder::new(7)
        .input("a", DataType::Bool, &[Dim::from(2)])
        .input("b", DataType::Bool, &[Dim::from(2)])
        .node("And", &["a", "b"], &["y"])
        .output("y", DataType::Bool, &[Dim::from(2)])
        .build();
    assert_eq!(crate::common::ops(&crate::common::convert(and)), ["And"]);
}
