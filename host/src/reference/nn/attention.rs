//! Reference ONNX `Attention` (opset 23), following the ONNX reference implementation:
//! `softmax(softcap(scale · Q Kᵀ) + bias) · V`, where the bias combines `attn_mask` (bool: false
//! masks; float: added; padded with masking up to the total sequence) and the causal mask.
//!
//! Internally every tensor is `(batch, heads, seq, head_size)`; the 3-D form `(batch, seq,
//! heads · head_size)` is converted on the way in and out. Query head `h` reads K/V head
//! `h / (q_heads / kv_heads)` (each K/V head repeated, as `numpy.repeat` on axis 1). A row that is
//! masked everywhere gives NaN, as in the ONNX reference.

use planner::DType;
use planner::op::Attention;

use super::operand::{Floats, expect_rank, floats, input, input_opt, ints, optional, required, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// A tensor viewed as `(batch, heads, seq, size)`, data in that order.
#[derive(Debug, Clone)]
pub(crate) struct Heads {
    pub batch: usize,
    pub heads: usize,
    pub seq: usize,
    pub size: usize,
    pub data: Vec<f64>,
}

impl Heads {
    pub(crate) fn at(&self, b: usize, h: usize, s: usize) -> &[f64] {
        let o = ((b * self.heads + h) * self.seq + s) * self.size;
        &self.data[o..o + self.size]
    }
}

/// Views a 4-D `(B, H, S, D)` or 3-D `(B, S, H·D)` tensor as [`Heads`].
pub(crate) fn to_heads(
    node: &NodeCtx,
    t: &Floats,
    num_heads: Option<usize>,
    what: &str,
) -> Result<Heads, HostError> {
    match (t.shape.as_slice(), num_heads) {
        (&[batch, heads, seq, size], _) => Ok(Heads { batch, heads, seq, size, data: t.data.clone() }),
        (&[batch, seq, hidden], Some(heads)) if heads > 0 && hidden % heads == 0 => {
            let size = hidden / heads;
            let mut data = crate::tensor::try_with_capacity(t.data.len(), "a working buffer")?;
            for b in 0..batch {
                for h in 0..heads {
                    for s in 0..seq {
                        let o = (b * seq + s) * hidden + h * size;
                        data.extend_from_slice(&t.data[o..o + size]);
                    }
                }
            }
            Ok(Heads { batch, heads, seq, size, data })
        }
        (&[_, _, hidden], Some(heads)) => {
            Err(node.err(format!("{what}: {hidden} is not divisible by {heads} heads")))
        }
        (&[_, _, _], None) => Err(node.err(format!("3-D {what} needs its num_heads attribute"))),
        (s, _) => Err(node.err(format!("{what} must be 3-D or 4-D, got {s:?}"))),
    }
}

/// The inverse of [`to_heads`] for the 3-D form: `(B, S, H·D)`.
fn from_heads_3d(h: &Heads) -> Vec<f64> {
    let mut out = vec![0.0; h.data.len()];
    for b in 0..h.batch {
        for hh in 0..h.heads {
            for s in 0..h.seq {
                let o = (b * h.seq + s) * h.heads * h.size + hh * h.size;
                out[o..o + h.size].copy_from_slice(h.at(b, hh, s));
            }
        }
    }
    out
}

/// Concatenates `past` and `new` along the sequence axis.
fn concat_seq(node: &NodeCtx, past: Option<&Heads>, new: &Heads, what: &str) -> Result<Heads, HostError> {
    let Some(p) = past else { return Ok(new.clone()) };
    if (p.batch, p.heads, p.size) != (new.batch, new.heads, new.size) {
        return Err(node.err(format!(
            "{what}: past (B={}, H={}, D={}) does not match the new (B={}, H={}, D={})",
            p.batch, p.heads, p.size, new.batch, new.heads, new.size
        )));
    }
    let seq = p.seq + new.seq;
    let mut data = crate::tensor::try_with_capacity(p.data.len() + new.data.len(), "a working buffer")?;
    for b in 0..new.batch {
        for h in 0..new.heads {
            for s in 0..p.seq {
                data.extend_from_slice(p.at(b, h, s));
            }
            for s in 0..new.seq {
                data.extend_from_slice(new.at(b, h, s));
            }
        }
    }
    Ok(Heads { seq, data, ..*new })
}

/// The additive bias `(B, Hq, Sq, total)` from `attn_mask` (bool or float, broadcast; last dim
/// padded with masking up to `total`) and the causal mask `j > i + past` (bottom-right aligned).
fn bias(
    node: &NodeCtx,
    mask: Option<&HostTensor>,
    dims: [usize; 4],
    past: usize,
    causal: bool,
) -> Result<Vec<f64>, HostError> {
    let [batch, heads, sq, total] = dims;
    let mut out = crate::tensor::try_filled(batch * heads * sq * total, 0.0, "a working buffer")?;
    if let Some(m) = mask {
        let (ms, is_bool) = (m.shape(), m.dtype() == DType::Bool);
        let vals = if is_bool { m.data().to_f64s() } else { floats(node, m, "attn_mask")?.data };
        if ms.is_empty() || ms.len() > 4 || ms[ms.len() - 1] > total {
            return Err(node.err(format!("attn_mask {ms:?} does not fit (B, H, {sq}, {total})")));
        }
        let mut full = [1usize; 4];
        full[4 - ms.len()..].copy_from_slice(ms);
        for (d, (&m, &want)) in full[..3].iter().zip(&dims[..3]).enumerate() {
            if m != 1 && m != want {
                return Err(node.err(format!("attn_mask {ms:?} does not broadcast to {dims:?} (dim {d})")));
            }
        }
        let (mb, mh, mq, ml) = (full[0], full[1], full[2], full[3]);
        for (k, slot) in out.iter_mut().enumerate() {
            let (j, i, h, b) =
                (k % total, (k / total) % sq, (k / (total * sq)) % heads, k / (total * sq * heads));
            if j >= ml {
                *slot = f64::NEG_INFINITY;
                continue;
            }
            let idx = (((b % mb) * mh + h % mh) * mq + i % mq) * ml + j;
            let v = vals[idx];
            *slot = if is_bool { if v != 0.0 { 0.0 } else { f64::NEG_INFINITY } } else { v };
        }
    }
    if causal {
        for (k, slot) in out.iter_mut().enumerate() {
            let (j, i) = (k % total, (k / total) % sq);
            if j > i + past {
                *slot = f64::NEG_INFINITY;
            }
        }
    }
    Ok(out)
}

/// ONNX `Attention` (opsets 23/24). Inputs Q, K, V, attn_mask?, past_key?, past_value?,
/// nonpad_kv_seqlen? (opset 24: per batch, keys from this index on are masked); outputs Y,
/// present_key, present_value (past concatenated with K/V along the sequence) and
/// qk_matmul_output: mode 0 the scaled `Q Kᵀ`, 1 after softcap, 2 after adding the mask bias,
/// 3 after softmax (the ONNX reference's order: softcap, then bias).
pub fn attention(
    node: &NodeCtx,
    attrs: &Attention,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (q_in, k_in, v_in) =
        (input(node, inputs, 0, "Q")?, input(node, inputs, 1, "K")?, input(node, inputs, 2, "V")?);
    let rank = q_in.shape.len();
    if k_in.shape.len() != rank || v_in.shape.len() != rank {
        return Err(
            node.err(format!("Q {:?}, K {:?}, V {:?} must share a rank", q_in.shape, k_in.shape, v_in.shape))
        );
    }
    let q = to_heads(node, &q_in, attrs.q_num_heads, "Q")?;
    let k = to_heads(node, &k_in, attrs.kv_num_heads, "K")?;
    let v = to_heads(node, &v_in, attrs.kv_num_heads, "V")?;
    if q.batch != k.batch || k.batch != v.batch || q.size != k.size || k.heads != v.heads || k.seq != v.seq {
        return Err(node.err(format!("Q {:?}, K {:?}, V {:?} disagree", q_in.shape, k_in.shape, v_in.shape)));
    }
    if k.heads == 0 || q.heads % k.heads != 0 {
        return Err(node.err(format!("{} query heads are not a multiple of {} kv heads", q.heads, k.heads)));
    }
    let past_k = input_opt(node, inputs, 4, "past_key")?;
    let past_v = input_opt(node, inputs, 5, "past_value")?;
    let (pk, pv) = match (&past_k, &past_v) {
        (Some(a), Some(b)) => {
            expect_rank(node, &a.shape, 4, "past_key")?;
            expect_rank(node, &b.shape, 4, "past_value")?;
            (Some(to_heads(node, a, None, "past_key")?), Some(to_heads(node, b, None, "past_value")?))
        }
        (None, None) => (None, None),
        _ => return Err(node.err("past_key and past_value must be given together")),
    };
    let past = pk.as_ref().map_or(0, |p| p.seq);
    let kk = concat_seq(node, pk.as_ref(), &k, "past_key")?;
    let vv = concat_seq(node, pv.as_ref(), &v, "past_value")?;
    if kk.seq != vv.seq {
        return Err(node.err("past_key and past_value have different sequence lengths"));
    }
    let total = kk.seq;
    let dims = [q.batch, q.heads, q.seq, total];
    let mut bias = bias(node, optional(inputs, 3), dims, past, attrs.is_causal)?;
    if let Some(t) = optional(inputs, 6) {
        let lens = ints(node, t, "nonpad_kv_seqlen")?;
        if lens.len() != q.batch {
            return Err(node.err(format!(
                "nonpad_kv_seqlen has {} entries for batch {}",
                lens.len(),
                q.batch
            )));
        }
        let per_batch = q.heads * q.seq * total;
        for (k, slot) in bias.iter_mut().enumerate() {
            if (k % total) as i64 >= lens[k / per_batch] {
                *slot = f64::NEG_INFINITY;
            }
        }
    }
    let scale = attrs.scale.map_or(1.0 / (q.size as f64).sqrt(), |s| s as f64);
    let softcap = attrs.softcap as f64;
    let group = q.heads / k.heads;
    let mut y = crate::tensor::try_filled(q.batch * q.heads * q.seq * vv.size, 0.0, "a working buffer")?;
    let mut qk = crate::tensor::try_filled(bias.len(), 0.0, "a working buffer")?;
    let mut row = crate::tensor::try_filled(total, 0.0, "a working buffer")?;
    for b in 0..q.batch {
        for h in 0..q.heads {
            for i in 0..q.seq {
                let r = ((b * q.heads + h) * q.seq + i) * total;
                let qr = q.at(b, h, i);
                for (j, s) in row.iter_mut().enumerate() {
                    let raw = scale * qr.iter().zip(kk.at(b, h / group, j)).map(|(a, c)| a * c).sum::<f64>();
                    let capped = if softcap > 0.0 { softcap * (raw / softcap).tanh() } else { raw };
                    *s = capped + bias[r + j];
                    qk[r + j] = match attrs.qk_matmul_output_mode {
                        0 => raw,
                        1 => capped,
                        _ => *s,
                    };
                }
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = row.iter().map(|s| (s - m).exp()).collect();
                let sum: f64 = e.iter().sum();
                let yo = ((b * q.heads + h) * q.seq + i) * vv.size;
                for (j, ej) in e.iter().enumerate() {
                    let p = ej / sum;
                    if attrs.qk_matmul_output_mode == 3 {
                        qk[r + j] = p;
                    }
                    for (d, vd) in vv.at(b, h / group, j).iter().enumerate() {
                        y[yo + d] += p * vd;
                    }
                }
            }
        }
    }
    let y_heads = Heads { batch: q.batch, heads: q.heads, seq: q.seq, size: vv.size, data: y };
    let (y_shape, y_data) = if rank == 3 {
        (vec![q.batch, q.seq, q.heads * vv.size], from_heads_3d(&y_heads))
    } else {
        (vec![q.batch, q.heads, q.seq, vv.size], y_heads.data)
    };
    let kv_dtype = required(node, inputs, 1, "K")?.dtype();
    Ok(vec![
        tensor(node, q_in.dtype, y_shape, y_data)?,
        tensor(node, kv_dtype, vec![kk.batch, kk.heads, kk.seq, kk.size], kk.data)?,
        tensor(node, kv_dtype, vec![vv.batch, vv.heads, vv.seq, vv.size], vv.data)?,
        tensor(node, q_in.dtype, dims.to_vec(), qk)?,
    ])
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
