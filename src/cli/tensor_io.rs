//! Reading input tensors from `.npy` and ONNX `TensorProto` (`.pb`) files, and writing outputs as
//! `.npy` files named after the output (characters that cannot be in a file name replaced by `_`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use host::HostTensor;
use prost::Message;

/// Reads one tensor; the format follows the extension (`.npy`, or `.pb` for a serialized
/// `onnx.TensorProto`).
pub fn read_tensor(path: &Path) -> Result<HostTensor> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => host::npy::read(&bytes).with_context(|| format!("parsing {}", path.display())),
        Some("pb") => {
            let proto = onnx::proto::TensorProto::decode(bytes.as_slice())
                .with_context(|| format!("{} is not a serialized onnx.TensorProto", path.display()))?;
            let constant =
                onnx::convert::to_const(&proto).with_context(|| format!("decoding {}", path.display()))?;
            Ok(HostTensor::from_const(&constant)?)
        }
        _ => bail!("{}: unknown tensor file type (expected .npy or .pb)", path.display()),
    }
}

/// `name` with every character outside `[A-Za-z0-9._-]` replaced by `_` (and a leading `.`, which
/// would hide the file or name a parent folder, as well).
pub fn file_stem(name: &str) -> String {
    let mut s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with('.') {
        s.insert(0, '_');
    }
    s
}

/// Writes `t` to `dir/<file_stem(name)>.npy`, returning the path.
pub fn write_output(dir: &Path, name: &str, t: &HostTensor) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}.npy", file_stem(name)));
    std::fs::write(&path, host::npy::write(t)).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_sanitised() {
        assert_eq!(file_stem("logits"), "logits");
        assert_eq!(file_stem("a/b:c d"), "a_b_c_d");
        assert_eq!(file_stem("../x"), "_.._x");
        assert_eq!(file_stem(""), "_");
        assert_eq!(file_stem("out.0"), "out.0");
    }
}
