//! Lowerings of the detection operators to `kernels_gpu::vision`: RoiAlign (`roi_align_f32`) and
//! DeformConv (`deform_conv_f32`, 1 to [`DEFORM_MAX_RANK`] spatial dims). Both check the CPU
//! reference's shape rules here, so that a kernel never sees operands it would read past; what
//! they refuse (other dtypes, higher ranks, inconsistent shapes) is the reason the node has no
//! GPU kernel.

use kernels_gpu::abi::{DEFORM_MAX_RANK, DeformConvParams, KernelId, RoiAlignParams};

use super::lower::{Lowered, dims};
use super::movement::{MoveNode, step};
use super::{Arg, PlanOptions, PlannedValue};
use crate::op::{DeformConv, RoiAlign};
use crate::tensor_info::DType;

/// ONNX RoiAlign of f32 X `(N, C, H, W)` at f32 rois `(R, 4)` with int64 (or int32) batch
/// indices `(R)`.
pub(super) fn roi_align(n: &MoveNode, a: &RoiAlign, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, rois, batch, y) = (n.input(0)?, n.input(1)?, n.input(2)?, n.output()?);
    let ((xd, xt), (rd, rt), (bd, bt)) = (dims(values, x)?, dims(values, rois)?, dims(values, batch)?);
    if (xt, rt) != (DType::F32, DType::F32) {
        return Err(format!("RoiAlign of {xt} X at {rt} rois: the kernel takes f32"));
    }
    if !matches!(bt, DType::I64 | DType::I32) {
        return Err(format!("batch_indices are {bt}; the kernel takes int64 or int32"));
    }
    let &[batch_n, c, h, w] = xd else { return Err(format!("X {xd:?} must be (N, C, H, W)")) };
    let r = bd.first().copied().unwrap_or(0);
    if bd.len() != 1 || rd != [r, 4] {
        return Err(format!("rois {rd:?} and batch_indices {bd:?} must be (R, 4) and (R)"));
    }
    if h == 0 || w == 0 {
        return Err(format!("RoiAlign over an empty image {xd:?}"));
    }
    let (oh, ow) = (a.output_height, a.output_width);
    let yd = dims(values, y)?.0;
    if yd != [r, c, oh, ow] {
        return Err(format!("output {yd:?} is not ({r}, {c}, {oh}, {ow})"));
    }
    let p = RoiAlignParams {
        n: batch_n as u64,
        c: c as u64,
        h: h as u64,
        w: w as u64,
        rois: r as u64,
        out_h: oh as u64,
        out_w: ow as u64,
        sampling_ratio: a.sampling_ratio as u64,
        spatial_scale: a.spatial_scale,
        half_pixel: a.half_pixel as u32,
        max: a.max as u32,
        index_bytes: bt.size_bytes() as u32,
    };
    let work = p.rois * p.c * p.out_h * p.out_w;
    let args = vec![Arg::Value(x), Arg::Value(rois), Arg::Value(batch), Arg::Value(y)];
    Ok(step(n.id, n.label.clone(), KernelId::RoiAlignF32, &p, work, o, args))
}

/// A per-axis attribute list: `default` on every axis when empty, else exactly `len` entries.
fn per_axis(v: &[usize], default: usize, len: usize, what: &str) -> Result<Vec<u64>, String> {
    match v.len() {
        0 => Ok(vec![default as u64; len]),
        k if k == len => Ok(v.iter().map(|&x| x as u64).collect()),
        k => Err(format!("{what} has {k} values where {len} are expected")),
    }
}

