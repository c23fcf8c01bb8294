//! [`HostTensor`]: a tensor in host memory of any [`DType`], row-major and contiguous.
//!
//! Invariant: the element count of `data` equals the product of `shape` (1 for a scalar,
//! `shape == []`); every constructor checks it.

use half::{bf16, f16};
use planner::{Coded, ConstTensor, DType};

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
    /// i16 elements.
    I16(Vec<i16>),
    /// u16 elements.
    U16(Vec<u16>),
    /// u32 elements.
    U32(Vec<u32>),
    /// u64 elements.
    U64(Vec<u64>),
    /// bool elements.
    Bool(Vec<bool>),
    /// Codes of a float8 / float4 / int4 / int2 format, one per byte (see [`Coded`]).
    Coded(Coded, Vec<u8>),
    /// UTF-8 strings.
    String(Vec<String>),
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
                match self { $(TensorData::$variant(v) => v.len(),)* TensorData::Coded(_, v) => v.len() }
            }

            /// The element type.
            pub fn dtype(&self) -> DType {
                match self { $(TensorData::$variant(_) => DType::$variant,)* TensorData::Coded(c, _) => DType::Coded(*c) }
            }
        }
    };
}
dtype_variants!(
    F32(f32),
    F16(f16),
    BF16(bf16),
    F64(f64),
    I64(i64),
    I32(i32),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    U32(u32),
    U64(u64),
    Bool(bool),
    String(String)
);

/// `$body` applied to the element vector `$v` of whichever variant `$data` is, giving the same
/// variant back (`$body` may use `?`: it runs inside the caller).
macro_rules! same_variant {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F32($v) => TensorData::F32($body),
            TensorData::F16($v) => TensorData::F16($body),
            TensorData::BF16($v) => TensorData::BF16($body),
            TensorData::F64($v) => TensorData::F64($body),
            TensorData::I64($v) => TensorData::I64($body),
            TensorData::I32($v) => TensorData::I32($body),
            TensorData::I8($v) => TensorData::I8($body),
            TensorData::U8($v) => TensorData::U8($body),
            TensorData::I16($v) => TensorData::I16($body),
            TensorData::U16($v) => TensorData::U16($body),
            TensorData::U32($v) => TensorData::U32($body),
            TensorData::U64($v) => TensorData::U64($body),
            TensorData::Bool($v) => TensorData::Bool($body),
            TensorData::Coded(c, $v) => TensorData::Coded(*c, $body),
            TensorData::String($v) => TensorData::String($body),
        }
    };
}

/// Like [`same_variant!`] over a list `$parts` of `&TensorData` that must all be of the first's
/// variant: `$vs` is the list of their element slices. A mixed list is `$mixed`.
macro_rules! same_variant_all {
    ($parts:expr, $mixed:expr, $vs:ident => $body:expr) => {{
        macro_rules! arm {
            ($variant:ident) => {{
                let mut $vs = Vec::with_capacity($parts.len());
                for p in $parts {
                    match p {
                        TensorData::$variant(v) => $vs.push(v.as_slice()),
                        _ => return Err($mixed),
                    }
                }
                TensorData::$variant($body)
            }};
        }
        match $parts.first().copied() {
            None | Some(TensorData::F32(_)) => arm!(F32),
            Some(TensorData::F16(_)) => arm!(F16),
            Some(TensorData::BF16(_)) => arm!(BF16),
            Some(TensorData::F64(_)) => arm!(F64),
            Some(TensorData::I64(_)) => arm!(I64),
            Some(TensorData::I32(_)) => arm!(I32),
            Some(TensorData::I8(_)) => arm!(I8),
            Some(TensorData::U8(_)) => arm!(U8),
            Some(TensorData::I16(_)) => arm!(I16),
            Some(TensorData::U16(_)) => arm!(U16),
            Some(TensorData::U32(_)) => arm!(U32),
            Some(TensorData::U64(_)) => arm!(U64),
            Some(TensorData::Bool(_)) => arm!(Bool),
            Some(TensorData::String(_)) => arm!(String),
            Some(TensorData::Coded(code, _)) => {
                let mut $vs = Vec::with_capacity($parts.len());
                for p in $parts {
                    match p {
                        TensorData::Coded(c, v) if c == code => $vs.push(v.as_slice()),
                        _ => return Err($mixed),
                    }
                }
                TensorData::Coded(*code, $body)
            }
        }
    }};
}

/// A vector of the `n` items of `items`, its memory reserved fallibly first: a request the
/// allocator refuses is [`HostError::HostMemory`] naming `what`, not an abort.
pub fn try_collect<T>(n: usize, what: &str, items: impl Iterator<Item = T>) -> Result<Vec<T>, HostError> {
    let mut v = try_with_capacity(n, what)?;
    v.extend(items);
    Ok(v)
}

