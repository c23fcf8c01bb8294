//! Element types, (possibly symbolic) shapes and the binding of symbols to sizes.
//!
//! A `Dim` is either a known size or a named symbol (`batch`, `seq`). Two dims with the same symbol
//! name always stand for the same size within one graph; a `Binding` gives every symbol its size when
//! a session is created or an input shape changes.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::coded::Coded;
use crate::error::PlanError;

/// Element type of a tensor. Closed: the planner, kernels and reference executor handle exactly these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE 754 binary64.
    F64,
    /// Signed 64-bit integer (ONNX's type for shapes and indices).
    I64,
    /// Signed 32-bit integer.
    I32,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean, stored as one byte (0 or 1).
    Bool,
    /// A float8 / float4 / int4 / int2 format, one code per byte in memory.
    Coded(Coded),
    /// UTF-8 strings (CPU reference only). A constant holds them length-prefixed
    /// ([`crate::ConstTensor::strings`]); `size_bytes` is what a string's header takes in host
    /// memory, not its text.
    String,
}

impl DType {
    /// Bytes one element occupies in memory.
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 | DType::U64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::I8 | DType::U8 | DType::Bool | DType::Coded(_) => 1,
            DType::String => 24,
        }
    }

    /// Bits one element's value takes (int4: 4, though it takes a byte in memory); `None` for
    /// strings.
    pub const fn bits(self) -> Option<u32> {
        match self {
            DType::Coded(c) => Some(c.bits()),
            DType::String => None,
            d => Some(8 * d.size_bytes() as u32),
        }
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 => true,
            DType::Coded(c) => c.is_float(),
            _ => false,
        }
    }

    /// Smallest and largest value of an integer or bool dtype (the identities of Max / Min over an
    /// empty set, a quantizer's clipping bounds); `None` for the float types and strings. uint64
    /// ends at `i64::MAX`, where the reference's integer computations (in i64) end.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::I64 => Some((i64::MIN, i64::MAX)),
            DType::I32 => Some((i32::MIN as i64, i32::MAX as i64)),
            DType::I8 => Some((i8::MIN as i64, i8::MAX as i64)),
            DType::U8 => Some((0, u8::MAX as i64)),
            DType::I16 => Some((i16::MIN as i64, i16::MAX as i64)),
            DType::U16 => Some((0, u16::MAX as i64)),
            DType::U32 => Some((0, u32::MAX as i64)),
            DType::U64 => Some((0, i64::MAX)),
            DType::Bool => Some((0, 1)),
            DType::Coded(c) if !c.is_float() => {
                let codes = (0..1u8 << c.bits()).map(|k| c.decode_int(k));
                Some(codes.fold((0, 0), |(a, b), x| (a.min(x), b.max(x))))
            }
            DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::Coded(_) | DType::String => None,
        }
    }

    /// True for the integer types (not `Bool`).
    pub const fn is_int(self) -> bool {
        match self {
            DType::I64 | DType::I32 | DType::I16 | DType::I8 => true,
            DType::U64 | DType::U32 | DType::U16 | DType::U8 => true,
            DType::Coded(c) => !c.is_float(),
            _ => false,
        }
    }

    /// True for the types with a sign (floats and signed integers).
    pub const fn is_signed(self) -> bool {
        match self {
            DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool | DType::String => false,
            DType::Coded(c) => c.is_signed(),
            _ => true,
        }
    }

    /// True for the types every GPU lowering takes (the coded narrow formats and the 16-bit and
    /// unsigned integer widths other than u8 only the type-generic ones: Cast, comparisons,
    /// integer arithmetic, views; strings none).
    pub const fn is_native(self) -> bool {
        !matches!(self, DType::I16 | DType::U16 | DType::U32 | DType::U64 | DType::Coded(_) | DType::String)
    }

    /// Lower-case name as in ONNX documentation (`float`, `int64`, ...).
    pub const fn onnx_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F64 => "double",
            DType::I64 => "int64",
            DType::I32 => "int32",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::Bool => "bool",
            DType::Coded(c) => c.onnx_name(),
            DType::String => "string",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.onnx_name())
    }
}

/// One dimension of a shape: a known size or a named symbol bound later.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dim {
    /// A size known at plan time.
    Known(usize),
    /// A size known only once the symbol is bound (batch, sequence length, data-dependent sizes).
    Symbol(String),
}

impl Dim {
    /// The size, if known.
    pub fn known(&self) -> Option<usize> {
        match self {
            Dim::Known(n) => Some(*n),
            Dim::Symbol(_) => None,
        }
    }

