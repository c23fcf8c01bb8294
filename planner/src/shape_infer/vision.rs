//! Losses, grid sampling and the selection operators whose output lengths depend on data
//! (NonMaxSuppression, Compress, Unique: fresh symbols, as for NonZero).

use super::Ctx;
use crate::error::PlanError;
use crate::op::{CenterCropPad, Compress, Dft, LossReduction, MaxUnpool, RoiAlign, Unique};
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: input `(N, C, d...)`, target
/// `(N, d...)` integer, weight? `(C)`; loss is the target's shape (reduction none) or a scalar;
/// SoftmaxCrossEntropyLoss's log_prob is the input's info.
pub(crate) fn loss(ctx: &mut Ctx, reduction: LossReduction) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, target) = (ctx.input(0)?, ctx.input(1)?);
    ctx.require_float(x)?;
    if !matches!(target.dtype, DType::I64 | DType::I32) {
        return Err(ctx.dtype(format!("target must be int32 or int64, got {}", target.dtype)));
    }
    if x.rank() < 2 || target.rank() + 1 != x.rank() {
        return Err(ctx.mismatch(format!("input {x} must be (N, C, d...) and target {target} (N, d...)")));
    }
    let (xd, td) = (x.shape.dims(), target.shape.dims());
    ctx.unify(&xd[0], &td[0], "batch")?;
    for (a, b) in xd[2..].iter().zip(&td[1..]) {
        ctx.unify(a, b, "spatial dims")?;
    }
    if let Some(w) = ctx.opt(2) {
        ctx.require_rank(w, 1, "weight")?;
        ctx.unify(&w.shape.dims()[0], &xd[1], "weight length vs classes")?;
        ctx.same_dtype(&[x, w])?;
    }
    let loss_shape = match reduction {
        LossReduction::None => target.shape.clone(),
        LossReduction::Sum | LossReduction::Mean => Shape(Vec::new()),
    };
    Ok(vec![TensorInfo { dtype: x.dtype, shape: loss_shape }, x.clone()])
}

/// GridSample: X `(N, C, D1..Dr)`, grid `(N, O1..Or, r)` -> `(N, C, O1..Or)`.
pub(crate) fn grid_sample(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, grid) = (ctx.input(0)?, ctx.input(1)?);
    ctx.require_float(x)?;
    ctx.require_float(grid)?;
    let r = x.rank().saturating_sub(2);
    if r == 0 || grid.rank() != r + 2 {
        return Err(ctx.mismatch(format!("X {x} and grid {grid} need ranks r + 2 with r >= 1")));
    }
    let gd = grid.shape.dims();
    if let Dim::Known(k) = gd[r + 1]
        && k != r
    {
        return Err(ctx.mismatch(format!("grid {grid} must end in {r} coordinates")));
    }
    let n = ctx.unify(&x.shape.dims()[0], &gd[0], "batch")?;
    let mut dims = vec![n, x.shape.dims()[1].clone()];
    dims.extend_from_slice(&gd[1..=r]);
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// NonMaxSuppression: `(selected, 3)` I64.
pub(crate) fn non_max_suppression(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (boxes, scores) = (ctx.input(0)?, ctx.input(1)?);
    ctx.require_rank(boxes, 3, "boxes")?;
    ctx.require_rank(scores, 3, "scores")?;
    let count = ctx.fresh();
    Ok(vec![TensorInfo { dtype: DType::I64, shape: Shape(vec![count, Dim::Known(3)]) }])
}

/// Shrink, LRN: the input's info (numeric / float).
pub(crate) fn same_as_input(ctx: &mut Ctx, float_only: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.dtype == DType::Bool || (float_only && !x.dtype.is_float()) {
        return Err(ctx.dtype(format!("unsupported input dtype {}", x.dtype)));
    }
    Ok(vec![x.clone()])
}

