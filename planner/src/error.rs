//! `PlanError`, the one error type of the planner.
//!
//! Every variant that concerns a node carries the node's display name (its ONNX name, or `#index`
//! when it has none) and the ONNX op_type, so a message always points at one place in the model.

use thiserror::Error;

/// Everything that can go wrong while validating, inferring, folding or planning a graph.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    /// Input shapes are incompatible with the operator's semantics.
    #[error("node {node} ({op}): shape mismatch: {detail}")]
    ShapeMismatch {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
        /// What did not fit.
        detail: String,
    },
    /// Input element types are incompatible with the operator's semantics.
    #[error("node {node} ({op}): dtype mismatch: {detail}")]
    DTypeMismatch {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
        /// What did not fit.
        detail: String,
    },
    /// An attribute (or an attribute-like constant input) has an invalid value.
    #[error("node {node} ({op}): invalid attribute: {detail}")]
    InvalidAttribute {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
        /// Which attribute and why.
        detail: String,
    },
    /// A required input slot is empty.
    #[error("node {node} ({op}): required input {index} is missing")]
    MissingInput {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
        /// Input slot index.
        index: usize,
    },
    /// The node has a number of inputs or outputs the operator does not accept.
    #[error("node {node} ({op}): wrong arity: {detail}")]
    Arity {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
        /// Expected and actual counts.
        detail: String,
    },
    /// The planner cannot handle this operator (or this use of it) yet.
    #[error(
        "node {node} ({op}): unsupported by shape inference: an output rank or axis list depends on \
         run-time values (or on an unsupported input combination)"
    )]
    Unsupported {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
    },
    /// A node reads a value that nothing defines.
    #[error("node {node} ({op}): input value {value} is not defined")]
    UndefinedValue {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
        /// Name (or id) of the undefined value.
        value: String,
    },
    /// A value id is outside the graph's value table.
    #[error("node {node} ({op}): value id {value} is out of range")]
    ValueOutOfRange {
        /// Node display name (or `graph` for graph inputs and outputs).
        node: String,
        /// ONNX op_type (empty for graph inputs and outputs).
        op: &'static str,
        /// The offending raw id.
        value: u32,
    },
    /// A value is defined more than once (by two nodes, or by a node and an input/initializer).
    #[error("node {node} ({op}): value {value} is defined more than once")]
    DuplicateDefinition {
        /// Node display name (or `graph`).
        node: String,
        /// ONNX op_type (empty for graph inputs).
        op: &'static str,
        /// Name of the value.
        value: String,
    },
    /// The graph has a cycle through this node.
    #[error("node {node} ({op}): part of a cycle")]
    Cycle {
        /// Node display name.
        node: String,
        /// ONNX op_type.
        op: &'static str,
    },
    /// A graph input has no declared dtype and shape.
    #[error("graph input {value} has no declared type and shape")]
    MissingInputInfo {
        /// Name of the input value.
        value: String,
    },
    /// A graph output is never defined.
    #[error("graph output {value} is not defined")]
    UndefinedOutput {
        /// Name of the output value.
        value: String,
    },
    /// A symbolic dim has no size in the binding.
    #[error("symbol {symbol} is not bound to a size")]
    UnboundSymbol {
        /// The symbol's name.
        symbol: String,
    },
    /// A constant tensor's bytes do not match its dtype and dims.
    #[error("constant tensor: {detail}")]
    BadConstant {
        /// What did not match.
        detail: String,
    },
    /// Nodes the GPU plan has no kernel for (all of them, listed at once; nothing falls back to the
    /// CPU silently).
    #[error("no GPU kernel for {} node(s): {}", .nodes.len(), .nodes.iter().map(|(n, o, why)| format!("{n} ({o}): {why}")).collect::<Vec<_>>().join("; "))]
    NoKernel {
        /// (node label, op type, what is missing: the op, or its dtype / mode).
        nodes: Vec<(String, &'static str, String)>,
    },
    /// Memory planning failed (a size overflows) or a memory plan broke an invariant.
    #[error("memory plan: {detail}")]
    Memory {
        /// What is wrong.
        detail: String,
    },
}
