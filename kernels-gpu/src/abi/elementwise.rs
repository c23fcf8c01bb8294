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

    /// The f64 kernel that applies this op, for the ops that have one.
    pub const fn kernel_f64(self) -> Option<KernelId> {
        Some(match self {
            Self::Relu => KernelId::ReluF64,
            Self::Exp => KernelId::ExpF64,
            Self::Log => KernelId::LogF64,
            Self::Sqrt => KernelId::SqrtF64,
            Self::Abs => KernelId::AbsF64,
            Self::Neg => KernelId::NegF64,
            _ => return None,
        })
    }

    /// The op's attribute as the kernel reads it ([`UnaryParams::alpha`]).
    pub const fn alpha(self) -> f32 {
        match self {
            Self::LeakyRelu { alpha } => alpha,
            _ => 0.0,
        }
    }
}

/// Inputs an elementwise program reads (besides immediates).
pub const EW_MAX_INPUTS: usize = 4;
/// Instructions in an elementwise program.
pub const EW_MAX_INSTRS: usize = 16;
/// Registers of an elementwise program.
pub const EW_REGS: u32 = 4;

/// Operand sources of an [`EwInstr`]: registers `0..EW_REGS`, then the inputs, then the
/// instruction's immediate.
pub mod ew_src {
    /// Input `k` is source `INPUT0 + k`.
    pub const INPUT0: u32 = super::EW_REGS;
    /// The instruction's `imm`.
    pub const IMM: u32 = INPUT0 + super::EW_MAX_INPUTS as u32;
}

/// One instruction of an elementwise program: `reg[dst] = op(src a, src b)` (unary ops read `a`
/// only; LeakyRelu's slope is `imm`). `op` is a [`BinaryOp`] code (`0..=6`, declaration order) or
/// `16 +` a [`UnaryOp`] code (declaration order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EwInstr {
    /// Operation code.
    pub op: u32,
    /// Destination register.
    pub dst: u32,
    /// First operand ([`ew_src`]).
    pub a: u32,
    /// Second operand ([`ew_src`]).
    pub b: u32,
    /// Immediate operand (a folded scalar constant, or LeakyRelu's slope).
    pub imm: f32,
    /// The constants of an op that takes more than `imm` ([`ew_extra::QUANTIZE`]:
    /// [`quantize_aux`]); 0 for the others.
    pub aux: u32,
}

/// The [`EwInstr::aux`] of a [`ew_extra::QUANTIZE`] instruction: the zero point `z` in bits
/// 0..16 (as i16), bit 16 set for an unsigned 8-bit integer (`[0, 255]`, else `[-128, 127]`),
/// bit 17 set when the zero point is added and taken off (a QuantizeLinear with one; without,
/// `z` is 0 and neither happens).
pub const fn quantize_aux(z: i16, unsigned: bool, has_zero_point: bool) -> u32 {
    (z as u16 as u32) | (unsigned as u32) << 16 | (has_zero_point as u32) << 17
}

/// Whether the first `n` instructions of a program use only the arithmetic ops (add, sub, mul,
/// div: codes 0..=3), which the kernels evaluate inline; kernels that must not call out of line
/// (`attention_tc_f32`) take only such programs.
pub const fn ew_arith_only(instrs: &[EwInstr], n: usize) -> bool {
    let mut k = 0;
    while k < n && k < instrs.len() {
        if instrs[k].op > 3 {
            return false;
        }
        k += 1;
    }
    n <= instrs.len()
}

/// The [`EwInstr::op`] code of a binary op.
pub const fn ew_binary_code(op: BinaryOp) -> u32 {
    match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Pow => 4,
        BinaryOp::Max => 5,
        BinaryOp::Min => 6,
    }
}

/// The [`EwInstr::op`] code of a unary op.
pub const fn ew_unary_code(op: UnaryOp) -> u32 {
    16 + match op {
        UnaryOp::Relu => 0,
        UnaryOp::LeakyRelu { .. } => 1,
        UnaryOp::Sigmoid => 2,
        UnaryOp::Tanh => 3,
        UnaryOp::Exp => 4,
        UnaryOp::Log => 5,
        UnaryOp::Sqrt => 6,
        UnaryOp::Abs => 7,
        UnaryOp::Neg => 8,
        UnaryOp::Erf => 9,
        UnaryOp::GeluErf => 10,
        UnaryOp::GeluTanh => 11,
        UnaryOp::Silu => 12,
        UnaryOp::Softplus => 13,
    }
}

