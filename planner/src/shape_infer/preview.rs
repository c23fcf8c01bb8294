//! `FlexAttention` (ai.onnx.preview) and the `ai.onnx.ml` operators `Binarizer`,
//! `ArrayFeatureExtractor` and `TreeEnsemble`.

use super::Ctx;
use crate::error::PlanError;
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// FlexAttention: Q `(B, Hq, L, E)`, K `(B, Hkv, S, E)`, V `(B, Hkv, S, Ev)` -> `(B, Hq, L, Ev)`.
pub(crate) fn flex_attention(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    ctx.require_float(q)?;
    let dtype = ctx.same_dtype(&[q, k, v])?;
    for (t, what) in [(q, "Q"), (k, "K"), (v, "V")] {
        ctx.require_rank(t, 4, what)?;
    }
    let (qd, kd, vd) = (q.shape.dims(), k.shape.dims(), v.shape.dims());
    let batch = ctx.unify(&qd[0], &kd[0], "batch of Q and K")?;
    let batch = ctx.unify(&batch, &vd[0], "batch of K and V")?;
    ctx.unify(&qd[3], &kd[3], "head size of Q and K")?;
    let kv_heads = ctx.unify(&kd[1], &vd[1], "heads of K and V")?;
    ctx.unify(&kd[2], &vd[2], "sequence of K and V")?;
    if let (Dim::Known(hq), Dim::Known(hkv)) = (&qd[1], &kv_heads)
        && (*hkv == 0 || hq % hkv != 0)
    {
        return Err(ctx.mismatch(format!("{hq} query heads not a multiple of {hkv} kv heads")));
    }
    Ok(vec![TensorInfo { dtype, shape: Shape(vec![batch, qd[1].clone(), qd[2].clone(), vd[3].clone()]) }])
}

/// Binarizer: same shape and dtype as the numeric input.
pub(crate) fn binarizer(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.dtype == DType::Bool {
        return Err(ctx.dtype(format!("unsupported input dtype {}", x.dtype)));
    }
    Ok(vec![x.clone()])
}

/// ArrayFeatureExtractor: data `[..., N]`, indices (n elements) -> `[..., n]`; 1-D data gives
/// `[1, n]`.
pub(crate) fn array_feature_extractor(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, idx) = (ctx.input(0)?, ctx.input(1)?);
    if !matches!(idx.dtype, DType::I64 | DType::I32) {
        return Err(ctx.dtype(format!("indices must be int64, got {}", idx.dtype)));
    }
    let n = match idx.shape.dims().iter().try_fold(1usize, |acc, d| match d {
        Dim::Known(k) => acc.checked_mul(*k),
        Dim::Symbol(_) => None,
    }) {
        Some(n) => Dim::Known(n),
        None => ctx.fresh(),
    };
    let dims = x.shape.dims();
    let mut out: Vec<Dim> = match dims.len() {
        0 => return Err(ctx.mismatch("data must have rank 1 or more")),
        1 => vec![Dim::Known(1)],
        r => dims[..r - 1].to_vec(),
    };
    out.push(n);
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(out) }])
}

/// TreeEnsemble: float X `(N, F)` -> `(N, n_targets)` in X's dtype.
pub(crate) fn tree_ensemble(ctx: &mut Ctx, n_targets: usize) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    ctx.require_rank(x, 2, "X")?;
    let n = x.shape.dims()[0].clone();
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(vec![n, Dim::Known(n_targets)]) }])
}
