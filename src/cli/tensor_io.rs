//! Reading input tensors from `.npy` and ONNX `TensorProto` (`.pb`) files, and writing outputs as
//! `.npy` files named after the output (characters that cannot be in a file name replaced by `_`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use host::HostTensor;
use prost::Message;

/// Reads one tensor; the format follows the extension (`.npy`, or `.pb` for a serialized
/// `onnx.TensorProto`).
pub fn read_tensor(path: &Path) -> Result<HostTensor> {
    let bytes = read_bounded(path, onnx::LoadLimits::default().max_tensor_bytes)?;
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

/// The bytes of the regular file `path`, refusing a larger one than `limit` before reading it, and
/// FIFOs, devices and folders before opening them (`/dev/zero` would read without end, a FIFO
/// would block): the caps the model loader applies to models.
fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("reading {}: not a regular file", path.display());
    }
    if meta.len() > limit {
        bail!(
            "reading {}: {} bytes, over the limit of {limit} for a tensor file",
            path.display(),
            meta.len()
        );
    }
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    // The file may grow after the check: `take` keeps the bound.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!("reading {}: over the limit of {limit} bytes for a tensor file", path.display());
    }
    Ok(bytes)
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

/// A file stem for each output name, all different: [`file_stem`] of the name, and where two
/// names sanitise alike (`a/b` and `a_b`) the later ones get `.1`, `.2`, ... until unique. Two
/// outputs of the same name are an error (no file name could tell them apart).
pub fn output_files(names: &[&str]) -> Result<Vec<String>> {
    let mut taken = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            bail!("the model has two outputs named `{name}`: their files would overwrite each other");
        }
        let stem = file_stem(name);
        let mut file = stem.clone();
        let mut k = 0;
        while !taken.insert(file.to_ascii_lowercase()) {
            k += 1;
            file = format!("{stem}.{k}");
        }
        out.push(file);
    }
    Ok(out)
}

/// Writes `t` to `dir/<stem>.npy` (`stem` from [`output_files`]), returning the path.
pub fn write_output(dir: &Path, stem: &str, t: &HostTensor) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{stem}.npy"));
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

    #[test]
    fn output_files_never_collide() {
        assert_eq!(output_files(&["a/b", "a_b", "a:b", "c"]).unwrap(), ["a_b", "a_b.1", "a_b.2", "c"]);
        // Names differing only in case would collide on case-insensitive file systems.
        assert_eq!(output_files(&["Y", "y"]).unwrap(), ["Y", "y.1"]);
        // A stem that a later disambiguation would produce is itself kept apart.
        assert_eq!(output_files(&["a_b", "a_b.1", "a/b"]).unwrap(), ["a_b", "a_b.1", "a_b.2"]);
        assert!(output_files(&["x", "x"]).unwrap_err().to_string().contains("two outputs named `x`"));
    }
}
