//! Constructors of the recurrent layers (LSTM, GRU, RNN) and ferrofuse's state-space operators.
//!
//! Attributes of the `ai.ferrofuse` operators (OPS.md), as the exporters write them:
//! - `SelectiveScan`: `delta_softplus` INT (0/1, default 0).
//! - `SSDScan`: `dt_softplus` INT (0/1, default 0), `dt_min` / `dt_max` FLOAT (absent: no clamp),
//!   or equivalently `dt_limit` FLOATS `[min, max]` (Mamba-2's spelling; an infinite bound is no
//!   clamp).
//! - `WKV6`: `layout` STRING, `"BTHN"` (default) or `"BHTN"`.
//! - `CausalConvWithState`: `activation` STRING, `"none"` (default) or `"silu"`.
//!
//! SOFIE's `MambaScan`, `GriffinRGLRU`, `RWKV_WKV6` and ferrofuse's `RGLRU` and `LinearScan` have no attributes
//! and are mapped in the registry directly.

use planner::op::{self, Op, RnnActivation, RnnDirection, RnnLayout};

use crate::error::OnnxError;

use super::attrs::Attrs;
use super::lower::Lower;

const ACTIVATIONS: [(&str, RnnActivation); 11] = [
    ("Relu", RnnActivation::Relu),
    ("Tanh", RnnActivation::Tanh),
    ("Sigmoid", RnnActivation::Sigmoid),
    ("Affine", RnnActivation::Affine),
    ("LeakyRelu", RnnActivation::LeakyRelu),
    ("ThresholdedRelu", RnnActivation::ThresholdedRelu),
    ("ScaledTanh", RnnActivation::ScaledTanh),
    ("HardSigmoid", RnnActivation::HardSigmoid),
    ("Elu", RnnActivation::Elu),
    ("Softsign", RnnActivation::Softsign),
    ("Softplus", RnnActivation::Softplus),
];

/// Attributes shared by LSTM, GRU and RNN (`layout` from opset 14).
fn recurrent(a: &Attrs<'_>) -> Result<op::Recurrent, OnnxError> {
    let names = a.strings("activations")?.unwrap_or_default();
    let mut activations = Vec::with_capacity(names.len());
    for name in &names {
        match ACTIVATIONS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            Some(&(_, act)) => activations.push(act),
            None => return Err(a.invalid("activations", format!("unknown activation '{name}'"))),
        }
    }
    let directions = [
        ("forward", RnnDirection::Forward),
        ("reverse", RnnDirection::Reverse),
        ("bidirectional", RnnDirection::Bidirectional),
    ];
    let layout = match a.int_or("layout", 0)? {
        0 => RnnLayout::SeqFirst,
        1 => RnnLayout::BatchFirst,
        other => return Err(a.invalid("layout", format!("{other} is not 0 or 1"))),
    };
    Ok(op::Recurrent {
        activation_alpha: a.floats("activation_alpha")?.unwrap_or_default(),
        activation_beta: a.floats("activation_beta")?.unwrap_or_default(),
        activations,
        clip: a.float("clip")?,
        direction: a.choice("direction", RnnDirection::Forward, &directions)?,
        hidden_size: a.required("hidden_size", a.usize("hidden_size")?)?,
        layout,
    })
}

/// `LSTM`.
pub(crate) fn lstm(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Lstm { common: recurrent(&a)?, input_forget: a.bool_or("input_forget", false)? };
    l.emit(Op::Lstm(attrs))
}

/// `GRU`.
pub(crate) fn gru(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs =
        op::Gru { common: recurrent(&a)?, linear_before_reset: a.bool_or("linear_before_reset", false)? };
    l.emit(Op::Gru(attrs))
}

/// `RNN`.
pub(crate) fn rnn(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let common = recurrent(&l.attrs())?;
    l.emit(Op::Rnn(op::Rnn { common }))
}

/// `SelectiveScan` (ai.ferrofuse).
pub(crate) fn selective_scan(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let delta_softplus = l.attrs().bool_or("delta_softplus", false)?;
    l.emit(Op::SelectiveScan(op::SelectiveScan { delta_softplus }))
}

/// `SSDScan` (ai.ferrofuse).
pub(crate) fn ssd_scan(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let (mut dt_min, mut dt_max) = (a.float("dt_min")?, a.float("dt_max")?);
    if let Some(limit) = a.floats("dt_limit")? {
        let [lo, hi] = limit[..] else {
            return Err(a.invalid("dt_limit", format!("needs 2 values, has {}", limit.len())));
        };
        if dt_min.is_some() || dt_max.is_some() {
            return Err(a.invalid("dt_limit", "given together with dt_min/dt_max"));
        }
        dt_min = lo.is_finite().then_some(lo);
        dt_max = hi.is_finite().then_some(hi);
    }
    if let (Some(lo), Some(hi)) = (dt_min, dt_max)
        && lo > hi
    {
        return Err(a.invalid("dt_max", format!("{hi} is below dt_min {lo}")));
    }
    let dt_softplus = a.bool_or("dt_softplus", false)?;
    l.emit(Op::SsdScan(op::SsdScan { dt_softplus, dt_min, dt_max, ..Default::default() }))
}

/// `WKV6` (ai.ferrofuse).
pub(crate) fn wkv6(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::Wkv6Layout as W;
    let layout = l.attrs().choice("layout", W::Bthn, &[("BTHN", W::Bthn), ("BHTN", W::Bhtn)])?;
    l.emit(Op::Wkv6(op::Wkv6 { layout }))
}

/// `CausalConvWithState` of the default domain (opset 27): weight `(C, 1, K)` and activations
/// `none`/`silu`/`swish` (an alias of `silu`); otherwise ferrofuse's op, whose weight is `(C, K)`,
/// so the weight is squeezed at axis 1 first (which also checks that axis is 1).
pub(crate) fn onnx_causal_conv(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::ConvActivation as A;
    let choices = [("none", A::None), ("silu", A::Silu), ("swish", A::Silu)];
    let activation = l.attrs().choice("activation", A::None, &choices)?;
    let weight = l.required_input(1)?;
    let squeezed = l.temp("weight_2d");
    l.push("weight_2d", Op::Squeeze(op::Squeeze { axes: Some(vec![1]) }), &[Some(weight)], &[squeezed]);
    let mut inputs = l.inputs_from(0);
    inputs[1] = Some(squeezed);
    l.emit_with_inputs(
        Op::CausalConvWithState(op::CausalConvWithState { activation, ..Default::default() }),
        inputs,
    )
}

/// `CausalConvWithState` (ai.ferrofuse).
pub(crate) fn causal_conv(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::ConvActivation as A;
    let activation = l.attrs().choice("activation", A::None, &[("none", A::None), ("silu", A::Silu)])?;
    l.emit(Op::CausalConvWithState(op::CausalConvWithState { activation, ..Default::default() }))
}
