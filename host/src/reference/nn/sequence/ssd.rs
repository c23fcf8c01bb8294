//! Mamba-2 SSD scan, ferrofuse's `SSDScan` (OPS.md "Mamba-2 SSD", recurrent form of
//! `Mamba2.step`): per head a scalar decay `exp(dt·A_h)` and a `P × N` state.
//!
//! This reference runs the recurrence sequentially in time. On the GPU, `ssd_scan_f32` runs it
//! the same way for short sequences and `ssd_chunk_f32` in 32-step chunks (with
//! `ssd_chunk_states_f32` / `ssd_chunk_pass_f32` where spans of chunks run in parallel); the
//! tests of this file derive the chunked form (`ssd_minimal_discrete`) independently and check it
//! against this sequential recurrence.

use planner::DType;
use planner::op::SsdScan;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::nn::operand::{expect_shape, input, input_opt, silu, softplus, tensor};
use crate::tensor::HostTensor;

/// ferrofuse `SSDScan`. Per (b, head h, step t), with group `g = h / (H/G)`:
/// 1. `dt ← dt + dt_bias[h]`, softplus if `dt_softplus`, clamped to `[dt_min, dt_max]`;
/// 2. `S ← exp(dt·A[h])·S + dt·(x ⊗ B_g)` with `S ∈ ℝ^{P×N}`;
/// 3. `y = S·C_g + D·x` (D per head `(H)` or per channel `(H·P)`), then `y ← y ⊙ silu(z)` if z
///    is given (the op has no RMSNorm; that happens outside).
///
/// Inputs x `(B,L,H,P)`, dt `(B,L,H)`, A `(H)`, Bm `(B,L,G,N)`, Cm `(B,L,G,N)`, D?, z?
/// `(B,L,H,P)`, dt_bias? `(H)`, initial_state? `(B,H,P,N)`; outputs y (x's dtype) and the final
/// state `(B,H,P,N)` in F32.
pub fn ssd_scan(
    node: &NodeCtx,
    attrs: &SsdScan,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "x")?;
    let [b, l, h, p] = <[usize; 4]>::try_from(x.shape.as_slice())
        .map_err(|_| node.err(format!("x must be (B, L, H, P), got {:?}", x.shape)))?;
    let dt = input(node, inputs, 1, "dt")?;
    expect_shape(node, &dt.shape, &[b, l, h], "dt")?;
    let a = input(node, inputs, 2, "A")?;
    expect_shape(node, &a.shape, &[h], "A")?;
    let (bm, cm) = (input(node, inputs, 3, "Bm")?, input(node, inputs, 4, "Cm")?);
    let (g, n) = match bm.shape.as_slice() {
        &[bb, bl, g, n] if bb == b && bl == l && g > 0 && h % g == 0 => (g, n),
        s => return Err(node.err(format!("Bm must be ({b}, {l}, G, N) with G dividing {h}, got {s:?}"))),
    };
    expect_shape(node, &cm.shape, &bm.shape, "Cm")?;
    let dskip = input_opt(node, inputs, 5, "D")?;
    let per_channel = match &dskip {
        Some(d) if d.shape == [h] => false,
        Some(d) if d.shape == [h * p] => true,
        Some(d) => return Err(node.err(format!("D must be ({h}) or ({}), got {:?}", h * p, d.shape))),
        None => false,
    };
    let z = input_opt(node, inputs, 6, "z")?;
    let dt_bias = input_opt(node, inputs, 7, "dt_bias")?;
    let init = input_opt(node, inputs, 8, "initial_state")?;
    for (t, want, what) in [
        (&z, x.shape.clone(), "z"),
        (&dt_bias, vec![h], "dt_bias"),
        (&init, vec![b, h, p, n], "initial_state"),
    ] {
        if let Some(t) = t {
            expect_shape(node, &t.shape, &want, what)?;
        }
    }
    let heads_per_group = h / g;
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    let mut state = match &init {
        Some(s) => s.data.clone(),
        None => vec![0.0; b * h * p * n],
    };
    for bi in 0..b {
        for hi in 0..h {
            let gi = hi / heads_per_group;
            let so = (bi * h + hi) * p * n;
            let s = &mut state[so..so + p * n];
            for t in 0..l {
                let mut d = dt.data[(bi * l + t) * h + hi] + dt_bias.as_ref().map_or(0.0, |v| v.data[hi]);
                if attrs.dt_softplus {
                    d = softplus(d);
                }
                if let Some(lo) = attrs.dt_min {
                    d = d.max(lo as f64);
                }
                if let Some(hi_) = attrs.dt_max {
                    d = d.min(hi_ as f64);
                }
                let decay = (d * a.data[hi]).exp();
                let bc = ((bi * l + t) * g + gi) * n;
                let (bv, cv) = (&bm.data[bc..bc + n], &cm.data[bc..bc + n]);
                let xo = ((bi * l + t) * h + hi) * p;
                for pi in 0..p {
                    let xv = x.data[xo + pi];
                    let row = &mut s[pi * n..(pi + 1) * n];
                    let mut acc = 0.0;
                    for ((sv, &bn), &cn) in row.iter_mut().zip(bv).zip(cv) {
                        *sv = decay * *sv + d * xv * bn;
                        acc += *sv * cn;
                    }
                    let dv =
                        dskip.as_ref().map_or(0.0, |v| v.data[if per_channel { hi * p + pi } else { hi }]);
                    acc += dv * xv;
                    if let Some(z) = &z {
                        acc *= silu(z.data[xo + pi]);
                    }
                    y[xo + pi] = acc;
                }
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?, tensor(node, DType::F32, vec![b, h, p, n], state)?])
}

#[cfg(test)]
#[path = "ssd_tests.rs"]
mod tests;
