//! Custom-domain operators: SOFIE's three (any domain) and ferrofuse's own (`ai.ferrofuse`).

use onnx::{DataType, Dim, ModelBuilder, NodeBuilder, OnnxError};
use planner::op::{self, Op};
use planner::{DType, TensorInfo};

use crate::common::{convert, convert_err, inferred, node};

fn f32_input(b: ModelBuilder, name: &str, dims: &[i64]) -> ModelBuilder {
    let dims: Vec<Dim> = dims.iter().map(|&d| Dim::from(d)).collect();
    b.input(name, DataType::Float, &dims)
}

fn mamba(domain: &str) -> ModelBuilder {
    let mut b = ModelBuilder::new(17).opset_import(domain, 1);
    for (name, dims) in [
        ("u", &[1, 2, 5][..]),
        ("delta", &[1, 2, 5]),
        ("A", &[2, 3]),
        ("Bm", &[1, 3, 5]),
        ("Cm", &[1, 3, 5]),
        ("D", &[2]),
    ] {
        b = f32_input(b, name, dims);
    }
    b.node_with(NodeBuilder::new("MambaScan", &["u", "delta", "A", "Bm", "Cm", "D"], &["y"]).domain(domain))
        .output("y", DataType::Float, &[Dim::from(1), Dim::from(2), Dim::from(5)])
}

#[test]
fn sofie_operators_from_any_domain() {
    for domain in ["com.sofie", "", "org.example.sofie"] {
        let g = convert(mamba(domain).build());
        assert_eq!(node(&g, "MambaScan").op, Op::MambaScan, "{domain}");
        assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [1usize, 2, 5]));
    }
    let mut b = ModelBuilder::new(17).opset_import("com.sofie", 1);
    for name in ["r", "k", "v", "w"] {
        b = f32_input(b, name, &[1, 2, 3, 4]);
    }
    let b = f32_input(f32_input(b, "u", &[2, 4]), "x", &[1, 3, 4]);
    let g = convert(
        f32_input(b, "a", &[1, 3, 4])
            .node_with(NodeBuilder::new("RWKV_WKV6", &["r", "k", "v", "w", "u"], &["y"]).domain("com.sofie"))
            .node_with(NodeBuilder::new("GriffinRGLRU", &["x", "a"], &["h"]).domain("com.sofie"))
            .output("y", DataType::Float, &[Dim::from(1), Dim::from(2), Dim::from(3), Dim::from(4)])
            .output("h", DataType::Float, &[Dim::from(1), Dim::from(3), Dim::from(4)])
            .build(),
    );
    assert_eq!(
        (node(&g, "RWKV_WKV6").op.clone(), node(&g, "GriffinRGLRU").op.clone()),
        (Op::RwkvWkv6, Op::GriffinRglru)
    );
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [1usize, 2, 3, 4]));
}

