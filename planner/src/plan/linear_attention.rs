//! Lowering of ONNX LinearAttention (opset 27) to `linear_attention_f32`, with the CPU
//! reference's shape rules: query `(B, T, H_q·d_k)`, key `(B, T, H_kv·d_k)`, value
//! `(B, T, H_kv·d_v)`, past_state `(B, H_kv, d_k, d_v)`, decay `(B, T, H_kv or H_kv·d_k)` for the
//! gated rules, beta `(B, T, H_kv or 1)` for the delta rules. The final state goes to the
//! `present_state` output, or to a scratch buffer when that is omitted.

use kernels_gpu::abi::{KernelId, LinearAttentionParams, Params};

use super::lower::{Lowered, dims, f32_only};
use super::{Arg, PlanOptions, PlannedValue, Step};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{LinearAttention, LinearAttentionRule as R, Op};
use crate::tensor_info::DType;

/// `(B, T, width)` of `v`.
fn btw(values: &[PlannedValue], v: ValueId, what: &str) -> Result<[usize; 3], String> {
    let d = dims(values, v)?.0;
    <[usize; 3]>::try_from(d).map_err(|_| format!("{what} must be (B, T, H*D), got {d:?}"))
}

/// The state buffer a LinearAttention node without its `present_state` output needs.
pub(super) fn scratch(g: &Graph, id: NodeId, values: &[PlannedValue]) -> Option<PlannedValue> {
    let n = &g.nodes[id.index()];
    let (Op::LinearAttention(a), None) = (&n.op, n.output(1)) else { return None };
    let [b, _, qw] = btw(values, n.input(0)?, "query").ok()?;
    let [_, _, vw] = btw(values, n.input(2)?, "value").ok()?;
    let (dk, dv) = (qw / a.q_num_heads.max(1), vw / a.kv_num_heads.max(1));
    let name = format!("{}/state", g.node_label(id));
    Some(PlannedValue { name, dtype: DType::F32, dims: Some(vec![b, a.kv_num_heads, dk, dv]) })
}

/// The launch of LinearAttention node `id` (see the module doc); `scratch` holds the state
/// buffer when `present_state` is omitted.
pub(super) fn lower(
    g: &Graph,
    id: NodeId,
    a: &LinearAttention,
    values: &[PlannedValue],
    scratch: &[ValueId],
    o: &PlanOptions,
) -> Lowered {
    let n = &g.nodes[id.index()];
    let input = |k: usize| n.input(k);
    let (Some(q), Some(k), Some(v), Some(y)) = (input(0), input(1), input(2), n.output(0)) else {
        return Err("query, key, value and the output are required".into());
    };
    let state = n.output(1).or_else(|| scratch.first().copied()).ok_or("no state buffer")?;
    let optional: Vec<ValueId> = [input(3), input(4), input(5)].into_iter().flatten().collect();
    f32_only(values, &[q, k, v, y, state])?;
    f32_only(values, &optional)?;
    let (hq, hkv) = (a.q_num_heads, a.kv_num_heads);
    let ([b, t, qw], [kb, kt, kw], [vb, vt, vw]) =
        (btw(values, q, "query")?, btw(values, k, "key")?, btw(values, v, "value")?);
    if hq == 0 || hkv == 0 || hq % hkv != 0 || qw % hq != 0 || vw % hkv != 0 {
        return Err(format!("heads {hq}/{hkv} do not divide query {qw} / value {vw}"));
    }
    let (dk, dv) = (qw / hq, vw / hkv);
    if (kb, kt, kw) != (b, t, hkv * dk) || (vb, vt) != (b, t) {
        return Err(format!(
            "key ({kb}, {kt}, {kw}) / value ({vb}, {vt}, {vw}) do not match query ({b}, {t}, {qw})"
        ));
    }
    let gated = matches!(a.update_rule, R::Gated | R::GatedDelta);
    let delta = matches!(a.update_rule, R::Delta | R::GatedDelta);
    if gated != input(4).is_some() || delta != input(5).is_some() {
        return Err(format!("update_rule {:?} needs decay: {gated}, beta: {delta}", a.update_rule));
    }
    let width = |v: Option<ValueId>, allowed: [usize; 2], what: &str| -> Result<u32, String> {
        let Some(v) = v else { return Ok(0) };
        match dims(values, v)?.0 {
            &[vb, vt, w] if vb == b && vt == t && allowed.contains(&w) => Ok(w as u32),
            other => Err(format!("{what} {other:?} must be ({b}, {t}, {} or {})", allowed[0], allowed[1])),
        }
    };
    let decay_width = width(input(4), [hkv, hkv * dk], "decay")?;
    let beta_width = width(input(5), [hkv, 1], "beta")?;
    if let Some(p) = input(3) {
        let pd = dims(values, p)?.0;
        if pd != [b, hkv, dk, dv] {
            return Err(format!("past_state {pd:?} must be ({b}, {hkv}, {dk}, {dv})"));
        }
    }
    let fits = |x: usize| u32::try_from(x).is_ok();
    if ![b, t, hq, hkv, dk, dv].into_iter().all(fits) {
        return Err("an extent past u32".into());
    }
    let p = LinearAttentionParams {
        batch: b as u32,
        len: t as u32,
        q_heads: hq as u32,
        kv_heads: hkv as u32,
        dk: dk as u32,
        dv: dv as u32,
        decay_width,
        beta_width,
        scale: a.scale.unwrap_or((1.0 / (dk as f64).sqrt()) as f32),
        _pad: 0,
    };
    let opt = |k: usize| input(k).map_or(Arg::Null, Arg::Value);
    let args = vec![
        Arg::Params(p.as_bytes().to_vec()),
        Arg::Value(q),
        Arg::Value(k),
        Arg::Value(v),
        opt(3),
        opt(4),
        opt(5),
        Arg::Output(state),
        Arg::Value(y),
    ];
    let columns = (b * hkv * dv) as u64;
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label: "LinearAttention".into(),
        kernel: KernelId::LinearAttentionF32,
        grid: super::capped_grid(o.sm_count, columns.div_ceil(64)),
        block: [64, 1, 1],
        shared_bytes: 0,
        args,
    }])
}
