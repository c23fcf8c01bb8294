//! Reference `DeformConv` (opset 19), N-D.
//!
//! Output position `o`, kernel tap `k` and input channel `c` (offset group `c / (C / G_off)`)
//! read X at `o · stride − pad_begin + k · dilation + offset[n, g, k, :, o]` by N-linear
//! interpolation (taps outside X read 0), scaled by `mask[n, g, k, o]` (1 without a mask) and by
//! the weight `W[m, c mod (C / group), k]`; output channel `m` sums the channels of its group, plus
//! `B[m]`.

use planner::op::DeformConv;

use super::operand::{count, input, input_opt, strides, tensor, unravel};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// ONNX `DeformConv(X, W, offset, B?, mask?)`.
pub fn deform_conv(
    node: &NodeCtx,
    attrs: &DeformConv,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let w = input(node, inputs, 1, "W")?;
    let off = input(node, inputs, 2, "offset")?;
    let bias = input_opt(node, inputs, 3, "B")?;
    let mask = input_opt(node, inputs, 4, "mask")?;
    let r = x.shape.len().saturating_sub(2);
    if r == 0 || w.shape.len() != r + 2 || off.shape.len() != r + 2 {
        return Err(
            node.err(format!("X {:?}, W {:?}, offset {:?} need one rank >= 3", x.shape, w.shape, off.shape))
        );
    }
    let (n, c, m) = (x.shape[0], x.shape[1], w.shape[0]);
    let (group, og) = (attrs.group, attrs.offset_group);
    let kernel =
        if attrs.kernel_shape.is_empty() { w.shape[2..].to_vec() } else { attrs.kernel_shape.clone() };
    let list =
        |v: &[usize], default: usize, len: usize| if v.is_empty() { vec![default; len] } else { v.to_vec() };
    let (dil, stride, pads) =
        (list(&attrs.dilations, 1, r), list(&attrs.strides, 1, r), list(&attrs.pads, 0, 2 * r));
    let kprod: usize = kernel.iter().product();
    let out_sp = off.shape[2..].to_vec();
    let cpg = c / group.max(1);
    let bad = group == 0
        || og == 0
        || c % group != 0
        || m % group != 0
        || c % og != 0
        || w.shape[1] != cpg
        || w.shape[2..] != kernel[..]
        || dil.len() != r
        || stride.len() != r
        || pads.len() != 2 * r
        || off.shape[0] != n
        || off.shape[1] != og * kprod * r;
    if bad {
        return Err(node.err(format!(
            "X {:?}, W {:?}, offset {:?} and attributes disagree",
            x.shape, w.shape, off.shape
        )));
    }
    if let Some(b) = &bias
        && b.shape != [m]
    {
        return Err(node.err(format!("B {:?} must be [{m}]", b.shape)));
    }
    let points = count(node, &out_sp)?;
    if let Some(mk) = &mask
        && (mk.shape.len() != r + 2 || mk.shape[..2] != [n, og * kprod] || mk.shape[2..] != out_sp[..])
    {
        return Err(node.err(format!("mask {:?} does not match offset {:?}", mk.shape, off.shape)));
    }
    let in_sp = &x.shape[2..];
    let image = count(node, in_sp)?;
    let in_strides = strides(in_sp);
    let (mpg, cpo) = (m / group, c / og);
    let mut out = crate::tensor::try_filled(n * m * points, 0.0, "a working buffer")?;
    let (mut oi, mut ki, mut corner) = (vec![0; r], vec![0; r], vec![0; r]);
    let corners = 1usize << r;
    for b in 0..n {
        for p in 0..points {
            unravel(p, &out_sp, &mut oi);
            for k in 0..kprod {
                unravel(k, &kernel, &mut ki);
                for g in 0..og {
                    // Sampling point and its interpolation taps (offset, weight).
                    let mut taps: Vec<(usize, f64)> =
                        crate::tensor::try_with_capacity(corners, "a working buffer")?;
                    let mut pos = crate::tensor::try_filled(r, 0.0, "a working buffer")?;
                    for d in 0..r {
                        let o_at = (((b * og + g) * kprod + k) * r + d) * points + p;
                        pos[d] =
                            (oi[d] * stride[d] + ki[d] * dil[d]) as f64 - pads[d] as f64 + off.data[o_at];
                    }
                    for cb in 0..corners {
                        let mut weight = 1.0;
                        let mut at = Some(0usize);
                        for d in 0..r {
                            let f = pos[d].floor();
                            let t = pos[d] - f;
                            let hi = (cb >> d) & 1 == 1;
                            corner[d] = f as i64 + i64::from(hi);
                            weight *= if hi { t } else { 1.0 - t };
                            at = at
                                .filter(|_| (0..in_sp[d] as i64).contains(&corner[d]))
                                .map(|a| a + corner[d] as usize * in_strides[d]);
                        }
                        if let Some(at) = at {
                            taps.push((at, weight));
                        }
                    }
                    let scale =
                        mask.as_ref().map_or(1.0, |mk| mk.data[((b * og + g) * kprod + k) * points + p]);
                    for ci in g * cpo..(g + 1) * cpo {
                        let plane = &x.data[(b * c + ci) * image..(b * c + ci + 1) * image];
                        let v: f64 = taps.iter().map(|&(a, wt)| wt * plane[a]).sum::<f64>() * scale;
                        let grp = ci / cpg;
                        for mo in grp * mpg..(grp + 1) * mpg {
                            out[(b * m + mo) * points + p] += v * w.data[(mo * cpg + ci % cpg) * kprod + k];
                        }
                    }
                }
            }
        }
        if let Some(bv) = &bias {
            for mo in 0..m {
                out[(b * m + mo) * points..(b * m + mo + 1) * points]
                    .iter_mut()
                    .for_each(|v| *v += bv.data[mo]);
            }
        }
    }
    let mut shape = vec![n, m];
    shape.extend_from_slice(&out_sp);
    Ok(vec![tensor(node, x.dtype, shape, out)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, vals};

    #[test]
    fn zero_offsets_are_a_plain_convolution_and_half_offsets_interpolate() {
        // 1-D X = [1, 2, 3], kernel [1, 1] -> outputs 3, 5.
        let x = tf(&[1, 1, 3], &[1.0, 2.0, 3.0]);
        let w = tf(&[1, 1, 2], &[1.0, 1.0]);
        let zero = tf(&[1, 2, 2], &[0.0; 4]);
        let y = deform_conv(&node("DeformConv"), &DeformConv::default(), &[Some(&x), Some(&w), Some(&zero)])
            .unwrap();
        assert_eq!(y[0].shape(), [1, 1, 2]);
        assert_close(&vals(&y[0]), &[3.0, 5.0], 1e-12);
        // Offsets +0.5 on every tap (layout (n, g, k, r, out)): taps read 1.5 + 2.5 and 2.5 + 1.5
        // (position 3 is outside: 3 * 0.5); mask halves tap 0; bias 1.
        let half = tf(&[1, 2, 2], &[0.5; 4]);
        let mask = tf(&[1, 2, 2], &[0.5, 0.5, 1.0, 1.0]);
        let b = tf(&[1], &[1.0]);
        let ins = [Some(&x), Some(&w), Some(&half), Some(&b), Some(&mask)];
        let y = deform_conv(&node("DeformConv"), &DeformConv::default(), &ins).unwrap();
        assert_close(&vals(&y[0]), &[0.5 * 1.5 + 2.5 + 1.0, 0.5 * 2.5 + 1.5 + 1.0], 1e-12);
    }
}
