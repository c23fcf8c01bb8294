//! Reference `FlexAttention` (ai.onnx.preview), following the ONNX reference implementation:
//! `prob_mod(softmax(score_mod(scale · Q Kᵀ))) · V` on 4-D `(B, H, S, D)` tensors, where the two
//! modifiers are optional one-input graphs run on the whole `(B, Hq, L, S)` tensor. Query head `h`
//! reads K/V head `h / (Hq / Hkv)` (as `numpy.repeat` on axis 1). A row the score_mod masks
//! everywhere gives NaN, as in the ONNX reference.

use std::borrow::Cow;

use planner::op::FlexAttention;
use planner::{DType, Graph};

use super::attention::to_heads;
use super::operand::{expect_rank, floats, input, tensor};
use crate::error::HostError;
use crate::reference::{NodeCtx, Scope, run_with};
use crate::tensor::HostTensor;

/// Runs the one-input, one-output modifier `g` on `data` (shape `dims`, dtype `dtype`) and returns
/// its output's elements, which must keep that shape.
fn apply_mod(
    node: &NodeCtx,
    g: &Graph,
    what: &str,
    dtype: DType,
    dims: [usize; 4],
    data: Vec<f64>,
    scope: Scope,
) -> Result<Vec<f64>, HostError> {
    let arg = tensor(node, dtype, dims.to_vec(), data)?;
    let captures = g
        .captures
        .iter()
        .map(|c| {
            scope
                .get(c.outer)
                .map(Cow::Borrowed)
                .ok_or_else(|| node.err(format!("{what}: captured value {} is not available", c.outer)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let out = run_with(g, vec![Cow::Owned(arg)], captures, node.limits)?;
    let [t] = <[HostTensor; 1]>::try_from(out)
        .map_err(|o| node.err(format!("{what} produced {} outputs; expected 1", o.len())))?;
    let f = floats(node, &t, what)?;
    if f.shape != dims {
        return Err(node.err(format!("{what} changed the shape {dims:?} to {:?}", f.shape)));
    }
    Ok(f.data)
}

/// `FlexAttention(Q, K, V) -> Y`: Q `(B, Hq, L, E)`, K `(B, Hkv, S, E)`, V `(B, Hkv, S, Ev)`,
/// Y `(B, Hq, L, Ev)` in Q's dtype.
pub fn flex_attention(
    node: &NodeCtx,
    attrs: &FlexAttention,
    inputs: &[Option<&HostTensor>],
    scope: Scope,
) -> Result<Vec<HostTensor>, HostError> {
    let (q_in, k_in, v_in) =
        (input(node, inputs, 0, "Q")?, input(node, inputs, 1, "K")?, input(node, inputs, 2, "V")?);
    for (t, what) in [(&q_in, "Q"), (&k_in, "K"), (&v_in, "V")] {
        expect_rank(node, &t.shape, 4, what)?;
    }
    let q = to_heads(node, &q_in, None, "Q")?;
    let k = to_heads(node, &k_in, None, "K")?;
    let v = to_heads(node, &v_in, None, "V")?;
    if q.batch != k.batch || k.batch != v.batch || q.size != k.size || k.heads != v.heads || k.seq != v.seq {
        return Err(node.err(format!("Q {:?}, K {:?}, V {:?} disagree", q_in.shape, k_in.shape, v_in.shape)));
    }
    if k.heads == 0 || q.heads % k.heads != 0 {
        return Err(node.err(format!("{} query heads are not a multiple of {} kv heads", q.heads, k.heads)));
    }
    let dtype = inputs.first().copied().flatten().map_or(DType::F32, HostTensor::dtype);
    let group = q.heads / k.heads;
    let (s_len, ev) = (k.seq, v.size);
    let dims = [q.batch, q.heads, q.seq, s_len];
    let n_scores = node.count(&dims)?;
    let scale = attrs.scale.map_or(1.0 / (q.size as f64).sqrt(), f64::from);
    let mut scores = crate::tensor::try_with_capacity(n_scores, "a working buffer")?;
    for b in 0..q.batch {
        for h in 0..q.heads {
            for i in 0..q.seq {
                let qr = q.at(b, h, i);
                for j in 0..s_len {
                    let dot: f64 = qr.iter().zip(k.at(b, h / group, j)).map(|(a, c)| a * c).sum();
                    scores.push(scale * dot);
                }
            }
        }
    }
    if let Some(g) = &attrs.score_mod {
        scores = apply_mod(node, g, "score_mod", dtype, dims, scores, scope)?;
    }
    let mut probs = scores;
    for row in probs.chunks_mut(s_len.max(1)) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        row.iter_mut().for_each(|s| *s = (*s - m).exp());
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|p| *p /= sum);
    }
    if let Some(g) = &attrs.prob_mod {
        probs = apply_mod(node, g, "prob_mod", dtype, dims, probs, scope)?;
    }
    let mut y = crate::tensor::try_filled(q.batch * q.heads * q.seq * ev, 0.0, "a working buffer")?;
    for b in 0..q.batch {
        for h in 0..q.heads {
            for i in 0..q.seq {
                let r = ((b * q.heads + h) * q.seq + i) * s_len;
                let yo = ((b * q.heads + h) * q.seq + i) * ev;
                for j in 0..s_len {
                    let p = probs[r + j];
                    for (d, vd) in v.at(b, h / group, j).iter().enumerate() {
                        y[yo + d] += p * vd;
                    }
                }
            }
        }
    }
    Ok(vec![tensor(node, dtype, vec![q.batch, q.heads, q.seq, ev], y)?])
}

#[cfg(test)]
#[path = "flex_attention_tests.rs"]
mod tests;
