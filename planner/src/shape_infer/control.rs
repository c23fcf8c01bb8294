//! Control flow: `If`, `Loop`, `Scan`. Bodies are inferred as nested scopes that see their
//! captured outer values.
//!
//! Loop-carried values may change shape between iterations: the body is inferred with the initial
//! infos; dims that come back different are replaced by fresh symbols and the body is inferred once
//! more. The result over-approximates (fresh symbols), never under-approximates.

use super::{Captured, Ctx, analyse_scope};
use crate::error::PlanError;
use crate::graph::Graph;
use crate::op::Op;
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

fn captured_for(ctx: &Ctx, body: &Graph) -> Result<Vec<Captured>, PlanError> {
    body.captures
        .iter()
        .map(|c| {
            ctx.captured(c.outer).ok_or_else(|| PlanError::UndefinedValue {
                node: ctx.label.clone(),
                op: ctx.op(),
                value: format!("captured {}", c.outer),
            })
        })
        .collect()
}

/// Infers `body` with `inputs`; returns the infos of its outputs.
fn body_outputs(ctx: &mut Ctx, body: &Graph, inputs: &[TensorInfo]) -> Result<Vec<TensorInfo>, PlanError> {
    let caps = captured_for(ctx, body)?;
    let inf = analyse_scope(body, inputs, &caps, ctx.syms)?;
    body.outputs
        .iter()
        .map(|v| {
            inf.infos.get(v.index()).cloned().ok_or_else(|| ctx.arity(format!("body output {v} undefined")))
        })
        .collect()
}

/// The least specific info covering both: equal dims stay, others become fresh.
fn join(ctx: &mut Ctx, a: &TensorInfo, b: &TensorInfo, what: &str) -> Result<TensorInfo, PlanError> {
    if a.dtype != b.dtype {
        return Err(ctx.dtype(format!("{what}: {a} vs {b}")));
    }
    if a.rank() != b.rank() {
        return Err(ctx.unsupported());
    }
    let dims =
        a.shape.dims().iter().zip(b.shape.dims()).map(|(x, y)| if x == y { x.clone() } else { ctx.fresh() });
    let dims: Vec<Dim> = dims.collect();
    Ok(TensorInfo { dtype: a.dtype, shape: Shape(dims) })
}

fn require_scalar(ctx: &Ctx, t: &TensorInfo, dtype: DType, what: &str) -> Result<(), PlanError> {
    if t.dtype != dtype || t.shape.known_elems() != Some(1) {
        return Err(ctx.mismatch(format!("{what} must be a one-element {dtype}, got {t}")));
    }
    Ok(())
}

/// `If`: each output joins the two branches' outputs; with a condition whose value is tracked
/// (a constant, a comparison of folded shapes), the taken branch's outputs alone (the other may
/// not even infer: an expanded ONNX function's branch for another rank).
pub(crate) fn if_(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let node = ctx.node;
    let Op::If(x) = &node.op else { return Err(ctx.unsupported()) };
    require_scalar(ctx, ctx.input(0)?, DType::Bool, "cond")?;
    if let Some(&[c]) = ctx.ints(0).as_deref() {
        let taken = if c != 0 { &x.then_branch } else { &x.else_branch };
        return body_outputs(ctx, taken, &[]);
    }
    let then = body_outputs(ctx, &x.then_branch, &[])?;
    let other = body_outputs(ctx, &x.else_branch, &[])?;
    then.iter().zip(&other).enumerate().map(|(i, (a, b))| join(ctx, a, b, &format!("output {i}"))).collect()
}

