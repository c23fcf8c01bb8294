//! `TensorProto` -> [`ConstTensor`], and ONNX element types -> planner [`DType`]s.
//!
//! Data comes from `raw_data` (little-endian, as ONNX stores it) when that is non-empty, else from
//! the typed field ONNX prescribes for the type:
//!
//! | dtype | field | one entry holds |
//! |---|---|---|
//! | FLOAT | `float_data` | one element |
//! | DOUBLE | `double_data` | one element |
//! | INT64 | `int64_data` | one element |
//! | INT32, INT8, UINT8, BOOL | `int32_data` | one element in the low bits |
//! | FLOAT16, BFLOAT16 | `int32_data` | one element's bit pattern in the low 16 bits |
//! | INT16, UINT16 | `int32_data` | one element in the low 16 bits |
//! | UINT32, UINT64 | `uint64_data` | one element |
//! | FLOAT8* | `int32_data` | one element's code in the low 8 bits |
//! | INT4, UINT4, FLOAT4E2M1 / INT2, UINT2 | `int32_data` | one packed byte: 2 / 4 elements |
//! | STRING | `string_data` | one element's UTF-8 bytes |
//!
//! The 4-bit and 2-bit types are packed in `raw_data` too (two or four elements per byte, the
//! first in the low bits, the last byte padded) and unpacked to one code per byte.
//!
//! Narrow values are truncated to their width (as ONNX writers produce them sign- or
//! zero-extended); BOOL is normalized to 0/1 from either source. The entry count must equal the
//! element count, so allocation is bounded by the model's own size.

use planner::{Coded, ConstTensor, DType};

use crate::error::{OnnxError, TensorIssue};
use crate::proto::TensorProto;
use crate::proto::tensor_proto::{DataLocation, DataType};
use crate::tensor::element_count;

/// The planner dtype of an ONNX `data_type` value.
///
/// # Errors
/// [`TensorIssue::UnknownDataType`] for UNDEFINED or unknown values and
/// [`TensorIssue::UnsupportedDataType`] for valid types the planner lacks (COMPLEX64, COMPLEX128,
/// the 6-bit floats, ...).
pub fn dtype(data_type: i32) -> Result<DType, TensorIssue> {
    use DataType as D;
    match DataType::try_from(data_type) {
        Ok(D::Float) => Ok(DType::F32),
        Ok(D::Float16) => Ok(DType::F16),
        Ok(D::Bfloat16) => Ok(DType::BF16),
        Ok(D::Double) => Ok(DType::F64),
        Ok(D::Int64) => Ok(DType::I64),
        Ok(D::Int32) => Ok(DType::I32),
        Ok(D::Int8) => Ok(DType::I8),
        Ok(D::Uint8) => Ok(DType::U8),
        Ok(D::Bool) => Ok(DType::Bool),
        Ok(D::Int16) => Ok(DType::I16),
        Ok(D::Uint16) => Ok(DType::U16),
        Ok(D::Uint32) => Ok(DType::U32),
        Ok(D::Uint64) => Ok(DType::U64),
        Ok(D::Float8e4m3fn) => Ok(DType::Coded(Coded::F8E4M3FN)),
        Ok(D::Float8e4m3fnuz) => Ok(DType::Coded(Coded::F8E4M3FNUZ)),
        Ok(D::Float8e5m2) => Ok(DType::Coded(Coded::F8E5M2)),
        Ok(D::Float8e5m2fnuz) => Ok(DType::Coded(Coded::F8E5M2FNUZ)),
        Ok(D::Float8e8m0) => Ok(DType::Coded(Coded::F8E8M0)),
        Ok(D::Float4e2m1) => Ok(DType::Coded(Coded::F4E2M1)),
        Ok(D::Int4) => Ok(DType::Coded(Coded::I4)),
        Ok(D::Uint4) => Ok(DType::Coded(Coded::U4)),
        Ok(D::Int2) => Ok(DType::Coded(Coded::I2)),
        Ok(D::Uint2) => Ok(DType::Coded(Coded::U2)),
        Ok(D::String) => Ok(DType::String),
        Ok(D::Undefined) | Err(_) => Err(TensorIssue::UnknownDataType { data_type }),
        Ok(other) => Err(TensorIssue::UnsupportedDataType { data_type: other.as_str_name() }),
    }
}

