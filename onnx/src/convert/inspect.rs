//! [`inspect()`]: a model's interface and contents, read straight from the protobuf so it works
//! (and lists every unsupported operator) even where [`to_graph`](super::to_graph) fails.

use std::collections::BTreeMap;
use std::fmt;

use planner::{DType, Shape};

use crate::error::UnsupportedOp;
use crate::model::Model;
use crate::proto::tensor_proto::DataType;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{GraphProto, ValueInfoProto};
use crate::tensor::{byte_len, element_count};

use super::types::{self, DimNamer};
use super::{MAX_OPSET, MIN_OPSET, registry, unsupported_ops};

/// What [`inspect()`] reports about a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSummary {
    /// The model's IR version.
    pub ir_version: i64,
    /// Producer name and version, as recorded by the exporter.
    pub producer: String,
    /// Imported opsets, in model order.
    pub opsets: Vec<OpsetSummary>,
    /// Graph inputs that are not initializers.
    pub inputs: Vec<ValueSummary>,
    /// Graph outputs.
    pub outputs: Vec<ValueSummary>,
    /// Node count per operator, subgraphs included; keys are `op_type` for the default domain
    /// and `domain::op_type` otherwise.
    pub op_histogram: BTreeMap<String, usize>,
    /// Number of nodes, subgraphs included.
    pub node_count: usize,
    /// Elements of all initializers (dense and sparse, subgraphs included).
    pub parameter_count: u64,
    /// Bytes those initializers occupy in their ONNX data types.
    pub parameter_bytes: u64,
    /// Every node the converter cannot map (empty when conversion can proceed).
    pub unsupported: Vec<UnsupportedOp>,
}

/// One imported opset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpsetSummary {
    /// The domain (`""` for the default ONNX domain).
    pub domain: String,
    /// The imported version.
    pub version: i64,
    /// False for a default-domain version outside the converter's range.
    pub supported: bool,
}

/// A graph input or output.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueSummary {
    /// The value's name.
    pub name: String,
    /// The ONNX element type (`FLOAT`, `INT64`, ...) or the kind of a non-tensor value.
    pub elem_type: String,
    /// The planner dtype, when the element type has one.
    pub dtype: Option<DType>,
    /// The declared shape (symbolic dims kept, anonymous dims freshly named); `None` when the
    /// rank is unknown.
    pub shape: Option<Shape>,
}

/// Summarizes `model`: interface, opsets, operator histogram, parameters and unsupported ops.
pub fn inspect(model: &Model) -> ModelSummary {
    let proto = model.proto();
    let graph = model.graph();
    let opset = model.opset_version("").unwrap_or(0);
    let opsets = proto
        .opset_import
        .iter()
        .map(|o| OpsetSummary {
            domain: o.domain.clone(),
            version: o.version,
            supported: !registry::is_default_domain(&o.domain)
                || (MIN_OPSET..=MAX_OPSET).contains(&o.version),
        })
        .collect();
    let mut namer = DimNamer::for_graph(graph);
    let is_init = |vi: &&ValueInfoProto| graph.initializer.iter().any(|t| t.name == vi.name);
    let inputs = graph.input.iter().filter(|vi| !is_init(vi)).map(|vi| summarize(vi, &mut namer)).collect();
    let outputs = graph.output.iter().map(|vi| summarize(vi, &mut namer)).collect();
    let mut counts = Counts::default();
    counts.walk(graph);
    ModelSummary {
        ir_version: proto.ir_version,
        producer: format!("{} {}", proto.producer_name, proto.producer_version).trim().to_owned(),
        opsets,
        inputs,
        outputs,
        op_histogram: counts.ops,
        node_count: counts.nodes,
        parameter_count: counts.params,
        parameter_bytes: counts.bytes,
        // What conversion would meet: the local functions' bodies instead of their calls (a
        // function that cannot be inlined is reported by conversion itself).
        unsupported: match super::with_functions_inlined(model) {
            Ok(Some(inlined)) => unsupported_ops(&inlined, opset),
            _ => unsupported_ops(graph, opset),
        },
    }
}

