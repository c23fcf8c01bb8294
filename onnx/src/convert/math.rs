//! Constructors of elementwise, activation, type, reduction and linear-algebra operators.
//!
//! Opset differences handled here: `Reduce*` axes (attribute before opset 13 for ReduceSum, 18
//! for the others; input after, with `noop_with_empty_axes`), `Clip` bounds (inputs since 11),
//! `Dropout` ratio/training_mode (inputs since 12; training mode is rejected, not ignored), and the
//! opset-24/28 `Swish`/`SwiGLU`, rewritten as `x * Sigmoid(alpha * x)`.

use planner::op::{self, Op};
use planner::{ConstTensor, RoundMode, ValueId};

use crate::error::OnnxError;

use super::lower::Lower;

/// `Mod`: `fmod` flag.
pub(crate) fn modulo(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let fmod = l.attrs().bool_or("fmod", false)?;
    l.emit(Op::Mod(op::Mod { fmod }))
}

/// `BitShift`: required `direction`.
pub(crate) fn bit_shift(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let choices = [("LEFT", Some(op::ShiftDirection::Left)), ("RIGHT", Some(op::ShiftDirection::Right))];
    let direction = a.required("direction", a.choice("direction", None, &choices)?)?;
    l.emit(Op::BitShift(op::BitShift { direction }))
}

/// `IsInf`: which infinities to detect.
pub(crate) fn is_inf(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let detect_positive = a.bool_or("detect_positive", true)?;
    let detect_negative = a.bool_or("detect_negative", true)?;
    l.emit(Op::IsInf(op::IsInf { detect_positive, detect_negative }))
}

/// `LeakyRelu`.
pub(crate) fn leaky_relu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let alpha = l.attrs().float_or("alpha", op::LeakyRelu::default().alpha)?;
    l.emit(Op::LeakyRelu(op::LeakyRelu { alpha }))
}

/// `Elu`.
pub(crate) fn elu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let alpha = l.attrs().float_or("alpha", op::Elu::default().alpha)?;
    l.emit(Op::Elu(op::Elu { alpha }))
}

/// `Selu`.
pub(crate) fn selu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let d = op::Selu::default();
    let a = l.attrs();
    let (alpha, gamma) = (a.float_or("alpha", d.alpha)?, a.float_or("gamma", d.gamma)?);
    l.emit(Op::Selu(op::Selu { alpha, gamma }))
}

/// `Celu`.
pub(crate) fn celu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let alpha = l.attrs().float_or("alpha", op::Celu::default().alpha)?;
    l.emit(Op::Celu(op::Celu { alpha }))
}

/// `HardSigmoid`.
pub(crate) fn hard_sigmoid(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let d = op::HardSigmoid::default();
    let a = l.attrs();
    let (alpha, beta) = (a.float_or("alpha", d.alpha)?, a.float_or("beta", d.beta)?);
    l.emit(Op::HardSigmoid(op::HardSigmoid { alpha, beta }))
}

/// `ThresholdedRelu`.
pub(crate) fn thresholded_relu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let alpha = l.attrs().float_or("alpha", op::ThresholdedRelu::default().alpha)?;
    l.emit(Op::ThresholdedRelu(op::ThresholdedRelu { alpha }))
}

/// `Gelu` (opset 20): exact or tanh approximation.
pub(crate) fn gelu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::GeluApproximation as G;
    let approximate = l.attrs().choice("approximate", G::None, &[("none", G::None), ("tanh", G::Tanh)])?;
    l.emit(Op::Gelu(op::Gelu { approximate }))
}

/// `Clip`: bounds are optional inputs 1 and 2 at every supported opset.
pub(crate) fn clip(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    l.no_attr("min", 11)?;
    l.no_attr("max", 11)?;
    l.emit(Op::Clip(op::Clip::default()))
}

/// `Swish` (opset 24): `x * Sigmoid(alpha * x)`.
pub(crate) fn swish(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let alpha = l.attrs().float_or("alpha", 1.0)?;
    let (x, y) = (l.required_input(0)?, l.required_output(0)?);
    swish_into(l, x, alpha, y);
    Ok(())
}

/// `SwiGLU` (opset 28): `Swish(A, alpha) * B`.
pub(crate) fn swiglu(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let alpha = l.attrs().float_or("alpha", 1.0)?;
    let (a, b, y) = (l.required_input(0)?, l.required_input(1)?, l.required_output(0)?);
    let gate = l.temp("swish");
    swish_into(l, a, alpha, gate);
    l.push("mul", Op::Mul, &[Some(gate), Some(b)], &[y]);
    Ok(())
}

/// Emits `y = x * Sigmoid(alpha * x)`; `alpha` is cast to x's dtype with `CastLike`.
fn swish_into(l: &mut Lower<'_, '_>, x: ValueId, alpha: f32, y: ValueId) {
    let scaled = if alpha == 1.0 {
        x
    } else {
        let alpha_f32 = l.constant("alpha", ConstTensor::scalar_f32(alpha));
        let (alpha_x, scaled) = (l.temp("alpha_like_x"), l.temp("scaled"));
        l.push(
            "alpha_like_x",
            Op::CastLike(op::CastLike::default()),
            &[Some(alpha_f32), Some(x)],
            &[alpha_x],
        );
        l.push("scaled", Op::Mul, &[Some(x), Some(alpha_x)], &[scaled]);
        scaled
    };
    let gate = l.temp("sigmoid");
    l.push("sigmoid", Op::Sigmoid, &[Some(scaled)], &[gate]);
    l.push("gate", Op::Mul, &[Some(x), Some(gate)], &[y]);
}

