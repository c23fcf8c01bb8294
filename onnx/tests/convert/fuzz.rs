//! Robustness: random bytes, mutated models and random node soups (random op types, edges,
//! attribute names, types and values, subgraphs, opsets) convert or fail with an error; nothing
//! panics, in conversion, inspection or the planner's inference on what converts.

use onnx::builder::{tensor_f32, tensor_i64, value_info};
use onnx::proto::attribute_proto::AttributeType;
use onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto};
use onnx::{DataType, Dim, Model, ModelBuilder, NodeBuilder, load_bytes};
use proptest::prelude::*;

const OPS: &[&str] = &[
    "Add",
    "Relu",
    "Softmax",
    "LogSoftmax",
    "Squeeze",
    "Unsqueeze",
    "Split",
    "Reshape",
    "Constant",
    "If",
    "Loop",
    "Scan",
    "Resize",
    "Upsample",
    "Pad",
    "Cast",
    "Conv",
    "MaxPool",
    "Gemm",
    "ReduceSum",
    "ReduceMean",
    "TopK",
    "Slice",
    "Concat",
    "LSTM",
    "MambaScan",
    "Dropout",
    "Swish",
    "ConstantOfShape",
    "Clip",
    "Transpose",
    "BatchNormalization",
    "Attention",
    "Mul",
    "Sigmoid",
    "Flatten",
    "Gather",
    "Expand",
    "Shape",
    "Where",
];
const DOMAINS: &[&str] = &["", "ai.onnx", "ai.ferrofuse", "com.sofie"];
const ATTRS: &[&str] = &[
    "axis",
    "axes",
    "alpha",
    "perm",
    "to",
    "mode",
    "value",
    "value_ints",
    "value_float",
    "then_branch",
    "else_branch",
    "body",
    "split",
    "num_outputs",
    "hidden_size",
    "num_scan_inputs",
    "layout",
    "direction",
    "kernel_shape",
    "blocksize",
    "stash_type",
    "activations",
    "dt_limit",
    "keepdims",
    "strides",
];

fn attribute(name: usize, kind: u8, int: i64, float: f32, graph: Option<GraphProto>) -> AttributeProto {
    let types = [
        AttributeType::Undefined,
        AttributeType::Float,
        AttributeType::Int,
        AttributeType::String,
        AttributeType::Tensor,
        AttributeType::Graph,
        AttributeType::Floats,
        AttributeType::Ints,
        AttributeType::Strings,
    ];
    let ty = types[kind as usize % types.len()];
    let mut a =
        AttributeProto { name: ATTRS[name % ATTRS.len()].into(), r#type: ty as i32, ..Default::default() };
    match ty {
        AttributeType::Float => a.f = float,
        AttributeType::Int => a.i = int,
        AttributeType::String => {
            a.s = ["linear", "DCR", "silu", "\u{ff}"][int.unsigned_abs() as usize % 4].into()
        }
        AttributeType::Tensor => {
            a.t =
                Some(if int % 2 == 0 { tensor_i64("", &[1], &[int]) } else { tensor_f32("", &[2], &[float]) })
        }
        AttributeType::Graph => a.g = graph,
        AttributeType::Floats => a.floats = vec![float; (int.unsigned_abs() % 3) as usize],
        AttributeType::Ints => a.ints = vec![int; (int.unsigned_abs() % 4) as usize],
        AttributeType::Strings => a.strings = vec![b"Tanh".to_vec(), b"Nope".to_vec()],
        _ => {}
    }
    a
}

#[derive(Debug, Clone)]
struct NodeSpec {
    op: usize,
    domain: usize,
    inputs: Vec<usize>,
    outputs: usize,
    attrs: Vec<(usize, u8, i64, f32)>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        any::<usize>(),
        prop_oneof![20 => Just(0usize), 1 => 0..DOMAINS.len()],
        prop::collection::vec(any::<usize>(), 0..5),
        prop_oneof![4 => Just(1usize), 1 => 0usize..3],
        prop::collection::vec((any::<usize>(), any::<u8>(), -3i64..5, -2.0f32..2.0), 0..3),
    )
        .prop_map(|(op, domain, inputs, outputs, attrs)| NodeSpec { op, domain, inputs, outputs, attrs })
}

