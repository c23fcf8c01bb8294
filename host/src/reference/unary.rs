//! Elementwise unary math and activations: each scalar function states the ONNX formula it
//! implements and is applied in f64, rounded once to the input dtype. [`map_float`] rejects
//! integer inputs (ONNX restricts these ops to floats); [`map_num`] also takes integers (Abs, Neg,
//! Sign, Relu), computed exactly with wrapping.

use std::f64::consts::{PI, SQRT_2};

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{floats_to, ints_to};
use crate::tensor::HostTensor;

/// `f` applied to every element of a float tensor.
pub fn map_float(ctx: &NodeCtx, x: &HostTensor, f: impl Fn(f64) -> f64) -> Result<HostTensor, HostError> {
    if !x.dtype().is_float() {
        return Err(ctx.err(format!("expects a floating-point input, got {}", x.dtype())));
    }
    map_num(x, f, |v| v)
}

/// `f` on float elements, `i` on integer elements (the result wraps to the input's width).
/// Element by element: nothing is widened beyond the one element in hand.
pub fn map_num(
    x: &HostTensor,
    f: impl Fn(f64) -> f64,
    i: impl Fn(i64) -> i64,
) -> Result<HostTensor, HostError> {
    let (d, n) = (x.data(), x.len());
    let data = if x.dtype().is_float() {
        floats_to(x.dtype(), n, (0..n).map(|k| f(d.float_at(k))))?
    } else {
        ints_to(x.dtype(), n, (0..n).map(|k| i(d.int_at(k))))?
    };
    HostTensor::new(x.shape().to_vec(), data)
}

/// ONNX `Sign`: -1, 0 or 1 (NaN stays NaN).
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// ONNX `Relu`: `max(0, x)` (NaN stays NaN).
pub fn relu(x: f64) -> f64 {
    if x < 0.0 { 0.0 } else { x }
}

/// ONNX `LeakyRelu`: `x < 0 ? alpha * x : x`.
pub fn leaky_relu(x: f64, alpha: f32) -> f64 {
    if x < 0.0 { alpha as f64 * x } else { x }
}

/// ONNX `Elu`: `x < 0 ? alpha * (exp(x) - 1) : x`.
pub fn elu(x: f64, alpha: f32) -> f64 {
    if x < 0.0 { alpha as f64 * x.exp_m1() } else { x }
}

/// ONNX `Selu`: `gamma * (x <= 0 ? alpha * (exp(x) - 1) : x)`.
pub fn selu(x: f64, alpha: f32, gamma: f32) -> f64 {
    gamma as f64 * if x <= 0.0 { alpha as f64 * x.exp_m1() } else { x }
}

/// ONNX `Celu`: `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
pub fn celu(x: f64, alpha: f32) -> f64 {
    let a = alpha as f64;
    x.max(0.0) + (a * (x / a).exp_m1()).min(0.0)
}

/// ONNX `Sigmoid`: `1 / (1 + exp(-x))`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// ONNX `HardSigmoid`: `max(0, min(1, alpha * x + beta))`.
pub fn hard_sigmoid(x: f64, alpha: f32, beta: f32) -> f64 {
    (alpha as f64 * x + beta as f64).clamp(0.0, 1.0)
}

/// ONNX `HardSwish`: `x * max(0, min(1, x / 6 + 0.5))`.
pub fn hard_swish(x: f64) -> f64 {
    x * (x / 6.0 + 0.5).clamp(0.0, 1.0)
}

/// ONNX `Softplus`: `ln(1 + exp(x))`, evaluated without overflow for large x.
pub fn softplus(x: f64) -> f64 {
    if x > 30.0 { x + (-x).exp().ln_1p() } else { x.exp().ln_1p() }
}

/// ONNX `Softsign`: `x / (1 + |x|)`.
pub fn softsign(x: f64) -> f64 {
    x / (1.0 + x.abs())
}

/// ONNX `Mish`: `x * tanh(softplus(x))`.
pub fn mish(x: f64) -> f64 {
    x * softplus(x).tanh()
}

/// ONNX `Gelu` with `approximate = "none"`: `0.5 * x * (1 + erf(x / sqrt(2)))`.
pub fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / SQRT_2))
}

/// ONNX `Gelu` with `approximate = "tanh"`: `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`.
pub fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / PI).sqrt() * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

/// ONNX `ThresholdedRelu`: `x > alpha ? x : 0`.
pub fn thresholded_relu(x: f64, alpha: f32) -> f64 {
    if x > alpha as f64 { x } else { 0.0 }
}

/// ONNX `Shrink`: `x + bias` below `-lambd`, `x - bias` above `lambd`, else 0.
pub fn shrink(x: f64, lambd: f32, bias: f32) -> f64 {
    let (lambd, bias) = (lambd as f64, bias as f64);
    if x < -lambd {
        x + bias
    } else if x > lambd {
        x - bias
    } else {
        0.0
    }
}

/// ONNX `Erf`: the error function.
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// ONNX `Reciprocal`: `1 / x`.
pub fn reciprocal(x: f64) -> f64 {
    1.0 / x
}

/// ONNX `Round`: to nearest, halves to even.
pub fn round(x: f64) -> f64 {
    x.round_ties_even()
}
