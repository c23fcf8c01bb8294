//! Control flow: ONNX If, Loop and Scan, running their body graphs through the same driver
//! ([`run_with`]). A body's captures are bound to the enclosing graph's values, borrowed from the
//! [`Scope`] (they are alive: `Node::uses` lists them, so the driver frees them only afterwards).

use std::borrow::Cow;

use planner::{DType, Graph};

use crate::error::HostError;
use crate::reference::lanes::Lanes;
use crate::reference::slice::{index_axis, stack};
use crate::reference::strides::{self, int_scalar, required, scalar_f64};
use crate::reference::{NodeCtx, Scope, run_with};
use crate::tensor::HostTensor;

/// The outer values `body` captures, borrowed from `scope`.
fn captures<'s>(
    ctx: &NodeCtx,
    body: &Graph,
    scope: Scope<'s>,
) -> Result<Vec<Cow<'s, HostTensor>>, HostError> {
    body.captures
        .iter()
        .map(|c| {
            scope
                .get(c.outer)
                .map(Cow::Borrowed)
                .ok_or_else(|| ctx.err(format!("captured value {} is not available", c.outer)))
        })
        .collect()
}

/// ONNX `If`: runs `then_branch` when the one-element bool condition is true, else `else_branch`;
/// the branch's outputs are the node's outputs.
pub fn if_(
    ctx: &NodeCtx,
    attrs: &planner::op::If,
    inputs: &[Option<&HostTensor>],
    scope: Scope,
) -> Result<Vec<HostTensor>, HostError> {
    let cond = scalar_f64(ctx, required(ctx, inputs, 0)?, "cond")? != 0.0;
    let branch = if cond { &attrs.then_branch } else { &attrs.else_branch };
    run_with(branch, Vec::new(), captures(ctx, branch, scope)?, ctx.body_limits())
}

/// ONNX `Loop`: inputs `M?`, `cond?`, `v_initial...`; the body maps `(i, cond, v...)` to
/// `(cond, v..., scan...)`. Runs while `i < M` (if given) and `cond` (if given); outputs the final
/// `v...` and each scan output stacked along a new axis 0.
pub fn loop_(
    ctx: &NodeCtx,
    attrs: &planner::op::Loop,
    inputs: &[Option<&HostTensor>],
    n_outputs: usize,
    scope: Scope,
) -> Result<Vec<HostTensor>, HostError> {
    let body = &attrs.body;
    let trip = strides::optional(inputs, 0).map(|t| int_scalar(ctx, t, "M")).transpose()?;
    let cond_given =
        strides::optional(inputs, 1).map(|t| scalar_f64(ctx, t, "cond").map(|c| c != 0.0)).transpose()?;
    if trip.is_none() && cond_given.is_none() {
        return Err(ctx.unsupported("a Loop with neither trip count nor condition never ends"));
    }
    let mut state: Vec<HostTensor> =
        (2..inputs.len()).map(|i| required(ctx, inputs, i).cloned()).collect::<Result<_, _>>()?;
    let n = state.len();
    let k = n_outputs
        .checked_sub(n)
        .ok_or_else(|| ctx.err(format!("{n_outputs} outputs for {n} loop-carried values")))?;
    if body.inputs.len() != 2 + n || body.outputs.len() != 1 + n + k {
        return Err(ctx.err(format!(
            "body has {} inputs and {} outputs; expected {} and {}",
            body.inputs.len(),
            body.outputs.len(),
            2 + n,
            1 + n + k
        )));
    }
    let mut scans: Vec<Vec<HostTensor>> = vec![Vec::new(); k];
    let mut scanned = vec![0usize; k];
    let mut cond = cond_given.unwrap_or(true);
    let mut i = 0i64;
    while cond && trip.is_none_or(|m| i < m) {
        if i as u64 >= ctx.limits.max_loop_iterations {
            let max = ctx.limits.max_loop_iterations;
            return Err(ctx.err(format!("runs more than {max} iterations (the limit of one Loop)")));
        }
        let mut args = vec![
            Cow::Owned(HostTensor::new(vec![], vec![i])?),
            Cow::Owned(HostTensor::new(vec![], vec![cond])?),
        ];
        args.extend(state.iter().map(Cow::Borrowed));
        let mut outs = run_with(body, args, captures(ctx, body, scope)?, ctx.body_limits())?.into_iter();
        let cond_out = outs.next().ok_or_else(|| ctx.err("body produced no condition"))?;
        if cond_given.is_some() {
            cond = scalar_f64(ctx, &cond_out, "body cond")? != 0.0;
        }
        state = outs.by_ref().take(n).collect();
        for ((s, t), total) in scans.iter_mut().zip(outs).zip(scanned.iter_mut()) {
            // The stacked scan output grows every iteration: bound it before it is built.
            *total = total.saturating_add(t.len());
            ctx.check_elems(*total, "a stacked scan output")?;
            s.push(t);
        }
        i += 1;
    }
    let mut sig = vec![(DType::I64, vec![]), (DType::Bool, vec![])];
    sig.extend(inputs.iter().skip(2).flatten().map(|t| (t.dtype(), t.shape().to_vec())));
    let caps = captures(ctx, body, scope)?;
    for (j, parts) in scans.into_iter().enumerate() {
        state.push(stack_or_empty(ctx, &parts, 0, (body, &caps, &sig, &first_iteration()), 1 + n + j)?);
    }
    Ok(state)
}

