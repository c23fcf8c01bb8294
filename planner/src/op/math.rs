//! Attribute structs of the elementwise, reduction and linear-algebra operators.
//!
//! Field names follow the ONNX attribute names; `Default` gives the ONNX defaults. Attributes that
//! later opsets turned into inputs (reduction `axes`, `Clip` bounds) are `Option`s: `Some` when an old
//! model set the attribute, `None` when the value comes from the input (or is absent).

use serde::{Deserialize, Serialize};

use crate::coded::RoundMode;
use crate::tensor_info::DType;

/// `Mod`: integer modulus with the sign of the divisor, or C `fmod` (sign of the dividend).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mod {
    /// `fmod` = 1: sign of the dividend (required for float inputs).
    pub fmod: bool,
}

/// Direction of `BitShift`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShiftDirection {
    /// `x << y`.
    Left,
    /// `x >> y`.
    Right,
}

/// `BitShift` (the direction attribute is required; no default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BitShift {
    /// Shift direction.
    pub direction: ShiftDirection,
}

/// `LeakyRelu`: `x < 0 ? alpha * x : x`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakyRelu {
    /// Negative slope (ONNX default 0.01).
    pub alpha: f32,
}

impl Default for LeakyRelu {
    fn default() -> Self {
        LeakyRelu { alpha: 0.01 }
    }
}

/// `Elu`: `x < 0 ? alpha * (exp(x) - 1) : x`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Elu {
    /// Scale of the negative part (default 1.0).
    pub alpha: f32,
}

impl Default for Elu {
    fn default() -> Self {
        Elu { alpha: 1.0 }
    }
}

/// `Selu`: `gamma * (x <= 0 ? alpha * (exp(x) - 1) : x)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selu {
    /// Default 1.67326319217681884765625.
    pub alpha: f32,
    /// Default 1.05070102214813232421875.
    pub gamma: f32,
}

impl Default for Selu {
    fn default() -> Self {
        Selu { alpha: 1.673_263_2, gamma: 1.050_701 }
    }
}

/// `Celu`: `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Celu {
    /// Default 1.0.
    pub alpha: f32,
}

impl Default for Celu {
    fn default() -> Self {
        Celu { alpha: 1.0 }
    }
}

/// `HardSigmoid`: `max(0, min(1, alpha * x + beta))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardSigmoid {
    /// Default 0.2.
    pub alpha: f32,
    /// Default 0.5.
    pub beta: f32,
}

impl Default for HardSigmoid {
    fn default() -> Self {
        HardSigmoid { alpha: 0.2, beta: 0.5 }
    }
}

/// Which GELU formula `Gelu` uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GeluApproximation {
    /// Exact, with `erf` (ONNX `"none"`, the default).
    #[default]
    None,
    /// The tanh approximation (ONNX `"tanh"`).
    Tanh,
}

/// `Gelu` (opset 20).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gelu {
    /// Formula to use.
    pub approximate: GeluApproximation,
}

/// `ThresholdedRelu`: `x > alpha ? x : 0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdedRelu {
    /// Default 1.0.
    pub alpha: f32,
}

impl Default for ThresholdedRelu {
    fn default() -> Self {
        ThresholdedRelu { alpha: 1.0 }
    }
}

/// `Clip`. Since opset 11 the bounds are optional inputs 1 and 2; the fields hold the opset-6
/// attributes and must be `None` when the inputs are used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Clip {
    /// Legacy `min` attribute.
    pub min: Option<f32>,
    /// Legacy `max` attribute.
    pub max: Option<f32>,
}

/// `IsInf`: which infinities count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsInf {
    /// Report +inf (default true).
    pub detect_positive: bool,
    /// Report -inf (default true).
    pub detect_negative: bool,
}

impl Default for IsInf {
    fn default() -> Self {
        IsInf { detect_positive: true, detect_negative: true }
    }
}

/// `Cast` to a fixed element type (the `to` attribute is required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cast {
    /// Target element type.
    pub to: DType,
    /// Saturate float8 conversions (default true): out-of-range values and infinities become
    /// the largest finite value rather than infinity or NaN.
    pub saturate: bool,
    /// How a conversion to float8 E8M0 rounds (opset 24; default up).
    pub round_mode: RoundMode,
}

impl Cast {
    /// A cast to `to` with the default `saturate` and `round_mode`.
    pub fn to(to: DType) -> Self {
        Cast { to, saturate: true, round_mode: RoundMode::Up }
    }
}

/// `CastLike`: cast input 0 to the element type of input 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CastLike {
    /// Saturate float8 conversions (default true).
    pub saturate: bool,
    /// How a conversion to float8 E8M0 rounds (default up).
    pub round_mode: RoundMode,
}

impl Default for CastLike {
    fn default() -> Self {
        CastLike { saturate: true, round_mode: RoundMode::Up }
    }
}

