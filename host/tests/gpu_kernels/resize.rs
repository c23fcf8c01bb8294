//! Resize through `Session` against the CPU reference: every mode (nearest with each
//! `nearest_mode`, linear, cubic with and without `exclude_outside`, both with and without
//! `antialias`) × every
//! `coordinate_transformation_mode`, on random shapes with 1–3 resized axes, up- and
//! down-sampling, `scales` or `sizes` (with each `keep_aspect_ratio_policy`), with and without the
//! `axes` attribute, random rois (on the resized axes) and an extrapolation value for `tf_crop_and_resize`. Nearest must
//! match bit for bit (same source index), linear and cubic within 1e-5.

use host::HostTensor;
use host::selftest::Rng;
use planner::op::{
    self, CoordinateTransformationMode as Ctm, KeepAspectRatioPolicy, NearestMode, Op, ResizeMode,
};
use planner::{ConstTensor, DType, Graph};

use crate::indexing::{compare, known, pick, shape_of};

const CTMS: [Ctm; 6] = [
    Ctm::HalfPixel,
    Ctm::HalfPixelSymmetric,
    Ctm::PytorchHalfPixel,
    Ctm::AlignCorners,
    Ctm::Asymmetric,
    Ctm::TfCropAndResize,
];

/// One random Resize case for `attrs`: the graph (x an input, roi/scales/sizes initializers) and a
/// description, or `None` when the drawn shape resizes to nothing.
fn case(rng: &mut Rng, mut attrs: op::Resize, dtype: DType) -> Option<(String, Graph, Vec<usize>)> {
    let rank = 1 + (rng.next_u64() % 5) as usize;
    let shape = shape_of(rng, rank, &[1, 2, 3, 4, 5, 7, 9]);
    let resized = 1 + (rng.next_u64() % rank.min(3) as u64) as usize;
    // Distinct resized axes, ascending or not.
    let mut axes: Vec<usize> = (0..rank).collect();
    for i in 0..rank {
        let j = i + (rng.next_u64() % (rank - i) as u64) as usize;
        axes.swap(i, j);
    }
    axes.truncate(resized);
    let with_axes = rng.next_u64().is_multiple_of(2) || resized == rank;
    // The axes the operands list: the drawn ones (attribute) or all of them.
    let listed: Vec<usize> = if with_axes { axes.clone() } else { (0..rank).collect() };
    if with_axes {
        attrs.axes = Some(
            axes.iter()
                .map(|&a| if rng.next_u64().is_multiple_of(2) { a as i64 - rank as i64 } else { a as i64 })
                .collect(),
        );
    }
    let mut g = Graph::new();
    let x = g.input("x", dtype, known(&shape));
    let (mut scales, mut sizes) = (None, None);
    if rng.next_u64().is_multiple_of(2) {
        let s: Vec<f32> = listed
            .iter()
            .map(|a| {
                if axes.contains(a) {
                    pick(rng, &[0.5, 0.6, 0.75, 1.0, 1.3, 1.5, 2.0, 2.5, 3.0])
                } else {
                    1.0
                }
            })
            .collect();
        scales = Some(s);
    } else {
        let s: Vec<i64> = listed
            .iter()
            .map(|&a| if axes.contains(&a) { 1 + (rng.next_u64() % 9) as i64 } else { shape[a] as i64 })
            .collect();
        // A policy scales every listed axis alike: only with the axes attribute (at most 3).
        if with_axes {
            attrs.keep_aspect_ratio_policy = pick(
                rng,
                &[
                    KeepAspectRatioPolicy::Stretch,
                    KeepAspectRatioPolicy::NotLarger,
                    KeepAspectRatioPolicy::NotSmaller,
                ],
            );
        }
        sizes = Some(s);
    }
    let sc: Option<Vec<f64>> = scales.as_ref().map(|s| s.iter().map(|&v| v as f64).collect());
    let (_, out) = attrs.geometry(&shape, &listed, sc.as_deref(), sizes.as_deref()).ok()?;
    if out.contains(&0) {
        return None;
    }
    let roi = (attrs.coordinate_transformation_mode == Ctm::TfCropAndResize).then(|| {
        let starts: Vec<f32> =
            listed.iter().map(|a| if axes.contains(a) { rng.uniform(-0.2, 0.5) } else { 0.0 }).collect();
        let ends: Vec<f32> =
            listed.iter().map(|a| if axes.contains(a) { rng.uniform(0.5, 1.2) } else { 1.0 }).collect();
        [starts, ends].concat()
    });
    if roi.is_some() && dtype == DType::F32 {
        attrs.extrapolation_value = pick(rng, &[0.0, 10.0, -3.5]);
    }
    let what =
        format!("{attrs:?} {dtype} x {shape:?} scales {scales:?} sizes {sizes:?} roi {roi:?} -> {out:?}");
    let mut operand = |name: &str, t: Option<ConstTensor>| t.map(|t| g.initializer(name, t));
    let roi = operand("roi", roi.map(|r| ConstTensor::from_f32(&[r.len()], &r).unwrap()));
    let scales = operand("scales", scales.map(|s| ConstTensor::from_f32(&[s.len()], &s).unwrap()));
    let sizes = operand("sizes", sizes.map(|s| ConstTensor::from_i64(&[s.len()], &s).unwrap()));
    let y = g.push_opt(Op::Resize(attrs), vec![Some(x), roi, scales, sizes], 1)[0];
    g.output(y);
    Some((what, g, shape))
}

