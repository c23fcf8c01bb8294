//! Opset-dependent forms: attributes that became inputs, Softmax's pre-13 2-D coercion, limited
//! operator ranges, and deprecated operators.

use onnx::builder::tensor_f32;
use onnx::{AttrIssue, DataType, Dim, ModelBuilder, NodeBuilder, OnnxError};
use planner::op::{self, Op};
use planner::{DType, TensorInfo};

use crate::common::{convert, convert_err, inferred, node, ops, value};

fn unary(opset: i64, dims: &[i64], node: NodeBuilder) -> ModelBuilder {
    let dims: Vec<Dim> = dims.iter().map(|&d| Dim::from(d)).collect();
    ModelBuilder::new(opset).input("x", DataType::Float, &dims).node_with(node).output(
        "y",
        DataType::Undefined,
        &[],
    )
}

#[test]
fn squeeze_axes_attribute_in_11_input_in_13() {
    let old = unary(11, &[2, 1, 3], NodeBuilder::new("Squeeze", &["x"], &["y"]).attr_ints("axes", &[1]));
    let g = convert(old.build());
    assert_eq!(node(&g, "Squeeze").op, Op::Squeeze(op::Squeeze { axes: Some(vec![1]) }));
    assert_eq!(node(&g, "Squeeze").inputs.len(), 1);
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize, 3]));

    let new = unary(13, &[2, 1, 3], NodeBuilder::new("Squeeze", &["x", "axes"], &["y"])).initializer_i64(
        "axes",
        &[1],
        &[1],
    );
    let g = convert(new.build());
    assert_eq!(node(&g, "Squeeze").op, Op::Squeeze(op::Squeeze { axes: None }));
    assert_eq!(node(&g, "Squeeze").inputs[1], Some(value(&g, "axes")));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize, 3]));

    let attr_in_13 =
        unary(13, &[2, 1, 3], NodeBuilder::new("Squeeze", &["x"], &["y"]).attr_ints("axes", &[1]));
    let err = convert_err(attr_in_13.build());
    assert!(
        matches!(&err, OnnxError::Attribute { attr, op_type, .. } if attr == "axes" && op_type == "Squeeze")
    );
    let input_in_11 = unary(11, &[2, 1, 3], NodeBuilder::new("Squeeze", &["x", "axes"], &["y"]))
        .initializer_i64("axes", &[1], &[1]);
    assert!(matches!(convert_err(input_in_11.build()), OnnxError::InvalidNode { .. }));
    let unsqueeze = unary(11, &[2], NodeBuilder::new("Unsqueeze", &["x"], &["y"]));
    let err = convert_err(unsqueeze.build());
    assert!(matches!(err, OnnxError::Attribute { issue: AttrIssue::Missing, .. }), "{err}");
}

#[test]
fn softmax_before_13_coerces_to_2d() {
    let g = convert(unary(11, &[2, 3, 4], NodeBuilder::new("Softmax", &["x"], &["y"]).name("sm")).build());
    assert_eq!(ops(&g), ["Shape", "Flatten", "Softmax", "Reshape"]);
    assert_eq!(node(&g, "Flatten").op, Op::Flatten(op::Flatten { axis: 1 }));
    assert_eq!(node(&g, "Softmax").op, Op::Softmax(op::Softmax { axis: 1 }));
    assert_eq!(node(&g, "Reshape").outputs, [Some(value(&g, "y"))]);
    assert_eq!(inferred(&g, "sm/flatten"), TensorInfo::new(DType::F32, [2usize, 12]));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize, 3, 4]));

    let g = convert(
        unary(12, &[2, 3, 4], NodeBuilder::new("LogSoftmax", &["x"], &["y"]).attr_int("axis", 0)).build(),
    );
    assert_eq!(ops(&g), ["Shape", "Flatten", "LogSoftmax", "Reshape"]);
    assert_eq!(node(&g, "Flatten").op, Op::Flatten(op::Flatten { axis: 0 }));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize, 3, 4]));
}

#[test]
fn softmax_on_the_last_axis_needs_no_rewrite() {
    let g = convert(unary(11, &[2, 5], NodeBuilder::new("Hardmax", &["x"], &["y"])).build());
    assert_eq!(ops(&g), ["Hardmax"]);
    assert_eq!(node(&g, "Hardmax").op, Op::Hardmax(op::Softmax { axis: 1 }));
    let g = convert(
        unary(11, &[2, 3, 5], NodeBuilder::new("Softmax", &["x"], &["y"]).attr_int("axis", -1)).build(),
    );
    assert_eq!(ops(&g), ["Softmax"]);
    let g = convert(unary(13, &[2, 3, 5], NodeBuilder::new("Softmax", &["x"], &["y"])).build());
    assert_eq!(node(&g, "Softmax").op, Op::Softmax(op::Softmax { axis: -1 }));
    let g = convert(
        unary(13, &[2, 3, 5], NodeBuilder::new("Softmax", &["x"], &["y"]).attr_int("axis", 1)).build(),
    );
    assert_eq!(ops(&g), ["Softmax"], "opset 13 semantics are the planner's");
}