/// ONNX `Scan` (opset 9+): inputs are N initial states then M scan inputs; the body maps
/// `(states..., slices...)` to `(states..., scan_elements...)`. Slices are taken along each scan
/// input's axis (reversed for direction 1); scan outputs are stacked along their axis (prepended
/// for direction 1).
pub fn scan(
    ctx: &NodeCtx,
    attrs: &planner::op::Scan,
    inputs: &[Option<&HostTensor>],
    n_outputs: usize,
    scope: Scope,
) -> Result<Vec<HostTensor>, HostError> {
    let body = &attrs.body;
    let m = attrs.num_scan_inputs;
    let n = inputs
        .len()
        .checked_sub(m)
        .ok_or_else(|| ctx.err(format!("{} inputs for {m} scan inputs", inputs.len())))?;
    let k = n_outputs.checked_sub(n).ok_or_else(|| ctx.err(format!("{n_outputs} outputs for {n} states")))?;
    if m == 0 || body.inputs.len() != n + m || body.outputs.len() != n + k {
        return Err(ctx.err(format!(
            "body has {} inputs and {} outputs; expected {} and {} (M = {m})",
            body.inputs.len(),
            body.outputs.len(),
            n + m,
            n + k
        )));
    }
    let all: Vec<&HostTensor> =
        (0..inputs.len()).map(|i| required(ctx, inputs, i)).collect::<Result<_, _>>()?;
    let (init, scanned) = all.split_at(n);
    let mut axes = crate::tensor::try_with_capacity(m, "a working buffer")?;
    let mut len = None;
    for (j, t) in scanned.iter().enumerate() {
        let a = strides::axis(ctx, attrs.scan_input_axes.get(j).copied().unwrap_or(0), t.shape().len())?;
        match len {
            Some(l) if l != t.shape()[a] => {
                return Err(
                    ctx.err(format!("scan input {j} has length {} along axis {a}, others {l}", t.shape()[a]))
                );
            }
            _ => len = Some(t.shape()[a]),
        }
        axes.push(a);
    }
    let len = len.unwrap_or(0);
    let mut state: Vec<HostTensor> = init.iter().map(|&t| t.clone()).collect();
    let mut scans: Vec<Vec<HostTensor>> = vec![Vec::new(); k];
    for t in 0..len {
        let mut args: Vec<Cow<HostTensor>> = state.iter().map(Cow::Borrowed).collect();
        for (j, x) in scanned.iter().enumerate() {
            let pos = if attrs.scan_input_directions.get(j) == Some(&1) { len - 1 - t } else { t };
            args.push(Cow::Owned(index_axis(ctx, x, axes[j], pos)?));
        }
        let mut outs = run_with(body, args, captures(ctx, body, scope)?, ctx.body_limits())?.into_iter();
        state = outs.by_ref().take(n).collect();
        for (s, e) in scans.iter_mut().zip(outs) {
            s.push(e);
        }
    }
    let mut sig: Vec<(DType, Vec<usize>)> = init.iter().map(|t| (t.dtype(), t.shape().to_vec())).collect();
    for (j, x) in scanned.iter().enumerate() {
        let mut d = x.shape().to_vec();
        d.remove(axes[j]);
        sig.push((x.dtype(), d));
    }
    let caps = captures(ctx, body, scope)?;
    for (j, mut parts) in scans.into_iter().enumerate() {
        if attrs.scan_output_directions.get(j) == Some(&1) {
            parts.reverse();
        }
        let elem_rank = match parts.first() {
            Some(p) => p.shape().len(),
            None => empty_element((body, &caps, &sig, &[]), n + j).1.len(),
        };
        let axis = strides::axis(ctx, attrs.scan_output_axes.get(j).copied().unwrap_or(0), elem_rank + 1)?;
        state.push(stack_or_empty(ctx, &parts, axis, (body, &caps, &sig, &[]), n + j)?);
    }
    Ok(state)
}

