//! Byte sizes of ONNX tensors: element widths per [`DataType`] and the `raw_data` check.
//!
//! Sub-byte types are packed as the ONNX spec says (two 4-bit or four 2-bit elements per byte),
//! so a tensor's byte count is `ceil(elems * bits / 8)`. Types without a fixed raw layout here
//! (STRING, the 6-bit floats) have no width and are not size-checked.

use crate::error::TensorIssue;
use crate::proto::TensorProto;
use crate::proto::tensor_proto::DataType;

/// Bits per element of `dtype` in `raw_data`, or `None` for types without a fixed-width raw
/// layout (UNDEFINED, STRING, FLOAT6E2M3, FLOAT6E3M2).
pub fn element_bits(dtype: DataType) -> Option<u64> {
    use DataType as D;
    match dtype {
        D::Undefined | D::String | D::Float6e2m3 | D::Float6e3m2 => None,
        D::Uint2 | D::Int2 => Some(2),
        D::Uint4 | D::Int4 | D::Float4e2m1 => Some(4),
        D::Uint8
        | D::Int8
        | D::Bool
        | D::Float8e4m3fn
        | D::Float8e4m3fnuz
        | D::Float8e5m2
        | D::Float8e5m2fnuz
        | D::Float8e8m0 => Some(8),
        D::Uint16 | D::Int16 | D::Float16 | D::Bfloat16 => Some(16),
        D::Float | D::Int32 | D::Uint32 => Some(32),
        D::Int64 | D::Uint64 | D::Double | D::Complex64 => Some(64),
        D::Complex128 => Some(128),
    }
}

/// Bytes that `elems` elements of `dtype` occupy in `raw_data` (sub-byte types packed, rounded
/// up to whole bytes). `None` when the type has no fixed width or the count overflows `u64`.
pub fn byte_len(dtype: DataType, elems: u64) -> Option<u64> {
    let bits = elems.checked_mul(element_bits(dtype)?)?;
    Some(bits.div_ceil(8))
}

/// Number of elements `dims` describe (1 for a scalar, `dims == []`).
pub(crate) fn element_count(dims: &[i64]) -> Result<u64, TensorIssue> {
    dims.iter().try_fold(1u64, |acc, &d| {
        let d = u64::try_from(d).map_err(|_| TensorIssue::NegativeDim { dims: dims.to_vec() })?;
        acc.checked_mul(d).ok_or_else(|| TensorIssue::CountOverflow { dims: dims.to_vec() })
    })
}

/// The tensor's data type, rejecting UNDEFINED and values this version does not know.
pub(crate) fn data_type(tensor: &TensorProto) -> Result<DataType, TensorIssue> {
    match DataType::try_from(tensor.data_type) {
        Ok(DataType::Undefined) | Err(_) => Err(TensorIssue::UnknownDataType { data_type: tensor.data_type }),
        Ok(dtype) => Ok(dtype),
    }
}

/// Bytes the tensor's raw data must have, or `None` when its type has no fixed width.
pub(crate) fn expected_bytes(tensor: &TensorProto) -> Result<Option<u64>, TensorIssue> {
    let dtype = data_type(tensor)?;
    let elems = element_count(&tensor.dims)?;
    if element_bits(dtype).is_none() {
        return Ok(None);
    }
    byte_len(dtype, elems).map(Some).ok_or_else(|| TensorIssue::CountOverflow { dims: tensor.dims.clone() })
}

/// Checks that `actual_bytes` of raw data fit the tensor's dims and type and the size limit.
pub(crate) fn check_bytes(
    tensor: &TensorProto,
    actual_bytes: u64,
    limit_bytes: u64,
) -> Result<(), TensorIssue> {
    if actual_bytes > limit_bytes {
        return Err(TensorIssue::TooLarge { bytes: actual_bytes, limit_bytes });
    }
    match expected_bytes(tensor)? {
        Some(expected_bytes) if expected_bytes != actual_bytes => Err(TensorIssue::ByteLenMismatch {
            data_type: data_type(tensor)?.as_str_name(),
            dims: tensor.dims.clone(),
            expected_bytes,
            actual_bytes,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_sub_byte_types_round_up() {
        assert_eq!(byte_len(DataType::Int4, 3), Some(2));
        assert_eq!(byte_len(DataType::Uint2, 5), Some(2));
        assert_eq!(byte_len(DataType::Float, 3), Some(12));
        assert_eq!(byte_len(DataType::Complex128, 2), Some(32));
        assert_eq!(byte_len(DataType::String, 2), None);
        assert_eq!(byte_len(DataType::Double, u64::MAX / 2), None);
    }

    #[test]
    fn element_count_rejects_negative_and_overflow() {
        assert_eq!(element_count(&[]), Ok(1));
        assert_eq!(element_count(&[2, 0, 5]), Ok(0));
        assert!(matches!(element_count(&[2, -1]), Err(TensorIssue::NegativeDim { .. })));
        assert!(matches!(element_count(&[i64::MAX, 4]), Err(TensorIssue::CountOverflow { .. })));
    }
}