/// `cases` random cases of each attribute set against the reference; the plan must use `kernel`.
fn check(seed: u64, variants: &[op::Resize], dtype: DType, kernel: &str, rtol: f64) {
    let mut rng = Rng::new(seed);
    for base in variants {
        for ctm in CTMS {
            let attrs = op::Resize { coordinate_transformation_mode: ctm, ..base.clone() };
            let mut done = 0;
            while done < 6 {
                let Some((what, g, shape)) = case(&mut rng, attrs.clone(), dtype) else { continue };
                let n: usize = shape.iter().product();
                let x = match dtype {
                    DType::F32 => rng.tensor(&shape, -2.0, 2.0),
                    DType::I64 => HostTensor::new(
                        shape.clone(),
                        (0..n).map(|_| rng.next_u64() as i64 >> 3).collect::<Vec<i64>>(),
                    )
                    .unwrap(),
                    _ => HostTensor::new(
                        shape.clone(),
                        (0..n).map(|_| rng.next_u64() as i32 >> 12).collect::<Vec<i32>>(),
                    )
                    .unwrap(),
                };
                let plan = compare(&what, g, &[("x".into(), x)], rtol);
                assert!(plan.contains(kernel), "{what}:\n{plan}");
                done += 1;
            }
        }
    }
}

#[test]
fn resize_nearest_matches_the_reference_in_every_mode() {
    let variants: Vec<op::Resize> =
        [NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil]
            .into_iter()
            .map(|nearest_mode| op::Resize { nearest_mode, ..op::Resize::default() })
            .collect();
    check(0x5e51, &variants, DType::F32, "resize_nearest_b4", 0.0);
}

#[test]
fn resize_nearest_moves_integer_elements_exactly() {
    let variants = [
        op::Resize { nearest_mode: NearestMode::RoundPreferCeil, ..op::Resize::default() },
        op::Resize { nearest_mode: NearestMode::Floor, ..op::Resize::default() },
    ];
    check(0x5e52, &variants, DType::I64, "resize_nearest_b8", 0.0);
    check(0x5e53, &variants, DType::I32, "resize_nearest_b4", 0.0);
}

#[test]
fn resize_linear_matches_the_reference_in_every_mode() {
    let variants = [
        op::Resize { mode: ResizeMode::Linear, ..op::Resize::default() },
        op::Resize { mode: ResizeMode::Linear, antialias: true, ..op::Resize::default() },
    ];
    check(0x5e54, &variants, DType::F32, "resize_linear_f32", 1e-5);
}

#[test]
fn resize_cubic_matches_the_reference_in_every_mode() {
    let variants = [
        op::Resize { mode: ResizeMode::Cubic, ..op::Resize::default() },
        op::Resize {
            mode: ResizeMode::Cubic,
            exclude_outside: true,
            cubic_coeff_a: -0.5,
            ..op::Resize::default()
        },
        op::Resize { mode: ResizeMode::Cubic, antialias: true, ..op::Resize::default() },
    ];
    check(0x5e55, &variants, DType::F32, "resize_cubic_f32", 1e-5);
}

