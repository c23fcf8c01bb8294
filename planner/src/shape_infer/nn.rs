//! MatMul, Gemm, convolutions, pooling, normalizations and softmax.
//!
//! Spatial output sizes of symbolic inputs stay symbolic only when the window is the identity
//! (1-wide, stride 1, unpadded, or SAME with stride 1); otherwise they get a fresh symbol.

use super::Ctx;
use super::dims::Window;
use super::elementwise::{broadcast_infos, unidirectional};
use crate::error::PlanError;
use crate::op::{AutoPad, AveragePool, Conv, ConvTranspose, FusedConv, FusedGemm, Gemm, LpPool, MaxPool};
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// NumPy `matmul`: 1-D operands are promoted and the added dim removed; batch dims broadcast.
pub(crate) fn matmul(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[a, b])?;
    matmul_of(ctx, a, b, dtype)
}

/// `MatMulInteger`: [`matmul`]'s shapes of uint8 / int8 operands, an int32 result.
pub(crate) fn matmul_integer(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    eight_bit(ctx, &[(a, "A"), (b, "B")])?;
    matmul_of(ctx, a, b, DType::I32)
}

/// Fails unless every `(info, name)` is uint8 or int8 (the quantized operators' operands).
fn eight_bit(ctx: &Ctx, operands: &[(&TensorInfo, &str)]) -> Result<(), PlanError> {
    match operands.iter().find(|(t, _)| !matches!(t.dtype, DType::U8 | DType::I8)) {
        Some((t, what)) => Err(ctx.mismatch(format!("{what} must be uint8 or int8, got {t}"))),
        None => Ok(()),
    }
}

/// `QLinearMatMul`: [`matmul`]'s shapes of A (input 0) and B (input 3), in y_zero_point's dtype.
pub(crate) fn qlinear_matmul(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b, zy) = (ctx.input(0)?, ctx.input(3)?, ctx.input(7)?);
    eight_bit(ctx, &[(a, "a"), (b, "b"), (zy, "y_zero_point")])?;
    matmul_of(ctx, a, b, zy.dtype)
}

/// The dtypes QuantizeLinear makes (opset 25): 8- and 16-bit integers, int4 / uint4, int2 /
/// uint2, float8 and float4 (the GPU plan refuses all but the 8-bit integers by node).
fn quantized(d: DType) -> bool {
    matches!(d, DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::Coded(_))
}

/// `QuantizeLinear`: x's shape, in the zero point's dtype (or the `output_dtype`, or uint8).
pub(crate) fn quantize(ctx: &mut Ctx, q: &crate::op::Quantize) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let dtype = match ctx.opt(2) {
        Some(zp) => zp.dtype,
        None => q.output_dtype.unwrap_or(DType::U8),
    };
    if !quantized(dtype) {
        return Err(ctx.attr(format!("quantizing to {dtype} (an integer or float8 / float4 type)")));
    }
    Ok(vec![TensorInfo { dtype, shape: x.shape.clone() }])
}

/// `DequantizeLinear`: x's shape, in the scale's dtype.
pub(crate) fn dequantize(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    ctx.require_float(scale)?;
    if !(quantized(x.dtype) || x.dtype == DType::I32) {
        return Err(ctx.mismatch(format!("x must be a quantized integer or float8 / float4 type, got {x}")));
    }
    Ok(vec![TensorInfo { dtype: scale.dtype, shape: x.shape.clone() }])
}

/// `DynamicQuantizeLinear`: y (uint8, x's shape), a scalar f32 scale and a scalar uint8 zero point.
pub(crate) fn dynamic_quantize(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.dtype != DType::F32 {
        return Err(ctx.mismatch(format!("x must be float32, got {x}")));
    }
    Ok(vec![
        TensorInfo { dtype: DType::U8, shape: x.shape.clone() },
        TensorInfo::scalar(DType::F32),
        TensorInfo::scalar(DType::U8),
    ])
}