/// Compress: the selected length is a fresh symbol.
pub(crate) fn compress(ctx: &mut Ctx, c: &Compress) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, cond) = (ctx.input(0)?, ctx.input(1)?);
    if cond.dtype != DType::Bool {
        return Err(ctx.dtype(format!("condition must be bool, got {}", cond.dtype)));
    }
    ctx.require_rank(cond, 1, "condition")?;
    let dims = match c.axis {
        None => vec![ctx.fresh()],
        Some(axis) => {
            let axis = ctx.axis(axis, x.rank())?;
            let mut dims = x.shape.0.clone();
            dims[axis] = ctx.fresh();
            dims
        }
    };
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// ReverseSequence: the input's info.
pub(crate) fn reverse_sequence(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, lens) = (ctx.input(0)?, ctx.input(1)?);
    if x.rank() < 2 {
        return Err(ctx.mismatch(format!("input {x} must have rank >= 2")));
    }
    ctx.require_rank(lens, 1, "sequence_lens")?;
    Ok(vec![x.clone()])
}

/// Unique: Y has a fresh length along the axis (or is 1-D); indices and counts are `(U)`,
/// inverse_indices the length of the axis (or of the flattened input).
pub(crate) fn unique(ctx: &mut Ctx, u: &Unique) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let found = ctx.fresh();
    let (y, inverse) = match u.axis {
        None => {
            let total = x.shape.dims().iter().try_fold(1usize, |acc, d| match d {
                Dim::Known(k) => acc.checked_mul(*k),
                Dim::Symbol(_) => None,
            });
            let inverse = total.map_or_else(|| ctx.fresh(), Dim::Known);
            (Shape(vec![found.clone()]), inverse)
        }
        Some(axis) => {
            let axis = ctx.axis(axis, x.rank())?;
            let mut dims = x.shape.0.clone();
            let inverse = std::mem::replace(&mut dims[axis], found.clone());
            (Shape(dims), inverse)
        }
    };
    let i64s = |d: Dim| TensorInfo { dtype: DType::I64, shape: Shape(vec![d]) };
    Ok(vec![TensorInfo { dtype: x.dtype, shape: y }, i64s(found.clone()), i64s(inverse), i64s(found)])
}

/// Det: `(*, M, M)` -> `(*)`.
pub(crate) fn det(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let r = x.rank();
    if r < 2 {
        return Err(ctx.mismatch(format!("input {x} must have rank >= 2")));
    }
    let d = x.shape.dims();
    ctx.unify(&d[r - 2], &d[r - 1], "square matrices")?;
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(d[..r - 2].to_vec()) }])
}