/// The body, its captured values, the element types and dims of its inputs and the values known
/// of its first inputs (for the shape of a scan output no iteration produced).
type BodyRun<'a, 'b> =
    (&'a Graph, &'a [Cow<'b, HostTensor>], &'a [(DType, Vec<usize>)], &'a [Option<planner::ConstTensor>]);

/// Element type and shape of body output `out` had the body run ([`BodyRun`]): from shape
/// inference (the captures as constants) where it knows them, else from the output's declared
/// info (`[]` when it has none).
fn empty_element((body, caps, sig, values): BodyRun, out: usize) -> (DType, Vec<usize>) {
    let declared = body.outputs.get(out).and_then(|&v| body.value(v)).and_then(|v| v.info.clone());
    let constants: Vec<Option<planner::ConstTensor>> = caps.iter().map(|t| Some(t.to_const())).collect();
    let inferred = planner::stage::body_output_dims(body, &constants, sig, values)
        .ok()
        .and_then(|o| o.get(out).cloned());
    match (inferred, declared) {
        (Some((dtype, Some(dims))), _) => (dtype, dims),
        (_, Some(i)) => (i.dtype, i.shape.as_known().unwrap_or_default()),
        (Some((dtype, None)), None) => (dtype, Vec::new()),
        (None, None) => (DType::F32, Vec::new()),
    }
}

/// The first iteration's counter and condition, the values of a Loop body's first two inputs
/// (shape inference may need them: the counter as a slice bound).
pub fn first_iteration() -> Vec<Option<planner::ConstTensor>> {
    vec![
        Some(planner::ConstTensor::scalar_i64(0)),
        planner::ConstTensor::new(DType::Bool, vec![], vec![1]).ok(),
    ]
}

/// `parts` stacked along `axis`; with no parts, an empty tensor of body output `out`'s element
/// type and shape ([`empty_element`]) with `0` inserted at `axis`.
fn stack_or_empty(
    ctx: &NodeCtx,
    parts: &[HostTensor],
    axis: usize,
    run: BodyRun,
    out: usize,
) -> Result<HostTensor, HostError> {
    if !parts.is_empty() {
        return stack(ctx, parts, axis);
    }
    let (dtype, mut shape) = empty_element(run, out);
    shape.insert(axis.min(shape.len()), 0);
    Lanes::F(Vec::new()).into_tensor(dtype, shape)
}
