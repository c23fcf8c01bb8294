//! Kernels on any element type: Cast, comparisons and boolean logic, Where.

use super::{BinaryParams, MAX_RANK, Params};

/// Element types the type-generic kernels read and write (`CastParams`, `CompareParams`).
pub mod scalar {
    /// IEEE binary32.
    pub const F32: u32 = 0;
    /// IEEE binary64.
    pub const F64: u32 = 1;
    /// Signed 64-bit integer.
    pub const I64: u32 = 2;
    /// Signed 32-bit integer.
    pub const I32: u32 = 3;
    /// Signed 8-bit integer.
    pub const I8: u32 = 4;
    /// Unsigned 8-bit integer.
    pub const U8: u32 = 5;
    /// Boolean (one byte, 0 or 1).
    pub const BOOL: u32 = 6;
    /// IEEE binary16.
    pub const F16: u32 = 7;
    /// bfloat16.
    pub const BF16: u32 = 8;
    /// Signed 16-bit integer.
    pub const I16: u32 = 9;
    /// Unsigned 16-bit integer.
    pub const U16: u32 = 10;
    /// Unsigned 32-bit integer.
    pub const U32: u32 = 11;
    /// Unsigned 64-bit integer.
    pub const U64: u32 = 12;
    /// float8 E4M3FN, one code a byte (the coded types, [`crate::math::coded`]).
    pub const F8E4M3FN: u32 = 13;
    /// float8 E4M3FNUZ.
    pub const F8E4M3FNUZ: u32 = 14;
    /// float8 E5M2.
    pub const F8E5M2: u32 = 15;
    /// float8 E5M2FNUZ.
    pub const F8E5M2FNUZ: u32 = 16;
    /// float8 E8M0 (a power of two).
    pub const F8E8M0: u32 = 17;
    /// float4 E2M1, one code a byte (low four bits).
    pub const F4E2M1: u32 = 18;
    /// Signed 4-bit integer, one code a byte (low four bits).
    pub const I4: u32 = 19;
    /// Unsigned 4-bit integer, one code a byte.
    pub const U4: u32 = 20;
    /// Signed 2-bit integer, one code a byte (low two bits).
    pub const I2: u32 = 21;
    /// Unsigned 2-bit integer, one code a byte.
    pub const U2: u32 = 22;

    /// True for the coded types (one code a byte, [`crate::math::coded`]).
    pub const fn is_coded(ty: u32) -> bool {
        ty >= F8E4M3FN && ty <= U2
    }
}

/// How a conversion to float8 E8M0 rounds (ONNX Cast's `round_mode`; `CastParams::round`).
pub mod round_mode {
    /// Up to the next power of two when any mantissa bit is set (ONNX's default).
    pub const UP: u32 = 0;
    /// Down to the value's own power of two.
    pub const DOWN: u32 = 1;
    /// To the nearer power of two, ties to even.
    pub const NEAREST: u32 = 2;
}

/// Parameters of `logic::cast`: `y[i] = x[i] as to` over `elems` contiguous elements, element
/// types from [`scalar`]. Floats to integers truncate toward zero and saturate (NaN gives 0);
/// integers to integers wrap; anything to bool is `x != 0`; to f16 / bf16 rounds to nearest even;
/// to a coded type as [`crate::math::coded::encode`] (ONNX Cast's rules).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CastParams {
    /// Number of elements.
    pub elems: u64,
    /// Source element type ([`scalar`]).
    pub from: u32,
    /// Destination element type ([`scalar`]).
    pub to: u32,
    /// 1: a float8 target saturates past its largest finite value (Cast's `saturate`, default 1).
    pub saturate: u32,
    /// How a float8 E8M0 target rounds ([`round_mode`]).
    pub round: u32,
}

/// `CompareParams::op`: the comparison or logic function.
pub mod compare_op {
    /// `a == b`.
    pub const EQUAL: u32 = 0;
    /// `a < b`.
    pub const LESS: u32 = 1;
    /// `a > b`.
    pub const GREATER: u32 = 2;
    /// `a <= b`.
    pub const LESS_OR_EQUAL: u32 = 3;
    /// `a >= b`.
    pub const GREATER_OR_EQUAL: u32 = 4;
    /// `a && b` (operands are bool).
    pub const AND: u32 = 5;
    /// `a || b`.
    pub const OR: u32 = 6;
    /// `a != b` for bools (Xor).
    pub const XOR: u32 = 7;
    /// `!a` (`b` is ignored; pass `a` again).
    pub const NOT: u32 = 8;
    /// `a` is NaN (`b` is ignored; pass `a` again; integers never are).
    pub const IS_NAN: u32 = 9;
    /// `a` is +inf or -inf (`b` is ignored; integers never are).
    pub const IS_INF: u32 = 10;
    /// `a` is +inf (`b` is ignored).
    pub const IS_POS_INF: u32 = 11;
    /// `a` is -inf (`b` is ignored).
    pub const IS_NEG_INF: u32 = 12;
    /// Always false (IsInf detecting neither infinity; `b` is ignored).
    pub const FALSE: u32 = 13;
    /// Always true (Dropout's mask in inference; `b` is ignored).
    pub const TRUE: u32 = 14;
}

