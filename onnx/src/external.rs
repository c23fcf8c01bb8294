//! Resolving external data: reading a tensor's bytes from a file beside the model into its
//! `raw_data`, and checking inline `raw_data` sizes on the way.
//!
//! Safety rules: `location` must be relative, free of `..`, and resolve (after symlinks) inside
//! the model's canonical folder to a regular file; `offset`/`length` must lie within that file,
//! and the byte count must match `dims` x data type before any buffer is reserved.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use crate::error::{ExternalDataReason, OnnxError, TensorIssue};
use crate::load::LoadLimits;
use crate::proto::TensorProto;
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::tensor;
use crate::visit::Site;

/// The parsed `external_data` entries of one tensor.
struct ExternalRef {
    location: String,
    offset: u64,
    length: Option<u64>,
}

/// Resolves tensors one by one, keeping the running total of external bytes.
pub(crate) struct Resolver<'a> {
    base_dir: Option<&'a Path>,
    canonical_base: Option<PathBuf>,
    limits: &'a LoadLimits,
    external_bytes: u64,
}

impl<'a> Resolver<'a> {
    /// A resolver for a model whose external files live in `base_dir` (none: bytes-only load).
    pub(crate) fn new(base_dir: Option<&'a Path>, limits: &'a LoadLimits) -> Self {
        Self { base_dir, canonical_base: None, limits, external_bytes: 0 }
    }

    /// Brings an external tensor's bytes inline; checks an inline tensor's `raw_data` size.
    pub(crate) fn resolve(&mut self, tensor: &mut TensorProto, site: Site<'_>) -> Result<(), OnnxError> {
        let invalid =
            |tensor: &TensorProto, issue| OnnxError::InvalidTensor { tensor: site.label(tensor), issue };
        if tensor.data_location != DataLocation::External as i32 {
            if tensor.raw_data.is_empty() {
                return Ok(());
            }
            let bytes = u64::try_from(tensor.raw_data.len()).unwrap_or(u64::MAX);
            return tensor::check_bytes(tensor, bytes, self.limits.max_tensor_bytes)
                .map_err(|issue| invalid(tensor, issue));
        }
        let external =
            |tensor: &TensorProto, reason| OnnxError::ExternalData { tensor: site.label(tensor), reason };
        let dtype = tensor::data_type(tensor).map_err(|issue| invalid(tensor, issue))?;
        if dtype == DataType::String {
            return Err(external(tensor, ExternalDataReason::StringTensor));
        }
        let reference = parse_entries(tensor).map_err(|reason| external(tensor, reason))?;
        let bytes = self.read(tensor, &reference).map_err(|failure| match failure {
            Failure::External(reason) => external(tensor, reason),
            Failure::Tensor(issue) => invalid(tensor, issue),
        })?;
        tensor.raw_data = bytes;
        tensor.external_data.clear();
        tensor.data_location = DataLocation::Default as i32;
        Ok(())
    }