#[test]
fn grid_sample_matches_the_reference_in_every_mode() {
    use planner::op::{GridSample, GridSampleMode, GridSamplePadding};
    let mut rng = Rng::new(0x961d);
    let modes = [GridSampleMode::Nearest, GridSampleMode::Linear, GridSampleMode::Cubic];
    let paddings = [GridSamplePadding::Zeros, GridSamplePadding::Border, GridSamplePadding::Reflection];
    // (X, output spatial dims)
    let shapes: [(&[usize], &[usize]); 3] =
        [(&[2, 3, 5, 7], &[4, 6]), (&[1, 2, 9], &[11]), (&[1, 2, 3, 4, 5], &[2, 3, 4])];
    for (xd, out) in shapes {
        let r = xd.len() - 2;
        for mode in modes {
            if mode == GridSampleMode::Cubic && r != 2 {
                continue;
            }
            for padding_mode in paddings {
                for align_corners in [false, true] {
                    let mut gd = vec![xd[0]];
                    gd.extend_from_slice(out);
                    gd.push(r);
                    let mut g = Graph::new();
                    let x = g.input("x", DType::F32, known(xd));
                    let grid = g.input("grid", DType::F32, known(&gd));
                    let attrs = GridSample { align_corners, mode, padding_mode };
                    let y = g.op1(Op::GridSample(attrs), &[x, grid]);
                    g.output(y);
                    // Points past the borders (-1.6..1.6) exercise the padding.
                    let inputs = vec![
                        ("x".to_string(), rng.tensor(xd, -2.0, 2.0)),
                        ("grid".to_string(), rng.tensor(&gd, -1.6, 1.6)),
                    ];
                    let what = format!("GridSample {xd:?} {mode:?} {padding_mode:?} align {align_corners}");
                    let plan = compare(&what, g, &inputs, 1e-5);
                    assert!(plan.contains("grid_sample_f32"), "{plan}");
                }
            }
        }
    }
}

#[test]
fn affine_grid_and_a_spatial_transformer_match_the_reference() {
    use planner::op::{AffineGrid, GridSample};
    let mut rng = Rng::new(0xaff1);
    for (size, align_corners) in
        [(vec![2, 3, 5, 7], false), (vec![1, 2, 4, 3, 6], true), (vec![3, 1, 1, 9], true)]
    {
        let r = size.len() - 2;
        let mut g = Graph::new();
        let theta = g.input("theta", DType::F32, known(&[size[0], r, r + 1]));
        let s = g.const_i64("size", &[size.len()], &size.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let grid = g.op1(Op::AffineGrid(AffineGrid { align_corners }), &[theta, s]);
        // The grid alone, and a spatial transformer: X sampled at it.
        let x = g.input("x", DType::F32, known(&size));
        let y = g.op1(Op::GridSample(GridSample { align_corners, ..GridSample::default() }), &[x, grid]);
        g.output(grid);
        g.output(y);
        let inputs = vec![
            ("theta".to_string(), rng.tensor(&[size[0], r, r + 1], -1.2, 1.2)),
            ("x".to_string(), rng.tensor(&size, -2.0, 2.0)),
        ];
        let plan = compare(&format!("AffineGrid {size:?} align {align_corners}"), g, &inputs, 1e-5);
        assert!(plan.contains("affine_grid_f32") && plan.contains("grid_sample_f32"), "{plan}");
    }
}

#[test]
fn dft_matches_the_reference_in_every_direction() {
    use planner::op::Dft;
    let mut rng = Rng::new(0xdf7);
    // (input, axis, dft_length, inverse, onesided)
    type Case = (Vec<usize>, i64, Option<i64>, bool, bool);
    let cases: [Case; 7] = [
        (vec![2, 16, 1], 1, None, false, false),
        (vec![3, 10, 2], -2, None, true, false),
        (vec![2, 12, 1], 1, None, false, true),
        (vec![1, 7, 2], 1, None, true, true),
        (vec![2, 9, 3, 2], 1, Some(12), false, false),
        (vec![4, 5, 2], 0, Some(3), true, false),
        (vec![1, 64, 1], 1, Some(100), false, true),
    ];
    for (shape, axis, length, inverse, onesided) in cases {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let mut ins = vec![Some(x)];
        ins.push(length.map(|l| g.const_i64("len", &[], &[l])));
        let y = g.push_opt(Op::Dft(Dft { axis: Some(axis), inverse, onesided }), ins, 1)[0];
        g.output(y);
        let inputs = vec![("x".to_string(), rng.tensor(&shape, -1.0, 1.0))];
        let what =
            format!("DFT {shape:?} axis {axis} length {length:?} inverse {inverse} onesided {onesided}");
        let plan = compare(&what, g, &inputs, 1e-5);
        assert!(plan.contains("dft_f32"), "{plan}");
    }
}

#[test]
fn stft_matches_the_reference() {
    use planner::op::Stft;
    let mut rng = Rng::new(0x57f7);
    // (signal, step, window length, frame length, onesided)
    for (shape, step, window, frame, onesided) in [
        (vec![2, 64, 1], 8, Some(16), None, true),
        (vec![1, 50, 2], 5, None, Some(12), false),
        (vec![3, 33, 1], 4, Some(10), Some(10), false),
        (vec![1, 20, 1], 3, None, None, true),
    ] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&shape));
        let s = g.const_i64("step", &[], &[step]);
        let mut inputs = vec![("x".to_string(), rng.tensor(&shape, -1.0, 1.0))];
        let w = window.map(|n| {
            inputs.push(("w".to_string(), rng.tensor(&[n], 0.0, 1.0)));
            g.input("w", DType::F32, known(&[n]))
        });
        let f = frame.map(|n| g.const_i64("frame", &[], &[n]));
        let y = g.push_opt(Op::Stft(Stft { onesided }), vec![Some(x), Some(s), w, f], 1)[0];
        g.output(y);
        let what =
            format!("STFT {shape:?} step {step} window {window:?} frame {frame:?} onesided {onesided}");
        let plan = compare(&what, g, &inputs, 1e-5);
        assert!(plan.contains("stft_f32"), "{plan}");
    }
}

