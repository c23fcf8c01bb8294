//! Reference `Conv` (N-D, grouped, dilated, strided, padded): a direct loop over output positions,
//! input channels of the group and kernel taps, accumulating in f64.
//!
//! Layout is ONNX's: X `(N, C, D1..Dn)`, W `(M, C/group, k1..kn)`, B `(M)`, Y `(N, M, O1..On)`.

use planner::op::Conv;

use super::operand::{OutBuf, count, expect_shape, float_view, input, input_opt, required, strides, unravel};
use super::window::geometry;
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// ONNX `Conv` (opset 11+): `Y[n, m, o] = B[m] + Σ_{c in group(m), k} X[n, c, o·s − pad + k·d] ·
/// W[m, c mod C/g, k]`, with padding reading as zero and `auto_pad` resolved as the spec says.
pub fn conv(
    node: &NodeCtx,
    attrs: &Conv,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = float_view(node, required(node, inputs, 0, "X")?, "X")?;
    let w = input(node, inputs, 1, "W")?;
    let b = input_opt(node, inputs, 2, "B")?;
    if x.shape.len() < 3 || w.shape.len() != x.shape.len() {
        return Err(node.err(format!("X {:?} and W {:?} must have the same rank >= 3", x.shape, w.shape)));
    }
    let (batch, channels, spatial) = (x.shape[0], x.shape[1], &x.shape[2..]);
    let mut x_col = crate::tensor::try_filled(group_channels_of(&w.shape), 0.0, "a working buffer")?;
    let (maps, group_channels, kernel) = (w.shape[0], w.shape[1], &w.shape[2..]);
    let group = attrs.group;
    if group == 0 || channels % group != 0 || maps % group != 0 || channels / group != group_channels {
        return Err(node.err(format!(
            "group {group} does not fit X channels {channels}, W {:?} (W dim 1 must be C/group)",
            w.shape
        )));
    }
    if !attrs.kernel_shape.is_empty() && attrs.kernel_shape != kernel {
        return Err(node.err(format!("kernel_shape {:?} disagrees with W {:?}", attrs.kernel_shape, w.shape)));
    }
    if let Some(b) = &b {
        expect_shape(node, &b.shape, &[maps], "B")?;
    }
    let g = geometry(
        node,
        spatial,
        kernel,
        &attrs.strides,
        &attrs.dilations,
        &attrs.pads,
        attrs.auto_pad,
        false,
    )?;
    let mut y_shape = vec![batch, maps];
    y_shape.extend(&g.out);
    let (n_out, n_tap) = (count(node, &g.out)?, count(node, kernel)?);
    let n_in = count(node, spatial)?;
    let in_strides = strides(spatial);
    let maps_per_group = maps / group;
    let mut y = OutBuf::new(node, x.dtype, y_shape)?;
    let (mut oi, mut ki) = (vec![0; spatial.len()], vec![0; spatial.len()]);
    for n in 0..batch {
        for m in 0..maps {
            let first_c = (m / maps_per_group) * group_channels;
            let bias = b.as_ref().map_or(0.0, |b| b.data[m]);
            for o in 0..n_out {
                unravel(o, &g.out, &mut oi);
                let mut acc = bias;
                for tap in 0..n_tap {
                    unravel(tap, kernel, &mut ki);
                    let mut off = 0;
                    let inside = (0..spatial.len()).all(|a| match g.source(a, oi[a], ki[a], spatial[a]) {
                        Some(p) => {
                            off += p * in_strides[a];
                            true
                        }
                        None => false,
                    });
                    if !inside {
                        continue;
                    }
                    for (cl, v) in x_col.iter_mut().enumerate() {
                        *v = x.at((n * channels + first_c + cl) * n_in + off);
                    }
                    for (cl, xv) in x_col.iter().enumerate() {
                        acc += xv * w.data[(m * group_channels + cl) * n_tap + tap];
                    }
                }
                y.set((n * maps + m) * n_out + o, acc);
            }
        }
    }
    Ok(vec![y.finish(node)?])
}

