//! ferrofuse planner: the graph IR, operator set, validation, shape inference and graph passes.
//!
//! | stage | function | what it guarantees |
//! |---|---|---|
//! | check | [`validate::graph`] | ids in range, one definition per value, arity, no cycles |
//! | fold | [`fold::run`] | shape subgraphs on static dims become initializers; dead nodes removed |
//! | infer | [`shape_infer::infer`] | a dtype and (possibly symbolic) shape for every value |
//!
//! The IR (`Graph`, `Node`, `Op`, `TensorInfo`, `ConstTensor`) is plain serialisable data. The
//! planner knows nothing about protobuf or CUDA; the onnx crate maps op_type strings to [`Op`].
#![forbid(unsafe_code)]

pub mod builder;
pub mod coded;
pub mod constant;
pub mod dce;
pub mod error;
pub mod fold;
pub mod graph;
pub mod memory;
pub mod op;
pub mod plan;
pub mod shape_infer;
pub mod stage;
pub mod tensor_info;
pub mod validate;

pub use coded::{Coded, RoundMode};
pub use constant::ConstTensor;
pub use error::PlanError;
pub use graph::{Capture, Definition, Graph, Node, NodeId, ValueId, ValueInfo};
pub use op::Op;
pub use shape_infer::Inference;
pub use tensor_info::{Binding, DType, Dim, Shape, TensorInfo};
