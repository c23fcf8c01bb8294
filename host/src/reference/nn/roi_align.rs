//! Reference `RoiAlign` (opsets 10/16/22), as the ONNX reference defines it.
//!
//! A roi `(x1, y1, x2, y2)` scaled by `spatial_scale` (and shifted by -0.5 with `half_pixel`;
//! otherwise its sides are at least 1) is divided into `output_height x output_width` bins, each
//! sampled on a `g_h x g_w` grid (`sampling_ratio`, or `ceil(bin size)` when 0). A sample point
//! outside `[-1, H] x [-1, W]` contributes 0; otherwise it is clamped to the image and
//! interpolated bilinearly from its four neighbours. `avg` averages the samples' interpolated
//! values; `max` takes, over the samples, the largest of the four weighted neighbour terms.

use planner::op::RoiAlign;

use super::operand::{input, ints, required, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// Bilinear taps `(offset, weight)` of point `(y, x)` in an `h x w` plane (all zero outside).
fn taps(y: f64, x: f64, h: usize, w: usize) -> [(usize, f64); 4] {
    if y < -1.0 || y > h as f64 || x < -1.0 || x > w as f64 {
        return [(0, 0.0); 4];
    }
    let axis = |v: f64, n: usize| {
        let v = v.max(0.0);
        let low = v as usize;
        if low >= n - 1 { (n - 1, n - 1, 0.0) } else { (low, low + 1, v - low as f64) }
    };
    let (y0, y1, ly) = axis(y, h);
    let (x0, x1, lx) = axis(x, w);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [(y0 * w + x0, hy * hx), (y0 * w + x1, hy * lx), (y1 * w + x0, ly * hx), (y1 * w + x1, ly * lx)]
}

/// ONNX `RoiAlign(X, rois, batch_indices)`.
pub fn roi_align(
    node: &NodeCtx,
    attrs: &RoiAlign,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let rois = input(node, inputs, 1, "rois")?;
    let batch = ints(node, required(node, inputs, 2, "batch_indices")?, "batch_indices")?;
    let &[n, c, h, w] = x.shape.as_slice() else {
        return Err(node.err(format!("X {:?} must be (N, C, H, W)", x.shape)));
    };
    let r = batch.len();
    if rois.shape != [r, 4] || h == 0 || w == 0 {
        return Err(node.err(format!("rois {:?} must be ({r}, 4) over a non-empty image", rois.shape)));
    }
    let (oh, ow) = (attrs.output_height, attrs.output_width);
    let scale = attrs.spatial_scale as f64;
    let offset = if attrs.half_pixel { 0.5 } else { 0.0 };
    let plane = h * w;
    let mut out = crate::tensor::try_filled(r * c * oh * ow, 0.0, "a working buffer")?;
    for (ri, &b) in batch.iter().enumerate() {
        let b = usize::try_from(b)
            .ok()
            .filter(|&b| b < n)
            .ok_or_else(|| node.err(format!("batch index {b} is outside [0, {n})")))?;
        let roi = &rois.data[ri * 4..ri * 4 + 4];
        let (x1, y1) = (roi[0] * scale - offset, roi[1] * scale - offset);
        let (mut rw, mut rh) = (roi[2] * scale - offset - x1, roi[3] * scale - offset - y1);
        if !attrs.half_pixel {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / oh as f64, rw / ow as f64);
        let grid = |size: f64, bins: usize| match attrs.sampling_ratio {
            0 => (size / bins as f64).ceil().max(0.0) as usize,
            s => s,
        };
        let (gh, gw) = (grid(rh, oh), grid(rw, ow));
        let samples = (gh * gw).max(1) as f64;
        for ph in 0..oh {
            for pw in 0..ow {
                let points: Vec<[(usize, f64); 4]> = (0..gh)
                    .flat_map(|iy| {
                        let y = y1 + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                        (0..gw).map(move |ix| {
                            let xx = x1 + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                            taps(y, xx, h, w)
                        })
                    })
                    .collect();
                for ch in 0..c {
                    let data = &x.data[(b * c + ch) * plane..(b * c + ch + 1) * plane];
                    let value = if attrs.max {
                        points
                            .iter()
                            .map(|t| t.iter().map(|&(o, wt)| wt * data[o]).fold(f64::NEG_INFINITY, f64::max))
                            .fold(None, |acc: Option<f64>, v| Some(acc.map_or(v, |a| a.max(v))))
                            .unwrap_or(0.0)
                    } else {
                        points.iter().flat_map(|t| t.iter().map(|&(o, wt)| wt * data[o])).sum::<f64>()
                            / samples
                    };
                    out[((ri * c + ch) * oh + ph) * ow + pw] = value;
                }
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, vec![r, c, oh, ow], out)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, ti, vals};

    #[test]
    fn one_bin_averages_its_samples() {
        // 2x2 image; roi covering it (half_pixel: [0.5, 2.5) -> [0, 2)), 1 bin of 2x2 samples at
        // 0.5 and 1.5 per axis: taps at 0.5 interpolate, at 1.5 clamp to the last pixel.
        let x = tf(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let rois = tf(&[1, 4], &[0.5, 0.5, 2.5, 2.5]);
        let idx = ti(&[1], &[0]);
        let y =
            roi_align(&node("RoiAlign"), &RoiAlign::default(), &[Some(&x), Some(&rois), Some(&idx)]).unwrap();
        assert_eq!(y[0].shape(), [1, 1, 1, 1]);
        // Samples: (0.5,0.5)=2.5, (0.5,1.5)->(0.5,1)=3.0, (1.5,0.5)->(1,0.5)=3.5, (1.5,1.5)->4.
        assert_close(&vals(&y[0]), &[(2.5 + 3.0 + 3.5 + 4.0) / 4.0], 1e-12);
        let max = RoiAlign { max: true, ..RoiAlign::default() };
        let y = roi_align(&node("RoiAlign"), &max, &[Some(&x), Some(&rois), Some(&idx)]).unwrap();
        // Largest weighted term: the clamped corner sample, weight 1 on pixel 4.
        assert_close(&vals(&y[0]), &[4.0], 1e-12);
    }
}
