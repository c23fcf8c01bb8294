//! Writing ONNX models from Rust, for tests, fixtures and the demo model.
//!
//! The builder records what it is told and validates nothing: a mismatched tensor or a dangling
//! edge reaches the `ModelProto` as written, which is what rejection tests need. Loading the
//! result ([`crate::Model::from_proto`], [`crate::load_bytes`]) performs the checks.
//!
//! ```
//! use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};
//!
//! let model = ModelBuilder::new(17)
//!     .input("x", DataType::Float, &[Dim::from("batch"), Dim::from(4)])
//!     .initializer_f32("w", &[4, 3], &[0.5; 12])
//!     .node("MatMul", &["x", "w"], &["xw"])
//!     .node_with(NodeBuilder::new("LeakyRelu", &["xw"], &["y"]).attr_float("alpha", 0.1))
//!     .output("y", DataType::Float, &[Dim::from("batch"), Dim::from(3)])
//!     .build();
//! let loaded = onnx::Model::from_proto(model).unwrap();
//! assert_eq!(loaded.opset_version(""), Some(17));
//! ```

use prost::Message;

use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto, tensor_shape_proto,
    type_proto,
};

/// One dimension of a graph input, output or value: a fixed size or a symbolic name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    /// A known size (`dim_value`).
    Fixed(i64),
    /// A named, symbolic size such as `"batch"` (`dim_param`).
    Symbolic(String),
}

impl From<i64> for Dim {
    fn from(size: i64) -> Self {
        Dim::Fixed(size)
    }
}

impl From<&str> for Dim {
    fn from(name: &str) -> Self {
        Dim::Symbolic(name.to_owned())
    }
}

/// The value of a node attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `FLOAT`
    Float(f32),
    /// `INT`
    Int(i64),
    /// `FLOATS`
    Floats(Vec<f32>),
    /// `INTS`
    Ints(Vec<i64>),
    /// `STRING` (stored as UTF-8 bytes)
    String(String),
    /// `TENSOR`
    Tensor(TensorProto),
    /// `GRAPH` (a subgraph, as on `If`'s `then_branch`)
    Graph(GraphProto),
}

impl AttrValue {
    fn into_proto(self, name: &str) -> AttributeProto {
        use attribute_proto::AttributeType as T;
        let mut attr = AttributeProto { name: name.to_owned(), ..AttributeProto::default() };
        let kind = match self {
            AttrValue::Float(f) => {
                attr.f = f;
                T::Float
            }
            AttrValue::Int(i) => {
                attr.i = i;
                T::Int
            }
            AttrValue::Floats(floats) => {
                attr.floats = floats;
                T::Floats
            }
            AttrValue::Ints(ints) => {
                attr.ints = ints;
                T::Ints
            }
            AttrValue::String(s) => {
                attr.s = s.into_bytes();
                T::String
            }
            AttrValue::Tensor(t) => {
                attr.t = Some(t);
                T::Tensor
            }
            AttrValue::Graph(g) => {
                attr.g = Some(g);
                T::Graph
            }
        };
        attr.r#type = kind as i32;
        attr
    }
}

/// Builds one `NodeProto`: op type, edges, and optionally a name, domain and attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeBuilder {
    proto: NodeProto,
}

impl NodeBuilder {
    /// A node running `op_type` from `inputs` to `outputs` (use `""` for an omitted optional
    /// input). Its name defaults to its first output's name.
    pub fn new(op_type: &str, inputs: &[&str], outputs: &[&str]) -> Self {
        let proto = NodeProto {
            op_type: op_type.to_owned(),
            name: outputs.first().map_or_else(|| op_type.to_owned(), |o| (*o).to_owned()),
            input: inputs.iter().map(|s| (*s).to_owned()).collect(),
            output: outputs.iter().map(|s| (*s).to_owned()).collect(),
            ..NodeProto::default()
        };
        Self { proto }
    }

    /// Sets the node's name.
    pub fn name(mut self, name: &str) -> Self {
        self.proto.name = name.to_owned();
        self
    }

