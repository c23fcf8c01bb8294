//! `ai.onnx.preview.training` optimizers and the tensor forms of the Optional operators.

use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};
use planner::op::{self, Op};
use planner::{DType, TensorInfo};

use crate::common::{convert, convert_err, inferred, node};

const TRAINING: &str = "ai.onnx.preview.training";

fn momentum(mode: Option<&str>) -> ModelBuilder {
    let d = |n: i64| [Dim::from(n)];
    let mut n = NodeBuilder::new("Momentum", &["R", "T", "X", "G", "V"], &["X_new", "V_new"])
        .domain(TRAINING)
        .attr_float("alpha", 0.5)
        .attr_float("beta", 0.25)
        .attr_float("norm_coefficient", 0.0);
    if let Some(mode) = mode {
        n = n.attr_string("mode", mode);
    }
    ModelBuilder::new(17)
        .opset_import(TRAINING, 1)
        .input("R", DataType::Float, &[])
        .input("T", DataType::Int64, &[])
        .input("X", DataType::Float, &d(3))
        .input("G", DataType::Float, &d(3))
        .input("V", DataType::Float, &d(3))
        .node_with(n)
        .output("X_new", DataType::Float, &d(3))
        .output("V_new", DataType::Float, &d(3))
}

#[test]
fn momentum_converts_with_its_mode_and_required_attributes() {
    let g = convert(momentum(Some("nesterov")).build());
    let want =
        op::Momentum { alpha: 0.5, beta: 0.25, norm_coefficient: 0.0, mode: op::MomentumMode::Nesterov };
    assert_eq!(node(&g, "Momentum").op, Op::Momentum(want));
    assert_eq!(node(&g, "Momentum").op.domain(), TRAINING);
    assert_eq!(inferred(&g, "V_new"), TensorInfo::new(DType::F32, [3usize]));
    let err = convert_err(momentum(None).build()).to_string();
    assert!(err.contains("mode"), "{err}");
}

#[test]
fn optional_ops_on_tensors_and_missing_inputs() {
    let g = convert(
        ModelBuilder::new(18)
            .input("x", DataType::Float, &[Dim::from(4)])
            .node_with(NodeBuilder::new("OptionalGetElement", &["x"], &["y"]))
            .node_with(NodeBuilder::new("OptionalHasElement", &["x"], &["has"]))
            .node_with(NodeBuilder::new("OptionalHasElement", &[""], &["none"]))
            .output("y", DataType::Float, &[Dim::from(4)])
            .output("has", DataType::Bool, &[])
            .output("none", DataType::Bool, &[])
            .build(),
    );
    assert_eq!(node(&g, "Identity").inputs.len(), 1);
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [4usize]));
    assert_eq!(inferred(&g, "none"), TensorInfo::new(DType::Bool, [0usize; 0]));
}