#[test]
fn reduce_axes_move_to_an_input_at_13_or_18() {
    let mean = |opset| {
        let node =
            NodeBuilder::new("ReduceMean", &["x"], &["y"]).attr_ints("axes", &[1]).attr_int("keepdims", 0);
        unary(opset, &[2, 3], node)
    };
    let g = convert(mean(17).build());
    let want = op::Reduce { axes: Some(vec![1]), keepdims: false, noop_with_empty_axes: false };
    assert_eq!(node(&g, "ReduceMean").op, Op::ReduceMean(want));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize]));
    assert!(matches!(convert_err(mean(18).build()), OnnxError::Attribute { .. }));

    let sum = unary(
        13,
        &[2, 3],
        NodeBuilder::new("ReduceSum", &["x", "axes"], &["y"]).attr_int("noop_with_empty_axes", 1),
    )
    .initializer_i64("axes", &[1], &[0]);
    let g = convert(sum.build());
    let want = op::Reduce { axes: None, keepdims: true, noop_with_empty_axes: true };
    assert_eq!(node(&g, "ReduceSum").op, Op::ReduceSum(want));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [1usize, 3]));
}

#[test]
fn split_sizes_attribute_input_and_num_outputs() {
    let split = |opset, node: NodeBuilder| {
        ModelBuilder::new(opset)
            .input("x", DataType::Float, &[Dim::from(6)])
            .initializer_i64("sizes", &[2], &[2, 4])
            .node_with(node)
            .output("a", DataType::Undefined, &[])
            .output("b", DataType::Undefined, &[])
    };
    let g = convert(
        split(11, NodeBuilder::new("Split", &["x"], &["a", "b"]).attr_ints("split", &[2, 4])).build(),
    );
    assert_eq!(
        node(&g, "Split").op,
        Op::Split(op::Split { axis: 0, split: Some(vec![2, 4]), num_outputs: None })
    );
    assert_eq!(inferred(&g, "b"), TensorInfo::new(DType::F32, [4usize]));
    let g = convert(split(13, NodeBuilder::new("Split", &["x", "sizes"], &["a", "b"])).build());
    assert_eq!(node(&g, "Split").op, Op::Split(op::Split::default()));
    assert_eq!(inferred(&g, "a"), TensorInfo::new(DType::F32, [2usize]));
    let g =
        convert(split(18, NodeBuilder::new("Split", &["x"], &["a", "b"]).attr_int("num_outputs", 2)).build());
    assert_eq!(node(&g, "Split").op, Op::Split(op::Split { axis: 0, split: None, num_outputs: Some(2) }));
    assert_eq!(inferred(&g, "b"), TensorInfo::new(DType::F32, [3usize]));
}

#[test]
fn legacy_attributes_of_input_taking_ops_are_rejected() {
    let clip = unary(11, &[2], NodeBuilder::new("Clip", &["x"], &["y"]).attr_float("min", 0.0));
    assert!(matches!(convert_err(clip.build()), OnnxError::Attribute { attr, .. } if attr == "min"));
    let topk = unary(11, &[4], NodeBuilder::new("TopK", &["x"], &["y", "i"]).attr_int("k", 2));
    assert!(matches!(convert_err(topk.build()), OnnxError::Attribute { attr, .. } if attr == "k"));
    let pad = unary(11, &[4], NodeBuilder::new("Pad", &["x"], &["y"]).attr_ints("pads", &[1, 1]));
    assert!(matches!(convert_err(pad.build()), OnnxError::Attribute { attr, .. } if attr == "pads"));
}

#[test]
fn pad_axes_from_18_and_wrap_from_19() {
    let pad = |opset, mode: &str| {
        unary(
            opset,
            &[4],
            NodeBuilder::new("Pad", &["x", "pads", "", "axes"], &["y"]).attr_string("mode", mode),
        )
        .initializer_i64("pads", &[2], &[1, 2])
        .initializer_i64("axes", &[1], &[0])
    };
    let g = convert(pad(19, "wrap").build());
    assert_eq!(node(&g, "Pad").op, Op::Pad(op::Pad { mode: op::PadMode::Wrap, pads: None, value: None }));
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [7usize]));
    assert!(
        matches!(convert_err(pad(18, "wrap").build()), OnnxError::Attribute { attr, .. } if attr == "mode")
    );
    assert!(matches!(convert_err(pad(17, "edge").build()), OnnxError::InvalidNode { .. }));
}

