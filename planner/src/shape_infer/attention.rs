//! `Attention` and `RotaryEmbedding` (ONNX opset 23).
//!
//! Q/K/V are 4-D `(B, heads, seq, head)` or 3-D `(B, seq, heads * head)`; in the 3-D form the head
//! counts come from `q_num_heads` / `kv_num_heads`.

use super::Ctx;
use crate::error::PlanError;
use crate::op::{Attention, FusedAttention, LinearAttention, RotaryEmbedding};
use crate::tensor_info::{Dim, Shape, TensorInfo};

/// Per-tensor view in 4-D terms: batch, heads, seq, head size.
struct Heads {
    batch: Dim,
    heads: Dim,
    seq: Dim,
    size: Dim,
}

fn heads_of(ctx: &mut Ctx, t: &TensorInfo, num_heads: Option<usize>, what: &str) -> Result<Heads, PlanError> {
    let d = t.shape.dims();
    match (t.rank(), num_heads) {
        (4, _) => {
            Ok(Heads { batch: d[0].clone(), heads: d[1].clone(), seq: d[2].clone(), size: d[3].clone() })
        }
        (3, Some(h)) if h > 0 => {
            let size = match &d[2] {
                Dim::Known(n) if n % h == 0 => Dim::Known(n / h),
                Dim::Known(n) => {
                    return Err(ctx.mismatch(format!("{what} hidden size {n} not divisible by {h} heads")));
                }
                s if h == 1 => s.clone(),
                _ => ctx.fresh(),
            };
            Ok(Heads { batch: d[0].clone(), heads: Dim::Known(h), seq: d[1].clone(), size })
        }
        (3, _) => Err(ctx.attr(format!("3-D {what} needs its num_heads attribute"))),
        _ => Err(ctx.mismatch(format!("{what} must be 3-D or 4-D, got {t}"))),
    }
}

fn sum_dims(ctx: &mut Ctx, a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => Dim::Known(x + y),
        (Dim::Known(0), d) | (d, Dim::Known(0)) => d.clone(),
        _ => ctx.fresh(),
    }
}

/// Outputs Y, present_key, present_value, qk_matmul_output.
pub(crate) fn attention(ctx: &mut Ctx, a: &Attention) -> Result<Vec<TensorInfo>, PlanError> {
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    ctx.require_float(q)?;
    let dtype = ctx.same_dtype(&[q, k, v])?;
    let qh = heads_of(ctx, q, a.q_num_heads, "Q")?;
    let kh = heads_of(ctx, k, a.kv_num_heads, "K")?;
    let vh = heads_of(ctx, v, a.kv_num_heads, "V")?;
    ctx.unify(&qh.batch, &kh.batch, "batch of Q and K")?;
    ctx.unify(&kh.batch, &vh.batch, "batch of K and V")?;
    ctx.unify(&qh.size, &kh.size, "head size of Q and K")?;
    ctx.unify(&kh.heads, &vh.heads, "heads of K and V")?;
    ctx.unify(&kh.seq, &vh.seq, "sequence of K and V")?;
    if let (Dim::Known(hq), Dim::Known(hkv)) = (&qh.heads, &kh.heads)
        && (*hkv == 0 || hq % hkv != 0)
    {
        return Err(ctx.mismatch(format!("{hq} query heads not a multiple of {hkv} kv heads")));
    }
    let past_seq = match (ctx.opt(4), ctx.opt(5)) {
        (Some(pk), Some(pv)) => {
            ctx.require_rank(pk, 4, "past_key")?;
            ctx.require_rank(pv, 4, "past_value")?;
            ctx.unify(&pk.shape.dims()[2], &pv.shape.dims()[2], "past sequence of key and value")?
        }
        (None, None) => Dim::Known(0),
        _ => return Err(ctx.arity("past_key and past_value must be given together")),
    };
    let total = sum_dims(ctx, &past_seq, &kh.seq);
    let y = if q.rank() == 4 {
        Shape(vec![qh.batch.clone(), qh.heads.clone(), qh.seq.clone(), vh.size.clone()])
    } else {
        let hidden = match (&qh.heads, &vh.size) {
            (Dim::Known(h), Dim::Known(s)) => Dim::Known(h.saturating_mul(*s)),
            (Dim::Known(1), s) => s.clone(),
            _ => ctx.fresh(),
        };
        Shape(vec![qh.batch.clone(), qh.seq.clone(), hidden])
    };
    let present = |size: &Dim| Shape(vec![qh.batch.clone(), kh.heads.clone(), total.clone(), size.clone()]);
    let qk = Shape(vec![qh.batch.clone(), qh.heads.clone(), qh.seq.clone(), total.clone()]);
    Ok(vec![
        TensorInfo { dtype, shape: y },
        TensorInfo { dtype, shape: present(&kh.size) },
        TensorInfo { dtype, shape: present(&vh.size) },
        TensorInfo { dtype, shape: qk },
    ])
}

