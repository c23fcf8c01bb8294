//! `ConstTensor`: an initializer or folded constant, stored as little-endian bytes.
//!
//! Invariant: `bytes.len() == product(dims) * dtype.size_bytes()`; every constructor checks it, so
//! code reading a `ConstTensor` may rely on it. Strings are the exception: their `bytes` hold each
//! string as a little-endian u64 byte length and its UTF-8 bytes, one after the other, and parse
//! to exactly `product(dims)` strings ([`ConstTensor::strings`]).

use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::PlanError;
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// A constant tensor (weights, folded shape values, `Constant` attributes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstTensor {
    /// Element type.
    pub dtype: DType,
    /// Concrete dims; empty for a scalar.
    pub dims: Vec<usize>,
    /// Elements in row-major order, little-endian; shared, so cloning a tensor (a graph, a
    /// pass's table of constants) does not copy them.
    pub bytes: Bytes,
}

/// A constant's bytes, immutable and shared by reference count: a clone of a `ConstTensor` (the
/// passes clone graphs and constant tables, which hold the model's weights) costs no copy.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Bytes(Arc<Vec<u8>>);

impl Bytes {
    /// The bytes as an owned vector: moved out when this is the only reference, copied otherwise.
    pub fn into_vec(self) -> Vec<u8> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| shared.as_ref().clone())
    }

    /// The bytes to change in place (their length stays): copied first if shared.
    pub fn make_mut(&mut self) -> &mut [u8] {
        Arc::make_mut(&mut self.0).as_mut_slice()
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(Arc::new(v))
    }
}

impl FromIterator<u8> for Bytes {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
        Bytes::from(iter.into_iter().collect::<Vec<u8>>())
    }
}

impl PartialEq<Vec<u8>> for Bytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        *self.0 == *other
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<u8>::deserialize(d).map(Bytes::from)
    }
}

impl ConstTensor {
    /// Wraps raw little-endian bytes, checking their length against `dtype` and `dims`.
    pub fn new(dtype: DType, dims: Vec<usize>, bytes: impl Into<Bytes>) -> Result<Self, PlanError> {
        let bytes = bytes.into();
        let elems = elem_count(&dims)?;
        if dtype == DType::String {
            let n = parse_strings(&bytes).map(|s| s.len());
            if n != Some(elems) {
                return Err(PlanError::BadConstant {
                    detail: format!("string{dims:?} needs {elems} length-prefixed UTF-8 strings"),
                });
            }
            return Ok(ConstTensor { dtype, dims, bytes });
        }
        let want = elems.checked_mul(dtype.size_bytes()).ok_or_else(|| overflow(&dims))?;
        if bytes.len() != want {
            return Err(PlanError::BadConstant {
                detail: format!("{dtype}{dims:?} needs {want} bytes, got {}", bytes.len()),
            });
        }
        Ok(ConstTensor { dtype, dims, bytes })
    }

    /// A string tensor.
    pub fn from_strings(dims: &[usize], values: &[String]) -> Result<Self, PlanError> {
        let mut bytes = Vec::new();
        for s in values {
            bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
            bytes.extend_from_slice(s.as_bytes());
        }
        Self::new(DType::String, dims.to_vec(), bytes)
    }

    /// The elements of a string tensor; `None` for other dtypes.
    pub fn strings(&self) -> Option<Vec<String>> {
        if self.dtype != DType::String {
            return None;
        }
        parse_strings(&self.bytes)
    }

    /// An `I64` tensor.
    pub fn from_i64(dims: &[usize], values: &[i64]) -> Result<Self, PlanError> {
        Self::from_i64s_as(DType::I64, dims, values)
    }

    /// An `F32` tensor.
    pub fn from_f32(dims: &[usize], values: &[f32]) -> Result<Self, PlanError> {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self::new(DType::F32, dims.to_vec(), bytes)
    }

    /// A scalar `I64`.
    pub fn scalar_i64(value: i64) -> Self {
        ConstTensor { dtype: DType::I64, dims: Vec::new(), bytes: value.to_le_bytes().to_vec().into() }
    }

    /// A scalar `F32`.
    pub fn scalar_f32(value: f32) -> Self {
        ConstTensor { dtype: DType::F32, dims: Vec::new(), bytes: value.to_le_bytes().to_vec().into() }
    }