#[test]
fn ferrofuse_operators_with_attributes() {
    let ff = "ai.ferrofuse";
    let mut b = ModelBuilder::new(17).opset_import(ff, 1);
    for (name, dims) in [
        ("u", &[1, 2, 5][..]),
        ("delta", &[1, 2, 5]),
        ("A", &[2, 3]),
        ("Bm", &[1, 3, 5]),
        ("Cm", &[1, 3, 5]),
        ("D", &[2]),
        ("r", &[1, 3, 2, 4]),
        ("u6", &[2, 4]),
        ("x", &[1, 3, 8]),
        ("a", &[1, 3, 8]),
        ("cw", &[2, 4]),
    ] {
        b = f32_input(b, name, dims);
    }
    let b = b
        .node_with(
            NodeBuilder::new("SelectiveScan", &["u", "delta", "A", "Bm", "Cm", "D"], &["y", "state"])
                .domain(ff)
                .attr_int("delta_softplus", 1),
        )
        .node_with(
            NodeBuilder::new("WKV6", &["r", "r", "r", "r", "u6"], &["o"])
                .domain(ff)
                .attr_string("layout", "BTHN"),
        )
        .node_with(NodeBuilder::new("RGLRU", &["x", "a"], &["h"]).domain(ff))
        .node_with(
            NodeBuilder::new("CausalConvWithState", &["u", "cw"], &["c", "c_state"])
                .domain(ff)
                .attr_string("activation", "silu"),
        )
        .output("state", DataType::Float, &[Dim::from(1), Dim::from(2), Dim::from(3)])
        .output("o", DataType::Float, &[Dim::from(1), Dim::from(3), Dim::from(2), Dim::from(4)])
        .output("h", DataType::Float, &[Dim::from(1), Dim::from(3), Dim::from(8)])
        .output("c_state", DataType::Float, &[Dim::from(1), Dim::from(2), Dim::from(3)]);
    let g = convert(b.build());
    assert_eq!(node(&g, "SelectiveScan").op, Op::SelectiveScan(op::SelectiveScan { delta_softplus: true }));
    assert_eq!(node(&g, "WKV6").op, Op::Wkv6(op::Wkv6 { layout: op::Wkv6Layout::Bthn }));
    assert_eq!(node(&g, "RGLRU").op, Op::Rglru);
    let conv = op::CausalConvWithState { activation: op::ConvActivation::Silu, ..Default::default() };
    assert_eq!(node(&g, "CausalConvWithState").op, Op::CausalConvWithState(conv));
    assert_eq!(inferred(&g, "state"), TensorInfo::new(DType::F32, [1usize, 2, 3]));
    assert_eq!(inferred(&g, "c_state"), TensorInfo::new(DType::F32, [1usize, 2, 3]));
}

#[test]
fn ssd_scan_dt_limits() {
    let ssd = |node: NodeBuilder| {
        let mut b = ModelBuilder::new(17).opset_import("ai.ferrofuse", 1);
        for (name, dims) in [("x", &[1, 5, 2, 3][..]), ("dt", &[1, 5, 2]), ("A", &[2]), ("B", &[1, 5, 1, 4])]
        {
            b = f32_input(b, name, dims);
        }
        b.node_with(node.domain("ai.ferrofuse")).output("y", DataType::Undefined, &[]).build()
    };
    let scan = || NodeBuilder::new("SSDScan", &["x", "dt", "A", "B", "B"], &["y"]);
    let g = convert(ssd(scan().attr_floats("dt_limit", &[0.001, f32::INFINITY]).attr_int("dt_softplus", 1)));
    let want = op::SsdScan { dt_softplus: true, dt_min: Some(0.001), dt_max: None, ..Default::default() };
    assert_eq!(node(&g, "SSDScan").op, Op::SsdScan(want));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [1usize, 5, 2, 3]));
    let g = convert(ssd(scan().attr_float("dt_max", 0.1)));
    assert_eq!(node(&g, "SSDScan").op, Op::SsdScan(op::SsdScan { dt_max: Some(0.1), ..Default::default() }));
    assert!(matches!(convert_err(ssd(scan().attr_floats("dt_limit", &[1.0]))), OnnxError::Attribute { .. }));
    assert!(matches!(
        convert_err(ssd(scan().attr_float("dt_min", 2.0).attr_float("dt_max", 1.0))),
        OnnxError::Attribute { .. }
    ));
}

#[test]
fn unknown_or_misplaced_custom_operators_are_unsupported() {
    let proto = ModelBuilder::new(17)
        .opset_import("ai.ferrofuse", 1)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node_with(NodeBuilder::new("Mamba3Scan", &["x"], &["a"]).domain("ai.ferrofuse"))
        .node_with(NodeBuilder::new("WKV6", &["a"], &["b"]).domain("com.sofie"))
        .node_with(NodeBuilder::new("WKV6", &["b"], &["y"]))
        .output("y", DataType::Float, &[Dim::from(2)])
        .build();
    let OnnxError::Unsupported { ops } = convert_err(proto) else { panic!("unsupported expected") };
    let listed: Vec<(&str, &str)> = ops.iter().map(|o| (o.op_type.as_str(), o.domain.as_str())).collect();
    assert_eq!(listed, [("Mamba3Scan", "ai.ferrofuse"), ("WKV6", "com.sofie"), ("WKV6", "")]);
}