/// `FusedAttention` (planner-internal): one f32 output of the recorded dims; the inputs are the
/// buffers the fused operands are views of, so their shapes say nothing about the output.
pub(crate) fn fused_attention(ctx: &mut Ctx, a: &FusedAttention) -> Result<Vec<TensorInfo>, PlanError> {
    for i in 0..3 {
        ctx.input(i)?;
    }
    Ok(vec![TensorInfo::new(crate::tensor_info::DType::F32, a.dims.iter().copied())])
}

/// `RotaryEmbedding`: same info as X; caches are 2-D (or 3-D with batch) and position ids integer.
pub(crate) fn rotary_embedding(ctx: &mut Ctx, r: &RotaryEmbedding) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, cos, sin) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    ctx.require_float(x)?;
    ctx.same_dtype(&[x, cos, sin])?;
    if x.rank() == 3 && r.num_heads.is_none() {
        return Err(ctx.attr("3-D input needs num_heads"));
    }
    if x.rank() != 3 && x.rank() != 4 {
        return Err(ctx.mismatch(format!("X must be 3-D or 4-D, got {x}")));
    }
    if cos.shape != sin.shape {
        return Err(ctx.mismatch(format!("cos_cache {cos} and sin_cache {sin} differ")));
    }
    if let Some(p) = ctx.opt(3)
        && !p.dtype.is_int()
    {
        return Err(ctx.dtype(format!("position_ids must be integers, got {}", p.dtype)));
    }
    Ok(vec![x.clone()])
}

/// `LinearAttention`: output `(B, T, H_q·d_v)` and present_state `(B, H_kv, d_k, d_v)`, with
/// `d_k = query_last / H_q` and `d_v = value_last / H_kv` (fresh symbols when not known).
pub(crate) fn linear_attention(ctx: &mut Ctx, a: &LinearAttention) -> Result<Vec<TensorInfo>, PlanError> {
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    for (t, what) in [(q, "query"), (k, "key"), (v, "value")] {
        ctx.require_float(t)?;
        ctx.require_rank(t, 3, what)?;
    }
    let (hq, hkv) = (a.q_num_heads, a.kv_num_heads);
    if hq == 0 || hkv == 0 || hq % hkv != 0 {
        return Err(ctx.attr(format!("q_num_heads {hq} must be a positive multiple of kv_num_heads {hkv}")));
    }
    let mut per_head = |d: &Dim, heads: usize, what: &str| match d {
        Dim::Known(n) if n % heads == 0 => Ok(Dim::Known(n / heads)),
        Dim::Known(n) => Err(ctx.mismatch(format!("{what} width {n} is not divisible by {heads} heads"))),
        Dim::Symbol(_) => Ok(ctx.fresh()),
    };
    let dk = per_head(&q.shape.dims()[2], hq, "query")?;
    let dv = per_head(&v.shape.dims()[2], hkv, "value")?;
    let qd = q.shape.dims();
    let out_width = match &dv {
        Dim::Known(n) => Dim::Known(n * hq),
        Dim::Symbol(_) => ctx.fresh(),
    };
    let state_dtype = ctx.opt(3).map_or(q.dtype, |s| s.dtype);
    let out = TensorInfo { dtype: q.dtype, shape: Shape(vec![qd[0].clone(), qd[1].clone(), out_width]) };
    let state = TensorInfo { dtype: state_dtype, shape: Shape(vec![qd[0].clone(), Dim::Known(hkv), dk, dv]) };
    Ok(vec![out, state])
}
