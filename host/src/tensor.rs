//! [`HostTensor`]: a tensor in host memory of any [`DType`], row-major and contiguous.
//!
//! Invariant: the element count of `data` equals the product of `shape` (1 for a scalar,
//! `shape == []`); every constructor checks it.

use half::{bf16, f16};
use planner::{ConstTensor, DType};

use crate::error::HostError;

/// Typed element storage of a [`HostTensor`].
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// f32 elements.
    F32(Vec<f32>),
    /// f16 elements.
    F16(Vec<f16>),
    /// bf16 elements.
    BF16(Vec<bf16>),
    /// f64 elements.
    F64(Vec<f64>),
    /// i64 elements.
    I64(Vec<i64>),
    /// i32 elements.
    I32(Vec<i32>),
    /// i8 elements.
    I8(Vec<i8>),
    /// u8 elements.
    U8(Vec<u8>),
    /// bool elements.
    Bool(Vec<bool>),
}

macro_rules! dtype_variants {
    ($($variant:ident($t:ty)),*) => {
        $(impl From<Vec<$t>> for TensorData {
            fn from(v: Vec<$t>) -> Self {
                TensorData::$variant(v)
            }
        })*

        impl TensorData {
            /// Number of elements.
            pub fn len(&self) -> usize {
                match self { $(TensorData::$variant(v) => v.len()),* }
            }

            /// The element type.
            pub fn dtype(&self) -> DType {
                match self { $(TensorData::$variant(_) => DType::$variant),* }
            }
        }
    };
}
dtype_variants!(F32(f32), F16(f16), BF16(bf16), F64(f64), I64(i64), I32(i32), I8(i8), U8(u8), Bool(bool));

impl TensorData {
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every element as f64 (bool as 0 or 1; i64 beyond 2^53 rounds).
    pub fn to_f64s(&self) -> Vec<f64> {
        match self {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        }
    }
}

/// A tensor in host memory (row-major, contiguous).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    shape: Vec<usize>,
    data: TensorData,
}

/// Product of `shape`, or `None` if it overflows `usize`.
pub fn elem_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl HostTensor {
    /// A tensor of `shape` holding `data`; fails if the element counts disagree.
    pub fn new(shape: Vec<usize>, data: impl Into<TensorData>) -> Result<Self, HostError> {
        let data = data.into();
        let expected = elem_count(&shape).unwrap_or(usize::MAX);
        if expected != data.len() {
            return Err(HostError::DataLength { what: "tensor".into(), shape, expected, got: data.len() });
        }
        Ok(HostTensor { shape, data })
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The typed elements, row-major.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// Consumes the tensor, returning its typed elements.
    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements of an f32 tensor; a dtype error naming `what` otherwise.
    pub fn f32s(&self, what: &str) -> Result<&[f32], HostError> {
        match &self.data {
            TensorData::F32(v) => Ok(v),
            other => Err(HostError::DType { what: what.into(), expected: DType::F32, got: other.dtype() }),
        }
    }

    /// Copies a constant (initializer) into a host tensor.
    pub fn from_const(c: &ConstTensor) -> Result<Self, HostError> {
        let b = &c.bytes;
        fn le<const N: usize, T>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
            b.as_chunks::<N>().0.iter().map(|c| f(*c)).collect()
        }
        let data = match c.dtype {
            DType::F32 => TensorData::F32(le(b, f32::from_le_bytes)),
            DType::F16 => TensorData::F16(le(b, f16::from_le_bytes)),
            DType::BF16 => TensorData::BF16(le(b, bf16::from_le_bytes)),
            DType::F64 => TensorData::F64(le(b, f64::from_le_bytes)),
            DType::I64 => TensorData::I64(le(b, i64::from_le_bytes)),
            DType::I32 => TensorData::I32(le(b, i32::from_le_bytes)),
            DType::I8 => TensorData::I8(le(b, i8::from_le_bytes)),
            DType::U8 => TensorData::U8(b.clone()),
            DType::Bool => TensorData::Bool(b.iter().map(|&x| x != 0).collect()),
        };
        HostTensor::new(c.dims.clone(), data)
    }

    /// The tensor as a constant (little-endian bytes).
    pub fn to_const(&self) -> ConstTensor {
        let bytes: Vec<u8> = match &self.data {
            TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::U8(v) => v.clone(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        };
        ConstTensor::new(self.dtype(), self.shape.clone(), bytes).expect("length invariant of HostTensor")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_checked_and_dtypes_reported() {
        assert!(HostTensor::new(vec![2, 3], vec![0f32; 5]).is_err());
        let t = HostTensor::new(vec![2], vec![1i64, 2]).unwrap();
        assert_eq!(t.dtype(), DType::I64);
        assert!(matches!(t.f32s("x"), Err(HostError::DType { expected: DType::F32, got: DType::I64, .. })));
        assert_eq!(HostTensor::new(vec![], vec![7f32]).unwrap().len(), 1);
    }

    #[test]
    fn constants_round_trip_for_every_dtype() {
        let cases: Vec<TensorData> = vec![
            vec![1.5f32, -2.0].into(),
            vec![f16::from_f32(0.5), f16::from_f32(-3.0)].into(),
            vec![bf16::from_f32(0.5), bf16::from_f32(-3.0)].into(),
            vec![1e300f64, -0.0].into(),
            vec![i64::MIN, 5].into(),
            vec![-7i32, 9].into(),
            vec![-8i8, 127].into(),
            vec![0u8, 255].into(),
            vec![true, false].into(),
        ];
        for data in cases {
            let t = HostTensor::new(vec![2], data).unwrap();
            assert_eq!(HostTensor::from_const(&t.to_const()).unwrap(), t);
        }
    }
}