    /// Sets the operator's domain, such as `"ai.ferrofuse"` (default: the ONNX domain `""`).
    pub fn domain(mut self, domain: &str) -> Self {
        self.proto.domain = domain.to_owned();
        self
    }

    /// Adds an attribute.
    pub fn attr(mut self, name: &str, value: AttrValue) -> Self {
        self.proto.attribute.push(value.into_proto(name));
        self
    }

    /// Adds a `FLOAT` attribute.
    pub fn attr_float(self, name: &str, value: f32) -> Self {
        self.attr(name, AttrValue::Float(value))
    }

    /// Adds an `INT` attribute.
    pub fn attr_int(self, name: &str, value: i64) -> Self {
        self.attr(name, AttrValue::Int(value))
    }

    /// Adds a `FLOATS` attribute.
    pub fn attr_floats(self, name: &str, values: &[f32]) -> Self {
        self.attr(name, AttrValue::Floats(values.to_vec()))
    }

    /// Adds an `INTS` attribute.
    pub fn attr_ints(self, name: &str, values: &[i64]) -> Self {
        self.attr(name, AttrValue::Ints(values.to_vec()))
    }

    /// Adds a `STRING` attribute.
    pub fn attr_string(self, name: &str, value: &str) -> Self {
        self.attr(name, AttrValue::String(value.to_owned()))
    }

    /// Adds a `TENSOR` attribute (as on `Constant`'s `value`).
    pub fn attr_tensor(self, name: &str, value: TensorProto) -> Self {
        self.attr(name, AttrValue::Tensor(value))
    }

    /// Adds a `GRAPH` attribute (a subgraph such as `If`'s `then_branch`).
    pub fn attr_graph(self, name: &str, value: GraphProto) -> Self {
        self.attr(name, AttrValue::Graph(value))
    }

    /// The finished `NodeProto`.
    pub fn build(self) -> NodeProto {
        self.proto
    }
}

/// Builds a single-graph `ModelProto` importing the default ONNX opset.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelBuilder {
    proto: ModelProto,
}

impl ModelBuilder {
    /// A model importing ONNX opset `opset`, with the matching IR version (see
    /// [`ir_version_for_opset`]), producer `ferrofuse` and an empty graph named `main`.
    pub fn new(opset: i64) -> Self {
        let proto = ModelProto {
            ir_version: ir_version_for_opset(opset),
            opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
            producer_name: "ferrofuse".to_owned(),
            producer_version: env!("CARGO_PKG_VERSION").to_owned(),
            graph: Some(GraphProto { name: "main".to_owned(), ..GraphProto::default() }),
            ..ModelProto::default()
        };
        Self { proto }
    }

    /// Overrides the IR version.
    pub fn ir_version(mut self, ir_version: i64) -> Self {
        self.proto.ir_version = ir_version;
        self
    }

    /// Imports `version` of another operator domain, such as `("ai.ferrofuse", 1)`.
    pub fn opset_import(mut self, domain: &str, version: i64) -> Self {
        self.proto.opset_import.push(OperatorSetIdProto { domain: domain.to_owned(), version });
        self
    }

    /// Sets the graph's name.
    pub fn graph_name(mut self, name: &str) -> Self {
        self.graph().name = name.to_owned();
        self
    }

    /// Adds a graph input: a tensor of `dtype` with `dims`.
    pub fn input(mut self, name: &str, dtype: DataType, dims: &[Dim]) -> Self {
        self.graph().input.push(value_info(name, dtype, dims));
        self
    }

    /// Adds a graph output: a tensor of `dtype` with `dims`.
    pub fn output(mut self, name: &str, dtype: DataType, dims: &[Dim]) -> Self {
        self.graph().output.push(value_info(name, dtype, dims));
        self
    }

    /// Records the type and shape of an intermediate value.
    pub fn value_info(mut self, name: &str, dtype: DataType, dims: &[Dim]) -> Self {
        self.graph().value_info.push(value_info(name, dtype, dims));
        self
    }

    /// Adds an initializer.
    pub fn initializer(mut self, tensor: TensorProto) -> Self {
        self.graph().initializer.push(tensor);
        self
    }

