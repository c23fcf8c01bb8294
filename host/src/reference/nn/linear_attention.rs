//! Reference `LinearAttention` (opset 27): a per-head recurrent state `S` `(d_k, d_v)` updated
//! once per time step and read by the query.
//!
//! Step `t`, key/value head `h` (query head `j` reads head `j / (H_q / H_kv)`):
//! - gated rules: `S ← exp(g_t) ⊙ S`, `g_t` per head or per key row;
//! - delta rules: `v_t ← β_t (v_t − Sᵀ k_t)`, `β_t` per head or shared;
//! - always: `S ← S + k_t v_tᵀ`, then `o_t = scale · Sᵀ q_t` (`scale` defaults to `1/sqrt(d_k)`).
//!
//! The state starts at `past_state` or zero and is returned as `present_state` in the dtype of
//! `past_state` (or of the query without one).

use planner::op::{LinearAttention, LinearAttentionRule as R};

use super::operand::{Floats, input, input_opt, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// `(B, T, width)` of a rank-3 input.
fn btw(node: &NodeCtx, x: &Floats, what: &str) -> Result<[usize; 3], HostError> {
    <[usize; 3]>::try_from(x.shape.as_slice())
        .map_err(|_| node.err(format!("{what} must be (B, T, H*D), got {:?}", x.shape)))
}

/// ONNX `LinearAttention(query, key, value, past_state?, decay?, beta?)`.
pub fn linear_attention(
    node: &NodeCtx,
    attrs: &LinearAttention,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (q, k, v) =
        (input(node, inputs, 0, "query")?, input(node, inputs, 1, "key")?, input(node, inputs, 2, "value")?);
    let (hq, hkv) = (attrs.q_num_heads, attrs.kv_num_heads);
    let [b, t, qw] = btw(node, &q, "query")?;
    let [kb, kt, kw] = btw(node, &k, "key")?;
    let [vb, vt, vw] = btw(node, &v, "value")?;
    if hq == 0 || hkv == 0 || hq % hkv != 0 || qw % hq != 0 || vw % hkv != 0 {
        return Err(node.err(format!("heads {hq}/{hkv} do not divide query {qw} / value {vw}")));
    }
    let (dk, dv, group) = (qw / hq, vw / hkv, hq / hkv);
    if (kb, kt, kw) != (b, t, hkv * dk) || (vb, vt) != (b, t) {
        return Err(
            node.err(format!("key {:?} / value {:?} do not match query {:?}", k.shape, v.shape, q.shape))
        );
    }
    let past = input_opt(node, inputs, 3, "past_state")?;
    let decay = input_opt(node, inputs, 4, "decay")?;
    let beta = input_opt(node, inputs, 5, "beta")?;
    let gated = matches!(attrs.update_rule, R::Gated | R::GatedDelta);
    let delta = matches!(attrs.update_rule, R::Delta | R::GatedDelta);
    if gated != decay.is_some() || delta != beta.is_some() {
        return Err(
            node.err(format!("update_rule {:?} needs decay: {gated}, beta: {delta}", attrs.update_rule))
        );
    }
    // Width per (b, t) row of decay (H_kv or H_kv*d_k) and beta (H_kv or 1).
    let decay_w = match &decay {
        Some(g) if g.shape == [b, t, hkv] || g.shape == [b, t, hkv * dk] => g.shape[2],
        Some(g) => {
            return Err(node.err(format!("decay {:?} must be ({b}, {t}, {hkv} or {})", g.shape, hkv * dk)));
        }
        None => 0,
    };
    let beta_w = match &beta {
        Some(x) if x.shape == [b, t, hkv] || x.shape == [b, t, 1] => x.shape[2],
        Some(x) => return Err(node.err(format!("beta {:?} must be ({b}, {t}, {hkv} or 1)", x.shape))),
        None => 0,
    };
    let size = dk * dv;
    let mut state = match &past {
        Some(p) if p.shape == [b, hkv, dk, dv] => p.data.clone(),
        Some(p) => return Err(node.err(format!("past_state {:?} must be ({b}, {hkv}, {dk}, {dv})", p.shape))),
        None => vec![0.0; b * hkv * size],
    };
    let scale = attrs.scale.map_or(1.0 / (dk as f64).sqrt(), f64::from);
    let mut out = crate::tensor::try_filled(b * t * hq * dv, 0.0, "a working buffer")?;
    let mut vt_row = crate::tensor::try_filled(dv, 0.0, "a working buffer")?;
    for bi in 0..b {
        for ti in 0..t {
            let row = bi * t + ti;
            for h in 0..hkv {
                let s = &mut state[(bi * hkv + h) * size..(bi * hkv + h + 1) * size];
                let kt_row = &k.data[row * kw + h * dk..row * kw + (h + 1) * dk];
                vt_row.copy_from_slice(&v.data[row * vw + h * dv..row * vw + (h + 1) * dv]);
                if let Some(g) = &decay {
                    for d in 0..dk {
                        let gi = if decay_w == hkv { h } else { h * dk + d };
                        let f = g.data[row * decay_w + gi].exp();
                        s[d * dv..(d + 1) * dv].iter_mut().for_each(|x| *x *= f);
                    }
                }
                if let Some(bt) = &beta {
                    let bv = bt.data[row * beta_w + if beta_w == 1 { 0 } else { h }];
                    for (m, vm) in vt_row.iter_mut().enumerate() {
                        let retrieved: f64 = (0..dk).map(|d| s[d * dv + m] * kt_row[d]).sum();
                        *vm = bv * (*vm - retrieved);
                    }
                }
                for d in 0..dk {
                    for m in 0..dv {
                        s[d * dv + m] += kt_row[d] * vt_row[m];
                    }
                }
                for j in h * group..(h + 1) * group {
                    let qt = &q.data[row * qw + j * dk..row * qw + (j + 1) * dk];
                    for m in 0..dv {
                        let o: f64 = (0..dk).map(|d| qt[d] * s[d * dv + m]).sum();
                        out[(row * hq + j) * dv + m] = scale * o;
                    }
                }
            }
        }
    }
    let state_dtype = past.as_ref().map_or(q.dtype, |p| p.dtype);
    Ok(vec![
        tensor(node, q.dtype, vec![b, t, hq * dv], out)?,
        tensor(node, state_dtype, vec![b, hkv, dk, dv], state)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, vals};

    fn attrs(rule: R, hq: usize, scale: Option<f32>) -> LinearAttention {
        LinearAttention { kv_num_heads: 1, q_num_heads: hq, scale, update_rule: rule }
    }

    #[test]
    fn linear_rule_accumulates_outer_products() {
        // d_k = d_v = 1, one head: S_t = Σ k v, o_t = q S_t (scale 1).
        let (q, k, v) =
            (tf(&[1, 2, 1], &[1.0, 2.0]), tf(&[1, 2, 1], &[3.0, 1.0]), tf(&[1, 2, 1], &[2.0, 5.0]));
        let out =
            linear_attention(&node("LA"), &attrs(R::Linear, 1, Some(1.0)), &[Some(&q), Some(&k), Some(&v)])
                .unwrap();
        assert_close(&vals(&out[0]), &[6.0, 22.0], 1e-12);
        assert_close(&vals(&out[1]), &[11.0], 1e-12);
    }

    #[test]
    fn gated_delta_decays_then_corrects() {
        // S0 = 2 (past); g = ln 0.5 -> S = 1; beta 0.5: v' = 0.5 (4 - 1 * 1) = 1.5; S = 1 + 1.5 = 2.5.
        let (q, k, v) = (tf(&[1, 1, 1], &[2.0]), tf(&[1, 1, 1], &[1.0]), tf(&[1, 1, 1], &[4.0]));
        let past = tf(&[1, 1, 1, 1], &[2.0]);
        let g = tf(&[1, 1, 1], &[0.5f64.ln()]);
        let beta = tf(&[1, 1, 1], &[0.5]);
        let ins = [Some(&q), Some(&k), Some(&v), Some(&past), Some(&g), Some(&beta)];
        let out = linear_attention(&node("LA"), &attrs(R::GatedDelta, 1, None), &ins).unwrap();
        assert_close(&vals(&out[1]), &[2.5], 1e-7);
        assert_close(&vals(&out[0]), &[5.0], 1e-7);
        // Missing beta for a delta rule is an error.
        assert!(linear_attention(&node("LA"), &attrs(R::Delta, 1, None), &ins[..3]).is_err());
    }

    #[test]
    fn query_heads_share_kv_heads() {
        // Two query heads read the single kv head; d_k = 1, default scale 1.
        let (q, k, v) = (tf(&[1, 1, 2], &[1.0, -1.0]), tf(&[1, 1, 1], &[2.0]), tf(&[1, 1, 1], &[3.0]));
        let out = linear_attention(&node("LA"), &attrs(R::Linear, 2, None), &[Some(&q), Some(&k), Some(&v)])
            .unwrap();
        assert_close(&vals(&out[0]), &[6.0, -6.0], 1e-12);
    }
}