/// An empty vector with room for `n` elements, reserved fallibly ([`HostError::HostMemory`]).
pub fn try_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>, HostError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| HostError::HostMemory {
        bytes: (n as u64).saturating_mul(size_of::<T>() as u64),
        what: what.to_string(),
    })?;
    Ok(v)
}

/// `n` copies of `value`, their memory reserved fallibly ([`HostError::HostMemory`]).
pub fn try_filled<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>, HostError> {
    let mut v = try_with_capacity(n, what)?;
    v.resize(n, value);
    Ok(v)
}

impl TensorData {
    /// The `n` elements at the positions `idx` yields, in that order, in this dtype (data
    /// movement: no conversion). Every index must be in range.
    pub fn take(&self, n: usize, idx: impl IntoIterator<Item = usize>) -> Result<TensorData, HostError> {
        // (`clone`: strings are not `Copy`; for the rest it is the copy.)
        #[allow(clippy::clone_on_copy)]
        let data = same_variant!(self, v => try_collect(n, "gathered elements", idx.into_iter().map(|i| v[i].clone()))?);
        Ok(data)
    }

    /// The `n` elements of the ranges `runs` yields, one after the other, in this dtype (row
    /// copies: Gather, GatherND). Every range must be in range.
    pub fn take_runs(
        &self,
        n: usize,
        runs: impl IntoIterator<Item = std::ops::Range<usize>>,
    ) -> Result<TensorData, HostError> {
        Ok(same_variant!(self, v => {
            let mut out = try_with_capacity(n, "gathered rows")?;
            for r in runs {
                out.extend_from_slice(&v[r]);
            }
            out
        }))
    }

    /// The elements at positions `idx`, or `fill`'s one element (same dtype) where an index is
    /// `None`.
    pub fn take_or(&self, idx: &[Option<usize>], fill: &TensorData) -> Result<TensorData, HostError> {
        let mixed = HostError::DType { what: "fill value".into(), expected: self.dtype(), got: fill.dtype() };
        let parts = [self, fill];
        Ok(same_variant_all!(&parts, mixed, vs => {
            let (data, fill) = (vs[0], vs[1].first().cloned().unwrap_or_default());
            #[allow(clippy::clone_on_copy)]
            let taken = try_collect(idx.len(), "gathered elements", idx.iter().map(|i| i.map_or_else(|| fill.clone(), |i| data[i].clone())))?;
            taken
        }))
    }

    /// The concatenation of `parts` (all of one dtype) in `outer` rounds: round `o` appends the
    /// `o`-th run of each part, a part's runs being `run[p]` elements long (row-major concatenation
    /// along an axis: `outer` is the product of the dims before it).
    pub fn concat_runs(parts: &[&TensorData], outer: usize, run: &[usize]) -> Result<TensorData, HostError> {
        let expected = parts.first().map_or(DType::F32, |p| p.dtype());
        let got = parts.iter().map(|p| p.dtype()).find(|&d| d != expected).unwrap_or(expected);
        let mixed = HostError::DType { what: "concatenated part".into(), expected, got };
        let total: usize = run.iter().sum::<usize>().saturating_mul(outer);
        Ok(same_variant_all!(parts, mixed, vs => {
            let mut out = try_with_capacity(total, "concatenated elements")?;
            for o in 0..outer {
                for (v, &r) in vs.iter().zip(run) {
                    out.extend_from_slice(&v[o * r..(o + 1) * r]);
                }
            }
            out
        }))
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every element as f64 (bool as 0 or 1; i64 beyond 2^53 rounds).
    pub fn to_f64s(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.float_at(i)).collect()
    }

    /// Element `i` of a float tensor, exactly, as f64 (integers and bools convert too; i64 beyond
    /// 2^53 rounds). The reference reads elements one at a time through it and [`Self::int_at`]
    /// instead of widening whole tensors.
    pub fn float_at(&self, i: usize) -> f64 {
        match self {
            TensorData::F32(v) => v[i] as f64,
            TensorData::F16(v) => v[i].to_f64(),
            TensorData::BF16(v) => v[i].to_f64(),
            TensorData::F64(v) => v[i],
            TensorData::U64(v) => v[i] as f64,
            TensorData::Coded(c, v) => c.decode(v[i]),
            TensorData::String(v) => v[i].trim().parse().unwrap_or(f64::NAN),
            other => other.int_at(i) as f64,
        }
    }

