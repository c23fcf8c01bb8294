//! [`OnnxError`], the one error type of this crate, and the structured reasons it carries.
//!
//! Every variant about a tensor names it: by its `name`, or, for unnamed tensors (Constant
//! attributes, sparse parts), by where it sits, such as `node 'c0' attribute 'value'`. Every
//! conversion error about a node names the node and its op_type; errors about values name them.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong while loading an ONNX model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// The bytes are not a valid protobuf `ModelProto` (truncated, garbage, nested too deep).
    #[error("cannot decode ONNX model{}: {source}", describe_path(.path))]
    Decode {
        /// The model file, when loading from a path.
        path: Option<PathBuf>,
        /// What prost reported.
        #[source]
        source: prost::DecodeError,
    },
    /// Reading the model file failed.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The serialized model is larger than [`LoadLimits::max_model_bytes`](crate::LoadLimits).
    #[error("ONNX model{} is {bytes} bytes, over the limit of {limit_bytes}", describe_path(.path))]
    ModelTooLarge {
        /// The model file, when loading from a path.
        path: Option<PathBuf>,
        /// Size of the serialized model.
        bytes: u64,
        /// The limit in force.
        limit_bytes: u64,
    },
    /// The `ModelProto` has no `graph` (empty input decodes to such a model).
    #[error("ONNX model has no graph")]
    MissingGraph,
    /// The `ModelProto` has no positive `ir_version`.
    #[error("ONNX model has no ir_version (got {ir_version})")]
    MissingIrVersion {
        /// The value found.
        ir_version: i64,
    },
    /// An external-data tensor could not be resolved.
    #[error("tensor '{tensor}': external data: {reason}")]
    ExternalData {
        /// The tensor's name, or where an unnamed tensor sits.
        tensor: String,
        /// Why it failed.
        reason: ExternalDataReason,
    },
    /// A tensor's shape, type or byte count is inconsistent or over a limit.
    #[error("tensor '{tensor}': {issue}")]
    InvalidTensor {
        /// The tensor's name, or where an unnamed tensor sits.
        tensor: String,
        /// What is wrong with it.
        issue: TensorIssue,
    },
    /// Conversion found operators it cannot map (every one in the model, subgraphs included).
    #[error("unsupported operators: {}", describe_ops(.ops))]
    Unsupported {
        /// Each unsupported node, in graph order.
        ops: Vec<UnsupportedOp>,
    },
    /// The model does not import the default ONNX domain although it uses its operators.
    #[error("the model uses ONNX operators but imports no default-domain opset")]
    MissingOpset,
    /// The model imports a default-domain opset outside the range the converter handles.
    #[error("ONNX opset {version} is not supported (supported: {min}..={max})")]
    UnsupportedOpset {
        /// The imported version.
        version: i64,
        /// Oldest supported version.
        min: i64,
        /// Newest supported version.
        max: i64,
    },
    /// A node attribute is missing, of the wrong type, or has an invalid value.
    #[error("node '{node}' ({op_type}): attribute '{attr}': {issue}")]
    Attribute {
        /// The node's name (or `#index` when unnamed).
        node: String,
        /// The node's op_type.
        op_type: String,
        /// The attribute's name.
        attr: String,
        /// What is wrong.
        issue: AttrIssue,
    },
    /// A node is malformed in a way no single attribute explains (input counts, opset rules).
    #[error("node '{node}' ({op_type}): {detail}")]
    InvalidNode {
        /// The node's name (or `#index` when unnamed).
        node: String,
        /// The node's op_type.
        op_type: String,
        /// What is wrong.
        detail: String,
    },
    /// A node reads a value that no input, initializer, node or enclosing graph defines.
    #[error("node '{node}' ({op_type}): input '{value}' is not defined")]
    UndefinedValue {
        /// The node's name (or `#index` when unnamed).
        node: String,
        /// The node's op_type.
        op_type: String,
        /// The undefined value's name.
        value: String,
    },
    /// A graph output names a value nothing defines.
    #[error("graph '{graph}': output '{value}' is not defined")]
    UndefinedOutput {
        /// The graph's name.
        graph: String,
        /// The undefined value's name.
        value: String,
    },
    /// Two definitions (inputs, initializers, node outputs) share one name in one graph.
    #[error("graph '{graph}': value '{value}' is defined more than once")]
    DuplicateValue {
        /// The graph's name.
        graph: String,
        /// The value's name.
        value: String,
    },
    /// A graph input or declared value has a type the planner cannot represent.
    #[error("value '{value}': {detail}")]
    InvalidType {
        /// The value's name.
        value: String,
        /// What is wrong with its type.
        detail: String,
    },
    /// The converted graph failed the planner's structural checks.
    #[error("converted graph is invalid: {source}")]
    InvalidGraph {
        /// What `planner::validate::graph` reported.
        #[from]
        source: planner::PlanError,
    },
}

