//! Resize tests: cases from the ONNX operator docs (values checked by hand where noted) and
//! identities (scale 1 is the identity; linear interpolation reproduces a linear ramp).

use super::*;
use crate::reference::nn::testing::{Rng, assert_close, node, tf, ti, vals};
use planner::op::KeepAspectRatioPolicy;

fn by_scales(attrs: &Resize, x: &HostTensor, scales: &[f64]) -> HostTensor {
    let s = tf(&[scales.len()], scales);
    resize(&node("Resize"), attrs, &[Some(x), None, Some(&s), None]).unwrap().remove(0)
}

fn ramp(h: usize, w: usize) -> HostTensor {
    tf(&[1, 1, h, w], &(1..=h * w).map(|v| v as f64).collect::<Vec<_>>())
}

fn mode(mode: ResizeMode, ctm: Ctm) -> Resize {
    Resize { mode, coordinate_transformation_mode: ctm, ..Resize::default() }
}

#[test]
fn nearest_up_and_down() {
    let y = by_scales(&Resize::default(), &ramp(2, 2), &[1., 1., 2., 3.]);
    assert_eq!(y.shape(), &[1, 1, 4, 6]);
    let r = |a: f64, b: f64| [a, a, a, b, b, b];
    assert_eq!(vals(&y), [r(1., 2.), r(1., 2.), r(3., 4.), r(3., 4.)].concat());
    let y = by_scales(&Resize::default(), &ramp(2, 4), &[1., 1., 0.6, 0.6]);
    assert_eq!(vals(&y), [1., 3.]);
    // asymmetric + floor picks floor(x / s); align_corners + round_prefer_ceil on a 1-D ramp.
    let x = tf(&[4], &[10., 20., 30., 40.]);
    let fl = Resize { nearest_mode: NearestMode::Floor, ..mode(ResizeMode::Nearest, Ctm::Asymmetric) };
    assert_eq!(vals(&by_scales(&fl, &x, &[1.5])), [10., 10., 20., 30., 30., 40.]);
    let ac =
        Resize { nearest_mode: NearestMode::RoundPreferCeil, ..mode(ResizeMode::Nearest, Ctm::AlignCorners) };
    // x_ori = i * 3/2: 0, 1.5, 3 -> 0, 2, 3.
    assert_eq!(vals(&by_scales(&ac, &x, &[0.75])), [10., 30., 40.]);
}

#[test]
fn linear_half_pixel_align_corners_and_downsampling() {
    let y = by_scales(&mode(ResizeMode::Linear, Ctm::HalfPixel), &ramp(2, 2), &[1., 1., 2., 2.]);
    let want = [1., 1.25, 1.75, 2., 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3., 3.25, 3.75, 4.];
    assert_close(&vals(&y), &want, 1e-6);
    let y = by_scales(&mode(ResizeMode::Linear, Ctm::AlignCorners), &ramp(2, 2), &[1., 1., 2., 2.]);
    let t = 1. / 3.;
    let want = [
        1.,
        1. + t,
        1. + 2. * t,
        2.,
        1. + 2. * t,
        2.,
        2. + t,
        2. + 2. * t,
        2. + t,
        2. + 2. * t,
        3.,
        3. + t,
        3.,
        3. + t,
        3. + 2. * t,
        4.,
    ];
    assert_close(&vals(&y), &want, 1e-6);
    // Rows 0,1 weighted 2/3,1/3 (x = 1/3); columns at x = 1/3 and x = 2.
    let y = by_scales(&mode(ResizeMode::Linear, Ctm::HalfPixel), &ramp(2, 4), &[1., 1., 0.6, 0.6]);
    assert_close(&vals(&y), &[2. + 2. / 3., 4. + 1. / 3.], 1e-6);
}

#[test]
fn cubic_upsampling_matches_the_onnx_doc_values() {
    let y = by_scales(&mode(ResizeMode::Cubic, Ctm::HalfPixel), &ramp(4, 4), &[1., 1., 2., 2.]);
    assert_eq!(y.shape(), &[1, 1, 8, 8]);
    let first = [0.47265625, 0.76953125, 1.24609375, 1.875, 2.28125, 2.91015625, 3.38671875, 3.68359375];
    assert_close(&vals(&y)[..8], &first, 1e-6);
    let y = by_scales(&mode(ResizeMode::Cubic, Ctm::AlignCorners), &ramp(4, 4), &[1., 1., 2., 2.]);
    let first = [1., 1.34110787, 1.80029155, 2.32944606, 2.67055394, 3.19970845, 3.65889213, 4.];
    assert_close(&vals(&y)[..8], &first, 1e-6);
}