    /// Integer values converted to `dtype` (floats convert exactly up to 2^53; bool is `v != 0`).
    pub fn from_i64s_as(dtype: DType, dims: &[usize], values: &[i64]) -> Result<Self, PlanError> {
        if dtype.is_float() {
            let as_f64: Vec<f64> = values.iter().map(|&v| v as f64).collect();
            return Self::from_f64s(dtype, dims, &as_f64);
        }
        if dtype == DType::String {
            return Self::from_strings(dims, &values.iter().map(|v| v.to_string()).collect::<Vec<_>>());
        }
        let mut bytes = Vec::with_capacity(values.len() * dtype.size_bytes());
        for &v in values {
            match dtype {
                DType::I64 => bytes.extend_from_slice(&v.to_le_bytes()),
                DType::I32 => bytes.extend_from_slice(&(v as i32).to_le_bytes()),
                DType::I8 => bytes.extend_from_slice(&(v as i8).to_le_bytes()),
                DType::U8 => bytes.push(v as u8),
                DType::I16 | DType::U16 => bytes.extend_from_slice(&(v as u16).to_le_bytes()),
                DType::U32 => bytes.extend_from_slice(&(v as u32).to_le_bytes()),
                DType::U64 => bytes.extend_from_slice(&(v as u64).to_le_bytes()),
                DType::Bool => bytes.push(u8::from(v != 0)),
                DType::Coded(c) => bytes.push(c.encode_int(v)),
                DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::String => {
                    unreachable!("float and string dtypes handled above")
                }
            }
        }
        Self::new(dtype, dims.to_vec(), bytes)
    }

    /// Float values converted to `dtype` (to integers with Rust's saturating `as`, to bool as `v != 0`).
    pub fn from_f64s(dtype: DType, dims: &[usize], values: &[f64]) -> Result<Self, PlanError> {
        if dtype == DType::String {
            return Self::from_strings(dims, &values.iter().map(|v| v.to_string()).collect::<Vec<_>>());
        }
        let mut bytes = Vec::with_capacity(values.len() * dtype.size_bytes());
        for &v in values {
            match dtype {
                DType::F64 => bytes.extend_from_slice(&v.to_le_bytes()),
                DType::F32 => bytes.extend_from_slice(&(v as f32).to_le_bytes()),
                DType::F16 => bytes.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
                DType::BF16 => bytes.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
                DType::I64 => bytes.extend_from_slice(&(v as i64).to_le_bytes()),
                DType::I32 => bytes.extend_from_slice(&(v as i32).to_le_bytes()),
                DType::I8 => bytes.extend_from_slice(&(v as i8).to_le_bytes()),
                DType::U8 => bytes.push(v as u8),
                DType::I16 => bytes.extend_from_slice(&(v as i16).to_le_bytes()),
                DType::U16 => bytes.extend_from_slice(&(v as u16).to_le_bytes()),
                DType::U32 => bytes.extend_from_slice(&(v as u32).to_le_bytes()),
                DType::U64 => bytes.extend_from_slice(&(v as u64).to_le_bytes()),
                DType::Bool => bytes.push(u8::from(v != 0.0)),
                // (Lossless for every code: infinities stay, E8M0's smallest too.)
                DType::Coded(c) => bytes.push(c.encode(v, false, crate::RoundMode::Nearest)),
                DType::String => unreachable!("strings handled above"),
            }
        }
        Self::new(dtype, dims.to_vec(), bytes)
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.dims.iter().product()
    }

    /// Dtype and (fully known) shape.
    pub fn info(&self) -> TensorInfo {
        TensorInfo { dtype: self.dtype, shape: Shape(self.dims.iter().map(|&d| Dim::Known(d)).collect()) }
    }