/// One node the converter cannot map, as listed by [`OnnxError::Unsupported`] and
/// [`ModelSummary::unsupported`](crate::ModelSummary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// The node's name (or `#index` when unnamed).
    pub node: String,
    /// The node's op_type.
    pub op_type: String,
    /// The node's domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Why: unknown operator, or the opset range it is supported in.
    pub reason: String,
}

impl fmt::Display for UnsupportedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let domain = if self.domain.is_empty() { String::new() } else { format!("{}::", self.domain) };
        write!(f, "'{}' ({domain}{}: {})", self.node, self.op_type, self.reason)
    }
}

/// What is wrong with a node attribute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttrIssue {
    /// A required attribute is absent.
    #[error("required but missing")]
    Missing,
    /// The attribute has another type than the operator expects.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// The expected ONNX attribute type, such as `INTS`.
        expected: &'static str,
        /// The type found.
        found: String,
    },
    /// The attribute's value is out of range or not one of the accepted values.
    #[error("{detail}")]
    Invalid {
        /// Why the value is rejected.
        detail: String,
    },
    /// The operator (at the model's opset) has no attribute of this name, or ferrofuse does not
    /// implement it: as ONNX Runtime does, the node is refused rather than run with a setting
    /// silently ignored.
    #[error("not an attribute ferrofuse knows for this operator at opset {opset} (refused, not ignored)")]
    Unknown {
        /// The model's default-domain opset.
        opset: i64,
    },
}

/// Why an external-data tensor (`data_location == EXTERNAL`) could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExternalDataReason {
    /// The model came from bytes without a base directory to resolve `location` against.
    #[error("the model was loaded from bytes without a base directory")]
    NoBaseDir,
    /// No (or an empty) `location` entry.
    #[error("no 'location' entry")]
    MissingLocation,
    /// The same key appears twice among `location`, `offset` and `length`.
    #[error("entry '{key}' appears more than once")]
    DuplicateEntry {
        /// The repeated key.
        key: String,
    },
    /// `offset` or `length` is not a non-negative decimal integer.
    #[error("entry '{key}' = '{value}' is not a non-negative integer")]
    InvalidEntry {
        /// The key.
        key: String,
        /// Its value.
        value: String,
    },
    /// `location` is an absolute path; ONNX requires it to be relative to the model's folder.
    #[error("location '{location}' is absolute")]
    AbsoluteLocation {
        /// The `location` entry.
        location: String,
    },
    /// `location` has a `..` component.
    #[error("location '{location}' contains '..'")]
    ParentDirLocation {
        /// The `location` entry.
        location: String,
    },
    /// `location` resolves (through symlinks) outside the model's folder.
    #[error("location '{location}' resolves to {}, outside the model's folder", .resolved.display())]
    EscapesModelDir {
        /// The `location` entry.
        location: String,
        /// Where it resolved to.
        resolved: PathBuf,
    },
    /// The model's folder cannot be resolved.
    #[error("cannot resolve the model's folder {}: {source}", .dir.display())]
    BaseDir {
        /// The base directory given or derived from the model path.
        dir: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file cannot be found or opened.
    #[error("cannot open '{location}': {source}")]
    Open {
        /// The `location` entry.
        location: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `location` names a directory or another non-regular file.
    #[error("location '{location}' is not a regular file")]
    NotAFile {
        /// The `location` entry.
        location: String,
    },
    /// `offset` / `length` lie beyond the end of the file.
    #[error(
        "offset {offset} + length {} exceeds the {file_bytes} bytes of '{location}'",
        .length.map_or_else(|| "(rest of file)".to_owned(), |l| l.to_string())
    )]
    OutOfBounds {
        /// The `location` entry.
        location: String,
        /// The `offset` entry (0 when absent).
        offset: u64,
        /// The `length` entry, if present.
        length: Option<u64>,
        /// The file's size.
        file_bytes: u64,
    },
    /// Reading the bytes failed (or the file shrank while being read).
    #[error("cannot read '{location}': {source}")]
    Read {
        /// The `location` entry.
        location: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Loading this tensor would take all external data over
    /// [`LoadLimits::max_external_bytes`](crate::LoadLimits).
    #[error("external data would total {total_bytes} bytes, over the limit of {limit_bytes}")]
    TotalTooLarge {
        /// External bytes loaded so far plus this tensor's.
        total_bytes: u64,
        /// The limit in force.
        limit_bytes: u64,
    },
    /// STRING tensors have no raw byte layout, so they cannot live in external data.
    #[error("STRING tensors cannot be stored as external data")]
    StringTensor,
}

