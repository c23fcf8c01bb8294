//! Reference ONNX `Resize` (opset 19 semantics, any rank): nearest, linear and cubic
//! interpolation, every `coordinate_transformation_mode`, `nearest_mode`, scales or sizes (with
//! `axes` and `keep_aspect_ratio_policy`), `exclude_outside`, `extrapolation_value` and
//! `antialias`.
//!
//! Interpolation is separable: each axis maps an output coordinate to taps `(input index, weight)`
//! and an output element is the sum over the product of its axes' taps. Taps past the edge read
//! the edge element (the ONNX reference pads in "edge" mode). Tap weights follow the ONNX reference:
//! `filter(s′·(idx − x))` normalized, with `s′ = min(scale, 1)` under antialias and 1 otherwise.

use planner::op::{CoordinateTransformationMode as Ctm, NearestMode, Resize, ResizeMode};

use super::operand::{axis, count, floats, ints, numbers, optional, required, strides, tensor, unravel};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// Taps of one output coordinate on one axis, or `None` when it extrapolates.
type Taps = Option<Vec<(usize, f64)>>;

/// Output coordinate `x` mapped into the input (ONNX `coordinate_transformation_mode`), or `None`
/// when `tf_crop_and_resize` lands outside the input.
fn source_coord(
    mode: Ctm,
    x: usize,
    scale: f64,
    len_in: usize,
    len_out: usize,
    roi: (f64, f64),
) -> Option<f64> {
    // `lo` is the unrounded resized length `scale · len_in` (the ONNX reference's
    // `output_width`): with scales it differs from the integer output length.
    let (x, li) = (x as f64, len_in as f64);
    let lo = scale * li;
    Some(match mode {
        Ctm::HalfPixel => (x + 0.5) / scale - 0.5,
        Ctm::HalfPixelSymmetric => {
            let adjustment = len_out as f64 / lo;
            li / 2.0 * (1.0 - adjustment) + (x + 0.5) / scale - 0.5
        }
        Ctm::PytorchHalfPixel if len_out > 1 => (x + 0.5) / scale - 0.5,
        Ctm::PytorchHalfPixel => 0.0,
        Ctm::AlignCorners if len_out > 1 && lo != 1.0 => x * (li - 1.0) / (lo - 1.0),
        Ctm::AlignCorners => 0.0,
        Ctm::Asymmetric => x / scale,
        Ctm::TfCropAndResize => {
            let (start, end) = roi;
            let c = if len_out > 1 && lo != 1.0 {
                start * (li - 1.0) + x * (end - start) * (li - 1.0) / (lo - 1.0)
            } else {
                0.5 * (start + end) * (li - 1.0)
            };
            if c < 0.0 || c > li - 1.0 {
                return None;
            }
            c
        }
    })
}

/// Keys' cubic convolution kernel with coefficient `a`.
fn cubic(t: f64, a: f64) -> f64 {
    let t = t.abs();
    if t <= 1.0 {
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    } else if t < 2.0 {
        ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    } else {
        0.0
    }
}

/// Taps of input coordinate `x` on an axis of length `len` (`len > 0`).
fn taps(attrs: &Resize, x: f64, scale: f64, len: usize) -> Vec<(usize, f64)> {
    let last = len as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last) as usize;
    let x0 = x.floor();
    let r = x - x0;
    if attrs.mode == ResizeMode::Nearest {
        let up = match attrs.nearest_mode {
            _ if r == 0.0 => false,
            NearestMode::RoundPreferFloor => r > 0.5,
            NearestMode::RoundPreferCeil => r >= 0.5,
            NearestMode::Floor => false,
            NearestMode::Ceil => true,
        };
        return vec![(clamp(x0 as i64 + up as i64), 1.0)];
    }
    let support = if attrs.mode == ResizeMode::Cubic { 2.0 } else { 1.0 };
    let s = if attrs.antialias { scale.min(1.0) } else { 1.0 };
    let start = (-support / s).floor() as i64 + 1;
    let mut out: Vec<(i64, f64)> = (start..=1 - start)
        .map(|j| {
            let t = s * (j as f64 - r);
            let w = if attrs.mode == ResizeMode::Cubic {
                cubic(t, attrs.cubic_coeff_a as f64)
            } else {
                (1.0 - t.abs()).max(0.0)
            };
            (x0 as i64 + j, w)
        })
        .collect();
    if attrs.exclude_outside {
        for (i, w) in &mut out {
            if *i < 0 || *i > last {
                *w = 0.0;
            }
        }
    }
    let total: f64 = out.iter().map(|(_, w)| w).sum();
    out.into_iter().filter(|(_, w)| *w != 0.0).map(|(i, w)| (clamp(i), w / total)).collect()
}