/// Input channels per group: dim 1 of W (0 for a W of rank < 2, which `conv` refuses).
fn group_channels_of(w_shape: &[usize]) -> usize {
    w_shape.get(1).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};
    use planner::op::AutoPad;

    fn run(attrs: &Conv, x: &HostTensor, w: &HostTensor, b: Option<&HostTensor>) -> HostTensor {
        conv(&node("Conv"), attrs, &[Some(x), Some(w), b]).unwrap().remove(0)
    }

    /// The ONNX `Conv` doc example: 5x5 ramp input, 3x3 ones kernel.
    #[test]
    fn onnx_doc_example_with_and_without_padding() {
        let x = tf(&[1, 1, 5, 5], &(0..25).map(f64::from).collect::<Vec<_>>());
        let w = tf(&[1, 1, 3, 3], &[1.0; 9]);
        let padded = run(&Conv { pads: vec![1, 1, 1, 1], ..Conv::default() }, &x, &w, None);
        assert_eq!(padded.shape(), &[1, 1, 5, 5]);
        let want = [
            12., 21., 27., 33., 24., 33., 54., 63., 72., 51., 63., 99., 108., 117., 81., 93., 144., 153.,
            162., 111., 72., 111., 117., 123., 84.,
        ];
        assert_eq!(vals(&padded), want);
        let unpadded = run(&Conv::default(), &x, &w, None);
        assert_eq!(vals(&unpadded), [54., 63., 72., 99., 108., 117., 144., 153., 162.]);
        // conv_with_strides_and_asymmetric_padding from the ONNX backend tests (7x5 input).
        let x7 = tf(&[1, 1, 7, 5], &(0..35).map(f64::from).collect::<Vec<_>>());
        let attrs = Conv { pads: vec![1, 0, 1, 0], strides: vec![2, 2], ..Conv::default() };
        let y = run(&attrs, &x7, &w, None);
        assert_eq!(y.shape(), &[1, 1, 4, 2]);
        assert_eq!(vals(&y), [21., 33., 99., 117., 189., 207., 171., 183.]);
    }

    #[test]
    fn same_upper_auto_pad_keeps_the_size_and_bias_adds() {
        let x = tf(&[1, 1, 4], &[1., 2., 3., 4.]);
        let w = tf(&[1, 1, 2], &[1., 1.]);
        let b = tf(&[1], &[10.]);
        let attrs = Conv { auto_pad: AutoPad::SameUpper, ..Conv::default() };
        assert_eq!(vals(&run(&attrs, &x, &w, Some(&b))), [13., 15., 17., 14.]);
        let attrs = Conv { auto_pad: AutoPad::SameLower, ..Conv::default() };
        assert_eq!(vals(&run(&attrs, &x, &w, Some(&b))), [11., 13., 15., 17.]);
    }

    #[test]
    fn rejects_group_mismatch() {
        let x = tf(&[1, 3, 4], &[0.; 12]);
        let w = tf(&[2, 2, 1], &[0.; 4]);
        let attrs = Conv { group: 2, ..Conv::default() };
        assert!(conv(&node("Conv"), &attrs, &[Some(&x), Some(&w), None]).is_err());
    }

    /// Conv as im2col + matmul: for each group, columns[(c, tap), o] gathered with zero padding,
    /// then W_g `(M/g, C/g·taps)` times columns.
    fn im2col_conv(
        x: &[f64],
        xs: &[usize],
        w: &[f64],
        ws: &[usize],
        b: &[f64],
        a: &Conv,
    ) -> (Vec<usize>, Vec<f64>) {
        let nd = xs.len() - 2;
        let g =
            geometry(&node("Conv"), &xs[2..], &ws[2..], &a.strides, &a.dilations, &a.pads, a.auto_pad, false)
                .unwrap();
        let (cg, mg) = (ws[1], ws[0] / a.group);
        let taps: usize = ws[2..].iter().product();
        let n_out: usize = g.out.iter().product();
        let n_in: usize = xs[2..].iter().product();
        let ist = strides(&xs[2..]);
        let mut y = vec![0.0; xs[0] * ws[0] * n_out];
        let (mut oi, mut ki) = (vec![0; nd], vec![0; nd]);
        for n in 0..xs[0] {
            for grp in 0..a.group {
                let mut cols = vec![0.0; cg * taps * n_out];
                for c in 0..cg {
                    for t in 0..taps {
                        unravel(t, &ws[2..], &mut ki);
                        for o in 0..n_out {
                            unravel(o, &g.out, &mut oi);
                            let pos: Option<Vec<usize>> = (0..nd)
                                .map(|ax| {
                                    let p = (oi[ax] * g.strides[ax] + ki[ax] * g.dilations[ax]) as i64
                                        - g.pad_begin[ax] as i64;
                                    (0..xs[2 + ax] as i64).contains(&p).then_some(p as usize)
                                })
                                .collect();
                            if let Some(p) = pos {
                                let off: usize = p.iter().zip(&ist).map(|(i, s)| i * s).sum();
                                cols[(c * taps + t) * n_out + o] = x[(n * xs[1] + grp * cg + c) * n_in + off];
                            }
                        }
                    }
                }
                for ml in 0..mg {
                    let m = grp * mg + ml;
                    for o in 0..n_out {
                        let dot: f64 =
                            (0..cg * taps).map(|r| w[m * cg * taps + r] * cols[r * n_out + o]).sum();
                        y[(n * ws[0] + m) * n_out + o] = dot + b[m];
                    }
                }
            }
        }
        let mut shape = vec![xs[0], ws[0]];
        shape.extend(&g.out);
        (shape, y)
    }

    #[test]
    fn matches_im2col_matmul_on_random_shapes() {
        let mut rng = Rng::new(42);
        for case in 0..60 {
            let nd = 1 + case % 3;
            let group = [1, 2, 3][rng.int(0, 2)];
            let (cg, mg, batch) = (rng.int(1, 2), rng.int(1, 2), rng.int(1, 2));
            let kernel: Vec<usize> = (0..nd).map(|_| rng.int(1, 3)).collect();
            let dil: Vec<usize> = (0..nd).map(|_| rng.int(1, 2)).collect();
            let st: Vec<usize> = (0..nd).map(|_| rng.int(1, 2)).collect();
            let pads: Vec<usize> = (0..2 * nd).map(|_| rng.int(0, 2)).collect();
            let spatial: Vec<usize> = (0..nd).map(|a| (kernel[a] - 1) * dil[a] + 1 + rng.int(0, 3)).collect();
            let auto_pad =
                [AutoPad::NotSet, AutoPad::NotSet, AutoPad::SameUpper, AutoPad::SameLower, AutoPad::Valid]
                    [rng.int(0, 4)];
            let attrs = Conv { auto_pad, dilations: dil, group, kernel_shape: vec![], pads, strides: st };
            let mut xs = vec![batch, cg * group];
            xs.extend(&spatial);
            let mut ws = vec![mg * group, cg];
            ws.extend(&kernel);
            let x = rng.vec(xs.iter().product(), -1.0, 1.0);
            let w = rng.vec(ws.iter().product(), -1.0, 1.0);
            let b = rng.vec(ws[0], -1.0, 1.0);
            let (want_shape, want) = im2col_conv(&x, &xs, &w, &ws, &b, &attrs);
            let got = run(&attrs, &tf(&xs, &x), &tf(&ws, &w), Some(&tf(&[ws[0]], &b)));
            assert_eq!(got.shape(), &want_shape[..], "case {case}: {attrs:?}");
            assert_close(&vals(&got), &want, 1e-5);
        }
    }
}
