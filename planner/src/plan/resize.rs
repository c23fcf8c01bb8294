//! Lowering of ONNX Resize to the `resize` kernels (see `kernels_gpu::abi::ResizeParams`).
//!
//! `scales`, `sizes` and `roi` must be constants (initializers or folded values): the per-axis
//! scales and output extents come from [`Resize::geometry`], the computation the CPU reference
//! uses, and must agree with the planned output shape. Axes whose mapping is the identity (scale
//! 1, same extent, full roi) are copied; up to [`RESIZE_MAX_AXES`] others are interpolated.
//! Nearest takes any element size (it copies bits); linear and cubic take f32, antialiased too (the
//! filter widens by 1 / scale when downscaling; refused past [`MAX_TAPS`] taps per element).

use kernels_gpu::abi::{
    KernelId, MAX_RANK, RESIZE_MAX_AXES, ResizeAxis, ResizeParams, resize_ctm, resize_nearest,
};

use super::lower::{Lowered, dims};
use super::movement::{MoveNode, axis_of, by_size, const_ints, contiguous, step};
use super::{Arg, PlanOptions, PlannedValue};
use crate::graph::{Graph, ValueId};
use crate::op::{CoordinateTransformationMode as Ctm, NearestMode, Resize, ResizeMode};
use crate::tensor_info::DType;

/// Most input elements one linear / cubic output element may read.
const MAX_TAPS: usize = 4096;

/// Input `i` when it is given and not empty (an empty tensor counts as absent), or why it cannot be
/// told.
fn operand(n: &MoveNode, values: &[PlannedValue], i: usize) -> Result<Option<ValueId>, String> {
    let Some(v) = n.ins.get(i).copied().flatten() else { return Ok(None) };
    let (d, _) = dims(values, v)?;
    Ok((d.iter().product::<usize>() > 0).then_some(v))
}

/// The constant floats of input `v`, or why not.
fn const_floats(g: &Graph, v: ValueId, what: &str) -> Result<Vec<f64>, String> {
    let c = g
        .initializers
        .get(&v)
        .ok_or_else(|| format!("{what} must be a constant (it is computed at run time)"))?;
    if !matches!(c.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        return Err(format!("{what} must be a float tensor, got {}", c.dtype));
    }
    Ok(c.to_f64s())
}

/// The kernel's `ctm` code.
fn ctm_code(m: Ctm) -> u32 {
    match m {
        Ctm::HalfPixel => resize_ctm::HALF_PIXEL,
        Ctm::HalfPixelSymmetric => resize_ctm::HALF_PIXEL_SYMMETRIC,
        Ctm::PytorchHalfPixel => resize_ctm::PYTORCH_HALF_PIXEL,
        Ctm::AlignCorners => resize_ctm::ALIGN_CORNERS,
        Ctm::Asymmetric => resize_ctm::ASYMMETRIC,
        Ctm::TfCropAndResize => resize_ctm::TF_CROP_AND_RESIZE,
    }
}

/// The kernel's `nearest_mode` code.
fn nearest_code(m: NearestMode) -> u32 {
    match m {
        NearestMode::RoundPreferFloor => resize_nearest::ROUND_PREFER_FLOOR,
        NearestMode::RoundPreferCeil => resize_nearest::ROUND_PREFER_CEIL,
        NearestMode::Floor => resize_nearest::FLOOR,
        NearestMode::Ceil => resize_nearest::CEIL,
    }
}