/// What is wrong with a tensor's shape, type or bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TensorIssue {
    /// A dimension is negative.
    #[error("negative dimension in dims {dims:?}")]
    NegativeDim {
        /// The tensor's dims.
        dims: Vec<i64>,
    },
    /// The element or byte count does not fit in 64 bits.
    #[error("dims {dims:?} overflow a 64-bit byte count")]
    CountOverflow {
        /// The tensor's dims.
        dims: Vec<i64>,
    },
    /// `data_type` is UNDEFINED or a value this version does not know, yet the tensor has data.
    #[error("data_type {data_type} is undefined or unknown")]
    UnknownDataType {
        /// The raw `data_type` value.
        data_type: i32,
    },
    /// The number of bytes does not match `dims` and the data type.
    #[error("{data_type} tensor with dims {dims:?} needs {expected_bytes} bytes but has {actual_bytes}")]
    ByteLenMismatch {
        /// The data type's ONNX name, such as `FLOAT`.
        data_type: &'static str,
        /// The tensor's dims.
        dims: Vec<i64>,
        /// Bytes implied by dims and data type.
        expected_bytes: u64,
        /// Bytes present (`raw_data`) or declared (external `length`).
        actual_bytes: u64,
    },
    /// The tensor is larger than [`LoadLimits::max_tensor_bytes`](crate::LoadLimits).
    #[error("{bytes} bytes is over the per-tensor limit of {limit_bytes}")]
    TooLarge {
        /// The tensor's byte count.
        bytes: u64,
        /// The limit in force.
        limit_bytes: u64,
    },
    /// The data type is valid ONNX but has no planner `DType` (UINT16, STRING, FLOAT8, ...).
    #[error("data type {data_type} is not supported")]
    UnsupportedDataType {
        /// The data type's ONNX name.
        data_type: &'static str,
    },
    /// The tensor has elements but no data in any field.
    #[error("dims {dims:?} need data but the tensor has none")]
    MissingData {
        /// The tensor's dims.
        dims: Vec<i64>,
    },
    /// A typed data field holds another number of entries than `dims` needs.
    #[error("{field} holds {actual} entries but dims {dims:?} need {expected}")]
    FieldLenMismatch {
        /// The field read, such as `float_data`.
        field: &'static str,
        /// The tensor's dims.
        dims: Vec<i64>,
        /// Entries needed.
        expected: u64,
        /// Entries present.
        actual: u64,
    },
    /// A tensor feature the converter does not handle (segments, sparse tensors, unresolved
    /// external data).
    #[error("{what} is not supported")]
    Unsupported {
        /// The feature.
        what: &'static str,
    },
}

fn describe_ops(ops: &[UnsupportedOp]) -> String {
    ops.iter().map(UnsupportedOp::to_string).collect::<Vec<_>>().join(", ")
}

fn describe_path(path: &Option<PathBuf>) -> String {
    path.as_ref().map_or_else(String::new, |p| format!(" {}", p.display()))
}