/// DFT: the input with the transformed axis resized (`N`, `N/2 + 1` one-sided forward, or `N`
/// real values for the one-sided inverse) and the last dim 2 (1 for the one-sided inverse).
/// An axis or dft_length known only at run time leaves the affected dims fresh.
pub(crate) fn dft(ctx: &mut Ctx, d: &Dft) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let r = x.rank();
    if r < 2 || !matches!(x.shape.dims()[r - 1], Dim::Known(1 | 2) | Dim::Symbol(_)) {
        return Err(ctx.mismatch(format!("input {x} must end in 1 or 2 components")));
    }
    let axis = match d.axis {
        Some(a) => Some(a),
        None if ctx.opt(2).is_none() => Some(-2),
        None => ctx.ints(2).and_then(|v| v.first().copied()),
    };
    let length = match ctx.opt(1) {
        None => Some(None),
        Some(_) => ctx.ints(1).and_then(|v| v.first().copied()).map(Some),
    };
    let mut dims = x.shape.0.clone();
    dims[r - 1] = Dim::Known(if d.inverse && d.onesided { 1 } else { 2 });
    let Some(axis) = axis else {
        for dim in &mut dims[..r - 1] {
            *dim = ctx.fresh();
        }
        return Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }]);
    };
    let ax = ctx.axis(axis, r)?;
    if ax == r - 1 {
        return Err(ctx.attr("axis must not be the component axis"));
    }
    let n = match (length, &x.shape.dims()[ax]) {
        (Some(Some(n)), _) => match usize::try_from(n) {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(ctx.attr(format!("dft_length {n} must be positive"))),
        },
        (Some(None), Dim::Known(m)) if d.inverse && d.onesided => Some(2 * m.saturating_sub(1)),
        (Some(None), Dim::Known(m)) => Some(*m),
        _ => None,
    };
    let out = n.map(|n| if d.onesided && !d.inverse { n / 2 + 1 } else { n });
    dims[ax] = match out {
        Some(m) => Dim::Known(m),
        None if length == Some(None) && !d.onesided => dims[ax].clone(),
        None => ctx.fresh(),
    };
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// CenterCropPad: the input with each listed axis set to its target length (fresh when the
/// shape input is not known).
pub(crate) fn center_crop_pad(ctx: &mut Ctx, c: &CenterCropPad) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let r = x.rank();
    let axes = match &c.axes {
        Some(a) => ctx.axes(a, r)?,
        None => (0..r).collect(),
    };
    let mut dims = x.shape.0.clone();
    match ctx.ints(1) {
        Some(target) if target.len() == axes.len() => {
            for (&a, &t) in axes.iter().zip(&target) {
                dims[a] = Dim::Known(
                    usize::try_from(t).map_err(|_| ctx.attr(format!("negative target length {t}")))?,
                );
            }
        }
        Some(target) => return Err(ctx.mismatch(format!("shape {target:?} does not match axes {axes:?}"))),
        None => {
            for &a in &axes {
                dims[a] = ctx.fresh();
            }
        }
    }
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// Col2Im: `(N, C·∏block, L)` -> `(N, C, image_shape...)`; C is known when the block shape is.
pub(crate) fn col2im(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_rank(x, 3, "input")?;
    let image = ctx.ints(1);
    let block = ctx.ints(2);
    let spatial =
        image.as_ref().map(Vec::len).or(block.as_ref().map(Vec::len)).ok_or_else(|| ctx.unsupported())?;
    let channels = match (&x.shape.dims()[1], &block) {
        (Dim::Known(cb), Some(b)) => {
            let prod =
                b.iter().try_fold(1usize, |acc, &k| usize::try_from(k).ok().and_then(|k| acc.checked_mul(k)));
            match prod {
                Some(p) if p > 0 && cb % p == 0 => Dim::Known(cb / p),
                _ => return Err(ctx.mismatch(format!("block shape {b:?} does not divide {cb}"))),
            }
        }
        _ => ctx.fresh(),
    };
    let mut dims = vec![x.shape.dims()[0].clone(), channels];
    match image {
        Some(img) => {
            for v in img {
                dims.push(Dim::Known(
                    usize::try_from(v).map_err(|_| ctx.attr(format!("negative image size {v}")))?,
                ));
            }
        }
        None => dims.extend(ctx.fresh_dims(spatial)),
    }
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// AffineGrid: theta `(N, r, r+1)`, size `(N, C, D1..Dr)` -> `(N, D1..Dr, r)`.
pub(crate) fn affine_grid(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let theta = ctx.input(0)?;
    ctx.require_float(theta)?;
    ctx.require_rank(theta, 3, "theta")?;
    let r = match theta.shape.dims()[1] {
        Dim::Known(r @ (2 | 3)) => r,
        _ => return Err(ctx.mismatch(format!("theta {theta} must be (N, 2, 3) or (N, 3, 4)"))),
    };
    let mut dims = vec![theta.shape.dims()[0].clone()];
    match ctx.ints(1) {
        Some(size) if size.len() == r + 2 => {
            for &v in &size[2..] {
                dims.push(Dim::Known(
                    usize::try_from(v).map_err(|_| ctx.attr(format!("negative size {v}")))?,
                ));
            }
        }
        Some(size) => return Err(ctx.mismatch(format!("size {size:?} must have {} entries", r + 2))),
        None => dims.extend(ctx.fresh_dims(r)),
    }
    dims.push(Dim::Known(r));
    Ok(vec![TensorInfo { dtype: theta.dtype, shape: Shape(dims) }])
}

/// TensorScatter: the cache's info.
pub(crate) fn tensor_scatter(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (cache, update) = (ctx.input(0)?, ctx.input(1)?);
    ctx.same_dtype(&[cache, update])?;
    if cache.rank() != update.rank() {
        return Err(ctx.mismatch(format!("cache {cache} and update {update} differ in rank")));
    }
    Ok(vec![cache.clone()])
}

/// RoiAlign: `(R, C, output_height, output_width)`.
pub(crate) fn roi_align(ctx: &mut Ctx, r: &RoiAlign) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, rois, idx) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    ctx.require_float(x)?;
    ctx.require_rank(x, 4, "X")?;
    ctx.require_rank(rois, 2, "rois")?;
    ctx.require_rank(idx, 1, "batch_indices")?;
    let n = ctx.unify(&rois.shape.dims()[0], &idx.shape.dims()[0], "number of rois")?;
    let dims = vec![n, x.shape.dims()[1].clone(), Dim::Known(r.output_height), Dim::Known(r.output_width)];
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// MaxUnpool: `output_shape` when known, else `(in − 1) · stride − pads + kernel` per axis.
pub(crate) fn max_unpool(ctx: &mut Ctx, m: &MaxUnpool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let r = x.rank();
    let s = m.kernel_shape.len();
    if r != s + 2 {
        return Err(ctx.mismatch(format!("X {x} needs {s} spatial dims")));
    }
    if ctx.opt(2).is_some() {
        let dims = match ctx.ints(2) {
            Some(v) if v.len() == r => v
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .map(Dim::Known)
                        .map_err(|_| ctx.attr(format!("negative output dim {d}")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(v) => return Err(ctx.mismatch(format!("output_shape {v:?} must have {r} entries"))),
            None => ctx.fresh_dims(r),
        };
        return Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }]);
    }
    let mut dims = x.shape.dims()[..2].to_vec();
    for d in 0..s {
        let stride = m.strides.get(d).copied().unwrap_or(1);
        let pads = m.pads.get(d).copied().unwrap_or(0) + m.pads.get(d + s).copied().unwrap_or(0);
        dims.push(match &x.shape.dims()[d + 2] {
            Dim::Known(n) => {
                let full = n.saturating_sub(1) * stride + m.kernel_shape[d];
                Dim::Known(full.checked_sub(pads).ok_or_else(|| ctx.attr("pads exceed the unpooled size"))?)
            }
            Dim::Symbol(_) => ctx.fresh(),
        });
    }
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// DeformConv: `(N, W.shape[0], offset spatial...)`.
pub(crate) fn deform_conv(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, w, offset) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    ctx.require_float(x)?;
    ctx.same_dtype(&[x, w, offset])?;
    if x.rank() < 3 || w.rank() != x.rank() || offset.rank() != x.rank() {
        return Err(ctx.mismatch(format!("X {x}, W {w} and offset {offset} need one rank >= 3")));
    }
    let n = ctx.unify(&x.shape.dims()[0], &offset.shape.dims()[0], "batch")?;
    let mut dims = vec![n, w.shape.dims()[0].clone()];
    dims.extend_from_slice(&offset.shape.dims()[2..]);
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// STFT: `(B, frames, bins, 2)`; frames and bins are fresh unless the frame step and length
/// (input 3, else the window's length, else the signal's) are known.
pub(crate) fn stft(ctx: &mut Ctx, onesided: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    ctx.require_rank(x, 3, "signal")?;
    let known = |d: &Dim| match d {
        Dim::Known(n) => Some(*n),
        Dim::Symbol(_) => None,
    };
    let len = known(&x.shape.dims()[1]);
    let frame = match (ctx.opt(3), ctx.opt(2)) {
        (Some(_), _) => ctx.ints(3).and_then(|v| v.first().copied()).and_then(|v| usize::try_from(v).ok()),
        (None, Some(w)) => w.shape.dims().first().and_then(known),
        (None, None) => len,
    };
    let step = ctx.ints(1).and_then(|v| v.first().copied()).and_then(|v| usize::try_from(v).ok());
    let frames = match (len, frame, step) {
        (Some(l), Some(f), Some(s)) if s > 0 && f <= l => Dim::Known(1 + (l - f) / s),
        _ => ctx.fresh(),
    };
    let bins = match frame {
        Some(f) if onesided => Dim::Known(f / 2 + 1),
        Some(f) => Dim::Known(f),
        None => ctx.fresh(),
    };
    let dims = vec![x.shape.dims()[0].clone(), frames, bins, Dim::Known(2)];
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}
