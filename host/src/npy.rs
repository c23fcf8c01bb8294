//! NumPy `.npy` files (format versions 1.0–3.0) to and from [`HostTensor`]: little-endian, C order,
//! the dtypes of [`planner::DType`]. Anything else (Fortran order, big-endian, object arrays, a
//! header that lies about the data length) is a clear error, never a panic.

use planner::DType;

use crate::tensor::{HostTensor, elem_count};

const MAGIC: &[u8] = b"\x93NUMPY";
/// Header bytes accepted; NumPy writes well under this.
const MAX_HEADER_BYTES: usize = 1 << 16;

/// Why a `.npy` file could not be read or a tensor written.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NpyError {
    /// Not an `.npy` file, or a header field missing or malformed.
    #[error("not a valid .npy file: {0}")]
    Format(String),
    /// A valid file this reader does not take.
    #[error("unsupported .npy content: {0}")]
    Unsupported(String),
}

fn format(detail: impl Into<String>) -> NpyError {
    NpyError::Format(detail.into())
}

/// NumPy's `descr` for a dtype (bf16 and the coded narrow types have none in NumPy; ml_dtypes'
/// `<V2` / `|V1` are ambiguous, so they are written and read as custom tags: `bfloat16`, and the
/// ONNX names `float8e4m3fn`, `int4`, ... one code per byte).
fn descr(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::BF16 => "bfloat16",
        DType::F64 => "<f8",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        DType::Coded(c) => c.onnx_name(),
        // Written as NumPy's fixed-width UTF-32 (`<U{n}`) by `write`, read by `read_unicode`.
        DType::String => "<U",
    }
}

fn dtype_of(descr: &str) -> Result<DType, NpyError> {
    Ok(match descr {
        "<f4" => DType::F32,
        "<f2" => DType::F16,
        "bfloat16" => DType::BF16,
        "<f8" => DType::F64,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|i1" | "<i1" => DType::I8,
        "|u1" | "<u1" => DType::U8,
        "|b1" | "<b1" => DType::Bool,
        "<i2" => DType::I16,
        "<u2" => DType::U16,
        "<u4" => DType::U32,
        "<u8" => DType::U64,
        other if let Some(c) = planner::Coded::ALL.into_iter().find(|c| c.onnx_name() == other) => {
            DType::Coded(c)
        }
        other => return Err(NpyError::Unsupported(format!("dtype {other:?}"))),
    })
}

/// Parses an `.npy` file.
pub fn read(bytes: &[u8]) -> Result<HostTensor, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(format("missing the \\x93NUMPY magic"));
    }
    let (header_len, header_start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => {
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        v => return Err(NpyError::Unsupported(format!("format version {v}"))),
    };
    if header_len > MAX_HEADER_BYTES || header_start + header_len > bytes.len() {
        return Err(format(format!("header of {header_len} bytes does not fit the file")));
    }
    let header = std::str::from_utf8(&bytes[header_start..header_start + header_len])
        .map_err(|_| format("header is not UTF-8"))?;
    let descr = dict_value(header, "descr")?.trim_matches(|c| c == '\'' || c == '"').to_owned();
    if dict_value(header, "fortran_order")?.trim() != "False" {
        return Err(NpyError::Unsupported("Fortran-order arrays".into()));
    }
    let shape = parse_shape(dict_value(header, "shape")?)?;
    let n = elem_count(&shape).ok_or_else(|| format(format!("shape {shape:?} overflows")))?;
    let body = &bytes[header_start + header_len..];
    if let Some(width) = descr.strip_prefix("<U") {
        return read_unicode(width, shape, n, body);
    }
    let dtype = dtype_of(&descr)?;
    let want = n.checked_mul(dtype.size_bytes()).ok_or_else(|| format("data size overflows"))?;
    if body.len() != want {
        return Err(format(format!(
            "shape {shape:?} of {descr} needs {want} data bytes, file has {}",
            body.len()
        )));
    }
    let constant =
        planner::ConstTensor::new(dtype, shape, body.to_vec()).map_err(|e| format(e.to_string()))?;
    HostTensor::from_const(&constant).map_err(|e| format(e.to_string()))
}

/// NumPy's `<U{width}` strings: `width` UTF-32LE code points per element, NUL-padded.
fn read_unicode(width: &str, shape: Vec<usize>, n: usize, body: &[u8]) -> Result<HostTensor, NpyError> {
    let width: usize = width.parse().map_err(|_| format(format!("string width {width:?}")))?;
    if width == 0 && n > 0 {
        return Err(format(format!("{n} strings of width 0")));
    }
    let want =
        n.checked_mul(width).and_then(|c| c.checked_mul(4)).ok_or_else(|| format("data size overflows"))?;
    if body.len() != want {
        return Err(format(format!(
            "shape {shape:?} of <U{width} needs {want} data bytes, file has {}",
            body.len()
        )));
    }
    // (n is bounded by the data now: n * width * 4 bytes are there.)
    let mut strings = Vec::with_capacity(n);
    for e in 0..n {
        let units = &body[e * width * 4..(e + 1) * width * 4];
        let mut s = String::new();
        for c in units.as_chunks::<4>().0.iter().map(|c| u32::from_le_bytes(*c)) {
            s.push(char::from_u32(c).ok_or_else(|| format(format!("code point {c:#x} is not a character")))?);
        }
        // NumPy pads with NULs and drops the trailing ones; a NUL inside stays.
        strings.push(s.trim_end_matches('\0').to_string());
    }
    HostTensor::new(shape, strings).map_err(|e| format(e.to_string()))
}