fn summarize(vi: &ValueInfoProto, namer: &mut DimNamer) -> ValueSummary {
    let elem_type = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        None => "UNDEFINED".to_owned(),
        Some(TypeValue::TensorType(t)) => DataType::try_from(t.elem_type)
            .map_or_else(|_| format!("type {}", t.elem_type), |d| d.as_str_name().into()),
        Some(TypeValue::SequenceType(_)) => "sequence".to_owned(),
        Some(TypeValue::MapType(_)) => "map".to_owned(),
        Some(TypeValue::OptionalType(_)) => "optional".to_owned(),
        Some(TypeValue::SparseTensorType(_)) => "sparse tensor".to_owned(),
        Some(TypeValue::OpaqueType(_)) => "opaque".to_owned(),
    };
    let info = types::declared(vi, namer).ok().flatten();
    ValueSummary {
        name: vi.name.clone(),
        elem_type,
        dtype: info.as_ref().map(|i| i.dtype),
        shape: info.map(|i| i.shape),
    }
}

/// Running totals over a graph and its subgraphs.
#[derive(Default)]
struct Counts {
    ops: BTreeMap<String, usize>,
    nodes: usize,
    params: u64,
    bytes: u64,
}

impl Counts {
    fn walk(&mut self, graph: &GraphProto) {
        let dense = graph.initializer.iter().map(|t| (t.data_type, &t.dims));
        let sparse =
            graph.sparse_initializer.iter().filter_map(|s| Some((s.values.as_ref()?.data_type, &s.dims)));
        for (data_type, dims) in dense.chain(sparse) {
            let elems = element_count(dims).unwrap_or(0);
            self.params = self.params.saturating_add(elems);
            let bytes = DataType::try_from(data_type).ok().and_then(|d| byte_len(d, elems)).unwrap_or(0);
            self.bytes = self.bytes.saturating_add(bytes);
        }
        for node in &graph.node {
            self.nodes += 1;
            let key = if registry::is_default_domain(&node.domain) {
                node.op_type.clone()
            } else {
                format!("{}::{}", node.domain, node.op_type)
            };
            *self.ops.entry(key).or_default() += 1;
            for a in &node.attribute {
                for g in a.g.iter().chain(&a.graphs) {
                    self.walk(g);
                }
            }
        }
    }
}

impl fmt::Display for ValueSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shape {
            Some(shape) => write!(f, "{}: {} {shape}", self.name, self.elem_type),
            None => write!(f, "{}: {} [unknown rank]", self.name, self.elem_type),
        }
    }
}

impl fmt::Display for ModelSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "ir_version {}, producer '{}'", self.ir_version, self.producer)?;
        let opsets: Vec<String> = self
            .opsets
            .iter()
            .map(|o| {
                let domain = if o.domain.is_empty() { "ai.onnx" } else { &o.domain };
                let flag = if o.supported { "" } else { " (unsupported)" };
                format!("{domain} {}{flag}", o.version)
            })
            .collect();
        writeln!(f, "opsets: {}", opsets.join(", "))?;
        for (title, values) in [("inputs", &self.inputs), ("outputs", &self.outputs)] {
            writeln!(f, "{title}:")?;
            for v in values {
                writeln!(f, "  {v}")?;
            }
        }
        writeln!(f, "parameters: {} ({} bytes)", self.parameter_count, self.parameter_bytes)?;
        let ops: Vec<String> = self.op_histogram.iter().map(|(op, n)| format!("{op} {n}")).collect();
        writeln!(f, "ops ({} nodes): {}", self.node_count, ops.join(", "))?;
        if self.unsupported.is_empty() {
            write!(f, "unsupported: none")
        } else {
            let list: Vec<String> = self.unsupported.iter().map(ToString::to_string).collect();
            write!(f, "unsupported ({}): {}", list.len(), list.join(", "))
        }
    }
}