/// Converts a tensor (initializer or attribute) to a planner constant.
///
/// # Errors
/// [`OnnxError::InvalidTensor`] naming the tensor (or `label` for an unnamed one) when its type
/// is unsupported, its dims are negative or overflow, its data is missing or of the wrong length,
/// or it uses segments or unresolved external data.
pub fn to_const(tensor: &TensorProto) -> Result<ConstTensor, OnnxError> {
    let label = if tensor.name.is_empty() { "<unnamed tensor>" } else { tensor.name.as_str() };
    to_const_labelled(tensor, label)
}

/// As [`to_const`], naming an unnamed tensor `label` in errors.
pub(crate) fn to_const_labelled(tensor: &TensorProto, label: &str) -> Result<ConstTensor, OnnxError> {
    let err = |issue| OnnxError::InvalidTensor { tensor: label.to_owned(), issue };
    if tensor.segment.is_some() {
        return Err(err(TensorIssue::Unsupported { what: "a segmented tensor" }));
    }
    if tensor.data_location == DataLocation::External as i32 || !tensor.external_data.is_empty() {
        return Err(err(TensorIssue::Unsupported { what: "unresolved external data" }));
    }
    let dtype = dtype(tensor.data_type).map_err(err)?;
    let elems = element_count(&tensor.dims).map_err(err)?;
    let overflow = || err(TensorIssue::CountOverflow { dims: tensor.dims.clone() });
    let dims: Vec<usize> =
        tensor.dims.iter().map(|&d| usize::try_from(d)).collect::<Result<_, _>>().map_err(|_| overflow())?;
    let bytes = if tensor.raw_data.is_empty() {
        typed_bytes(tensor, dtype, elems).map_err(err)?
    } else {
        raw_bytes(tensor, dtype, elems).map_err(err)?
    };
    ConstTensor::new(dtype, dims, bytes).map_err(|_| overflow())
}

/// Bytes `elems` elements of `dtype` take in a file (sub-byte codes packed).
fn stored_bytes(dtype: DType, elems: u64) -> Option<u64> {
    match dtype {
        DType::Coded(c) if c.bits() < 8 => Some(elems.div_ceil(u64::from(8 / c.bits()))),
        _ => elems.checked_mul(dtype.size_bytes() as u64),
    }
}

/// One byte per element from `packed` codes of `bits` (4 or 2) each, the first in the low bits.
fn unpack(packed: &[u8], bits: u32, elems: u64) -> Vec<u8> {
    let per = (8 / bits) as usize;
    let mask = (1u8 << bits) - 1;
    (0..elems as usize).map(|i| (packed[i / per] >> ((i % per) as u32 * bits)) & mask).collect()
}

fn raw_bytes(tensor: &TensorProto, dtype: DType, elems: u64) -> Result<Vec<u8>, TensorIssue> {
    if dtype == DType::String {
        return Err(TensorIssue::Unsupported {
            what: "strings in raw_data (ONNX keeps them in string_data)",
        });
    }
    let expected =
        stored_bytes(dtype, elems).ok_or_else(|| TensorIssue::CountOverflow { dims: tensor.dims.clone() })?;
    let actual = tensor.raw_data.len() as u64;
    if actual != expected {
        return Err(TensorIssue::ByteLenMismatch {
            data_type: DataType::try_from(tensor.data_type).map_or("?", |d| d.as_str_name()),
            dims: tensor.dims.clone(),
            expected_bytes: expected,
            actual_bytes: actual,
        });
    }
    if let DType::Coded(c) = dtype
        && c.bits() < 8
    {
        return Ok(unpack(&tensor.raw_data, c.bits(), elems));
    }
    let mut bytes = tensor.raw_data.clone();
    if dtype == DType::Bool {
        bytes.iter_mut().for_each(|b| *b = u8::from(*b != 0));
    }
    Ok(bytes)
}

