//! Recurrent layers (LSTM, GRU, RNN) and the state-space operators of OPS.md.
//!
//! State outputs of the state-space operators are always `F32` (OPS.md: state is kept in f32).
//! Control flow (If, Loop, Scan) lives in `control.rs`.

use super::Ctx;
use crate::error::PlanError;
use crate::op::{Recurrent, RnnLayout, Wkv6Layout};
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

pub(crate) use super::control::{if_, loop_, scan};

/// Checks that `t` has exactly the dims `want` (known dims must match; symbols are accepted).
fn check(ctx: &Ctx, t: &TensorInfo, want: &[Dim], what: &str) -> Result<(), PlanError> {
    if t.rank() != want.len() {
        return Err(ctx.mismatch(format!("{what} must have rank {}, got {t}", want.len())));
    }
    for (d, w) in t.shape.dims().iter().zip(want) {
        ctx.unify(d, w, what)?;
    }
    Ok(())
}

/// Checks optional input `i` against `want`, if present.
fn check_opt(ctx: &Ctx, i: usize, want: &[Dim], what: &str) -> Result<(), PlanError> {
    match ctx.opt(i) {
        Some(t) => check(ctx, t, want, what),
        None => Ok(()),
    }
}

fn rank_dims(ctx: &Ctx, t: &TensorInfo, rank: usize, what: &str) -> Result<Vec<Dim>, PlanError> {
    ctx.require_rank(t, rank, what)?;
    Ok(t.shape.0.clone())
}

fn f32_state(dims: Vec<Dim>) -> TensorInfo {
    TensorInfo { dtype: DType::F32, shape: Shape(dims) }
}

/// LSTM (4 gates, 3 outputs), GRU (3 gates, 2 outputs), RNN (1 gate, 2 outputs).
pub(crate) fn recurrent(
    ctx: &mut Ctx,
    r: &Recurrent,
    gates: usize,
    outputs: usize,
) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, w, rr) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    ctx.require_float(x)?;
    let dtype = ctx.same_dtype(&[x, w, rr])?;
    let xd = rank_dims(ctx, x, 3, "X")?;
    let (seq, batch, input) = match r.layout {
        RnnLayout::SeqFirst => (xd[0].clone(), xd[1].clone(), xd[2].clone()),
        RnnLayout::BatchFirst => (xd[1].clone(), xd[0].clone(), xd[2].clone()),
    };
    let h = r.hidden_size;
    if h == 0 {
        return Err(ctx.attr("hidden_size is 0"));
    }
    let dirs = Dim::Known(r.direction.num_directions());
    let gates_h = gates.checked_mul(h).ok_or_else(|| ctx.attr(format!("hidden_size {h} too large")))?;
    check(ctx, w, &[dirs.clone(), Dim::Known(gates_h), input], "W")?;
    check(ctx, rr, &[dirs.clone(), Dim::Known(gates_h), Dim::Known(h)], "R")?;
    let hd = Dim::Known(h);
    let (y, yh) = match r.layout {
        RnnLayout::SeqFirst => (vec![seq, dirs.clone(), batch.clone(), hd.clone()], vec![dirs, batch, hd]),
        RnnLayout::BatchFirst => (vec![batch.clone(), seq, dirs.clone(), hd.clone()], vec![batch, dirs, hd]),
    };
    let mut outs = vec![TensorInfo { dtype, shape: Shape(y) }];
    outs.extend(std::iter::repeat_n(TensorInfo { dtype, shape: Shape(yh) }, outputs - 1));
    Ok(outs)
}

/// SOFIE `MambaScan(u[B,D,L], delta[B,D,L], A[D,N], Bm[B,N,L], Cm[B,N,L], Dskip[D]) -> y[B,D,L]`.
pub(crate) fn mamba_scan(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let u = ctx.input(0)?;
    let [b, d, l] = <[Dim; 3]>::try_from(rank_dims(ctx, u, 3, "u")?).map_err(|_| ctx.unsupported())?;
    let n = rank_dims(ctx, ctx.input(2)?, 2, "A")?[1].clone();
    check(ctx, ctx.input(1)?, &[b.clone(), d.clone(), l.clone()], "delta")?;
    check(ctx, ctx.input(2)?, &[d.clone(), n.clone()], "A")?;
    check(ctx, ctx.input(3)?, &[b.clone(), n.clone(), l.clone()], "Bm")?;
    check(ctx, ctx.input(4)?, &[b, n, l], "Cm")?;
    check(ctx, ctx.input(5)?, &[d], "Dskip")?;
    Ok(vec![u.clone()])
}