/// [`matmul`]'s shape rule with the result in `dtype`.
fn matmul_of(
    ctx: &mut Ctx,
    a: &TensorInfo,
    b: &TensorInfo,
    dtype: DType,
) -> Result<Vec<TensorInfo>, PlanError> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(ctx.mismatch(format!("MatMul needs rank >= 1, got {a} and {b}")));
    }
    let mut ad = a.shape.0.clone();
    let mut bd = b.shape.0.clone();
    let a_vec = ad.len() == 1;
    let b_vec = bd.len() == 1;
    if a_vec {
        ad.insert(0, Dim::Known(1));
    }
    if b_vec {
        bd.push(Dim::Known(1));
    }
    let (m, k1) = (ad[ad.len() - 2].clone(), ad[ad.len() - 1].clone());
    let (k2, n) = (bd[bd.len() - 2].clone(), bd[bd.len() - 1].clone());
    ctx.unify(&k1, &k2, &format!("inner dims of {a} @ {b}"))?;
    let batch_a = TensorInfo { dtype, shape: Shape(ad[..ad.len() - 2].to_vec()) };
    let batch_b = TensorInfo { dtype, shape: Shape(bd[..bd.len() - 2].to_vec()) };
    let mut dims = broadcast_infos(ctx, &[&batch_a, &batch_b])?.0;
    if !a_vec {
        dims.push(m);
    }
    if !b_vec {
        dims.push(n);
    }
    Ok(vec![TensorInfo { dtype, shape: Shape(dims) }])
}

/// `Gemm` on 2-D A and B; C broadcasts to `(M, N)`.
pub(crate) fn gemm(ctx: &mut Ctx, g: &Gemm) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[a, b])?;
    ctx.require_rank(a, 2, "A")?;
    ctx.require_rank(b, 2, "B")?;
    let (ad, bd) = (a.shape.dims(), b.shape.dims());
    let (m, ka) = if g.trans_a { (&ad[1], &ad[0]) } else { (&ad[0], &ad[1]) };
    let (kb, n) = if g.trans_b { (&bd[1], &bd[0]) } else { (&bd[0], &bd[1]) };
    ctx.unify(ka, kb, "inner dims of A and B")?;
    let y = TensorInfo { dtype, shape: Shape(vec![m.clone(), n.clone()]) };
    if let Some(c) = ctx.opt(2) {
        ctx.same_dtype(&[a, c])?;
        unidirectional(ctx, c, &y, "C")?;
    }
    Ok(vec![y])
}

/// A [`FusedGemm`]: its GEMM's operands checked as the Gemm or MatMul would be, its program
/// inputs of the same dtype, and the output `dims` (holding the GEMM result's elements).
pub(crate) fn fused_gemm(ctx: &mut Ctx, f: &FusedGemm) -> Result<Vec<TensorInfo>, PlanError> {
    let gemm_out = match &f.gemm {
        Some(g) => gemm(ctx, g)?,
        None => matmul(ctx)?,
    };
    fused_output(ctx, &gemm_out[0], 3, &f.dims)
}

/// A [`FusedConv`]: its Conv's operands checked as the Conv would be, its program inputs of the
/// same dtype, and the output `dims` (holding the Conv result's elements).
pub(crate) fn fused_conv(ctx: &mut Ctx, f: &FusedConv) -> Result<Vec<TensorInfo>, PlanError> {
    let conv_out = conv(ctx, &f.conv)?;
    fused_output(ctx, &conv_out[0], 3, &f.dims)
}

/// The output of a fused node whose producer made `y` and whose program reads inputs
/// `first_extra..` as well: all of one dtype, `dims` holding `y`'s elements.
pub(crate) fn fused_output(
    ctx: &mut Ctx,
    y: &TensorInfo,
    first_extra: usize,
    dims: &[usize],
) -> Result<Vec<TensorInfo>, PlanError> {
    let extras: Vec<&TensorInfo> = (first_extra..ctx.n_inputs()).filter_map(|i| ctx.opt(i)).collect();
    let mut all = vec![y];
    all.extend(extras.iter().copied());
    let dtype = ctx.same_dtype(&all)?;
    if let Some(d) = y.shape.as_known()
        && d.iter().product::<usize>() != dims.iter().product::<usize>()
    {
        return Err(
            ctx.mismatch(format!("the fused node's producer gives {y}, which does not hold {dims:?}"))
        );
    }
    Ok(vec![TensorInfo { dtype, shape: Shape::known(dims) }])
}

/// Pooling attributes common to MaxPool, AveragePool and LpPool.
pub(crate) struct PoolAttrs {
    auto_pad: AutoPad,
    ceil_mode: bool,
    dilations: Vec<usize>,
    kernel_shape: Vec<usize>,
    pads: Vec<usize>,
    strides: Vec<usize>,
}

impl PoolAttrs {
    fn new(
        auto_pad: AutoPad,
        ceil_mode: bool,
        dil: &[usize],
        kernel: &[usize],
        pads: &[usize],
        strides: &[usize],
    ) -> Self {
        PoolAttrs {
            auto_pad,
            ceil_mode,
            dilations: dil.to_vec(),
            kernel_shape: kernel.to_vec(),
            pads: pads.to_vec(),
            strides: strides.to_vec(),
        }
    }
}