/// [`EwInstr::op`] codes of the functions that only elementwise programs apply (no single-op
/// kernel): `x` is the instruction's `a` operand, `b` its `b` operand, `imm` its immediate.
pub mod ew_extra {
    /// `floor(x)`
    pub const FLOOR: u32 = 30;
    /// `ceil(x)`
    pub const CEIL: u32 = 31;
    /// `x` rounded half to even
    pub const ROUND: u32 = 32;
    /// `1 / x`
    pub const RECIPROCAL: u32 = 33;
    /// `sin(x)`
    pub const SIN: u32 = 34;
    /// `cos(x)`
    pub const COS: u32 = 35;
    /// `tan(x)`
    pub const TAN: u32 = 36;
    /// `asin(x)`
    pub const ASIN: u32 = 37;
    /// `acos(x)`
    pub const ACOS: u32 = 38;
    /// `atan(x)`
    pub const ATAN: u32 = 39;
    /// `sinh(x)`
    pub const SINH: u32 = 40;
    /// `cosh(x)`
    pub const COSH: u32 = 41;
    /// `asinh(x)`
    pub const ASINH: u32 = 42;
    /// `acosh(x)`
    pub const ACOSH: u32 = 43;
    /// `atanh(x)`
    pub const ATANH: u32 = 44;
    /// `sign(x)` (-1, 0, 1; NaN stays NaN)
    pub const SIGN: u32 = 45;
    /// `x < 0 ? imm * (e^x - 1) : x` (Elu; Selu is this times gamma)
    pub const ELU: u32 = 46;
    /// `x / (1 + |x|)`
    pub const SOFTSIGN: u32 = 47;
    /// `x * clamp(x / 6 + 1/2, 0, 1)`
    pub const HARD_SWISH: u32 = 48;
    /// `x > imm ? x : 0`
    pub const THRESHOLDED_RELU: u32 = 49;
    /// `x * tanh(softplus(x))`
    pub const MISH: u32 = 50;
    /// `max(0, x) + min(0, imm * (e^(x / imm) - 1))`
    pub const CELU: u32 = 51;
    /// `x < 0 ? b * x : x` (PRelu; a binary instruction, `b` the slope)
    pub const PRELU: u32 = 52;
    /// `x < -imm ? x + b : x > imm ? x - b : 0` (Shrink: `imm` is lambd, operand `b` the bias)
    pub const SHRINK: u32 = 53;
    /// `fmod(x, b)`: the remainder of `x / b` truncated toward zero, with `x`'s sign, exact (Mod
    /// with `fmod = 1`; a binary instruction)
    pub const FMOD: u32 = 54;
    /// `clip(round(x / b) + z, lo, hi) - z`, `round` to nearest even: the integer an 8-bit
    /// QuantizeLinear of scale `b` and zero point `z` makes, less `z` (the centred integer a QDQ
    /// pair's dequantization scales; a binary instruction, `z` and the range in
    /// [`super::EwInstr::aux`], [`super::quantize_aux`]). The ops it stands for, in their order
    /// (`kernels_gpu::math::quantize_centred`): the same bits as their instructions one by one.
    pub const QUANTIZE: u32 = 55;
}

/// Parameters of `program::ew_program_f32`: a fused chain of f32 elementwise ops. For each
/// output element `i` (row-major over `out_shape[MAX_RANK - rank..]`; rank 0: `elems` contiguous
/// elements, every input of the output's shape), input `k < n_inputs` is read at
/// `sum_d idx[d] * strides[k][d]` (0 broadcasts), the registers start at 0, the `n_instr`
/// instructions run in order, and `y[i] = reg[out_reg]`. Every op rounds exactly as its
/// single-op kernel does, so a program gives the bits of the unfused ops.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EwProgramParams {
    /// Output elements.
    pub elems: u64,
    /// Used dims (0: contiguous, no broadcast).
    pub rank: u32,
    /// Instructions used.
    pub n_instr: u32,
    /// Inputs used.
    pub n_inputs: u32,
    /// Register holding the result.
    pub out_reg: u32,
    /// Output shape, right-aligned.
    pub out_shape: [u64; MAX_RANK],
    /// Element strides of each input, right-aligned.
    pub strides: [[u64; MAX_RANK]; EW_MAX_INPUTS],
    /// The program.
    pub instrs: [EwInstr; EW_MAX_INSTRS],
    /// 1 when `elems < 2^31` and [`EwProgramParams::div_m`] / [`EwProgramParams::div_s`] hold the
    /// [`crate::math::FastDiv`] of each used dim of `out_shape`
    /// ([`EwProgramParams::with_fast_division`]): `ew_program_f32` then computes 32-bit offsets
    /// with a multiply-high and a shift a dim instead of two 64-bit divisions.
    pub fast_div: u32,
    /// Padding (0).
    pub _pad: u32,
    /// The multiplier of each dim's [`crate::math::FastDiv`].
    pub div_m: [u32; MAX_RANK],
    /// The shift of each dim's [`crate::math::FastDiv`].
    pub div_s: [u32; MAX_RANK],
}