/// SOFIE `GriffinRGLRU(x[B,L,D], a[B,L,D]) -> y[B,L,D]`.
pub(crate) fn griffin_rglru(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let xd = rank_dims(ctx, x, 3, "x")?;
    check(ctx, ctx.input(1)?, &xd, "a")?;
    Ok(vec![x.clone()])
}

/// SOFIE `RWKV_WKV6(r,k,v,w[B,H,T,Dh], u[H,Dh]) -> y[B,H,T,Dh]`.
pub(crate) fn rwkv_wkv6(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let r = ctx.input(0)?;
    let rd = rank_dims(ctx, r, 4, "r")?;
    for (i, what) in [(1, "k"), (2, "v"), (3, "w")] {
        check(ctx, ctx.input(i)?, &rd, what)?;
    }
    check(ctx, ctx.input(4)?, &[rd[1].clone(), rd[3].clone()], "u")?;
    Ok(vec![r.clone()])
}

/// `SelectiveScan`: out like u; final state `(B, D, N)`.
pub(crate) fn selective_scan(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let u = ctx.input(0)?;
    ctx.require_float(u)?;
    let ud = rank_dims(ctx, u, 3, "u")?;
    let (b, d, l) = (ud[0].clone(), ud[1].clone(), ud[2].clone());
    check(ctx, ctx.input(1)?, &ud, "delta")?;
    let n = rank_dims(ctx, ctx.input(2)?, 2, "A")?[1].clone();
    check(ctx, ctx.input(2)?, &[d.clone(), n.clone()], "A")?;
    for (i, what) in [(3, "Bm"), (4, "Cm")] {
        let t = ctx.input(i)?;
        match t.rank() {
            3 => check(ctx, t, &[b.clone(), n.clone(), l.clone()], what)?,
            4 => {
                let g = t.shape.dims()[1].clone();
                check(ctx, t, &[b.clone(), g.clone(), n.clone(), l.clone()], what)?;
                if let (Dim::Known(g), Dim::Known(dd)) = (g, &d)
                    && (g == 0 || dd % g != 0)
                {
                    return Err(ctx.mismatch(format!("{what}: {g} groups do not divide {dd} channels")));
                }
            }
            _ => return Err(ctx.mismatch(format!("{what} must be (B,N,L) or (B,G,N,L), got {t}"))),
        }
    }
    check_opt(ctx, 5, std::slice::from_ref(&d), "D")?;
    check_opt(ctx, 6, &ud, "z")?;
    check_opt(ctx, 7, std::slice::from_ref(&d), "delta_bias")?;
    let state = vec![b, d, n];
    check_opt(ctx, 8, &state, "initial_state")?;
    Ok(vec![u.clone(), f32_state(state)])
}

/// `SSDScan`: y like x; final state `(B, H, P, N)`.
pub(crate) fn ssd_scan(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let xd = rank_dims(ctx, x, 4, "x")?;
    let (b, l, h, p) = (xd[0].clone(), xd[1].clone(), xd[2].clone(), xd[3].clone());
    check(ctx, ctx.input(1)?, &[b.clone(), l.clone(), h.clone()], "dt")?;
    check(ctx, ctx.input(2)?, std::slice::from_ref(&h), "A")?;
    let bd = rank_dims(ctx, ctx.input(3)?, 4, "Bm")?;
    let (g, n) = (bd[2].clone(), bd[3].clone());
    check(ctx, ctx.input(3)?, &[b.clone(), l.clone(), g.clone(), n.clone()], "Bm")?;
    check(ctx, ctx.input(4)?, &[b.clone(), l, g.clone(), n.clone()], "Cm")?;
    if let (Dim::Known(h), Dim::Known(g)) = (&h, &g)
        && (*g == 0 || h % g != 0)
    {
        return Err(ctx.mismatch(format!("{g} groups do not divide {h} heads")));
    }
    if let Some(dskip) = ctx.opt(5) {
        let hp = match (&h, &p) {
            (Dim::Known(h), Dim::Known(p)) => h.checked_mul(*p).map(Dim::Known),
            _ => None,
        };
        let ok = check(ctx, dskip, std::slice::from_ref(&h), "D").is_ok()
            || hp.is_some_and(|hp| check(ctx, dskip, &[hp], "D").is_ok());
        if !ok && dskip.rank() != 1 {
            return Err(ctx.mismatch(format!("D must be (H) or (H*P), got {dskip}")));
        }
    }
    check_opt(ctx, 6, &xd, "z")?;
    check_opt(ctx, 7, std::slice::from_ref(&h), "dt_bias")?;
    let state = vec![b, h, p, n];
    check_opt(ctx, 8, &state, "initial_state")?;
    Ok(vec![x.clone(), f32_state(state)])
}