    /// Reads the bytes `reference` names, after every check on them has passed.
    fn read(&mut self, tensor: &TensorProto, reference: &ExternalRef) -> Result<Vec<u8>, Failure> {
        let location = &reference.location;
        let path = self.locate(location)?;
        let open = |source| ExternalDataReason::Open { location: location.clone(), source };
        let not_a_file = || ExternalDataReason::NotAFile { location: location.clone() };
        // Checked before opening too: opening a FIFO would block.
        if !std::fs::metadata(&path).map_err(open)?.is_file() {
            return Err(not_a_file().into());
        }
        let mut file = File::open(&path).map_err(open)?;
        let metadata = file.metadata().map_err(open)?;
        if !metadata.is_file() {
            return Err(not_a_file().into());
        }
        let file_bytes = metadata.len();
        let out_of_bounds = || ExternalDataReason::OutOfBounds {
            location: location.clone(),
            offset: reference.offset,
            length: reference.length,
            file_bytes,
        };
        let available = file_bytes.checked_sub(reference.offset).ok_or_else(out_of_bounds)?;
        let length = reference.length.unwrap_or(available);
        if length > available {
            return Err(out_of_bounds().into());
        }
        // Before reserving anything: the length must fit dims x data type and the size limit.
        tensor::check_bytes(tensor, length, self.limits.max_tensor_bytes)?;
        let total_bytes = self.external_bytes.saturating_add(length);
        if total_bytes > self.limits.max_external_bytes {
            let limit_bytes = self.limits.max_external_bytes;
            return Err(ExternalDataReason::TotalTooLarge { total_bytes, limit_bytes }.into());
        }
        let read_error = |source| ExternalDataReason::Read { location: location.clone(), source };
        let capacity = usize::try_from(length)
            .map_err(|_| read_error(std::io::Error::from(std::io::ErrorKind::OutOfMemory)))?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(capacity)
            .map_err(|_| read_error(std::io::Error::from(std::io::ErrorKind::OutOfMemory)))?;
        file.seek(SeekFrom::Start(reference.offset)).map_err(read_error)?;
        file.take(length).read_to_end(&mut bytes).map_err(read_error)?;
        if bytes.len() != capacity {
            return Err(read_error(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)).into());
        }
        self.external_bytes = total_bytes;
        Ok(bytes)
    }

    /// The canonical path of `location`, checked to lie inside the model's folder.
    fn locate(&mut self, location: &str) -> Result<PathBuf, ExternalDataReason> {
        let relative = Path::new(location);
        if relative.is_absolute()
            || relative.has_root()
            || relative.components().any(|c| matches!(c, Component::Prefix(_)))
        {
            return Err(ExternalDataReason::AbsoluteLocation { location: location.to_owned() });
        }
        if relative.components().any(|c| c == Component::ParentDir) {
            return Err(ExternalDataReason::ParentDirLocation { location: location.to_owned() });
        }
        let base = self.canonical_base()?;
        let resolved = base
            .join(relative)
            .canonicalize()
            .map_err(|source| ExternalDataReason::Open { location: location.to_owned(), source })?;
        if !resolved.starts_with(base) {
            return Err(ExternalDataReason::EscapesModelDir { location: location.to_owned(), resolved });
        }
        Ok(resolved)
    }

    fn canonical_base(&mut self) -> Result<&Path, ExternalDataReason> {
        let dir = self.base_dir.ok_or(ExternalDataReason::NoBaseDir)?;
        if self.canonical_base.is_none() {
            let canonical = dir
                .canonicalize()
                .map_err(|source| ExternalDataReason::BaseDir { dir: dir.to_path_buf(), source })?;
            self.canonical_base = Some(canonical);
        }
        Ok(self.canonical_base.as_deref().unwrap_or(dir))
    }
}

/// A failure while reading, before the tensor's label is attached.
enum Failure {
    External(ExternalDataReason),
    Tensor(TensorIssue),
}

impl From<ExternalDataReason> for Failure {
    fn from(reason: ExternalDataReason) -> Self {
        Failure::External(reason)
    }
}

impl From<TensorIssue> for Failure {
    fn from(issue: TensorIssue) -> Self {
        Failure::Tensor(issue)
    }
}

/// Parses `location` (required), `offset` and `length` (optional); other keys such as
/// `checksum` are ignored.
fn parse_entries(tensor: &TensorProto) -> Result<ExternalRef, ExternalDataReason> {
    let (mut location, mut offset, mut length) = (None, None, None);
    for entry in &tensor.external_data {
        let slot = match entry.key.as_str() {
            "location" => {
                set_once(&mut location, &entry.key, entry.value.clone())?;
                continue;
            }
            "offset" => &mut offset,
            "length" => &mut length,
            _ => continue,
        };
        let value = entry.value.trim().parse::<u64>().map_err(|_| ExternalDataReason::InvalidEntry {
            key: entry.key.clone(),
            value: entry.value.clone(),
        })?;
        set_once(slot, &entry.key, value)?;
    }
    let location = location.filter(|l: &String| !l.is_empty()).ok_or(ExternalDataReason::MissingLocation)?;
    Ok(ExternalRef { location, offset: offset.unwrap_or(0), length })
}

fn set_once<T>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), ExternalDataReason> {
    if slot.replace(value).is_some() {
        return Err(ExternalDataReason::DuplicateEntry { key: key.to_owned() });
    }
    Ok(())
}