/// ONNX Resize (inputs X, roi?, scales?, sizes?).
pub(super) fn resize(
    n: &MoveNode,
    r: &Resize,
    g: &Graph,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let ((xd, dtype), (od, _)) = (dims(values, x)?, dims(values, y)?);
    let rank = xd.len();
    if rank > MAX_RANK {
        return Err(format!("rank {rank} is above {MAX_RANK}"));
    }
    let axes: Vec<usize> = match &r.axes {
        Some(a) => a.iter().map(|&a| axis_of(a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
        return Err(format!("axes {axes:?} repeat an axis"));
    }
    let scales = match operand(n, values, 2)? {
        Some(v) => Some(const_floats(g, v, "scales")?),
        None => None,
    };
    let sizes = match operand(n, values, 3)? {
        Some(v) => Some(const_ints(g, v, "sizes")?),
        None => None,
    };
    let (scale, out) = r.geometry(xd, &axes, scales.as_deref(), sizes.as_deref())?;
    if out != od {
        return Err(format!("the computed output shape {out:?} differs from the planned {od:?}"));
    }
    let tf_crop = r.coordinate_transformation_mode == Ctm::TfCropAndResize;
    let mut roi = vec![(0.0, 1.0); rank];
    if tf_crop && let Some(v) = operand(n, values, 1)? {
        let vals = const_floats(g, v, "roi")?;
        if vals.len() != 2 * axes.len() {
            return Err(format!("roi has {} values, need {}", vals.len(), 2 * axes.len()));
        }
        for (i, &a) in axes.iter().enumerate() {
            roi[a] = (vals[i], vals[axes.len() + i]);
        }
    }
    if (0..rank).any(|a| xd[a] == 0 && out[a] > 0) {
        return Err(format!("cannot resize the empty input {xd:?} to {out:?}"));
    }
    // The filter scale and taps per element of linear / cubic (the reference's `taps`).
    let filter_scale: Vec<f64> = scale
        .iter()
        .map(|&s| if r.antialias && r.mode != ResizeMode::Nearest { s.min(1.0) } else { 1.0 })
        .collect();
    let kernel = match r.mode {
        ResizeMode::Nearest => by_size(
            dtype,
            [
                Some(KernelId::ResizeNearestB1),
                Some(KernelId::ResizeNearestB2),
                Some(KernelId::ResizeNearestB4),
                Some(KernelId::ResizeNearestB8),
            ],
            "Resize",
        )?,
        _ if dtype != DType::F32 => return Err(format!("linear / cubic Resize of {dtype} has no kernel")),
        ResizeMode::Linear => KernelId::ResizeLinearF32,
        ResizeMode::Cubic => KernelId::ResizeCubicF32,
    };
    let value_bits = match dtype {
        _ if !tf_crop => 0,
        DType::F32 => r.extrapolation_value.to_bits() as u64,
        DType::F64 => (r.extrapolation_value as f64).to_bits(),
        _ if r.extrapolation_value.to_bits() == 0 => 0,
        _ => return Err(format!("a non-zero extrapolation_value on {dtype} data")),
    };
    // The identity mapping: scale 1, same extent, the full roi.
    let interpolated: Vec<usize> =
        (0..rank).filter(|&a| scale[a] != 1.0 || out[a] != xd[a] || roi[a] != (0.0, 1.0)).collect();
    if interpolated.len() > RESIZE_MAX_AXES {
        return Err(format!("{} interpolated axes, more than {RESIZE_MAX_AXES}", interpolated.len()));
    }
    let support = if r.mode == ResizeMode::Cubic { 2.0 } else { 1.0 };
    let taps: f64 = interpolated.iter().map(|&a| 2.0 * -(-support / filter_scale[a]).floor()).product();
    if r.mode != ResizeMode::Nearest && taps > MAX_TAPS as f64 {
        return Err(format!(
            "antialiased downscaling by {scale:?} reads {taps} taps per element, more than {MAX_TAPS}"
        ));
    }
    let elems: u64 = out.iter().map(|&d| d as u64).product();
    if elems == 0 {
        return Ok(Vec::new());
    }
    let (in_strides, out_strides) = (contiguous(xd), contiguous(&out));
    let mut p = ResizeParams {
        elems,
        rank: rank as u32,
        ctm: ctm_code(r.coordinate_transformation_mode),
        nearest_mode: nearest_code(r.nearest_mode),
        exclude_outside: r.exclude_outside as u32,
        cubic_coeff_a: r.cubic_coeff_a as f64,
        value_bits,
        ..ResizeParams::default()
    };
    let first = MAX_RANK - rank;
    for a in 0..rank {
        p.out_shape[first + a] = out[a] as u64;
        if !interpolated.contains(&a) {
            p.copy_strides[first + a] = in_strides[a] as u64;
        }
    }
    for (slot, &a) in interpolated.iter().enumerate() {
        p.axes[slot] = ResizeAxis {
            out_stride: out_strides[a] as u64,
            out_len: out[a] as u64,
            in_len: xd[a] as u64,
            in_stride: in_strides[a] as u64,
            scale: scale[a],
            filter_scale: filter_scale[a],
            roi_start: roi[a].0,
            roi_end: roi[a].1,
        };
    }
    Ok(step(n.id, n.label.clone(), kernel, &p, elems, o, vec![Arg::Value(x), Arg::Value(y)]))
}

#[cfg(test)]
#[path = "resize_tests.rs"]
mod tests;