    /// The size under `binding`, or `UnboundSymbol`.
    pub fn bind(&self, binding: &Binding) -> Result<usize, PlanError> {
        match self {
            Dim::Known(n) => Ok(*n),
            Dim::Symbol(s) => binding.get(s).ok_or_else(|| PlanError::UnboundSymbol { symbol: s.clone() }),
        }
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Self {
        Dim::Known(n)
    }
}

impl From<&str> for Dim {
    fn from(s: &str) -> Self {
        Dim::Symbol(s.to_string())
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Symbol(s) => f.write_str(s),
        }
    }
}

/// A tensor shape; rank 0 is a scalar.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    /// A shape whose dims are all known.
    pub fn known(dims: &[usize]) -> Self {
        Shape(dims.iter().map(|&d| Dim::Known(d)).collect())
    }

    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The dims.
    pub fn dims(&self) -> &[Dim] {
        &self.0
    }

    /// All sizes, when every dim is known.
    pub fn as_known(&self) -> Option<Vec<usize>> {
        self.0.iter().map(Dim::known).collect()
    }

    /// Number of elements, when every dim is known.
    pub fn known_elems(&self) -> Option<usize> {
        self.0.iter().try_fold(1usize, |acc, d| acc.checked_mul(d.known()?))
    }

    /// Concrete sizes under `binding`; the error names the first unbound symbol.
    pub fn bind(&self, binding: &Binding) -> Result<Vec<usize>, PlanError> {
        self.0.iter().map(|d| d.bind(binding)).collect()
    }

    /// Names of the symbols this shape mentions, in order of first appearance.
    pub fn symbols(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for d in &self.0 {
            if let Dim::Symbol(s) = d
                && !out.contains(&s.as_str())
            {
                out.push(s);
            }
        }
        out
    }
}

impl From<Vec<Dim>> for Shape {
    fn from(dims: Vec<Dim>) -> Self {
        Shape(dims)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Sizes for symbolic dims, by symbol name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Binding(pub BTreeMap<String, usize>);

impl Binding {
    /// An empty binding.
    pub fn new() -> Self {
        Binding::default()
    }

    /// Binds `symbol` to `size` (replacing any earlier size); returns `self` for chaining.
    pub fn with(mut self, symbol: &str, size: usize) -> Self {
        self.0.insert(symbol.to_string(), size);
        self
    }

    /// Binds `symbol` to `size`, replacing any earlier size.
    pub fn set(&mut self, symbol: &str, size: usize) {
        self.0.insert(symbol.to_string(), size);
    }

    /// The size bound to `symbol`.
    pub fn get(&self, symbol: &str) -> Option<usize> {
        self.0.get(symbol).copied()
    }
}

/// Element type and shape of one value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Element type.
    pub dtype: DType,
    /// Shape, possibly with symbolic dims.
    pub shape: Shape,
}

impl TensorInfo {
    /// Builds an info from a dtype and anything convertible to dims.
    pub fn new(dtype: DType, dims: impl IntoIterator<Item = impl Into<Dim>>) -> Self {
        TensorInfo { dtype, shape: Shape(dims.into_iter().map(Into::into).collect()) }
    }

    /// A scalar (rank 0).
    pub fn scalar(dtype: DType) -> Self {
        TensorInfo { dtype, shape: Shape(Vec::new()) }
    }

    /// Rank of the shape.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Bytes the tensor occupies, when every dim is known.
    pub fn known_bytes(&self) -> Option<usize> {
        self.shape.known_elems()?.checked_mul(self.dtype.size_bytes())
    }
}

impl fmt::Display for TensorInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_sizes() {
        assert_eq!(DType::F32.size_bytes(), 4);
        assert_eq!(DType::BF16.size_bytes(), 2);
        assert_eq!(DType::I64.size_bytes(), 8);
        assert_eq!(DType::Bool.size_bytes(), 1);
        assert!(DType::F16.is_float() && !DType::I8.is_float() && DType::U8.is_int());
    }

    #[test]
    fn bind_reports_unbound_symbol() {
        let s = Shape(vec![Dim::from("batch"), Dim::Known(3), Dim::from("seq")]);
        let b = Binding::new().with("batch", 2);
        assert_eq!(s.bind(&b), Err(PlanError::UnboundSymbol { symbol: "seq".into() }));
        assert_eq!(s.bind(&b.with("seq", 7)), Ok(vec![2, 3, 7]));
        assert_eq!(s.symbols(), vec!["batch", "seq"]);
    }

    #[test]
    fn display_and_bytes() {
        let t = TensorInfo::new(DType::F16, [2usize, 3]);
        assert_eq!(t.to_string(), "float16[2,3]");
        assert_eq!(t.known_bytes(), Some(12));
        assert_eq!(TensorInfo::new(DType::F32, [Dim::from("n")]).known_bytes(), None);
    }
}