fn typed_bytes(tensor: &TensorProto, dtype: DType, elems: u64) -> Result<Vec<u8>, TensorIssue> {
    let check = |field: &'static str, actual: usize| -> Result<(), TensorIssue> {
        match actual as u64 {
            n if n == elems => Ok(()),
            0 => Err(TensorIssue::MissingData { dims: tensor.dims.clone() }),
            actual => Err(TensorIssue::FieldLenMismatch {
                field,
                dims: tensor.dims.clone(),
                expected: elems,
                actual,
            }),
        }
    };
    let ints = &tensor.int32_data;
    Ok(match dtype {
        DType::F32 => {
            check("float_data", tensor.float_data.len())?;
            tensor.float_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DType::F64 => {
            check("double_data", tensor.double_data.len())?;
            tensor.double_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DType::I64 => {
            check("int64_data", tensor.int64_data.len())?;
            tensor.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DType::I32 => {
            check("int32_data", ints.len())?;
            ints.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DType::F16 | DType::BF16 => {
            check("int32_data", ints.len())?;
            ints.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect()
        }
        DType::I16 | DType::U16 => {
            check("int32_data", ints.len())?;
            ints.iter().flat_map(|&v| (v as u16).to_le_bytes()).collect()
        }
        DType::U32 => {
            check("uint64_data", tensor.uint64_data.len())?;
            tensor.uint64_data.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect()
        }
        DType::U64 => {
            check("uint64_data", tensor.uint64_data.len())?;
            tensor.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect()
        }
        DType::I8 | DType::U8 => {
            check("int32_data", ints.len())?;
            ints.iter().map(|&v| v as u8).collect()
        }
        DType::Coded(c) if c.bits() < 8 => {
            // One packed byte per entry.
            let packed = stored_bytes(dtype, elems).unwrap_or(u64::MAX);
            if ints.len() as u64 != packed {
                return Err(match ints.len() {
                    0 if elems > 0 => TensorIssue::MissingData { dims: tensor.dims.clone() },
                    actual => TensorIssue::FieldLenMismatch {
                        field: "int32_data",
                        dims: tensor.dims.clone(),
                        expected: packed,
                        actual: actual as u64,
                    },
                });
            }
            let bytes: Vec<u8> = ints.iter().map(|&v| v as u8).collect();
            unpack(&bytes, c.bits(), elems)
        }
        DType::Coded(_) => {
            check("int32_data", ints.len())?;
            ints.iter().map(|&v| v as u8).collect()
        }
        DType::String => {
            // Allowed empty for an empty tensor only; each entry one element's UTF-8 bytes.
            if !(elems == 0 && tensor.string_data.is_empty()) {
                check("string_data", tensor.string_data.len())?;
            }
            let mut strings = Vec::with_capacity(tensor.string_data.len());
            for s in &tensor.string_data {
                strings.push(
                    String::from_utf8(s.clone())
                        .map_err(|_| TensorIssue::Unsupported { what: "a string that is not UTF-8" })?,
                );
            }
            return ConstTensor::from_strings(&[strings.len()], &strings)
                .map(|c| c.bytes.into_vec())
                .map_err(|_| TensorIssue::Unsupported { what: "strings that do not fill the shape" });
        }
        DType::Bool => {
            check("int32_data", ints.len())?;
            ints.iter().map(|&v| u8::from(v != 0)).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: DataType, dims: &[i64]) -> TensorProto {
        TensorProto { name: "t".into(), data_type: dtype as i32, dims: dims.to_vec(), ..Default::default() }
    }

    #[test]
    fn typed_fields_follow_the_packing_rules() {
        let mut t = tensor(DataType::Float16, &[2]);
        t.int32_data = vec![0x3c00, 0xc000];
        assert_eq!(to_const(&t).unwrap().to_f64s(), vec![1.0, -2.0]);
        let mut t = tensor(DataType::Bfloat16, &[1]);
        t.int32_data = vec![0x3f80];
        assert_eq!(to_const(&t).unwrap().to_f64s(), vec![1.0]);
        let mut t = tensor(DataType::Int8, &[3]);
        t.int32_data = vec![-1, 127, -128];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![-1, 127, -128]));
        let mut t = tensor(DataType::Uint8, &[2]);
        t.int32_data = vec![255, 7];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![255, 7]));
        let mut t = tensor(DataType::Bool, &[3]);
        t.int32_data = vec![0, 1, 5];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![0, 1, 1]));
        let mut t = tensor(DataType::Double, &[]);
        t.double_data = vec![2.5];
        assert_eq!(to_const(&t).unwrap().to_f64s(), vec![2.5]);
        let mut t = tensor(DataType::Int64, &[2, 1]);
        t.int64_data = vec![i64::MIN, 3];
        let c = to_const(&t).unwrap();
        assert_eq!((c.dims.clone(), c.to_i64s()), (vec![2, 1], Some(vec![i64::MIN, 3])));
    }

    #[test]
    fn wide_unsigned_and_coded_types_read_from_every_field() {
        let mut t = tensor(DataType::Uint64, &[2]);
        t.uint64_data = vec![u64::MAX, 3];
        assert_eq!(to_const(&t).unwrap().bytes[8..], 3u64.to_le_bytes());
        let mut t = tensor(DataType::Uint32, &[1]);
        t.uint64_data = vec![0xffff_ffff];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![0xffff_ffff]));
        let mut t = tensor(DataType::Int16, &[2]);
        t.int32_data = vec![-2, 300];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![-2, 300]));
        // Three int4 elements packed low nibble first, in raw_data and in int32_data.
        let mut t = tensor(DataType::Int4, &[3]);
        t.raw_data = vec![0x8f, 0x07];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![-1, -8, 7]));
        let mut t = tensor(DataType::Int4, &[3]);
        t.int32_data = vec![0x8f, 0x07];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![-1, -8, 7]));
        let mut t = tensor(DataType::Uint2, &[5]);
        t.raw_data = vec![0b1110_0100, 0b11];
        assert_eq!(to_const(&t).unwrap().to_i64s(), Some(vec![0, 1, 2, 3, 3]));
        // A packed tensor with a byte too many is refused naming both counts.
        let mut t = tensor(DataType::Uint4, &[2]);
        t.raw_data = vec![0, 0];
        assert!(matches!(
            to_const(&t),
            Err(OnnxError::InvalidTensor {
                issue: TensorIssue::ByteLenMismatch { expected_bytes: 1, actual_bytes: 2, .. },
                ..
            })
        ));
        let mut t = tensor(DataType::Float8e4m3fn, &[2]);
        t.int32_data = vec![0x7e, 0xfe];
        assert_eq!(to_const(&t).unwrap().to_f64s(), vec![448.0, -448.0]);
    }

    #[test]
    fn raw_data_wins_and_bools_normalize() {
        let mut t = tensor(DataType::Bool, &[2]);
        t.raw_data = vec![0, 9];
        t.int32_data = vec![1, 1, 1];
        assert_eq!(to_const(&t).unwrap().bytes, vec![0, 1]);
    }

    #[test]
    fn rejects_bad_tensors_naming_them() {
        let t = tensor(DataType::Float, &[2]);
        let e = to_const(&t).unwrap_err();
        assert!(
            matches!(&e, OnnxError::InvalidTensor { tensor, issue: TensorIssue::MissingData { .. } } if tensor == "t")
        );
        let mut t = tensor(DataType::Float, &[2]);
        t.int64_data = vec![1];
        t.float_data = vec![1.0];
        assert!(matches!(
            to_const(&t),
            Err(OnnxError::InvalidTensor {
                issue: TensorIssue::FieldLenMismatch { field: "float_data", .. },
                ..
            })
        ));
        let t = tensor(DataType::Complex64, &[0]);
        assert!(matches!(
            to_const(&t),
            Err(OnnxError::InvalidTensor {
                issue: TensorIssue::UnsupportedDataType { data_type: "COMPLEX64" },
                ..
            })
        ));
        let mut t = tensor(DataType::Float, &[-1]);
        t.float_data = vec![1.0];
        assert!(matches!(
            to_const(&t),
            Err(OnnxError::InvalidTensor { issue: TensorIssue::NegativeDim { .. }, .. })
        ));
        let mut t = tensor(DataType::Int32, &[3]);
        t.raw_data = vec![0; 8];
        assert!(matches!(
            to_const(&t),
            Err(OnnxError::InvalidTensor { issue: TensorIssue::ByteLenMismatch { .. }, .. })
        ));
        assert_eq!(to_const(&tensor(DataType::Float, &[0, 4])).unwrap().elems(), 0);
    }
}
