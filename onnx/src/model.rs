//! [`Model`]: a decoded, checked `ModelProto` plus the lookups the converter needs.
//!
//! Invariants (established by the loaders and [`Model::from_proto`]): the graph is present,
//! `ir_version > 0`, no tensor refers to external data any more, and every non-empty
//! `raw_data` matches its tensor's dims and data type.

use prost::Message;

use crate::error::OnnxError;
use crate::load::{self, LoadLimits};
use crate::proto::{GraphProto, ModelProto, TensorProto};

/// A loaded ONNX model. Obtain one from [`load_path`](crate::load_path),
/// [`load_bytes`](crate::load_bytes) or [`Model::from_proto`].
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    proto: ModelProto,
}

impl Model {
    /// Checks an in-memory `ModelProto` as the loaders do (graph present, tensor sizes) with
    /// [`LoadLimits::default`].
    ///
    /// # Errors
    /// As [`load_bytes`](crate::load_bytes) without a base directory: a tensor with external
    /// data yields [`OnnxError::ExternalData`] with
    /// [`ExternalDataReason::NoBaseDir`](crate::ExternalDataReason::NoBaseDir).
    pub fn from_proto(proto: ModelProto) -> Result<Self, OnnxError> {
        load::finish(proto, None, &LoadLimits::default())
    }

    /// Wraps a proto that [`load::finish`] has checked.
    pub(crate) fn new_unchecked(proto: ModelProto) -> Self {
        Self { proto }
    }

    /// The underlying protobuf message.
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// Unwraps the protobuf message.
    pub fn into_proto(self) -> ModelProto {
        self.proto
    }

    /// The main graph.
    pub fn graph(&self) -> &GraphProto {
        self.proto.graph.as_ref().expect("Model invariant: load::finish checked the graph is present")
    }

    /// The model's IR version (always positive).
    pub fn ir_version(&self) -> i64 {
        self.proto.ir_version
    }

    /// The imported opset version of `domain`, if the model imports it. The default ONNX
    /// domain may be spelled `""` or `"ai.onnx"`; both find the same import.
    pub fn opset_version(&self, domain: &str) -> Option<i64> {
        fn canonical(domain: &str) -> &str {
            if domain == "ai.onnx" { "" } else { domain }
        }
        let wanted = canonical(domain);
        self.proto.opset_import.iter().find(|o| canonical(&o.domain) == wanted).map(|o| o.version)
    }

    /// The main graph's initializer called `name`, if any.
    pub fn initializer(&self, name: &str) -> Option<&TensorProto> {
        self.graph().initializer.iter().find(|t| t.name == name)
    }

    /// Serializes the model (all tensor data inline) to protobuf bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.proto.encode_to_vec()
    }
}