/// `RGLRU`: y like x; final state `(B, W)`.
pub(crate) fn rglru(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let xd = rank_dims(ctx, x, 3, "x")?;
    check(ctx, ctx.input(1)?, &xd, "a")?;
    check_opt(ctx, 2, &xd[..2], "reset")?;
    let state = vec![xd[0].clone(), xd[2].clone()];
    check_opt(ctx, 3, &state, "initial_state")?;
    Ok(vec![x.clone(), f32_state(state)])
}

/// `LinearScan`: y like x; final state `(B, W)`.
pub(crate) fn linear_scan(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let xd = rank_dims(ctx, x, 3, "x")?;
    check(ctx, ctx.input(1)?, &xd, "a")?;
    let state = vec![xd[0].clone(), xd[2].clone()];
    check_opt(ctx, 2, &state, "initial_state")?;
    Ok(vec![x.clone(), f32_state(state)])
}

/// `WKV6`: y like r; final state `(B, H, N, N)`.
pub(crate) fn wkv6(ctx: &mut Ctx, layout: Wkv6Layout) -> Result<Vec<TensorInfo>, PlanError> {
    let r = ctx.input(0)?;
    ctx.require_float(r)?;
    let rd = rank_dims(ctx, r, 4, "r")?;
    for (i, what) in [(1, "k"), (2, "v"), (3, "w")] {
        check(ctx, ctx.input(i)?, &rd, what)?;
    }
    let (b, h, n) = match layout {
        Wkv6Layout::Bthn => (rd[0].clone(), rd[2].clone(), rd[3].clone()),
        Wkv6Layout::Bhtn => (rd[0].clone(), rd[1].clone(), rd[3].clone()),
    };
    check(ctx, ctx.input(4)?, &[h.clone(), n.clone()], "u")?;
    let state = vec![b, h, n.clone(), n];
    check_opt(ctx, 5, &state, "initial_state")?;
    Ok(vec![r.clone(), f32_state(state)])
}

/// `CausalConvWithState`: y like x (`(B, D, L)`, or `(B, L, D)` channels-last); final state
/// `(B, D, K-1)` of x's dtype (as the ONNX node
/// tests expect: `test_causal_conv_with_state_fp16`).
pub(crate) fn causal_conv(ctx: &mut Ctx, channels_last: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let mut xd = rank_dims(ctx, x, 3, "x")?;
    if channels_last {
        // (B, L, D): the checks below read (B, D, L).
        xd.swap(1, 2);
    }
    let wd = rank_dims(ctx, ctx.input(1)?, 2, "weight")?;
    ctx.unify(&wd[0], &xd[1], "weight channels")?;
    let Dim::Known(k) = wd[1] else { return Err(ctx.attr("conv width must be known")) };
    if k == 0 {
        return Err(ctx.attr("conv width is 0"));
    }
    check_opt(ctx, 2, &xd[1..2], "bias")?;
    let state = vec![xd[0].clone(), xd[1].clone(), Dim::Known(k - 1)];
    check_opt(ctx, 3, &state, "initial_state")?;
    Ok(vec![x.clone(), TensorInfo { dtype: x.dtype, shape: Shape(state) }])
}