    /// Adds an `f32` initializer, see [`tensor_f32`].
    pub fn initializer_f32(self, name: &str, dims: &[i64], data: &[f32]) -> Self {
        self.initializer(tensor_f32(name, dims, data))
    }

    /// Adds an `i64` initializer, see [`tensor_i64`].
    pub fn initializer_i64(self, name: &str, dims: &[i64], data: &[i64]) -> Self {
        self.initializer(tensor_i64(name, dims, data))
    }

    /// Appends a node without attributes; nodes keep the order they are added in.
    pub fn node(self, op_type: &str, inputs: &[&str], outputs: &[&str]) -> Self {
        self.node_with(NodeBuilder::new(op_type, inputs, outputs))
    }

    /// Appends a node built with [`NodeBuilder`] (attributes, name, domain).
    pub fn node_with(mut self, node: NodeBuilder) -> Self {
        self.graph().node.push(node.build());
        self
    }

    /// The finished `ModelProto`.
    pub fn build(self) -> ModelProto {
        self.proto
    }

    /// The finished model, serialized to protobuf bytes.
    pub fn to_bytes(self) -> Vec<u8> {
        self.proto.encode_to_vec()
    }

    fn graph(&mut self) -> &mut GraphProto {
        self.proto.graph.get_or_insert_with(GraphProto::default)
    }
}

/// The IR version onnx released alongside `opset` of the default domain (opset 23 and later
/// map to IR 11; set a newer one with [`ModelBuilder::ir_version`] when needed).
pub fn ir_version_for_opset(opset: i64) -> i64 {
    match opset {
        ..=8 => 3,
        9 => 4,
        10 => 5,
        11 => 6,
        12..=14 => 7,
        15..=18 => 8,
        19..=20 => 9,
        21..=22 => 10,
        _ => 11,
    }
}

/// A `ValueInfoProto` for a tensor of `dtype` with `dims`.
pub fn value_info(name: &str, dtype: DataType, dims: &[Dim]) -> ValueInfoProto {
    use tensor_shape_proto::dimension::Value;
    let dim = dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match d {
                Dim::Fixed(size) => Value::DimValue(*size),
                Dim::Symbolic(name) => Value::DimParam(name.clone()),
            }),
            ..tensor_shape_proto::Dimension::default()
        })
        .collect();
    let tensor = type_proto::Tensor { elem_type: dtype as i32, shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto {
        name: name.to_owned(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(tensor)),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// An `f32` tensor with `data` in little-endian `raw_data`. `data.len()` is not checked
/// against `dims`.
pub fn tensor_f32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    let raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensor_raw(name, DataType::Float, dims, raw_data)
}

/// An `i64` tensor with `data` in little-endian `raw_data`. `data.len()` is not checked
/// against `dims`.
pub fn tensor_i64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    let raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensor_raw(name, DataType::Int64, dims, raw_data)
}

/// A tensor of any `dtype` whose bytes are `raw_data`, taken as given.
pub fn tensor_raw(name: &str, dtype: DataType, dims: &[i64], raw_data: Vec<u8>) -> TensorProto {
    TensorProto {
        name: name.to_owned(),
        data_type: dtype as i32,
        dims: dims.to_vec(),
        raw_data,
        ..TensorProto::default()
    }
}

/// A tensor whose bytes live in the file `location` (relative to the model's folder), at
/// `offset` for `length` bytes; `None` omits the entry (offset 0, length to end of file).
pub fn tensor_external(
    name: &str,
    dtype: DataType,
    dims: &[i64],
    location: &str,
    offset: Option<u64>,
    length: Option<u64>,
) -> TensorProto {
    let entry = |key: &str, value: String| StringStringEntryProto { key: key.to_owned(), value };
    let mut external_data = vec![entry("location", location.to_owned())];
    external_data.extend(offset.map(|o| entry("offset", o.to_string())));
    external_data.extend(length.map(|l| entry("length", l.to_string())));
    TensorProto {
        name: name.to_owned(),
        data_type: dtype as i32,
        dims: dims.to_vec(),
        external_data,
        data_location: DataLocation::External as i32,
        ..TensorProto::default()
    }
}