/// ONNX DeformConv of f32 X `(N, C, D...)`, W `(M, C / group, k...)`, offset
/// `(N, offset_group * prod(k) * r, O...)`, optional B `(M)` and mask
/// `(N, offset_group * prod(k), O...)`, over 1 to [`DEFORM_MAX_RANK`] spatial dims.
pub(super) fn deform_conv(n: &MoveNode, a: &DeformConv, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, w, off, y) = (n.input(0)?, n.input(1)?, n.input(2)?, n.output()?);
    let at = |k: usize| n.ins.get(k).copied().flatten();
    let (bias, mask) = (at(3), at(4));
    let ((xd, xt), (wd, wt), (od, ot)) = (dims(values, x)?, dims(values, w)?, dims(values, off)?);
    if (xt, wt, ot) != (DType::F32, DType::F32, DType::F32) {
        return Err(format!("DeformConv of {xt} X, {wt} W, {ot} offset: the kernel takes f32"));
    }
    let r = xd.len().saturating_sub(2);
    if r == 0 || wd.len() != r + 2 || od.len() != r + 2 {
        return Err(format!("X {xd:?}, W {wd:?} and offset {od:?} need one rank >= 3"));
    }
    if r > DEFORM_MAX_RANK {
        return Err(format!("DeformConv over {r} spatial dims (the kernel takes up to {DEFORM_MAX_RANK})"));
    }
    let (batch, c, m) = (xd[0], xd[1], wd[0]);
    let (group, og) = (a.group, a.offset_group);
    let kernel = if a.kernel_shape.is_empty() { wd[2..].to_vec() } else { a.kernel_shape.clone() };
    let (dil, stride, pads) = (
        per_axis(&a.dilations, 1, r, "dilations")?,
        per_axis(&a.strides, 1, r, "strides")?,
        per_axis(&a.pads, 0, 2 * r, "pads")?,
    );
    let kprod: usize = kernel.iter().product();
    let bad = group == 0
        || og == 0
        || !c.is_multiple_of(group)
        || !m.is_multiple_of(group)
        || !c.is_multiple_of(og)
        || wd[1] != c / group
        || wd[2..] != kernel[..]
        || od[0] != batch
        || od[1] != og * kprod * r;
    if bad {
        return Err(format!(
            "X {xd:?}, W {wd:?}, offset {od:?}, group {group}, offset_group {og} and kernel_shape \
             {kernel:?} disagree"
        ));
    }
    let out = &od[2..];
    if let Some(b) = bias {
        let (bd, bt) = dims(values, b)?;
        if bt != DType::F32 || bd != [m] {
            return Err(format!("B {bd:?} {bt} must be ({m}) f32"));
        }
    }
    if let Some(mk) = mask {
        let (md, mt) = dims(values, mk)?;
        if mt != DType::F32 || md.len() != r + 2 || md[..2] != [batch, og * kprod] || md[2..] != *out {
            return Err(format!("mask {md:?} {mt} does not match offset {od:?} (f32)"));
        }
    }
    let yd = dims(values, y)?.0;
    if yd.len() != r + 2 || yd[..2] != [batch, m] || yd[2..] != *out {
        return Err(format!("output {yd:?} is not ({batch}, {m}, {out:?})"));
    }
    let arr =
        |v: &[u64]| -> [u64; DEFORM_MAX_RANK] { std::array::from_fn(|d| v.get(d).copied().unwrap_or(1)) };
    let to_u64 = |v: &[usize]| v.iter().map(|&d| d as u64).collect::<Vec<u64>>();
    let p = DeformConvParams {
        n: batch as u64,
        c: c as u64,
        m: m as u64,
        points: out.iter().product::<usize>() as u64,
        kprod: kprod as u64,
        image: arr(&to_u64(&xd[2..])),
        kernel: arr(&to_u64(&kernel)),
        out: arr(&to_u64(out)),
        stride: arr(&stride),
        dilation: arr(&dil),
        pad_begin: std::array::from_fn(|d| if d < r { pads[d] } else { 0 }),
        group: u32::try_from(group).map_err(|_| format!("group {group} does not fit u32"))?,
        offset_group: u32::try_from(og).map_err(|_| format!("offset_group {og} does not fit u32"))?,
        rank: r as u32,
        has_bias: bias.is_some() as u32,
        has_mask: mask.is_some() as u32,
        _pad: 0,
    };
    let work = p.n * p.m * p.points;
    let args = vec![
        Arg::Value(x),
        Arg::Value(w),
        Arg::Value(off),
        bias.map_or(Arg::Null, Arg::Value),
        mask.map_or(Arg::Null, Arg::Value),
        Arg::Value(y),
    ];
    Ok(step(n.id, n.label.clone(), KernelId::DeformConvF32, &p, work, o, args))
}

#[cfg(test)]
#[path = "vision_tests.rs"]
mod tests;