#[test]
fn col2im_matches_the_reference() {
    use planner::op::Col2Im;
    let mut rng = Rng::new(0xc021);
    // (batch, channels, image, block, strides, dilations, pads)
    type Case = (usize, usize, Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>);
    let cases: [Case; 4] = [
        (1, 1, vec![5, 5], vec![2, 2], vec![], vec![], vec![]),
        (2, 3, vec![6, 7], vec![3, 2], vec![2, 1], vec![1, 2], vec![1, 0, 1, 1]),
        (1, 2, vec![9], vec![3], vec![2], vec![2], vec![1, 2]),
        (1, 1, vec![3, 4, 5], vec![2, 2, 2], vec![1, 2, 1], vec![], vec![]),
    ];
    for (n, c, image, block, strides, dilations, pads) in cases {
        let r = image.len();
        let at = |v: &Vec<usize>, d: usize, default: usize| v.get(d).copied().unwrap_or(default);
        let grid: usize = (0..r)
            .map(|d| {
                let span = image[d] + at(&pads, d, 0) + at(&pads, d + r, 0);
                (span - (at(&dilations, d, 1) * (block[d] - 1) + 1)) / at(&strides, d, 1) + 1
            })
            .product();
        let kprod: usize = block.iter().product();
        let xd = [n, c * kprod, grid];
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&xd));
        let is = g.const_i64("image", &[r], &image.iter().map(|&v| v as i64).collect::<Vec<_>>());
        let bs = g.const_i64("block", &[r], &block.iter().map(|&v| v as i64).collect::<Vec<_>>());
        let attrs = Col2Im { dilations: dilations.clone(), pads: pads.clone(), strides: strides.clone() };
        let y = g.op1(Op::Col2Im(attrs), &[x, is, bs]);
        g.output(y);
        let inputs = vec![("x".to_string(), rng.tensor(&xd, -1.0, 1.0))];
        let what = format!(
            "Col2Im image {image:?} block {block:?} strides {strides:?} dilations {dilations:?} pads {pads:?}"
        );
        let plan = compare(&what, g, &inputs, 1e-6);
        assert!(plan.contains("col2im_f32"), "{plan}");
    }
}