/// `Cast`: required `to`; `saturate` since 19 (float8 targets); `round_mode` since 24 (E8M0).
pub(crate) fn cast(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let to = a.required("to", a.dtype("to")?)?;
    let saturate = a.bool_or("saturate", true)?;
    let round_mode = round_mode(l)?;
    l.emit(Op::Cast(op::Cast { to, saturate, round_mode }))
}

/// `round_mode` of Cast / CastLike (opset 24): `up` (default), `down` or `nearest`.
fn round_mode(l: &Lower<'_, '_>) -> Result<RoundMode, OnnxError> {
    let a = l.attrs();
    match a.string("round_mode")?.as_deref() {
        None | Some("up") => Ok(RoundMode::Up),
        Some("down") => Ok(RoundMode::Down),
        Some("nearest") => Ok(RoundMode::Nearest),
        Some(other) => Err(a.invalid("round_mode", format!("{other:?} (expected up, down or nearest)"))),
    }
}

/// `BitCast` (opset 26): the required `to`.
pub(crate) fn bit_cast(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let to = a.required("to", a.dtype("to")?)?;
    l.emit(Op::BitCast(op::BitCast { to }))
}

/// `CastLike` (opset 15).
pub(crate) fn cast_like(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let saturate = l.attrs().bool_or("saturate", true)?;
    let round_mode = round_mode(l)?;
    l.emit(Op::CastLike(op::CastLike { saturate, round_mode }))
}

/// `Dropout`: the identity at inference. A `training_mode` input (opset 12) that is a known
/// `true` constant is rejected rather than ignored.
pub(crate) fn dropout(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let seed = l.attrs().int("seed")?;
    if l.opset < 12 {
        l.no_inputs_from(1, "ratio is an attribute")?;
        // The ratio of the attribute form: no effect at inference.
        l.attrs().float("ratio")?;
    }
    if let Some(mode) = l.input(2)
        && let Some(c) = l.known_constant(mode)
        && c.to_i64s().is_some_and(|v| v.iter().any(|&b| b != 0))
    {
        return Err(l.invalid("training_mode = true is not supported (inference only)"));
    }
    l.emit(Op::Dropout(op::Dropout { seed }))
}

/// `Reduce*`: `axes` is an attribute before `input_since` (13 for ReduceSum, 18 for the others)
/// and input 1 from then on, where `noop_with_empty_axes` also appears.
pub(crate) fn reduce(
    l: &mut Lower<'_, '_>,
    make: fn(op::Reduce) -> Op,
    input_since: i64,
) -> Result<(), OnnxError> {
    let keepdims = l.attrs().bool_or("keepdims", true)?;
    let attrs = if l.opset < input_since {
        l.no_inputs_from(1, "axes is an attribute")?;
        op::Reduce { axes: l.attrs().ints("axes")?, keepdims, noop_with_empty_axes: false }
    } else {
        l.no_attr("axes", input_since)?;
        let noop_with_empty_axes = l.attrs().bool_or("noop_with_empty_axes", false)?;
        op::Reduce { axes: None, keepdims, noop_with_empty_axes }
    };
    l.emit(make(attrs))
}

/// `ArgMax` / `ArgMin`.
pub(crate) fn arg_reduce(l: &mut Lower<'_, '_>, make: fn(op::ArgReduce) -> Op) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::ArgReduce {
        axis: a.int_or("axis", 0)?,
        keepdims: a.bool_or("keepdims", true)?,
        select_last_index: a.bool_or("select_last_index", false)?,
    };
    l.emit(make(attrs))
}

/// `CumSum`: the axis is input 1.
pub(crate) fn cum_sum(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let attrs = cumulative(l)?;
    l.emit(Op::CumSum(attrs))
}

/// `CumProd` (opset 26): CumSum's attributes.
pub(crate) fn cum_prod(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let attrs = cumulative(l)?;
    l.emit(Op::CumProd(attrs))
}

fn cumulative(l: &Lower<'_, '_>) -> Result<op::CumSum, OnnxError> {
    let a = l.attrs();
    Ok(op::CumSum { exclusive: a.bool_or("exclusive", false)?, reverse: a.bool_or("reverse", false)? })
}

/// `Gemm`.
pub(crate) fn gemm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Gemm {
        alpha: a.float_or("alpha", 1.0)?,
        beta: a.float_or("beta", 1.0)?,
        trans_a: a.bool_or("transA", false)?,
        trans_b: a.bool_or("transB", false)?,
    };
    l.emit(Op::Gemm(attrs))
}

/// `Einsum`: required `equation`.
pub(crate) fn einsum(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let equation = a.required("equation", a.string("equation")?)?;
    l.emit(Op::Einsum(op::Einsum { equation }))
}

/// `QuantizeLinear` / `DequantizeLinear` (opset 10; `axis` from 13, `saturate` from 19 — float8
/// outputs only — `block_size` and `output_dtype` from 21).
fn quantize_attrs(l: &Lower<'_, '_>) -> Result<op::Quantize, OnnxError> {
    let a = l.attrs();
    let saturate = a.bool_or("saturate", true)?;
    let block_size = a.int_or("block_size", 0)?;
    let block_size = usize::try_from(block_size)
        .map_err(|_| a.invalid("block_size", format!("{block_size} is negative")))?;
    let output_dtype = match a.int_or("output_dtype", 0)? {
        0 => None,
        _ => a.dtype("output_dtype")?,
    };
    Ok(op::Quantize { axis: a.int_or("axis", 1)?, block_size, output_dtype, saturate })
}

/// `QuantizeLinear`.
pub(crate) fn quantize_linear(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let q = quantize_attrs(l)?;
    l.emit(Op::QuantizeLinear(q))
}

/// `DequantizeLinear`.
pub(crate) fn dequantize_linear(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let q = quantize_attrs(l)?;
    l.emit(Op::DequantizeLinear(q))
}