    /// Element `i` of an integer or bool tensor (bool as 0 or 1), exactly, as i64 (floats
    /// truncate toward zero; uint64 past `i64::MAX` wraps, which [`Self::u64_in_i64`] checks).
    pub fn int_at(&self, i: usize) -> i64 {
        match self {
            TensorData::I64(v) => v[i],
            TensorData::I32(v) => v[i] as i64,
            TensorData::I8(v) => v[i] as i64,
            TensorData::U8(v) => v[i] as i64,
            TensorData::I16(v) => v[i] as i64,
            TensorData::U16(v) => v[i] as i64,
            TensorData::U32(v) => v[i] as i64,
            TensorData::U64(v) => v[i] as i64,
            TensorData::Bool(v) => v[i] as i64,
            TensorData::Coded(c, v) => c.decode_int(v[i]),
            other => other.float_at(i) as i64,
        }
    }

    /// The first uint64 element past `i64::MAX` (which the reference's integer lanes cannot
    /// hold), if any; `None` for every other dtype.
    pub fn u64_in_i64(&self) -> Option<u64> {
        match self {
            TensorData::U64(v) => v.iter().copied().find(|&x| x > i64::MAX as u64),
            _ => None,
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
        fn le<const N: usize, T>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Result<Vec<T>, HostError> {
            let chunks = b.as_chunks::<N>().0;
            try_collect(chunks.len(), "an initializer", chunks.iter().map(|c| f(*c)))
        }
        let data = match c.dtype {
            DType::F32 => TensorData::F32(le(b, f32::from_le_bytes)?),
            DType::F16 => TensorData::F16(le(b, f16::from_le_bytes)?),
            DType::BF16 => TensorData::BF16(le(b, bf16::from_le_bytes)?),
            DType::F64 => TensorData::F64(le(b, f64::from_le_bytes)?),
            DType::I64 => TensorData::I64(le(b, i64::from_le_bytes)?),
            DType::I32 => TensorData::I32(le(b, i32::from_le_bytes)?),
            DType::I8 => TensorData::I8(le(b, i8::from_le_bytes)?),
            DType::U8 => TensorData::U8(le(b, u8::from_le_bytes)?),
            DType::I16 => TensorData::I16(le(b, i16::from_le_bytes)?),
            DType::U16 => TensorData::U16(le(b, u16::from_le_bytes)?),
            DType::U32 => TensorData::U32(le(b, u32::from_le_bytes)?),
            DType::U64 => TensorData::U64(le(b, u64::from_le_bytes)?),
            DType::Bool => TensorData::Bool(le(b, |[x]: [u8; 1]| x != 0)?),
            DType::Coded(code) => TensorData::Coded(code, le(b, u8::from_le_bytes)?),
            DType::String => TensorData::String(c.strings().ok_or_else(|| HostError::Unsupported {
                node: String::new(),
                op: "initializer",
                detail: "string bytes that do not parse".into(),
            })?),
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
            TensorData::U8(v) | TensorData::Coded(_, v) => v.clone(),
            TensorData::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8).collect(),
            TensorData::String(v) => {
                return ConstTensor::from_strings(&self.shape, v).expect("the shape holds the strings");
            }
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
    fn data_moves_in_its_own_dtype() {
        let v = TensorData::from(vec![10i32, 11, 12, 13, 14, 15]);
        assert_eq!(v.take(3, [5, 0, 5]).unwrap(), TensorData::from(vec![15i32, 10, 15]));
        assert_eq!(v.take_runs(4, [4..6, 0..2]).unwrap(), TensorData::from(vec![14i32, 15, 10, 11]));
        let fill = TensorData::from(vec![-1i32]);
        assert_eq!(v.take_or(&[Some(1), None], &fill).unwrap(), TensorData::from(vec![11i32, -1]));
        assert!(v.take_or(&[None], &TensorData::from(vec![0f32])).is_err(), "fill of another dtype");
        // [2, 3] and [2, 1] along axis 1: two rounds of 3 + 1 elements.
        let w = TensorData::from(vec![true, false]);
        let b = TensorData::from(vec![true, true, false, false, true, false]);
        assert_eq!(
            TensorData::concat_runs(&[&b, &w], 2, &[3, 1]).unwrap(),
            TensorData::from(vec![true, true, false, true, false, true, false, false])
        );
        assert!(TensorData::concat_runs(&[&v, &w], 1, &[6, 2]).is_err(), "mixed dtypes");
        let refused = try_with_capacity::<u64>(usize::MAX / 8, "a test");
        assert!(matches!(refused, Err(HostError::HostMemory { .. })), "{refused:?}");
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
            vec![i16::MIN, 7].into(),
            vec![u16::MAX, 7].into(),
            vec![u32::MAX, 7].into(),
            vec![u64::MAX, 7].into(),
            vec![true, false].into(),
            TensorData::Coded(Coded::F8E5M2, vec![0x7c, 0x01]),
            TensorData::Coded(Coded::I4, vec![0x8, 0x7]),
            vec!["π".to_string(), String::new()].into(),
        ];
        for data in cases {
            let t = HostTensor::new(vec![2], data).unwrap();
            assert_eq!(HostTensor::from_const(&t.to_const()).unwrap(), t);
        }
    }
}
