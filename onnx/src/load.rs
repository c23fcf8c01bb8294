//! Loading a model: read the file (bounded), decode the `ModelProto`, check its structure, and
//! resolve external data into `raw_data`.
//!
//! Allocation is bounded by the real input: the model file is read up to
//! [`LoadLimits::max_model_bytes`], prost never allocates beyond the bytes it is given, and
//! external tensors are checked against their file's size before a buffer is reserved.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::error::OnnxError;
use crate::external::Resolver;
use crate::model::Model;
use crate::proto::ModelProto;
use crate::visit;

/// Size limits applied while loading. The defaults suit any model one GPU can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// Largest serialized `ModelProto` accepted; protobuf itself caps messages at 2 GiB.
    pub max_model_bytes: u64,
    /// Largest single tensor (inline `raw_data` or external) accepted.
    pub max_tensor_bytes: u64,
    /// Largest total of external data read for one model.
    pub max_external_bytes: u64,
}

impl Default for LoadLimits {
    fn default() -> Self {
        const GIB: u64 = 1 << 30;
        Self { max_model_bytes: 2 * GIB, max_tensor_bytes: 16 * GIB, max_external_bytes: 64 * GIB }
    }
}

/// Loads the model at `path` with [`LoadLimits::default`]; external data is resolved relative
/// to the file's folder.
///
/// # Errors
/// [`OnnxError::Io`] if the file cannot be read, [`OnnxError::Decode`] for bytes that are not a
/// `ModelProto`, and any error of [`load_bytes_with`].
pub fn load_path(path: &Path) -> Result<Model, OnnxError> {
    load_path_with(path, &LoadLimits::default())
}

/// Loads the model at `path` under `limits`; external data is resolved relative to the file's
/// folder.
///
/// # Errors
/// As [`load_path`], plus [`OnnxError::ModelTooLarge`] when the file exceeds
/// `limits.max_model_bytes`.
pub fn load_path_with(path: &Path, limits: &LoadLimits) -> Result<Model, OnnxError> {
    let bytes = read_bounded(path, limits.max_model_bytes)?;
    let base_dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let proto = ModelProto::decode(bytes.as_slice())
        .map_err(|source| OnnxError::Decode { path: Some(path.to_path_buf()), source })?;
    finish(proto, Some(base_dir), limits)
}

/// Loads a model from its serialized bytes with [`LoadLimits::default`]. External data is
/// resolved relative to `base_dir`; without one, a model with external data is an error.
///
/// # Errors
/// See [`load_bytes_with`].
pub fn load_bytes(bytes: &[u8], base_dir: Option<&Path>) -> Result<Model, OnnxError> {
    load_bytes_with(bytes, base_dir, &LoadLimits::default())
}

/// Loads a model from its serialized bytes under `limits`.
///
/// # Errors
/// - [`OnnxError::ModelTooLarge`] when `bytes` exceeds `limits.max_model_bytes`;
/// - [`OnnxError::Decode`] for bytes that are not a `ModelProto`;
/// - [`OnnxError::MissingGraph`] / [`OnnxError::MissingIrVersion`] for a structurally empty model;
/// - [`OnnxError::ExternalData`] when an external tensor cannot be resolved safely;
/// - [`OnnxError::InvalidTensor`] when a tensor's bytes do not match its dims and data type or
///   exceed `limits.max_tensor_bytes`.
pub fn load_bytes_with(
    bytes: &[u8],
    base_dir: Option<&Path>,
    limits: &LoadLimits,
) -> Result<Model, OnnxError> {
    let bytes_len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if bytes_len > limits.max_model_bytes {
        return Err(OnnxError::ModelTooLarge {
            path: None,
            bytes: bytes_len,
            limit_bytes: limits.max_model_bytes,
        });
    }
    let proto = ModelProto::decode(bytes).map_err(|source| OnnxError::Decode { path: None, source })?;
    finish(proto, base_dir, limits)
}

/// Checks a decoded model's structure and brings every tensor inline. Shared by the loaders and
/// [`Model::from_proto`].
pub(crate) fn finish(
    mut proto: ModelProto,
    base_dir: Option<&Path>,
    limits: &LoadLimits,
) -> Result<Model, OnnxError> {
    if proto.graph.is_none() {
        return Err(OnnxError::MissingGraph);
    }
    if proto.ir_version <= 0 {
        return Err(OnnxError::MissingIrVersion { ir_version: proto.ir_version });
    }
    let mut resolver = Resolver::new(base_dir, limits);
    visit::model(&mut proto, &mut |tensor, site| resolver.resolve(tensor, site))?;
    Ok(Model::new_unchecked(proto))
}

/// Reads the whole file, refusing files over `limit_bytes` without reading them.
fn read_bounded(path: &Path, limit_bytes: u64) -> Result<Vec<u8>, OnnxError> {
    let io_error = |source| OnnxError::Io { path: path.to_path_buf(), source };
    // Checked before opening: opening a FIFO would block, and a directory is no model.
    if !std::fs::metadata(path).map_err(io_error)?.is_file() {
        return Err(io_error(std::io::Error::new(ErrorKind::InvalidInput, "not a regular file")));
    }
    let file = File::open(path).map_err(io_error)?;
    let file_bytes = file.metadata().map_err(io_error)?.len();
    let too_large = |bytes| OnnxError::ModelTooLarge { path: Some(PathBuf::from(path)), bytes, limit_bytes };
    if file_bytes > limit_bytes {
        return Err(too_large(file_bytes));
    }
    // Metadata can lie (the file may grow, or be a special file); `take` keeps the bound.
    let mut bytes = Vec::with_capacity(usize::try_from(file_bytes).unwrap_or(0));
    file.take(limit_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(io_error)?;
    let read_bytes = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if read_bytes > limit_bytes {
        return Err(too_large(read_bytes));
    }
    Ok(bytes)
}