impl From<&MaxPool> for PoolAttrs {
    fn from(p: &MaxPool) -> Self {
        PoolAttrs::new(p.auto_pad, p.ceil_mode, &p.dilations, &p.kernel_shape, &p.pads, &p.strides)
    }
}

impl From<&AveragePool> for PoolAttrs {
    fn from(p: &AveragePool) -> Self {
        PoolAttrs::new(p.auto_pad, p.ceil_mode, &p.dilations, &p.kernel_shape, &p.pads, &p.strides)
    }
}

impl From<&LpPool> for PoolAttrs {
    fn from(p: &LpPool) -> Self {
        PoolAttrs::new(p.auto_pad, p.ceil_mode, &p.dilations, &p.kernel_shape, &p.pads, &p.strides)
    }
}

/// Output spatial dims of a sliding window over `spatial` input dims.
#[allow(clippy::too_many_arguments)]
fn spatial_out(
    ctx: &mut Ctx,
    spatial: &[Dim],
    kernel: &[usize],
    strides: &[usize],
    pads: &[usize],
    dilations: &[usize],
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> Result<Vec<Dim>, PlanError> {
    let n = spatial.len();
    let per_axis = |v: &[usize], name: &str, default: usize| -> Result<Vec<usize>, PlanError> {
        match v.len() {
            0 => Ok(vec![default; n]),
            l if l == n => Ok(v.to_vec()),
            l => Err(ctx.attr(format!("{name} has {l} entries for {n} spatial dims"))),
        }
    };
    let strides = per_axis(strides, "strides", 1)?;
    let dilations = per_axis(dilations, "dilations", 1)?;
    if kernel.len() != n {
        return Err(ctx.attr(format!("kernel_shape {kernel:?} does not match {n} spatial dims")));
    }
    let pads = match pads.len() {
        0 => vec![0; 2 * n],
        l if l == 2 * n => pads.to_vec(),
        l => return Err(ctx.attr(format!("pads has {l} entries for {n} spatial dims"))),
    };
    if strides.contains(&0) || dilations.contains(&0) || kernel.contains(&0) {
        return Err(ctx.attr("zero stride, dilation or kernel size"));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (pb, pe) = if auto_pad == AutoPad::NotSet { (pads[i], pads[n + i]) } else { (0, 0) };
        let w = Window {
            kernel: kernel[i],
            stride: strides[i],
            dilation: dilations[i],
            pad_begin: pb,
            pad_end: pe,
            ceil_mode,
        };
        let d = match (&spatial[i], auto_pad) {
            (Dim::Known(x), AutoPad::SameUpper | AutoPad::SameLower) => Dim::Known(x.div_ceil(strides[i])),
            (Dim::Known(x), _) => match w.output(*x) {
                Some(o) => Dim::Known(o),
                None => {
                    return Err(
                        ctx.mismatch(format!("window {} does not fit input size {x} on axis {i}", kernel[i]))
                    );
                }
            },
            (Dim::Symbol(_), AutoPad::SameUpper | AutoPad::SameLower) if strides[i] == 1 => {
                spatial[i].clone()
            }
            (Dim::Symbol(_), AutoPad::NotSet | AutoPad::Valid) if w.is_identity() => spatial[i].clone(),
            (Dim::Symbol(_), _) => ctx.fresh(),
        };
        out.push(d);
    }
    Ok(out)
}

/// `Conv`: X `(N, C, D...)`, W `(M, C/group, k...)`, B? `(M)` -> `(N, M, out...)`.
pub(crate) fn conv(ctx: &mut Ctx, c: &Conv) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[x, w])?;
    conv_of(ctx, c, (x, w, ctx.opt(2)), dtype)
}

/// `ConvInteger` (x, w of uint8 / int8, an int32 result) and `QLinearConv` (x input 0, w input
/// 3, bias input 8, in y_zero_point's dtype): [`conv`]'s shapes.
pub(crate) fn conv_quantized(ctx: &mut Ctx, c: &Conv, qlinear: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, w) = (ctx.input(0)?, ctx.input(if qlinear { 3 } else { 1 })?);
    eight_bit(ctx, &[(x, "x"), (w, "w")])?;
    let dtype = if qlinear { ctx.input(7)?.dtype } else { DType::I32 };
    conv_of(ctx, c, (x, w, if qlinear { ctx.opt(8) } else { None }), dtype)
}