/// `Dropout`; at inference it is the identity (and its optional mask output is all true).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dropout {
    /// Random seed attribute, if set.
    pub seed: Option<i64>,
}

/// Attributes shared by `ReduceSum`, `ReduceMean`, ... `ReduceSumSquare`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reduce {
    /// Legacy `axes` attribute (before opset 13/18 moved it to input 1).
    pub axes: Option<Vec<i64>>,
    /// Keep reduced dims as size 1 (default true).
    pub keepdims: bool,
    /// With no axes: identity when true, reduce everything when false (default).
    pub noop_with_empty_axes: bool,
}

impl Default for Reduce {
    fn default() -> Self {
        Reduce { axes: None, keepdims: true, noop_with_empty_axes: false }
    }
}

/// Attributes of `ArgMax` and `ArgMin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgReduce {
    /// Axis to reduce (default 0, negative counts from the back).
    pub axis: i64,
    /// Keep the reduced dim as size 1 (default true).
    pub keepdims: bool,
    /// On ties, return the last index instead of the first (default false).
    pub select_last_index: bool,
}

impl Default for ArgReduce {
    fn default() -> Self {
        ArgReduce { axis: 0, keepdims: true, select_last_index: false }
    }
}

/// `Gemm`: `alpha * op(A) @ op(B) + beta * C`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gemm {
    /// Default 1.0.
    pub alpha: f32,
    /// Default 1.0.
    pub beta: f32,
    /// Transpose A (default false).
    pub trans_a: bool,
    /// Transpose B (default false).
    pub trans_b: bool,
}

impl Default for Gemm {
    fn default() -> Self {
        Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false }
    }
}

/// Planner-internal, made by the GEMM-epilogue fusion (no ONNX op_type): a Gemm (`gemm: Some`,
/// its attributes) or MatMul (`None`) whose result feeds an elementwise program that the GEMM
/// kernel applies in its epilogue. Inputs: A, B, C (absent for a MatMul or a Gemm without C), then
/// the program's other inputs (each broadcastable to the output). Output: the program's result,
/// of shape `dims` (the GEMM result's element count, reshaped: the GEMM writes it in row-major
/// order). The program itself lives in the plan's fusion tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusedGemm {
    /// The Gemm attributes, or `None` for a MatMul.
    pub gemm: Option<Gemm>,
    /// Output dims.
    pub dims: Vec<usize>,
}

/// Planner-internal, made by the epilogue fusion (no ONNX op_type): a Gather of f32 data whose
/// result feeds an elementwise program that the gather kernel applies to each element it gathers
/// (an embedding lookup plus its position embedding). Inputs: data, indices, then the program's
/// other inputs (each broadcastable to the output). Output: the program's result, of shape `dims`
/// (the gathered elements in row-major order). The program lives in the plan's fusion tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusedGather {
    /// The Gather's axis.
    pub axis: i64,
    /// Output dims.
    pub dims: Vec<usize>,
}

/// `Einsum` with its equation (e.g. `"bij,bjk->bik"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Einsum {
    /// The equation, explicit (`->`) or implicit.
    pub equation: String,
}

/// `CumSum` along the axis given by input 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CumSum {
    /// Exclude the current element (default false).
    pub exclusive: bool,
    /// Sum from the end (default false).
    pub reverse: bool,
}

/// Axis attribute of `Softmax`, `LogSoftmax` and `Hardmax`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Softmax {
    /// Axis (opset-13 default -1; the loader sets 1 for older opsets, whose semantics also differ).
    pub axis: i64,
}

impl Default for Softmax {
    fn default() -> Self {
        Softmax { axis: -1 }
    }
}

/// `QuantizeLinear` / `DequantizeLinear`: the scale (and zero point) apply to the whole tensor (one
/// element), per slice along `axis` (a 1-D scale), or per block of `block_size` elements along
/// `axis` (a scale of x's rank whose `axis` dim is `ceil(dim / block_size)`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantize {
    /// The axis of per-axis and blocked scales (default 1).
    pub axis: i64,
    /// Elements per block along `axis`; 0: not blocked (default).
    pub block_size: usize,
    /// QuantizeLinear's output dtype when no zero point gives it (opset 21; `None`: uint8).
    pub output_dtype: Option<DType>,
    /// QuantizeLinear to float8: out-of-range values become the largest finite value (default
    /// true) rather than infinity or NaN.
    pub saturate: bool,
}

impl Default for Quantize {
    fn default() -> Self {
        Quantize { axis: 1, block_size: 0, output_dtype: None, saturate: true }
    }
}

/// `BitwiseAnd` / `BitwiseOr` / `BitwiseXor` (opset 18).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bitwise {
    /// `a & b`.
    And,
    /// `a | b`.
    Or,
    /// `a ^ b`.
    Xor,
}

/// `BitCast` (opset 26): the same bytes read as `to`, which has the input's bit width.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BitCast {
    /// Target element type.
    pub to: DType,
}
