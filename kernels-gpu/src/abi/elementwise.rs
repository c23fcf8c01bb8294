//! Elementwise kernels: binary ops with NumPy broadcasting, unary ops over contiguous data.

use super::{KernelId, MAX_RANK, Params};

/// Parameters of a binary elementwise kernel, `y[i] = f(a[ia], b[ib])`.
///
/// Two layouts:
/// - `rank == 0`: `a`, `b` and `y` all hold `elems` contiguous elements (same shape, no
///   broadcasting); the kernel uses 16-byte vector accesses when all three pointers are 16-byte
///   aligned.
/// - `1 <= rank <= MAX_RANK`: the output has shape `out_shape[MAX_RANK - rank..]` (row-major,
///   contiguous) and the operands are read at element offsets `sum_d idx[d] * x_strides[d]`;
///   a stride of 0 broadcasts that dimension (NumPy rules). Unused leading entries are ignored.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BinaryParams {
    /// Number of output elements.
    pub elems: u64,
    /// Number of used dimensions, 0 for the contiguous layout.
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Output shape, right-aligned: dimension `d` of a rank-`r` shape is at `MAX_RANK - r + d`.
    pub out_shape: [u64; MAX_RANK],
    /// Element strides of `a`, right-aligned like `out_shape`; 0 broadcasts.
    pub a_strides: [u64; MAX_RANK],
    /// Element strides of `b`, right-aligned like `out_shape`; 0 broadcasts.
    pub b_strides: [u64; MAX_RANK],
}

/// Parameters of a unary elementwise kernel, `y[i] = f(x[i])` over `elems` contiguous elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnaryParams {
    /// Number of elements in `x` and `y`.
    pub elems: u64,
    /// Op attribute: the negative slope of LeakyRelu; unused (0) by other ops.
    pub alpha: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// The binary elementwise ops with a kernel (f32, NumPy broadcasting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (IEEE division)
    Div,
    /// `a ^ b` (C `powf` semantics)
    Pow,
    /// `max(a, b)`; NaN if either is NaN
    Max,
    /// `min(a, b)`; NaN if either is NaN
    Min,
}

impl BinaryOp {
    /// Every binary op, in declaration order.
    pub const ALL: [BinaryOp; 7] =
        [Self::Add, Self::Sub, Self::Mul, Self::Div, Self::Pow, Self::Max, Self::Min];

    /// The f32 kernel that applies this op.
    pub const fn kernel(self) -> KernelId {
        match self {
            Self::Add => KernelId::AddF32,
            Self::Sub => KernelId::SubF32,
            Self::Mul => KernelId::MulF32,
            Self::Div => KernelId::DivF32,
            Self::Pow => KernelId::PowF32,
            Self::Max => KernelId::MaxF32,
            Self::Min => KernelId::MinF32,
        }
    }
}

/// The unary elementwise ops with a kernel (f32, contiguous).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN stays NaN
    Relu,
    /// `x < 0 ? alpha * x : x`
    LeakyRelu {
        /// Negative slope (ONNX default 0.01).
        alpha: f32,
    },
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `tanh(x)`
    Tanh,
    /// `e^x`
    Exp,
    /// natural logarithm
    Log,
    /// square root (correctly rounded)
    Sqrt,
    /// `|x|`
    Abs,
    /// `-x`
    Neg,
    /// error function
    Erf,
    /// ONNX Gelu, `approximate = "none"`: `x/2 * (1 + erf(x / sqrt 2))`
    GeluErf,
    /// ONNX Gelu, `approximate = "tanh"`: `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`
    GeluTanh,
    /// `x * sigmoid(x)`
    Silu,
    /// `ln(1 + e^x)`, evaluated without overflow
    Softplus,
}

impl UnaryOp {
    /// Every unary op (LeakyRelu with the ONNX default slope), in declaration order.
    pub const ALL: [UnaryOp; 14] = [
        Self::Relu,
        Self::LeakyRelu { alpha: 0.01 },
        Self::Sigmoid,
        Self::Tanh,
        Self::Exp,
        Self::Log,
        Self::Sqrt,
        Self::Abs,
        Self::Neg,
        Self::Erf,
        Self::GeluErf,
        Self::GeluTanh,
        Self::Silu,
        Self::Softplus,
    ];

    /// The f32 kernel that applies this op.
    pub const fn kernel(self) -> KernelId {
        match self {
            Self::Relu => KernelId::ReluF32,
            Self::LeakyRelu { .. } => KernelId::LeakyReluF32,
            Self::Sigmoid => KernelId::SigmoidF32,
            Self::Tanh => KernelId::TanhF32,
            Self::Exp => KernelId::ExpF32,
            Self::Log => KernelId::LogF32,
            Self::Sqrt => KernelId::SqrtF32,
            Self::Abs => KernelId::AbsF32,
            Self::Neg => KernelId::NegF32,
            Self::Erf => KernelId::ErfF32,
            Self::GeluErf => KernelId::GeluErfF32,
            Self::GeluTanh => KernelId::GeluTanhF32,
            Self::Silu => KernelId::SiluF32,
            Self::Softplus => KernelId::SoftplusF32,
        }
    }

    /// The op's attribute as the kernel reads it ([`UnaryParams::alpha`]).
    pub const fn alpha(self) -> f32 {
        match self {
            Self::LeakyRelu { alpha } => alpha,
            _ => 0.0,
        }
    }
}

// SAFETY: #[repr(C)], u64/u32 fields with the padding spelled out as `_pad`.
unsafe impl Params for BinaryParams {}
// SAFETY: #[repr(C)], u64 then f32 and an explicit `_pad`.
unsafe impl Params for UnaryParams {}
