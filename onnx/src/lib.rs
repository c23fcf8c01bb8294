//! ferrofuse ONNX front end: the ONNX protobuf types, the model loader and a model builder.
//!
//! - [`proto`] holds the prost messages generated from `onnx/proto/onnx.proto3` (checked in;
//!   `scripts/regen-onnx-proto.sh` regenerates them, so building needs no `protoc`).
//! - [`load_path`] / [`load_bytes`] decode a model and pull external-data tensors into memory.
//!   A [`Model`] they return always has a graph and holds every tensor's bytes inline, with
//!   `raw_data` lengths checked against `dims` and the data type.
//! - [`builder`] writes `ModelProto`s from Rust for tests, fixtures and demos.
//! - [`to_graph`] converts a [`Model`] to the planner's `Graph` (opsets
//!   [`convert::MIN_OPSET`]..=[`convert::MAX_OPSET`] plus ferrofuse's and SOFIE's sequence
//!   operators); [`inspect()`] summarizes a model without converting it.
//!
//! Untrusted input never panics and never allocates more than the real file holds and
//! [`LoadLimits`] allows; every failure is an [`OnnxError`] naming the tensor involved.
#![forbid(unsafe_code)]

pub mod builder;
pub mod convert;
mod error;
mod external;
mod load;
mod model;
pub mod proto;
mod tensor;
mod visit;

pub use builder::{AttrValue, Dim, ModelBuilder, NodeBuilder};
pub use convert::{ModelSummary, OpsetSummary, ValueSummary, inspect, to_graph};
pub use error::{AttrIssue, ExternalDataReason, OnnxError, TensorIssue, UnsupportedOp};
pub use load::{LoadLimits, load_bytes, load_bytes_with, load_path, load_path_with};
pub use model::Model;
pub use proto::tensor_proto::DataType;
pub use tensor::{byte_len, element_bits};