/// [`conv`]'s shape rule on `(x, w, bias)`, the result in `dtype`.
fn conv_of(
    ctx: &mut Ctx,
    c: &Conv,
    (x, w, bias): (&TensorInfo, &TensorInfo, Option<&TensorInfo>),
    dtype: DType,
) -> Result<Vec<TensorInfo>, PlanError> {
    if x.rank() < 3 || w.rank() != x.rank() {
        return Err(ctx.mismatch(format!("X {x} and W {w} must have the same rank >= 3")));
    }
    let (xd, wd) = (x.shape.dims(), w.shape.dims());
    if c.group == 0 {
        return Err(ctx.attr("group is 0"));
    }
    if let (Dim::Known(ci), Dim::Known(wc)) = (&xd[1], &wd[1])
        && *ci != wc.saturating_mul(c.group)
    {
        return Err(ctx.mismatch(format!("X has {ci} channels, W expects {wc} x group {}", c.group)));
    }
    let kernel = kernel_from(ctx, &c.kernel_shape, &wd[2..])?;
    let spatial = spatial_out(ctx, &xd[2..], &kernel, &c.strides, &c.pads, &c.dilations, c.auto_pad, false)?;
    if let Some(b) = bias {
        ctx.require_rank(b, 1, "B")?;
        ctx.unify(&b.shape.dims()[0], &wd[0], "bias length vs output channels")?;
    }
    let mut dims = vec![xd[0].clone(), wd[0].clone()];
    dims.extend(spatial);
    Ok(vec![TensorInfo { dtype, shape: Shape(dims) }])
}

/// `ConvTranspose`: X `(N, C, D...)`, W `(C, M/group, k...)` -> `(N, M, out...)`.
pub(crate) fn conv_transpose(ctx: &mut Ctx, c: &ConvTranspose) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[x, w])?;
    if x.rank() < 3 || w.rank() != x.rank() {
        return Err(ctx.mismatch(format!("X {x} and W {w} must have the same rank >= 3")));
    }
    let (xd, wd) = (x.shape.dims(), w.shape.dims());
    let n = x.rank() - 2;
    ctx.unify(&xd[1], &wd[0], "input channels")?;
    let kernel = kernel_from(ctx, &c.kernel_shape, &wd[2..])?;
    let get = |v: &[usize], i: usize, d: usize| v.get(i).copied().unwrap_or(d);
    let out_ch = match &wd[1] {
        Dim::Known(m) => Dim::Known(m.checked_mul(c.group).ok_or_else(|| ctx.attr("group overflows"))?),
        s if c.group == 1 => s.clone(),
        _ => ctx.fresh(),
    };
    let mut dims = vec![xd[0].clone(), out_ch];
    for i in 0..n {
        if !c.output_shape.is_empty() {
            dims.push(Dim::Known(get(&c.output_shape, i, 0)));
            continue;
        }
        let (s, dil, op) = (get(&c.strides, i, 1), get(&c.dilations, i, 1), get(&c.output_padding, i, 0));
        let d = match (&xd[2 + i], c.auto_pad) {
            (Dim::Known(x), AutoPad::SameUpper | AutoPad::SameLower) => {
                Dim::Known(x.checked_mul(s).ok_or_else(|| ctx.mismatch("output size overflows"))?)
            }
            (Dim::Known(x), _) => {
                let (pb, pe) = if c.auto_pad == AutoPad::Valid {
                    (0, 0)
                } else {
                    (get(&c.pads, i, 0), get(&c.pads, n + i, 0))
                };
                let full = s
                    .checked_mul(x.saturating_sub(1))
                    .and_then(|v| v.checked_add(op))
                    .and_then(|v| v.checked_add(kernel[i].saturating_sub(1).checked_mul(dil)?))
                    .and_then(|v| v.checked_add(1))
                    .ok_or_else(|| ctx.mismatch("output size overflows"))?;
                match full.checked_sub(pb.saturating_add(pe)) {
                    Some(o) => Dim::Known(o),
                    None => return Err(ctx.mismatch(format!("pads exceed output size on axis {i}"))),
                }
            }
            (Dim::Symbol(_), _) => ctx.fresh(),
        };
        dims.push(d);
    }
    Ok(vec![TensorInfo { dtype, shape: Shape(dims) }])
}

/// Kernel sizes from the attribute or, when empty, from W's known spatial dims.
fn kernel_from(ctx: &Ctx, attr: &[usize], w_spatial: &[Dim]) -> Result<Vec<usize>, PlanError> {
    if !attr.is_empty() {
        return Ok(attr.to_vec());
    }
    w_spatial
        .iter()
        .map(Dim::known)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ctx.attr("kernel_shape unknown: W has symbolic spatial dims"))
}