/// The text after `'key':` in the header dict, up to the next top-level comma or the closing brace.
fn dict_value<'a>(header: &'a str, key: &str) -> Result<&'a str, NpyError> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))
        .ok_or_else(|| format(format!("header has no '{key}'")))?;
    let rest = &header[at + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':').ok_or_else(|| format(format!("'{key}' has no value")))?;
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Ok(rest[..i].trim()),
            _ => {}
        }
    }
    Err(format(format!("'{key}' value is not terminated")))
}

fn parse_shape(text: &str) -> Result<Vec<usize>, NpyError> {
    let inner = text
        .trim()
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format(format!("shape {text:?} is not a tuple")))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|d| d.trim_end_matches('L').parse::<usize>().map_err(|_| format(format!("shape entry {d:?}"))))
        .collect()
}

/// Serialises a tensor as an `.npy` file (format 1.0, or 2.0 for very long headers).
pub fn write(t: &HostTensor) -> Vec<u8> {
    let shape = match t.shape() {
        [] => "()".to_owned(),
        [d] => format!("({d},)"),
        dims => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    // Strings: UTF-32 code points, as many per element as the longest has (at least one).
    let strings = match t.data() {
        crate::tensor::TensorData::String(v) => Some(v),
        _ => None,
    };
    let width = strings.map_or(0, |v| v.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1));
    let descr = match strings {
        Some(_) => format!("<U{width}"),
        None => descr(t.dtype()).to_string(),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that the data starts 64-byte aligned, ending the header with a newline.
    let pad = 64 - (10 + header.len() + 1) % 64;
    header.extend(std::iter::repeat_n(' ', pad % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + t.len() * t.dtype().size_bytes());
    out.extend_from_slice(MAGIC);
    if header.len() <= u16::MAX as usize {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    match strings {
        Some(v) => {
            for s in v {
                let n = s.chars().count();
                out.extend(s.chars().flat_map(|c| (c as u32).to_le_bytes()));
                out.extend(std::iter::repeat_n(0u8, (width - n) * 4));
            }
        }
        None => out.extend_from_slice(&t.to_const().bytes),
    }
    out
}

#[cfg(test)]
mod tests {
    use half::{bf16, f16};

    use super::*;
    use crate::tensor::TensorData;

    #[test]
    fn round_trips_every_dtype_and_rank() {
        let cases: Vec<(Vec<usize>, TensorData)> = vec![
            (vec![2, 3], vec![1.5f32, -2.0, 0.0, 4.0, 5.0, 6.0].into()),
            (vec![], vec![7i64].into()),
            (vec![3], vec![true, false, true].into()),
            (vec![1, 0, 2], TensorData::F64(vec![])),
            (vec![2], vec![f16::from_f32(1.0), f16::from_f32(-0.5)].into()),
            (vec![2], vec![bf16::from_f32(1.0), bf16::from_f32(-0.5)].into()),
            (vec![2, 1], vec![-3i32, 4].into()),
            (vec![2], vec![-3i8, 4].into()),
            (vec![2], vec![3u8, 255].into()),
            (vec![2], vec![-3i16, 4].into()),
            (vec![2], vec![3u16, 65535].into()),
            (vec![2], vec![3u32, u32::MAX].into()),
            (vec![2], vec![3u64, u64::MAX].into()),
            (vec![3], TensorData::Coded(planner::Coded::F8E4M3FN, vec![0x7e, 0x80, 1])),
            (vec![2], TensorData::Coded(planner::Coded::U2, vec![3, 0])),
            (vec![3], TensorData::String(vec!["héllo".into(), String::new(), "π≈3".into()])),
        ];
        for (shape, data) in cases {
            let t = HostTensor::new(shape, data).unwrap();
            let bytes = write(&t);
            assert_eq!((10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64, 0);
            assert_eq!(read(&bytes).unwrap(), t);
        }
    }

    /// Zero-width strings cannot make a huge shape fit an empty body.
    #[test]
    fn zero_width_strings_of_a_huge_shape_are_refused() {
        let h = "{'descr': '<U0', 'fortran_order': False, 'shape': (1000000000000,), }     \n";
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend_from_slice(&(h.len() as u16).to_le_bytes());
        f.extend_from_slice(h.as_bytes());
        assert!(matches!(read(&f), Err(NpyError::Format(_))));
    }

    #[test]
    fn reads_numpy_written_headers() {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }          \n";
        f.extend_from_slice(&(h.len() as u16).to_le_bytes());
        f.extend_from_slice(h.as_bytes());
        f.extend_from_slice(&1f32.to_le_bytes());
        f.extend_from_slice(&2f32.to_le_bytes());
        assert_eq!(read(&f).unwrap().f32s("x").unwrap(), &[1.0, 2.0]);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        let good = write(&HostTensor::new(vec![4], vec![1f32; 4]).unwrap());
        for cut in 0..good.len() {
            assert!(read(&good[..cut]).is_err(), "prefix of {cut} bytes accepted");
        }
        let replace = |from: &[u8], to: &[u8]| {
            let at = good.windows(from.len()).position(|w| w == from).unwrap();
            let mut b = good.clone();
            b[at..at + to.len()].copy_from_slice(to);
            b
        };
        assert!(matches!(read(&replace(b"False", b"True ")), Err(NpyError::Unsupported(_))));
        assert!(matches!(read(&replace(b"<f4", b">f4")), Err(NpyError::Unsupported(_))));
        assert!(matches!(read(&replace(b"(4,)", b"(5,)")), Err(NpyError::Format(_))));
        assert!(read(b"\x93NUMPY\x01\x00\xff\xff").is_err());
        let mut rng = 0x1234_5678u64;
        for _ in 0..2000 {
            let mut bytes = good.clone();
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let i = (rng >> 33) as usize % bytes.len();
            bytes[i] = (rng >> 17) as u8;
            let _ = read(&bytes);
        }
    }
}