    /// Elements as `i64`, for integer and bool tensors (uint64 past `i64::MAX` wraps); `None`
    /// for floats.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        let b = &self.bytes;
        Some(match self.dtype {
            DType::I64 => b.as_chunks::<8>().0.iter().map(|c| i64::from_le_bytes(*c)).collect(),
            DType::U64 => b.as_chunks::<8>().0.iter().map(|c| u64::from_le_bytes(*c) as i64).collect(),
            DType::I32 => b.as_chunks::<4>().0.iter().map(|c| i64::from(i32::from_le_bytes(*c))).collect(),
            DType::U32 => b.as_chunks::<4>().0.iter().map(|c| i64::from(u32::from_le_bytes(*c))).collect(),
            DType::I16 => b.as_chunks::<2>().0.iter().map(|c| i64::from(i16::from_le_bytes(*c))).collect(),
            DType::U16 => b.as_chunks::<2>().0.iter().map(|c| i64::from(u16::from_le_bytes(*c))).collect(),
            DType::I8 => b.iter().map(|&x| i64::from(x as i8)).collect(),
            DType::U8 | DType::Bool => b.iter().map(|&x| i64::from(x)).collect(),
            DType::Coded(c) if !c.is_float() => b.iter().map(|&x| c.decode_int(x)).collect(),
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::Coded(_) | DType::String => {
                return None;
            }
        })
    }

    /// Elements as `f64`, for every dtype.
    pub fn to_f64s(&self) -> Vec<f64> {
        let b = &self.bytes;
        match self.dtype {
            DType::F64 => b.as_chunks::<8>().0.iter().map(|c| f64::from_le_bytes(*c)).collect(),
            DType::F32 => b.as_chunks::<4>().0.iter().map(|c| f64::from(f32::from_le_bytes(*c))).collect(),
            DType::F16 => {
                b.as_chunks::<2>().0.iter().map(|c| half::f16::from_le_bytes(*c).to_f64()).collect()
            }
            DType::BF16 => {
                b.as_chunks::<2>().0.iter().map(|c| half::bf16::from_le_bytes(*c).to_f64()).collect()
            }
            DType::U64 => b.as_chunks::<8>().0.iter().map(|c| u64::from_le_bytes(*c) as f64).collect(),
            DType::Coded(c) => b.iter().map(|&x| c.decode(x)).collect(),
            // (What numpy's float() of the text would give; NaN where it is no number.)
            DType::String => self
                .strings()
                .unwrap_or_default()
                .iter()
                .map(|s| s.trim().parse().unwrap_or(f64::NAN))
                .collect(),
            DType::I64
            | DType::I32
            | DType::I16
            | DType::U32
            | DType::U16
            | DType::I8
            | DType::U8
            | DType::Bool => self.to_i64s().unwrap_or_default().into_iter().map(|v| v as f64).collect(),
        }
    }

    /// The same data under new dims with the same element count.
    pub fn reshaped(&self, dims: Vec<usize>) -> Result<Self, PlanError> {
        Self::new(self.dtype, dims, self.bytes.clone())
    }
}

/// The strings of a constant's bytes (see the module docs), or `None` when they do not parse.
fn parse_strings(mut b: &[u8]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (len, rest) = b.split_first_chunk::<8>()?;
        let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
        let text = rest.get(..len)?;
        out.push(String::from_utf8(text.to_vec()).ok()?);
        b = &rest[len..];
    }
    Some(out)
}

fn elem_count(dims: &[usize]) -> Result<usize, PlanError> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| overflow(dims))
}

fn overflow(dims: &[usize]) -> PlanError {
    PlanError::BadConstant { detail: format!("element count of {dims:?} overflows") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_bytes_and_changes_copy_them() {
        let t = ConstTensor::from_f32(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let mut c = t.clone();
        assert_eq!(c.bytes.as_ptr(), t.bytes.as_ptr());
        c.bytes.make_mut()[0] = 7;
        assert_ne!(c.bytes.as_ptr(), t.bytes.as_ptr());
        assert_eq!(t.to_f64s()[0], 1.0);
        assert_eq!(c.bytes.clone().into_vec().len(), 16);
        let r = t.reshaped(vec![4]).unwrap();
        assert_eq!(r.bytes.as_ptr(), t.bytes.as_ptr());
    }

    #[test]
    fn round_trips_each_dtype() {
        let vals = [0.0, 1.0, -2.0, 3.0];
        let coded =
            [crate::Coded::F8E4M3FN, crate::Coded::F8E5M2FNUZ, crate::Coded::F4E2M1, crate::Coded::I4];
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I8]
            .into_iter()
            .chain(coded.map(DType::Coded))
        {
            let t = ConstTensor::from_f64s(dtype, &[2, 2], &vals).unwrap();
            assert_eq!(t.elems(), 4);
            assert_eq!(t.to_f64s(), vals, "{dtype}");
        }
        for dtype in [DType::I16, DType::U16, DType::U32, DType::U64, DType::Coded(crate::Coded::U2)] {
            let t = ConstTensor::from_i64s_as(dtype, &[4], &[0, 1, 2, 3]).unwrap();
            assert_eq!(
                (t.to_i64s(), t.to_f64s()),
                (Some(vec![0, 1, 2, 3]), vec![0.0, 1.0, 2.0, 3.0]),
                "{dtype}"
            );
        }
        let b = ConstTensor::from_i64s_as(DType::Bool, &[3], &[0, 5, -1]).unwrap();
        assert_eq!(b.to_i64s(), Some(vec![0, 1, 1]));
    }

    #[test]
    fn rejects_wrong_length() {
        assert!(ConstTensor::new(DType::F32, vec![2], vec![0; 7]).is_err());
        assert!(ConstTensor::from_i64(&[3], &[1, 2]).is_err());
        assert!(ConstTensor::new(DType::F32, vec![usize::MAX, 2], vec![]).is_err());
    }

    #[test]
    fn scalar_info() {
        let t = ConstTensor::scalar_i64(-4);
        assert_eq!(t.info(), TensorInfo::scalar(DType::I64));
        assert_eq!(t.to_i64s(), Some(vec![-4]));
        assert_eq!(t.to_f64s(), vec![-4.0]);
    }
}