#[test]
fn tf_crop_and_resize_with_extrapolation() {
    let roi = tf(&[8], &[0., 0., 0.4, 0.6, 1., 1., 0.6, 0.8]);
    let sizes = ti(&[4], &[1, 1, 3, 3]);
    let attrs = mode(ResizeMode::Linear, Ctm::TfCropAndResize);
    let y = resize(&node("Resize"), &attrs, &[Some(&ramp(4, 4)), Some(&roi), None, Some(&sizes)]).unwrap();
    // Rows at 1.2 + 0.3i, columns at 1.8 + 0.3j of the affine ramp 4h + w + 1.
    assert_close(&vals(&y[0]), &[7.6, 7.9, 8.2, 8.8, 9.1, 9.4, 10.0, 10.3, 10.6], 1e-5);
    let roi = tf(&[8], &[0., 0., 0.4, 0.6, 1., 1., 1.2, 1.7]);
    let ex = Resize { extrapolation_value: 10.0, ..attrs };
    let y = resize(&node("Resize"), &ex, &[Some(&ramp(4, 4)), Some(&roi), None, Some(&sizes)]).unwrap();
    assert_close(&vals(&y[0]), &[7.6, 10., 10., 12.4, 10., 10., 10., 10., 10.], 1e-5);
}

#[test]
fn sizes_with_axes_and_aspect_policy() {
    let sizes = ti(&[2], &[3, 8]);
    let x = ramp(2, 2);
    let nl = Resize {
        axes: Some(vec![2, 3]),
        keep_aspect_ratio_policy: KeepAspectRatioPolicy::NotLarger,
        ..Resize::default()
    };
    let y = resize(&node("Resize"), &nl, &[Some(&x), None, None, Some(&sizes)]).unwrap();
    assert_eq!(y[0].shape(), &[1, 1, 3, 3]);
    let ns = Resize { keep_aspect_ratio_policy: KeepAspectRatioPolicy::NotSmaller, ..nl.clone() };
    let y = resize(&node("Resize"), &ns, &[Some(&x), None, None, Some(&sizes)]).unwrap();
    assert_eq!(y[0].shape(), &[1, 1, 8, 8]);
    let s = tf(&[2], &[2., 2.]);
    assert!(resize(&node("Resize"), &nl, &[Some(&x), None, Some(&s), Some(&sizes)]).is_err());
    assert!(resize(&node("Resize"), &nl, &[Some(&x), None, None, None]).is_err());
}

#[test]
fn antialiased_linear_downsampling_averages_more_inputs() {
    let attrs = Resize { antialias: true, ..mode(ResizeMode::Linear, Ctm::HalfPixel) };
    let y = by_scales(&attrs, &ramp(4, 4), &[1., 1., 0.6, 0.6]);
    assert_close(&vals(&y), &[2.875, 4.5, 9.375, 11.], 1e-6);
}

#[test]
fn unit_scale_is_identity_and_linear_reproduces_ramps() {
    let mut rng = Rng::new(12);
    let x = tf(&[2, 3, 4], &rng.vec(24, -1.0, 1.0));
    for m in [ResizeMode::Nearest, ResizeMode::Linear, ResizeMode::Cubic] {
        for c in [
            Ctm::HalfPixel,
            Ctm::Asymmetric,
            Ctm::AlignCorners,
            Ctm::PytorchHalfPixel,
            Ctm::HalfPixelSymmetric,
        ] {
            assert_close(&vals(&by_scales(&mode(m, c), &x, &[1., 1., 1.])), &vals(&x), 1e-6);
        }
    }
    // 3-D linear align_corners upsampling of an affine function is exact everywhere.
    let f = |a: f64, b: f64, c: f64| 1.0 + 2.0 * a - 3.0 * b + 0.5 * c;
    let (d0, d1, d2) = (2, 3, 3);
    let data: Vec<f64> =
        (0..d0 * d1 * d2).map(|k| f((k / 9) as f64, ((k / 3) % 3) as f64, (k % 3) as f64)).collect();
    let y = by_scales(&mode(ResizeMode::Linear, Ctm::AlignCorners), &tf(&[d0, d1, d2], &data), &[2., 2., 2.]);
    assert_eq!(y.shape(), &[4, 6, 6]);
    let want: Vec<f64> = (0..4 * 36)
        .map(|k| f((k / 36) as f64 / 3.0, ((k / 6) % 6) as f64 * 2.0 / 5.0, (k % 6) as f64 * 2.0 / 5.0))
        .collect();
    assert_close(&vals(&y), &want, 1e-5);
}
