//! Mamba-1 selective scan: SOFIE's `MambaScan` and ferrofuse's `SelectiveScan` (OPS.md, "SOFIE's
//! contracts" and "Mamba-1 selective scan"; `selective_scan_ref` semantics).
//!
//! Per (b, d) the state `h ∈ ℝᴺ` evolves as `h ← exp(Δ·A[d,n])·h + Δ·B[n]·u`, and the output is
//! `y = Σₙ C[n]·h[n] + D[d]·u`, gated by `silu(z)` when z is given.

use planner::DType;
use planner::op::SelectiveScan;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::nn::operand::{Floats, expect_shape, input, input_opt, silu, softplus, tensor};
use crate::tensor::HostTensor;

/// B or C: `(B, N, L)` shared by all channels, or `(B, G, N, L)` with channel d using group
/// `d / (D / G)`.
struct Grouped<'a> {
    t: &'a Floats,
    groups: usize,
    per_group: usize,
    n: usize,
    l: usize,
}

impl<'a> Grouped<'a> {
    fn new(node: &NodeCtx, t: &'a Floats, [b, d, n, l]: [usize; 4], what: &str) -> Result<Self, HostError> {
        let groups = match t.shape.as_slice() {
            &[tb, tn, tl] if [tb, tn, tl] == [b, n, l] => 1,
            &[tb, g, tn, tl] if [tb, tn, tl] == [b, n, l] && g > 0 && d % g == 0 => g,
            s => {
                return Err(node.err(format!(
                    "{what} must be ({b}, {n}, {l}) or ({b}, G, {n}, {l}) with G | {d}, got {s:?}"
                )));
            }
        };
        Ok(Grouped { t, groups, per_group: d / groups, n, l })
    }

    fn at(&self, b: usize, d: usize, n: usize, t: usize) -> f64 {
        self.t.data[((b * self.groups + d / self.per_group) * self.n + n) * self.l + t]
    }
}

/// Optional parts of the scan (absent for SOFIE's `MambaScan`).
#[derive(Default)]
struct Extras {
    dskip: Option<Floats>,
    z: Option<Floats>,
    delta_bias: Option<Floats>,
    delta_softplus: bool,
    init: Option<Floats>,
}

/// Runs the scan; returns out `(B, D, L)` (as u's dtype), the final state and its shape `(B, D, N)`.
fn scan(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    ex: &Extras,
) -> Result<(Floats, Vec<f64>, Vec<usize>), HostError> {
    let u = input(node, inputs, 0, "u")?;
    let delta = input(node, inputs, 1, "delta")?;
    let a = input(node, inputs, 2, "A")?;
    let [b, d, l] = <[usize; 3]>::try_from(u.shape.as_slice())
        .map_err(|_| node.err(format!("u must be (B, D, L), got {:?}", u.shape)))?;
    expect_shape(node, &delta.shape, &u.shape, "delta")?;
    let n = match a.shape.as_slice() {
        &[ad, n] if ad == d => n,
        s => return Err(node.err(format!("A must be ({d}, N), got {s:?}"))),
    };
    let (bm_in, cm_in) = (input(node, inputs, 3, "Bm")?, input(node, inputs, 4, "Cm")?);
    let bm = Grouped::new(node, &bm_in, [b, d, n, l], "Bm")?;
    let cm = Grouped::new(node, &cm_in, [b, d, n, l], "Cm")?;
    for (t, want, what) in [
        (&ex.dskip, vec![d], "D"),
        (&ex.z, u.shape.clone(), "z"),
        (&ex.delta_bias, vec![d], "delta_bias"),
        (&ex.init, vec![b, d, n], "initial_state"),
    ] {
        if let Some(t) = t {
            expect_shape(node, &t.shape, &want, what)?;
        }
    }
    let mut out = crate::tensor::try_filled(u.data.len(), 0.0, "a working buffer")?;
    let mut state = crate::tensor::try_filled(b * d * n, 0.0, "a working buffer")?;
    for bi in 0..b {
        for di in 0..d {
            let so = (bi * d + di) * n;
            let h = &mut state[so..so + n];
            if let Some(init) = &ex.init {
                h.copy_from_slice(&init.data[so..so + n]);
            }
            for t in 0..l {
                let k = (bi * d + di) * l + t;
                let mut dt = delta.data[k] + ex.delta_bias.as_ref().map_or(0.0, |v| v.data[di]);
                if ex.delta_softplus {
                    dt = softplus(dt);
                }
                let uv = u.data[k];
                let mut y = 0.0;
                for (ni, hn) in h.iter_mut().enumerate() {
                    *hn = (dt * a.data[di * n + ni]).exp() * *hn + dt * bm.at(bi, di, ni, t) * uv;
                    y += cm.at(bi, di, ni, t) * *hn;
                }
                y += uv * ex.dskip.as_ref().map_or(0.0, |v| v.data[di]);
                if let Some(z) = &ex.z {
                    y *= silu(z.data[k]);
                }
                out[k] = y;
            }
        }
    }
    Ok((Floats { data: out, ..u }, state, vec![b, d, n]))
}

/// SOFIE `MambaScan(u[B,D,L], delta[B,D,L], A[D,N], Bm[B,N,L], Cm[B,N,L], Dskip[D]) -> y[B,D,L]`
/// (OPS.md "SOFIE's contracts"): delta is used as given (no bias, no softplus), no z gate, and the
/// state starts at zero on every call.
pub fn mamba_scan(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let ex = Extras { dskip: Some(input(node, inputs, 5, "Dskip")?), ..Extras::default() };
    let (y, _, _) = scan(node, inputs, &ex)?;
    Ok(vec![tensor(node, y.dtype, y.shape, y.data)?])
}

/// ferrofuse `SelectiveScan` (OPS.md "Mamba-1 selective scan"): `Δ = delta + delta_bias`, softplus
/// if `delta_softplus`, the scan from `initial_state` (zero if absent), `out = (y + u·D)·silu(z)`.
/// Inputs u, delta, A, Bm, Cm, D?, z?, delta_bias?, initial_state?; outputs out and the final
/// state `(B, D, N)` in F32.
pub fn selective_scan(
    node: &NodeCtx,
    attrs: &SelectiveScan,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let ex = Extras {
        dskip: input_opt(node, inputs, 5, "D")?,
        z: input_opt(node, inputs, 6, "z")?,
        delta_bias: input_opt(node, inputs, 7, "delta_bias")?,
        delta_softplus: attrs.delta_softplus,
        init: input_opt(node, inputs, 8, "initial_state")?,
    };
    let (y, state, state_shape) = scan(node, inputs, &ex)?;
    Ok(vec![tensor(node, y.dtype, y.shape, y.data)?, tensor(node, DType::F32, state_shape, state)?])
}

#[cfg(test)]
#[path = "mamba_tests.rs"]
mod tests;
