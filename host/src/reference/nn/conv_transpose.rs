//! Reference `ConvTranspose` (N-D, grouped, dilated, strided): every input element scatters
//! `x · W[c, m, k]` to output position `i·s + k·d − pad_begin`, accumulating in f64.
//!
//! Layout is ONNX's: X `(N, C, D1..Dn)`, W `(C, M/group, k1..kn)`, B `(M)`, Y `(N, M, O1..On)`.
//! Pads may come out negative when `output_shape` asks for more than the natural size; the extra
//! output positions then stay at the bias.

use planner::op::{AutoPad, ConvTranspose};

use super::operand::{count, expect_shape, input, input_opt, strides, tensor, unravel};
use super::window::{per_axis, split_pads};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// ONNX `ConvTranspose` (opset 11+). Output size is `s·(in−1) + output_padding + (k−1)·d + 1 −
/// pad_begin − pad_end`; when `output_shape` is set (or `auto_pad` is SAME_*, giving `in·s`), the
/// total padding is derived from it and split as the spec says: SAME_UPPER puts `⌊total/2⌋` first,
/// every other mode puts `total − ⌊total/2⌋` first.
pub fn conv_transpose(
    node: &NodeCtx,
    attrs: &ConvTranspose,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let w = input(node, inputs, 1, "W")?;
    let b = input_opt(node, inputs, 2, "B")?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err(node.err(format!("X {:?} and W {:?} must have the same rank >= 3", x.shape, w.shape)));
    }
    let (batch, channels, spatial) = (x.shape[0], x.shape[1], &x.shape[2..]);
    let (maps_per_group, kernel) = (w.shape[1], &w.shape[2..]);
    let group = attrs.group;
    if group == 0 || channels % group != 0 || w.shape[0] != channels {
        return Err(
            node.err(format!("W {:?} must be (C={channels}, M/group, k...) with group {group}", w.shape))
        );
    }
    if !attrs.kernel_shape.is_empty() && attrs.kernel_shape != kernel {
        return Err(node.err(format!("kernel_shape {:?} disagrees with W {:?}", attrs.kernel_shape, w.shape)));
    }
    let maps = maps_per_group * group;
    if let Some(b) = &b {
        expect_shape(node, &b.shape, &[maps], "B")?;
    }
    let nd = spatial.len();
    let st = per_axis(node, &attrs.strides, nd, 1, "strides")?;
    let dil = per_axis(node, &attrs.dilations, nd, 1, "dilations")?;
    let out_pad = per_axis(node, &attrs.output_padding, nd, 0, "output_padding")?;
    if st.contains(&0) || dil.contains(&0) || kernel.contains(&0) {
        return Err(node.err("strides, dilations and kernel sizes must be positive"));
    }
    let requested: Option<Vec<usize>> = match attrs.output_shape.len() {
        0 if matches!(attrs.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) => {
            Some(spatial.iter().zip(&st).map(|(i, s)| i * s).collect())
        }
        0 => None,
        l if l == nd => Some(attrs.output_shape.clone()),
        l if l == nd + 2 => Some(attrs.output_shape[2..].to_vec()),
        l => return Err(node.err(format!("output_shape has {l} values for {nd} spatial axes"))),
    };
    let mut pad_begin = vec![0i64; nd];
    let mut out = vec![0usize; nd];
    let (pb_attr, pe_attr) = split_pads(node, &attrs.pads, nd)?;
    for a in 0..nd {
        let natural =
            (st[a] * spatial[a].saturating_sub(1) + out_pad[a] + (kernel[a] - 1) * dil[a] + 1) as i64;
        if let Some(req) = &requested {
            let total = natural - req[a] as i64;
            let half = total.div_euclid(2);
            pad_begin[a] = if attrs.auto_pad == AutoPad::SameUpper { half } else { total - half };
            out[a] = req[a];
        } else {
            let (pb, pe) = if attrs.auto_pad == AutoPad::Valid { (0, 0) } else { (pb_attr[a], pe_attr[a]) };
            let size = natural - (pb + pe) as i64;
            if size < 0 {
                return Err(node.err(format!("axis {a}: pads {pb}+{pe} exceed the output size {natural}")));
            }
            pad_begin[a] = pb as i64;
            out[a] = size as usize;
        }
    }
    let mut y_shape = vec![batch, maps];
    y_shape.extend(&out);
    let (n_in, n_tap, n_out) = (count(node, spatial)?, count(node, kernel)?, count(node, &out)?);
    let out_strides = strides(&out);
    let channels_per_group = channels / group;
    let mut y = crate::tensor::try_filled(count(node, &y_shape)?, 0.0, "a working buffer")?;
    for n in 0..batch {
        for m in 0..maps {
            let bias = b.as_ref().map_or(0.0, |b| b.data[m]);
            y[(n * maps + m) * n_out..(n * maps + m + 1) * n_out].fill(bias);
        }
    }
    let (mut ii, mut ki) = (vec![0; nd], vec![0; nd]);
    for n in 0..batch {
        for c in 0..channels {
            let grp = c / channels_per_group;
            for i in 0..n_in {
                unravel(i, spatial, &mut ii);
                let xv = x.data[(n * channels + c) * n_in + i];
                for tap in 0..n_tap {
                    unravel(tap, kernel, &mut ki);
                    let mut off = 0;
                    let inside = (0..nd).all(|a| {
                        let o = (ii[a] * st[a] + ki[a] * dil[a]) as i64 - pad_begin[a];
                        off += o.max(0) as usize * out_strides[a];
                        (0..out[a] as i64).contains(&o)
                    });
                    if !inside {
                        continue;
                    }
                    for ml in 0..maps_per_group {
                        let m = grp * maps_per_group + ml;
                        y[(n * maps + m) * n_out + off] +=
                            xv * w.data[(c * maps_per_group + ml) * n_tap + tap];
                    }
                }
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, y_shape, y)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::conv::conv;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};
    use planner::op::Conv;

    fn run(attrs: &ConvTranspose, x: &HostTensor, w: &HostTensor) -> HostTensor {
        conv_transpose(&node("ConvTranspose"), attrs, &[Some(x), Some(w), None]).unwrap().remove(0)
    }

    fn ramp3x3() -> HostTensor {
        tf(&[1, 1, 3, 3], &(0..9).map(f64::from).collect::<Vec<_>>())
    }

    /// ONNX doc examples `convtranspose` and `convtranspose_1d`.
    #[test]
    fn onnx_doc_examples() {
        let y = run(&ConvTranspose::default(), &ramp3x3(), &tf(&[1, 2, 3, 3], &[1.0; 18]));
        assert_eq!(y.shape(), &[1, 2, 5, 5]);
        let one = [
            0., 1., 3., 3., 2., 3., 8., 15., 12., 7., 9., 21., 36., 27., 15., 9., 20., 33., 24., 13., 6.,
            13., 21., 15., 8.,
        ];
        assert_eq!(vals(&y), [one, one].concat());
        let y = run(&ConvTranspose::default(), &tf(&[1, 1, 3], &[0., 1., 2.]), &tf(&[1, 2, 3], &[1.0; 6]));
        assert_eq!(vals(&y), [0., 1., 3., 3., 2., 0., 1., 3., 3., 2.]);
    }

    /// ONNX doc examples `convtranspose_pads` and `convtranspose_output_shape` (strides 3x2).
    #[test]
    fn onnx_doc_pads_and_output_shape() {
        let w = tf(&[1, 2, 3, 3], &[1.0; 18]);
        let attrs = ConvTranspose { strides: vec![3, 2], pads: vec![1, 2, 1, 2], ..ConvTranspose::default() };
        let y = run(&attrs, &ramp3x3(), &w);
        assert_eq!(y.shape(), &[1, 2, 7, 3]);
        let ch = [1., 1., 3., 1., 1., 3., 7., 4., 9., 7., 4., 9., 7., 4., 9., 13., 7., 15., 13., 7., 15.];
        assert_eq!(vals(&y)[..21], ch);
        let row = |a: [f64; 8]| [a, a, a].concat();
        let ch: Vec<f64> = [
            row([0., 0., 1., 1., 3., 2., 2., 0.]),
            row([3., 3., 7., 4., 9., 5., 5., 0.]),
            row([6., 6., 13., 7., 15., 8., 8., 0.]),
            vec![0.; 8],
        ]
        .concat();
        let shaped =
            ConvTranspose { strides: vec![3, 2], output_shape: vec![10, 8], ..ConvTranspose::default() };
        let y = run(&shaped, &ramp3x3(), &w);
        assert_eq!(y.shape(), &[1, 2, 10, 8]);
        assert_eq!(vals(&y)[..80], ch[..]);
        let padded =
            ConvTranspose { strides: vec![3, 2], output_padding: vec![1, 1], ..ConvTranspose::default() };
        assert_eq!(vals(&run(&padded, &ramp3x3(), &w))[..80], ch[..]);
    }

    /// ConvTranspose is the adjoint of Conv: ⟨conv(x; W), y⟩ = ⟨x, convT(y; W)⟩ for the same
    /// strides, dilations, pads and groups (output_padding makes the sizes line up).
    #[test]
    fn is_the_adjoint_of_conv() {
        let mut rng = Rng::new(5);
        for case in 0..40 {
            let nd = 1 + case % 3;
            let group = rng.int(1, 2);
            let (cg, mg) = (rng.int(1, 2), rng.int(1, 2));
            let kernel: Vec<usize> = (0..nd).map(|_| rng.int(1, 3)).collect();
            let dil: Vec<usize> = (0..nd).map(|_| rng.int(1, 2)).collect();
            let st: Vec<usize> = (0..nd).map(|_| rng.int(1, 3)).collect();
            let pads: Vec<usize> = (0..2 * nd).map(|_| rng.int(0, 1)).collect();
            let spatial: Vec<usize> = (0..nd).map(|a| (kernel[a] - 1) * dil[a] + 1 + rng.int(0, 4)).collect();
            let mut xs = vec![1, cg * group];
            xs.extend(&spatial);
            let mut ws = vec![mg * group, cg];
            ws.extend(&kernel);
            let x = rng.vec(xs.iter().product(), -1.0, 1.0);
            let w = rng.vec(ws.iter().product(), -1.0, 1.0);
            let ca = Conv {
                dilations: dil.clone(),
                group,
                pads: pads.clone(),
                strides: st.clone(),
                ..Conv::default()
            };
            let cx =
                conv(&node("Conv"), &ca, &[Some(&tf(&xs, &x)), Some(&tf(&ws, &w)), None]).unwrap().remove(0);
            let out = cx.shape()[2..].to_vec();
            let y = rng.vec(cx.len(), -1.0, 1.0);
            let op: Vec<usize> = (0..nd)
                .map(|a| {
                    spatial[a] + pads[a] + pads[nd + a]
                        - (st[a] * (out[a] - 1) + (kernel[a] - 1) * dil[a] + 1)
                })
                .collect();
            let ta = ConvTranspose {
                dilations: dil,
                group,
                output_padding: op,
                pads,
                strides: st,
                ..ConvTranspose::default()
            };
            let ty = run(&ta, &tf(cx.shape(), &y), &tf(&ws, &w));
            assert_eq!(ty.shape(), &xs[..], "case {case}");
            let lhs: f64 = vals(&cx).iter().zip(&y).map(|(a, b)| a * b).sum();
            let rhs: f64 = x.iter().zip(vals(&ty)).map(|(a, b)| a * b).sum();
            assert_close(&[lhs], &[rhs], 1e-5);
        }
    }
}