impl EwProgramParams {
    /// Whether the program's parameters are over `[batch, m, n]`: rank 3 with those dims, so that
    /// element `(b, i, j)`'s offsets are linear in its indices ([`EwProgramParams::aligned_offsets`]).
    /// The planner writes a GEMM's or a convolution's epilogue program so where it can. (Constant
    /// indices only: a slice comparison copies the parameters to local memory.)
    #[inline(always)]
    pub fn aligned_to(&self, batch: u64, m: u64, n: u64) -> bool {
        let r = MAX_RANK - 3;
        self.rank == 3
            && self.out_shape[r] == batch
            && self.out_shape[r + 1] == m
            && self.out_shape[r + 2] == n
    }

    /// The element offsets of `(b, i, j)` into the four inputs, for parameters
    /// [`EwProgramParams::aligned_to`] `[batch, m, n]`.
    #[inline(always)]
    pub fn aligned_offsets(&self, b: u64, i: u64, j: u64) -> [u64; EW_MAX_INPUTS] {
        let r = MAX_RANK - 3;
        let at = |s: &[u64; MAX_RANK]| b * s[r] + i * s[r + 1] + j * s[r + 2];
        [at(&self.strides[0]), at(&self.strides[1]), at(&self.strides[2]), at(&self.strides[3])]
    }

    /// These parameters with the divisors of their used output dims recomputed:
    /// [`EwProgramParams::fast_div`] set and [`EwProgramParams::div_m`] / [`EwProgramParams::div_s`]
    /// filled when there are broadcast dims (`rank > 0`) and every output index is below 2^31,
    /// all three cleared otherwise.
    pub fn with_fast_division(mut self) -> Self {
        (self.fast_div, self.div_m, self.div_s) = (0, [0; MAX_RANK], [0; MAX_RANK]);
        let (rank, big) = (self.rank as usize, |d: u64| d > i32::MAX as u64);
        if rank == 0 || rank > MAX_RANK || big(self.elems) || self.out_shape.iter().any(|&d| big(d)) {
            return self;
        }
        for d in MAX_RANK - rank..MAX_RANK {
            let f = crate::math::FastDiv::new(self.out_shape[d] as u32);
            (self.div_m[d], self.div_s[d]) = (f.m, f.s);
        }
        self.fast_div = 1;
        self
    }

    /// The element offsets of output index `i` into the four inputs, 32-bit, through the divisors
    /// of [`EwProgramParams::with_fast_division`] (`fast_div` set, so `i < elems < 2^31` and each
    /// input's offset is below its element count, at most the output's). What `ew_program_f32`
    /// computes; the dims are unrolled, so each parameter is read at a constant offset.
    #[inline(always)]
    pub fn fast_offsets(&self, i: u32) -> [u32; EW_MAX_INPUTS] {
        let first = MAX_RANK - self.rank as usize;
        let (mut rem, mut o) = (i, [0u32; EW_MAX_INPUTS]);
        macro_rules! dim {
            ($($d:literal)*) => {$(
                if $d >= first {
                    let div = crate::math::FastDiv { d: self.out_shape[$d] as u32, m: self.div_m[$d], s: self.div_s[$d] };
                    let (q, r) = div.divmod(rem);
                    rem = q;
                    o[0] = o[0].wrapping_add(r.wrapping_mul(self.strides[0][$d] as u32));
                    o[1] = o[1].wrapping_add(r.wrapping_mul(self.strides[1][$d] as u32));
                    o[2] = o[2].wrapping_add(r.wrapping_mul(self.strides[2][$d] as u32));
                    o[3] = o[3].wrapping_add(r.wrapping_mul(self.strides[3][$d] as u32));
                }
            )*};
        }
        dim!(7 6 5 4 3 2 1 0);
        let _ = rem; // the quotient after the outermost dim: 0 for an index below elems
        o
    }
}

// SAFETY: #[repr(C)], u64/u32 fields with the padding spelled out as `_pad`.
unsafe impl Params for BinaryParams {}
// SAFETY: #[repr(C)], u64 then f32 and an explicit `_pad`.
unsafe impl Params for UnaryParams {}
// SAFETY: #[repr(C)], four u32, an f32 and a u32: 24 bytes, no padding.
unsafe impl Params for EwInstr {}
// SAFETY: #[repr(C)], u64, four u32, u64 arrays, 24-byte instructions, two u32 and u32 arrays:
// no padding.
unsafe impl Params for EwProgramParams {}