/// Builds nodes whose inputs come from `pool` (plus earlier nodes' outputs, named
/// `<prefix><node>_<slot>`) and returns them with the last output defined.
fn build_nodes(
    specs: &[NodeSpec],
    pool: &[&str],
    prefix: &str,
    graph: Option<&GraphProto>,
) -> (Vec<NodeProto>, String) {
    let mut names: Vec<String> = pool.iter().map(|s| (*s).to_owned()).collect();
    let mut nodes = Vec::new();
    let mut last = pool[0].to_owned();
    for (k, spec) in specs.iter().enumerate() {
        let inputs: Vec<&str> = spec.inputs.iter().map(|i| names[i % names.len()].as_str()).collect();
        let outputs: Vec<String> = (0..spec.outputs).map(|slot| format!("{prefix}{k}_{slot}")).collect();
        let outputs_ref: Vec<&str> = outputs.iter().map(String::as_str).collect();
        let mut node = NodeBuilder::new(OPS[spec.op % OPS.len()], &inputs, &outputs_ref)
            .domain(DOMAINS[spec.domain])
            .build();
        node.attribute =
            spec.attrs.iter().map(|&(n, kind, i, f)| attribute(n, kind, i, f, graph.cloned())).collect();
        nodes.push(node);
        if let Some(o) = outputs.first() {
            last.clone_from(o);
        }
        names.extend(outputs);
    }
    (nodes, last)
}

fn soup(opset: i64, body: &[NodeSpec], nodes: &[NodeSpec]) -> ModelProto {
    let (body_nodes, body_out) = build_nodes(body, &["a", "x", "w", ""], "b", None);
    let sub = GraphProto {
        name: "body".into(),
        node: body_nodes,
        input: vec![value_info("a", DataType::Float, &[])],
        output: vec![value_info(&body_out, DataType::Undefined, &[])],
        ..Default::default()
    };
    let (main_nodes, out) = build_nodes(nodes, &["x", "w", "s", ""], "n", Some(&sub));
    let mut proto = ModelBuilder::new(opset)
        .opset_import("ai.ferrofuse", 1)
        .input("x", DataType::Float, &[Dim::from("n"), Dim::from(3)])
        .initializer_f32("w", &[3], &[1.0, 2.0, 3.0])
        .initializer_i64("s", &[2], &[-1, 3])
        .output(&out, DataType::Undefined, &[])
        .build();
    if let Some(g) = proto.graph.as_mut() {
        g.node = main_nodes;
    }
    proto
}

fn exercise(model: &Model) {
    let _ = onnx::inspect(model);
    if let Ok(g) = onnx::to_graph(model) {
        let _ = planner::shape_infer::infer(&g);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_node_soups_never_panic(
        opset in prop_oneof![8 => 11i64..=28, 1 => 7i64..40],
        body in prop::collection::vec(node_spec(), 0..4),
        nodes in prop::collection::vec(node_spec(), 0..8),
    ) {
        if let Ok(model) = Model::from_proto(soup(opset, &body, &nodes)) {
            exercise(&model);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(model) = load_bytes(&bytes, None) {
            exercise(&model);
        }
    }

    #[test]
    fn mutated_models_never_panic(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12)) {
        let spec = |op: &str| NodeSpec {
            op: OPS.iter().position(|o| *o == op).unwrap_or(0),
            domain: 0,
            inputs: vec![0, 1],
            outputs: 1,
            attrs: vec![(0, 2, 1, 0.5)],
        };
        let mut bytes = prost::Message::encode_to_vec(&soup(13, &[spec("Relu")], &[spec("Add"), spec("If"), spec("Softmax")]));
        for (index, value) in edits {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        if let Ok(model) = load_bytes(&bytes, None) {
            exercise(&model);
        }
    }
}
