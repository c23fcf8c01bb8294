//! Shared helpers: convert a built model, find nodes and values, run shape inference.

use onnx::proto::ModelProto;
use onnx::{Model, OnnxError};
use planner::{Graph, Node, TensorInfo, ValueId};

/// Converts `proto`, panicking with the error's message on failure.
pub fn convert(proto: ModelProto) -> Graph {
    let model = Model::from_proto(proto).expect("model loads");
    onnx::to_graph(&model).unwrap_or_else(|e| panic!("conversion failed: {e}"))
}

/// Converts `proto`, which must fail; returns the error.
pub fn convert_err(proto: ModelProto) -> OnnxError {
    let model = Model::from_proto(proto).expect("model loads");
    match onnx::to_graph(&model) {
        Ok(g) => panic!("conversion should fail, got {g:#?}"),
        Err(e) => e,
    }
}

/// The op_type of every node, in order.
pub fn ops(g: &Graph) -> Vec<&'static str> {
    g.nodes.iter().map(|n| n.op.name()).collect()
}

/// The first node running `op_type`.
pub fn node<'g>(g: &'g Graph, op_type: &str) -> &'g Node {
    g.nodes.iter().find(|n| n.op.name() == op_type).unwrap_or_else(|| panic!("no {op_type} in {:?}", ops(g)))
}

/// The value called `name`.
pub fn value(g: &Graph, name: &str) -> ValueId {
    let i = g.values.iter().position(|v| v.name == name).unwrap_or_else(|| panic!("no value {name}"));
    ValueId(i as u32)
}

/// Shape inference over `g`, panicking with the error's message on failure.
pub fn infer(g: &Graph) -> Vec<TensorInfo> {
    planner::shape_infer::infer(g).unwrap_or_else(|e| panic!("shape inference failed: {e}"))
}

/// The inferred info of the value called `name`.
pub fn inferred(g: &Graph, name: &str) -> TensorInfo {
    infer(g)[value(g, name).index()].clone()
}