#[test]
fn resize_attributes_and_upsample_as_resize() {
    let resize = unary(
        13,
        &[1, 1, 2, 2],
        NodeBuilder::new("Resize", &["x", "", "scales"], &["y"])
            .attr_string("mode", "linear")
            .attr_string("coordinate_transformation_mode", "align_corners"),
    )
    .initializer(tensor_f32("scales", &[4], &[1.0, 1.0, 2.0, 3.0]));
    let g = convert(resize.build());
    let Op::Resize(r) = &node(&g, "Resize").op else { unreachable!() };
    assert_eq!(
        (r.mode, r.coordinate_transformation_mode),
        (op::ResizeMode::Linear, op::CoordinateTransformationMode::AlignCorners)
    );
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [1usize, 1, 4, 6]));

    let upsample = unary(11, &[1, 1, 2, 2], NodeBuilder::new("Upsample", &["x", "scales"], &["y"]))
        .initializer(tensor_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]));
    let g = convert(upsample.build());
    let resize = node(&g, "Resize");
    let Op::Resize(r) = &resize.op else { unreachable!() };
    assert_eq!(r.coordinate_transformation_mode, op::CoordinateTransformationMode::Asymmetric);
    assert_eq!((r.mode, r.nearest_mode), (op::ResizeMode::Nearest, op::NearestMode::Floor));
    assert_eq!(resize.inputs, [Some(value(&g, "x")), None, Some(value(&g, "scales"))]);
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [1usize, 1, 4, 4]));

    let symmetric = unary(
        18,
        &[2],
        NodeBuilder::new("Resize", &["x"], &["y"])
            .attr_string("coordinate_transformation_mode", "half_pixel_symmetric"),
    );
    assert!(matches!(convert_err(symmetric.build()), OnnxError::Attribute { .. }));
}

#[test]
fn operators_limited_to_an_opset_range_are_reported() {
    let gn = ModelBuilder::new(18)
        .input("x", DataType::Float, &[Dim::from(1), Dim::from(4), Dim::from(2)])
        .initializer_f32("s", &[2], &[1.0; 2])
        .node_with(NodeBuilder::new("GroupNormalization", &["x", "s", "s"], &["y"]).attr_int("num_groups", 2))
        .output("y", DataType::Undefined, &[]);
    let OnnxError::Unsupported { ops: listed } = convert_err(gn.build()) else {
        panic!("unsupported expected")
    };
    assert_eq!(listed.len(), 1);
    assert!(listed[0].reason.contains("21"), "{}", listed[0]);
    let swish = unary(24, &[2], NodeBuilder::new("Swish", &["x"], &["y"]).attr_float("alpha", 2.0));
    let g = convert(swish.build());
    assert_eq!(ops(&g), ["CastLike", "Mul", "Sigmoid", "Mul"]);
    assert_eq!(inferred(&g, "y"), TensorInfo::new(DType::F32, [2usize]));
}

#[test]
fn dropout_in_training_mode_is_rejected() {
    let dropout = |training: bool| {
        unary(13, &[2], NodeBuilder::new("Dropout", &["x", "", "t"], &["y"]))
            .initializer(onnx::builder::tensor_raw("t", DataType::Bool, &[], vec![u8::from(training)]))
    };
    let g = convert(dropout(false).build());
    assert_eq!(node(&g, "Dropout").op, Op::Dropout(op::Dropout { seed: None }));
    assert!(matches!(convert_err(dropout(true).build()), OnnxError::InvalidNode { .. }));
}

#[test]
fn batch_norm_training_outputs_before_14_are_rejected() {
    let bn = |opset, outputs: &[&str]| {
        ModelBuilder::new(opset)
            .input("x", DataType::Float, &[Dim::from(1), Dim::from(2)])
            .initializer_f32("p", &[2], &[1.0; 2])
            .node_with(
                NodeBuilder::new("BatchNormalization", &["x", "p", "p", "p", "p"], outputs)
                    .attr_float("epsilon", 1e-3),
            )
            .output("y", DataType::Undefined, &[])
    };
    let g = convert(bn(11, &["y"]).build());
    let Op::BatchNormalization(b) = &node(&g, "BatchNormalization").op else { unreachable!() };
    assert_eq!(b.epsilon, 1e-3);
    assert!(matches!(convert_err(bn(11, &["y", "m"]).build()), OnnxError::InvalidNode { .. }));
}