/// MaxPool / AveragePool / LpPool output `Y`.
pub(crate) fn pool(ctx: &mut Ctx, p: &PoolAttrs) -> Result<TensorInfo, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() < 3 {
        return Err(ctx.mismatch(format!("X must have rank >= 3, got {x}")));
    }
    let xd = x.shape.dims();
    let spatial = spatial_out(
        ctx,
        &xd[2..],
        &p.kernel_shape,
        &p.strides,
        &p.pads,
        &p.dilations,
        p.auto_pad,
        p.ceil_mode,
    )?;
    let mut dims = xd[..2].to_vec();
    dims.extend(spatial);
    Ok(TensorInfo { dtype: x.dtype, shape: Shape(dims) })
}

/// `GlobalAveragePool`, `GlobalMaxPool`: spatial dims become 1.
pub(crate) fn global_pool(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.mismatch(format!("X must have rank >= 2, got {x}")));
    }
    let mut dims = x.shape.dims()[..2].to_vec();
    dims.resize(x.rank(), Dim::Known(1));
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// `BatchNormalization`: Y like X; training mode adds running mean and var `(C)`.
pub(crate) fn batch_norm(ctx: &mut Ctx, training: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.mismatch(format!("X must have rank >= 2, got {x}")));
    }
    let c = &x.shape.dims()[1];
    for (i, what) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
        let t = ctx.input(i)?;
        ctx.require_rank(t, 1, what)?;
        ctx.unify(&t.shape.dims()[0], c, what)?;
    }
    let stat = TensorInfo { dtype: ctx.input(3)?.dtype, shape: Shape(vec![c.clone()]) };
    let mut outs = vec![x.clone()];
    if training {
        outs.extend([stat.clone(), stat]);
    }
    Ok(outs)
}

/// `InstanceNormalization`: Y like X; scale and B are `(C)`.
pub(crate) fn instance_norm(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() < 3 {
        return Err(ctx.mismatch(format!("X must have rank >= 3, got {x}")));
    }
    let c = &x.shape.dims()[1];
    for (i, what) in [(1, "scale"), (2, "B")] {
        let t = ctx.input(i)?;
        ctx.require_rank(t, 1, what)?;
        ctx.unify(&t.shape.dims()[0], c, what)?;
    }
    Ok(vec![x.clone()])
}

/// `LayerNormalization`: Y like X; Mean and InvStdDev keep dims before `axis`, 1 after.
pub(crate) fn layer_norm(ctx: &mut Ctx, axis: i64, stash: DType) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    let axis = ctx.axis(axis, x.rank())?;
    let norm = TensorInfo { dtype: x.dtype, shape: Shape(x.shape.dims()[axis..].to_vec()) };
    for i in 1..3 {
        if let Some(t) = ctx.opt(i) {
            unidirectional(ctx, t, &norm, if i == 1 { "scale" } else { "bias" })?;
        }
    }
    let mut stat = x.shape.dims()[..axis].to_vec();
    stat.resize(x.rank(), Dim::Known(1));
    let stat = TensorInfo { dtype: stash, shape: Shape(stat) };
    Ok(vec![x.clone(), stat.clone(), stat])
}

/// `GroupNormalization`: Y like X; C divisible by num_groups; scale and bias `(C)`.
pub(crate) fn group_norm(ctx: &mut Ctx, groups: usize) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.mismatch(format!("X must have rank >= 2, got {x}")));
    }
    if groups == 0 {
        return Err(ctx.attr("num_groups is 0"));
    }
    if let Dim::Known(c) = x.shape.dims()[1]
        && c % groups != 0
    {
        return Err(ctx.attr(format!("num_groups {groups} does not divide {c} channels")));
    }
    Ok(vec![x.clone()])
}

/// `RMSNormalization`: Y like X; scale broadcasts to the normalized dims.
pub(crate) fn rms_norm(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    ctx.require_float(x)?;
    let axis = ctx.axis(axis, x.rank())?;
    let norm = TensorInfo { dtype: x.dtype, shape: Shape(x.shape.dims()[axis..].to_vec()) };
    unidirectional(ctx, scale, &norm, "scale")?;
    Ok(vec![x.clone()])
}

/// `Softmax`, `LogSoftmax`, `Hardmax`: same info; the axis must be in range.
pub(crate) fn softmax(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    ctx.axis(axis, x.rank().max(1))?;
    Ok(vec![x.clone()])
}
