//! Models exported with onnx's Python helper (`tests/fixtures/make_fixtures.py`): typed-field
//! tensors as a real writer produces them, opset-11 attribute forms, a Loop capture, custom
//! domains.

use std::path::PathBuf;

use onnx::load_path;
use planner::op::Op;
use planner::{DType, Dim, Graph, TensorInfo};

use crate::common::{infer, inferred, node, ops, value};

fn fixture(name: &str) -> Graph {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let model = load_path(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    onnx::to_graph(&model).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn softmax_opset11_fixture() {
    let g = fixture("softmax_opset11.onnx");
    assert_eq!(
        ops(&g),
        [
            "Unsqueeze",
            "Squeeze",
            "Cast",
            "Mul",
            "Add",
            "Shape",
            "Flatten",
            "Softmax",
            "Reshape",
            "ReduceMean"
        ]
    );
    let w16 = g.constant(value(&g, "w16")).expect("initializer");
    assert_eq!((w16.dtype, w16.to_f64s()), (DType::F16, vec![1.0, 2.0, 0.5, -1.0]));
    let Op::ReduceMean(r) = &node(&g, "ReduceMean").op else { unreachable!() };
    assert_eq!(r.axes, Some(vec![2]));
    assert_eq!(
        inferred(&g, "y"),
        TensorInfo::new(DType::F32, [Dim::from("N"), Dim::Known(3), Dim::Known(1)])
    );
}

#[test]
fn loop_opset13_fixture() {
    let g = fixture("loop_opset13.onnx");
    let Op::Loop(l) = &node(&g, "Loop").op else { unreachable!() };
    assert_eq!(l.body.captures.len(), 1);
    assert_eq!(l.body.captures[0].outer, value(&g, "step"));
    assert_eq!(node(&g, "Loop").inputs[1], None, "the omitted cond input stays empty");
    let infos = infer(&g);
    assert_eq!(infos[value(&g, "traces").index()], TensorInfo::new(DType::F32, [3usize, 2]));
    assert_eq!(infos[value(&g, "final").index()], TensorInfo::new(DType::F32, [2usize]));
}

#[test]
fn sequence_ops_fixture() {
    let g = fixture("sequence_ops.onnx");
    assert_eq!(ops(&g), ["MambaScan", "Transpose", "RGLRU"]);
    assert_eq!(
        inferred(&g, "h"),
        TensorInfo::new(DType::F32, [Dim::from("B"), Dim::from("L"), Dim::Known(2)])
    );
    assert_eq!(inferred(&g, "h_last"), TensorInfo::new(DType::F32, [Dim::from("B"), Dim::Known(2)]));
}