/// ONNX `Resize` (opset 19). Inputs X, roi?, scales?, sizes? (exactly one of scales/sizes, an
/// empty tensor counting as absent). Output sizes are `floor(in · scale)` for scales, the given
/// sizes for `stretch`, and `floor(s · in + 0.5)` with `s` the min/max ratio otherwise.
pub fn resize(
    node: &NodeCtx,
    attrs: &Resize,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = numbers(node, required(node, inputs, 0, "X")?, "X")?;
    let rank = x.shape.len();
    let present = |i: usize| optional(inputs, i).filter(|t| !t.is_empty());
    let axes: Vec<usize> = match &attrs.axes {
        Some(list) => list.iter().map(|&a| axis(node, a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let scales = match present(2) {
        Some(s) => Some(floats(node, s, "scales")?.data),
        None => None,
    };
    let sizes = match present(3) {
        Some(s) => Some(ints(node, s, "sizes")?),
        None => None,
    };
    let (scale, out) =
        attrs.geometry(&x.shape, &axes, scales.as_deref(), sizes.as_deref()).map_err(|e| node.err(e))?;
    let mut roi = vec![(0.0, 1.0); rank];
    if attrs.coordinate_transformation_mode == Ctm::TfCropAndResize
        && let Some(r) = present(1)
    {
        let r = floats(node, r, "roi")?.data;
        if r.len() != 2 * axes.len() {
            return Err(node.err(format!("roi has {} values, need {}", r.len(), 2 * axes.len())));
        }
        for (i, &a) in axes.iter().enumerate() {
            roi[a] = (r[i], r[axes.len() + i]);
        }
    }
    let n_out = count(node, &out)?;
    if (0..rank).any(|a| x.shape[a] == 0 && out[a] > 0) {
        return Err(node.err(format!("cannot resize the empty input {:?} to {out:?}", x.shape)));
    }
    let per_axis: Vec<Vec<Taps>> = (0..rank)
        .map(|a| {
            (0..out[a])
                .map(|o| {
                    let c = source_coord(
                        attrs.coordinate_transformation_mode,
                        o,
                        scale[a],
                        x.shape[a],
                        out[a],
                        roi[a],
                    );
                    c.map(|c| taps(attrs, c, scale[a], x.shape[a]))
                })
                .collect()
        })
        .collect();
    let in_strides = strides(&x.shape);
    let mut idx = vec![0; rank];
    let mut y = crate::tensor::try_with_capacity(n_out, "a working buffer")?;
    for o in 0..n_out {
        unravel(o, &out, &mut idx);
        let chosen: Option<Vec<&Vec<(usize, f64)>>> =
            (0..rank).map(|a| per_axis[a][idx[a]].as_ref()).collect();
        let Some(chosen) = chosen else {
            y.push(attrs.extrapolation_value as f64);
            continue;
        };
        // Sum over the cartesian product of the axes' taps.
        let mut acc = 0.0;
        let mut pick = vec![0usize; rank];
        loop {
            let (mut off, mut w) = (0, 1.0);
            for a in 0..rank {
                let (i, wa) = chosen[a][pick[a]];
                off += i * in_strides[a];
                w *= wa;
            }
            acc += w * x.data[off];
            let Some(a) = (0..rank).rev().find(|&a| pick[a] + 1 < chosen[a].len()) else { break };
            pick[a] += 1;
            pick[a + 1..].fill(0);
        }
        y.push(acc);
    }
    Ok(vec![tensor(node, x.dtype, out, y)?])
}

#[cfg(test)]
#[path = "resize_tests.rs"]
mod tests;
