//! RWKV-6 WKV: SOFIE's `RWKV_WKV6` (bonus `exp(u)`) and ferrofuse's `WKV6` (bonus `u`, linear),
//! OPS.md "SOFIE's contracts" and "RWKV-6 WKV" (BlinkDL convention).
//!
//! Per (b, head) the state `S ∈ ℝ^{N×N}` is indexed [key i, value j]:
//! `y_t[j] = Σᵢ r[i]·(bonus[i]·k[i]·v[j] + S[i, j])`, then `S[i, j] ← exp(−exp(w[i]))·S[i, j] +
//! k[i]·v[j]`, with no scale on r.

use planner::DType;
use planner::op::{Wkv6, Wkv6Layout};

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::nn::operand::{Floats, expect_shape, input, input_opt, tensor};
use crate::tensor::HostTensor;

/// y, the final state and `[B, H, N]`.
type Scanned = (Vec<f64>, Vec<f64>, [usize; 3]);

/// Runs WKV over r, k, v, w in `layout`, with the per-(head, key) `bonus` already transformed.
/// Returns y (r's layout) and the final state `(B, H, N, N)`.
fn scan(
    node: &NodeCtx,
    layout: Wkv6Layout,
    rkvw: [&Floats; 4],
    bonus: &[f64],
    init: Option<&Floats>,
) -> Result<Scanned, HostError> {
    let [r, k, v, w] = rkvw;
    let [d0, d1, d2, n] = <[usize; 4]>::try_from(r.shape.as_slice())
        .map_err(|_| node.err(format!("r must be 4-D, got {:?}", r.shape)))?;
    for (t, what) in [(k, "k"), (v, "v"), (w, "w")] {
        expect_shape(node, &t.shape, &r.shape, what)?;
    }
    let (b, t_len, h) = match layout {
        Wkv6Layout::Bthn => (d0, d1, d2),
        Wkv6Layout::Bhtn => (d0, d2, d1),
    };
    if bonus.len() != h * n {
        return Err(node.err(format!("u must be ({h}, {n}), got {} elements", bonus.len())));
    }
    if let Some(s) = init {
        expect_shape(node, &s.shape, &[b, h, n, n], "initial_state")?;
    }
    let offset = |bi: usize, t: usize, hi: usize| match layout {
        Wkv6Layout::Bthn => ((bi * t_len + t) * h + hi) * n,
        Wkv6Layout::Bhtn => ((bi * h + hi) * t_len + t) * n,
    };
    let mut y = crate::tensor::try_filled(r.data.len(), 0.0, "a working buffer")?;
    let mut state = init.map_or(vec![0.0; b * h * n * n], |s| s.data.clone());
    for bi in 0..b {
        for hi in 0..h {
            let so = (bi * h + hi) * n * n;
            let s = &mut state[so..so + n * n];
            let u = &bonus[hi * n..(hi + 1) * n];
            for t in 0..t_len {
                let o = offset(bi, t, hi);
                let (rt, kt, vt, wt) =
                    (&r.data[o..o + n], &k.data[o..o + n], &v.data[o..o + n], &w.data[o..o + n]);
                for (j, &vj) in vt.iter().enumerate() {
                    y[o + j] = (0..n).map(|i| rt[i] * (u[i] * kt[i] * vj + s[i * n + j])).sum();
                }
                for i in 0..n {
                    let decay = (-wt[i].exp()).exp();
                    for (j, &vj) in vt.iter().enumerate() {
                        s[i * n + j] = decay * s[i * n + j] + kt[i] * vj;
                    }
                }
            }
        }
    }
    Ok((y, state, [b, h, n]))
}

fn rkvw(node: &NodeCtx, inputs: &[Option<&HostTensor>]) -> Result<[Floats; 4], HostError> {
    Ok([
        input(node, inputs, 0, "r")?,
        input(node, inputs, 1, "k")?,
        input(node, inputs, 2, "v")?,
        input(node, inputs, 3, "w")?,
    ])
}

/// SOFIE `RWKV_WKV6(r,k,v,w[B,H,T,Dh], u[H,Dh]) -> y[B,H,T,Dh]` (OPS.md "SOFIE's contracts"): the
/// bonus is `exp(u)`, the state starts at zero.
pub fn rwkv_wkv6(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let [r, k, v, w] = rkvw(node, inputs)?;
    let u = input(node, inputs, 4, "u")?;
    let bonus: Vec<f64> = u.data.iter().map(|x| x.exp()).collect();
    let (y, _, _) = scan(node, Wkv6Layout::Bhtn, [&r, &k, &v, &w], &bonus, None)?;
    Ok(vec![tensor(node, r.dtype, r.shape.clone(), y)?])
}

/// ferrofuse `WKV6` (OPS.md "RWKV-6 WKV"): decay `exp(−exp(w))`, bonus u used linearly, layout
/// `[B,T,H,N]` or `[B,H,T,N]` by attribute. Inputs r, k, v, w, u `(H,N)`, initial_state?
/// `(B,H,N,N)`; outputs y (r's dtype and layout) and the final state `(B,H,N,N)` in F32.
pub fn wkv6(
    node: &NodeCtx,
    attrs: &Wkv6,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let [r, k, v, w] = rkvw(node, inputs)?;
    let u = input(node, inputs, 4, "u")?;
    let init = input_opt(node, inputs, 5, "initial_state")?;
    let (y, state, [b, h, n]) = scan(node, attrs.layout, [&r, &k, &v, &w], &u.data, init.as_ref())?;
    Ok(vec![tensor(node, r.dtype, r.shape.clone(), y)?, tensor(node, DType::F32, vec![b, h, n, n], state)?])
}

#[cfg(test)]
#[path = "wkv_tests.rs"]
mod tests;