/// `CompareParams::op` of `logic::int_arith`: integer arithmetic, computed in i64 with
/// wrap-around and stored in the operands' type (truncated), as the CPU reference does.
pub mod int_op {
    /// `a + b`.
    pub const ADD: u32 = 0;
    /// `a - b`.
    pub const SUB: u32 = 1;
    /// `a * b`.
    pub const MUL: u32 = 2;
    /// `a / b`, truncated toward zero (the planner only launches it for divisors known non-zero).
    pub const DIV: u32 = 3;
    /// `a mod b` with the sign of the divisor (Python `%`, ONNX Mod with fmod 0).
    pub const MOD: u32 = 4;
    /// `a mod b` with the sign of the dividend (C `%`, ONNX Mod with fmod 1).
    pub const FMOD: u32 = 5;
    /// `max(a, b)`.
    pub const MAX: u32 = 6;
    /// `min(a, b)`.
    pub const MIN: u32 = 7;
    /// `a ^ b` by repeated squaring (a negative exponent truncates `1 / a^|b|`).
    pub const POW: u32 = 8;
    /// `-a` (`b` is ignored; pass `a` again).
    pub const NEG: u32 = 9;
    /// `|a|` (`b` is ignored).
    pub const ABS: u32 = 10;
    /// `a & b`.
    pub const AND: u32 = 11;
    /// `a | b`.
    pub const OR: u32 = 12;
    /// `a ^ b`.
    pub const XOR: u32 = 13;
    /// `!a` (`b` is ignored).
    pub const NOT: u32 = 14;
    /// `a << b` of unsigned integers (0 when `b` is the width or more).
    pub const SHL: u32 = 15;
    /// `a >> b` of unsigned integers, logical (0 when `b` is the width or more).
    pub const SHR: u32 = 16;
}

/// Parameters of `logic::compare` and `logic::int_arith`: `y[i] = op(a[ia], b[ib])`, with the
/// broadcast layout of [`BinaryParams`] (rank 0: contiguous, same shape). Operands have element
/// type `dtype` ([`scalar`]: any type for `compare`, whose output is a bool byte; an integer type
/// for `int_arith`, whose output has the operands' type).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareParams {
    /// Shape and strides.
    pub bin: BinaryParams,
    /// One of [`compare_op`] (`compare`) or [`int_op`] (`int_arith`).
    pub op: u32,
    /// Operand element type.
    pub dtype: u32,
    /// `int_arith`: the code a zero divisor raises the status word to (an atomic max; the
    /// planner gives each checked node its own, [`crate::abi`]'s callers map it back to the node).
    pub status_code: u32,
    /// Padding (zero).
    pub _pad: u32,
}

/// Parameters of the `logic::where_b*` kernels: `y[i] = cond[ic] ? a[ia] : b[ib]` over the
/// row-major output `out_shape[MAX_RANK - rank..]` (rank 0: `elems` contiguous elements, no
/// broadcast); strides in elements, 0 broadcasts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WhereParams {
    /// Output elements.
    pub elems: u64,
    /// Number of used dimensions.
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Output shape, right-aligned.
    pub out_shape: [u64; MAX_RANK],
    /// Strides of the condition.
    pub c_strides: [u64; MAX_RANK],
    /// Strides of the value taken where the condition holds.
    pub a_strides: [u64; MAX_RANK],
    /// Strides of the value taken elsewhere.
    pub b_strides: [u64; MAX_RANK],
}

/// Parameters of `logic::one_hot` (ONNX OneHot): indices viewed as `[outer, inner]` (the new axis
/// goes between), output `[outer, depth, inner]` with `y[o, d, i] = values[1]` where
/// `trunc(indices[o, i])` (plus `depth` when negative) is `d`, else `values[0]`. An index outside
/// `[-depth, depth)` gives a row of `values[0]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OneHotParams {
    /// Product of the index dims before the new axis.
    pub outer: u64,
    /// Extent of the new axis.
    pub depth: u64,
    /// Product of the index dims after the new axis.
    pub inner: u64,
    /// Element type of the indices ([`scalar`]).
    pub index_type: u32,
    /// Element type of the values and the output ([`scalar`]).
    pub value_type: u32,
}

// SAFETY: #[repr(C)], three u64 then two u32.
unsafe impl Params for OneHotParams {}
// SAFETY: #[repr(C)], u64 then two u32.
unsafe impl Params for CastParams {}
// SAFETY: #[repr(C)], BinaryParams (no padding, 8-aligned) then two u32.
unsafe impl Params for CompareParams {}
// SAFETY: #[repr(C)], u64, two u32 (`_pad` explicit), four u64 arrays.
unsafe impl Params for WhereParams {}