/// Infers a body whose first `carried.len()` inputs (after `prefix`) are loop-carried, generalizing
/// their infos until they are stable; returns (final carried infos, all body outputs).
fn carried_fixpoint(
    ctx: &mut Ctx,
    body: &Graph,
    prefix: &[TensorInfo],
    mut carried: Vec<TensorInfo>,
    suffix: &[TensorInfo],
    out_offset: usize,
) -> Result<(Vec<TensorInfo>, Vec<TensorInfo>), PlanError> {
    for pass in 0..2 {
        let inputs: Vec<TensorInfo> = prefix.iter().chain(&carried).chain(suffix).cloned().collect();
        let outs = body_outputs(ctx, body, &inputs)?;
        let back = outs
            .get(out_offset..out_offset + carried.len())
            .ok_or_else(|| ctx.arity("body has too few outputs"))?;
        if back == carried.as_slice() {
            return Ok((carried, outs));
        }
        let joined: Vec<TensorInfo> = carried
            .iter()
            .zip(back)
            .enumerate()
            .map(|(i, (a, b))| join(ctx, a, b, &format!("loop-carried value {i}")))
            .collect::<Result<_, _>>()?;
        if pass == 1 {
            return Ok((joined, outs));
        }
        carried = joined;
    }
    Err(ctx.unsupported())
}

/// `Loop`: final carried values, then scan outputs stacked along a new leading trip-count axis.
pub(crate) fn loop_(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let node = ctx.node;
    let Op::Loop(l) = &node.op else { return Err(ctx.unsupported()) };
    if let Some(m) = ctx.opt(0) {
        require_scalar(ctx, m, DType::I64, "M")?;
    }
    if let Some(c) = ctx.opt(1) {
        require_scalar(ctx, c, DType::Bool, "cond")?;
    }
    let carried: Vec<TensorInfo> =
        (2..ctx.n_inputs()).map(|i| ctx.input(i).cloned()).collect::<Result<_, _>>()?;
    let n = carried.len();
    let prefix = [TensorInfo::scalar(DType::I64), TensorInfo::scalar(DType::Bool)];
    let (carried, outs) = carried_fixpoint(ctx, &l.body, &prefix, carried, &[], 1)?;
    let trip = match (ctx.opt(1), ctx.ints(0).as_deref()) {
        (None, Some(&[m])) if m >= 0 => Dim::Known(m as usize),
        _ => ctx.fresh(),
    };
    let mut result = carried;
    for t in &outs[1 + n..] {
        let mut dims = vec![trip.clone()];
        dims.extend(t.shape.dims().iter().cloned());
        result.push(TensorInfo { dtype: t.dtype, shape: Shape(dims) });
    }
    Ok(result)
}

/// `Scan`: final states, then scan outputs stacked along their scan axes.
pub(crate) fn scan(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let node = ctx.node;
    let Op::Scan(s) = &node.op else { return Err(ctx.unsupported()) };
    let m = s.num_scan_inputs;
    let n = ctx.n_inputs().checked_sub(m).ok_or_else(|| ctx.arity("fewer inputs than num_scan_inputs"))?;
    let states: Vec<TensorInfo> = (0..n).map(|i| ctx.input(i).cloned()).collect::<Result<_, _>>()?;
    let mut seq: Option<Dim> = None;
    let mut slices = Vec::with_capacity(m);
    for j in 0..m {
        let t = ctx.input(n + j)?;
        let axis = ctx.axis(s.scan_input_axes.get(j).copied().unwrap_or(0), t.rank())?;
        let d = &t.shape.dims()[axis];
        seq = Some(match &seq {
            Some(prev) => ctx.unify(prev, d, "scan lengths")?,
            None => d.clone(),
        });
        let mut dims = t.shape.0.clone();
        dims.remove(axis);
        slices.push(TensorInfo { dtype: t.dtype, shape: Shape(dims) });
    }
    let seq = match seq {
        Some(d) => d,
        None => return Err(ctx.arity("Scan needs at least one scan input")),
    };
    let (states, outs) = carried_fixpoint(ctx, &s.body, &[], states, &slices, 0)?;
    let mut result = states;
    for (k, t) in outs[n..].iter().enumerate() {
        let axis = ctx.axis(s.scan_output_axes.get(k).copied().unwrap_or(0), t.rank() + 1)?;
        let mut dims = t.shape.0.clone();
        dims.insert(axis, seq.clone());
        result.push(TensorInfo { dtype: t.dtype, shape: Shape(dims) });
    }
    Ok(result)
}
