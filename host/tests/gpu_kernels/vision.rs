//! The detection kernels against the CPU reference: RoiAlign (`roi_align_f32`: both modes, both
//! coordinate transformations, fixed and adaptive sampling, scaled rois partly or wholly outside
//! the image, reversed rois) and DeformConv (`deform_conv_f32`: 1 to 3 spatial dims, groups and
//! offset groups that split each other's channels, strides, pads, dilations, with and without
//! mask and bias, offsets that push taps past the borders).

use host::HostTensor;
use host::selftest::Rng;
use planner::op::{DeformConv, Op, RoiAlign};
use planner::{DType, Graph, ValueId};

use crate::indexing::{compare, known, pick};

/// `count` rois over an `h x w` image in roi coordinates (pixels / `scale`): corners from 4 pixels
/// before the image to 2 past it, sizes up to the image's (and now and then negative).
fn rois(rng: &mut Rng, count: usize, (h, w): (usize, usize), scale: f32) -> HostTensor {
    let mut v = Vec::with_capacity(count * 4);
    for _ in 0..count {
        let (x1, y1) = (rng.uniform(-4.0, w as f32 + 2.0), rng.uniform(-4.0, h as f32 + 2.0));
        let (bw, bh) = (rng.uniform(-0.5, w as f32), rng.uniform(-0.5, h as f32));
        v.extend([x1, y1, x1 + bw, y1 + bh].map(|c| c / scale));
    }
    HostTensor::new(vec![count, 4], v).unwrap()
}

/// Runs one RoiAlign over X `xd` with `count` random rois and compares it with the reference.
fn roi_case(rng: &mut Rng, a: RoiAlign, xd: [usize; 4], count: usize, i32_indices: bool) {
    let idx_type = if i32_indices { DType::I32 } else { DType::I64 };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&xd));
    let r = g.input("rois", DType::F32, known(&[count, 4]));
    let i = g.input("idx", idx_type, known(&[count]));
    let y = g.op1(Op::RoiAlign(a.clone()), &[x, r, i]);
    g.output(y);
    let batch: Vec<i64> = (0..count).map(|_| (rng.next_u64() % xd[0] as u64) as i64).collect();
    let batch = if i32_indices {
        HostTensor::new(vec![count], batch.iter().map(|&b| b as i32).collect::<Vec<_>>()).unwrap()
    } else {
        HostTensor::new(vec![count], batch).unwrap()
    };
    let inputs = vec![
        ("x".to_string(), rng.tensor(&xd, -2.0, 2.0)),
        ("rois".to_string(), rois(rng, count, (xd[2], xd[3]), a.spatial_scale)),
        ("idx".to_string(), batch),
    ];
    let plan = compare(&format!("RoiAlign {xd:?} x{count} {a:?}"), g, &inputs, 1e-5);
    assert!(plan.contains("roi_align_f32"), "{plan}");
}

#[test]
fn roi_align_matches_the_reference_in_every_mode() {
    let mut rng = Rng::new(0x401a);
    for max in [false, true] {
        for half_pixel in [true, false] {
            for sampling_ratio in [0, 1, 2, 3] {
                let a = RoiAlign {
                    half_pixel,
                    max,
                    output_height: pick(&mut rng, &[1, 2, 3, 5, 7]),
                    output_width: pick(&mut rng, &[1, 2, 4, 6]),
                    sampling_ratio,
                    spatial_scale: pick(&mut rng, &[1.0, 0.5, 0.25, 0.37]),
                };
                let xd = [
                    pick(&mut rng, &[1, 2, 3]),
                    pick(&mut rng, &[1, 3, 4]),
                    pick(&mut rng, &[1, 5, 10, 17]),
                    pick(&mut rng, &[1, 6, 12, 19]),
                ];
                let count = pick(&mut rng, &[1, 3, 8]);
                roi_case(&mut rng, a, xd, count, sampling_ratio == 3);
            }
        }
    }
}

#[test]
fn roi_align_of_the_onnx_shapes_matches_the_reference() {
    // The ONNX backend tests' geometry: a 10 x 10 image, 5 x 5 bins, 2 x 2 samples, and large
    // adaptive grids (rois the size of the image, one bin).
    let mut rng = Rng::new(0x401b);
    for (max, half_pixel) in [(false, false), (false, true), (true, false), (true, true)] {
        let a = RoiAlign {
            half_pixel,
            max,
            output_height: 5,
            output_width: 5,
            sampling_ratio: 2,
            spatial_scale: 1.0,
        };
        let one = RoiAlign { output_height: 1, output_width: 1, sampling_ratio: 0, ..a.clone() };
        roi_case(&mut rng, a, [1, 1, 10, 10], 3, false);
        roi_case(&mut rng, one, [2, 5, 24, 24], 4, false);
    }
}

/// Sizes and attributes of one DeformConv case.
struct DeformCase {
    x: Vec<usize>,
    m: usize,
    kernel: Vec<usize>,
    group: usize,
    offset_group: usize,
    strides: Vec<usize>,
    pads: Vec<usize>,
    dilations: Vec<usize>,
    bias: bool,
    mask: bool,
}

fn deform_case(rng: &mut Rng, c: &DeformCase) {
    let r = c.x.len() - 2;
    let out: Vec<usize> = (0..r)
        .map(|d| {
            let (s, dil) = (c.strides.get(d).copied().unwrap_or(1), c.dilations.get(d).copied().unwrap_or(1));
            let pads = c.pads.get(d).copied().unwrap_or(0) + c.pads.get(d + r).copied().unwrap_or(0);
            (c.x[d + 2] + pads - dil * (c.kernel[d] - 1) - 1) / s + 1
        })
        .collect();
    let kprod: usize = c.kernel.iter().product();
    let mut wd = vec![c.m, c.x[1] / c.group];
    wd.extend(&c.kernel);
    let field = |channels: usize| {
        let mut d = vec![c.x[0], channels];
        d.extend(&out);
        d
    };
    let (od, md) = (field(c.offset_group * kprod * r), field(c.offset_group * kprod));
    let mut g = Graph::new();
    let mut ins: Vec<Option<ValueId>> = vec![
        Some(g.input("x", DType::F32, known(&c.x))),
        Some(g.input("w", DType::F32, known(&wd))),
        Some(g.input("offset", DType::F32, known(&od))),
    ];
    let mut inputs = vec![
        ("x".to_string(), rng.tensor(&c.x, -2.0, 2.0)),
        ("w".to_string(), rng.tensor(&wd, -1.0, 1.0)),
        // Up to two pixels either way: some taps land between pixels, some outside.
        ("offset".to_string(), rng.tensor(&od, -2.0, 2.0)),
    ];
    ins.push(c.bias.then(|| g.input("b", DType::F32, known(&[c.m]))));
    if c.bias {
        inputs.push(("b".to_string(), rng.tensor(&[c.m], -1.0, 1.0)));
    }
    if c.mask {
        ins.push(Some(g.input("mask", DType::F32, known(&md))));
        inputs.push(("mask".to_string(), rng.tensor(&md, 0.0, 1.0)));
    }
    let a = DeformConv {
        dilations: c.dilations.clone(),
        group: c.group,
        kernel_shape: if rng.next_u64().is_multiple_of(2) { c.kernel.clone() } else { vec![] },
        offset_group: c.offset_group,
        pads: c.pads.clone(),
        strides: c.strides.clone(),
    };
    let y = g.push_opt(Op::DeformConv(a.clone()), ins, 1);
    g.output(y[0]);
    let what = format!("DeformConv X {:?} W {wd:?} bias {} mask {} {a:?}", c.x, c.bias, c.mask);
    let plan = compare(&what, g, &inputs, 1e-4);
    assert!(plan.contains("deform_conv_f32"), "{plan}");
}

#[test]
fn deform_conv_matches_the_reference() {
    let mut rng = Rng::new(0xdef0);
    let case = |x: &[usize], m: usize, kernel: &[usize], (group, offset_group): (usize, usize)| DeformCase {
        x: x.to_vec(),
        m,
        kernel: kernel.to_vec(),
        group,
        offset_group,
        strides: vec![],
        pads: vec![],
        dilations: vec![],
        bias: false,
        mask: false,
    };
    let cases = [
        // The ONNX tests' shapes: a 3 x 3 image, 2 x 2 kernel, with and without padding.
        case(&[1, 1, 3, 3], 1, &[2, 2], (1, 1)),
        DeformCase { pads: vec![1, 1, 1, 1], bias: true, ..case(&[1, 1, 3, 3], 1, &[2, 2], (1, 1)) },
        DeformCase { bias: true, mask: true, ..case(&[1, 1, 3, 3], 1, &[2, 2], (1, 1)) },
        DeformCase { mask: true, ..case(&[1, 2, 3, 3], 1, &[2, 2], (1, 2)) },
        // Groups and offset groups, each splitting the other's channels (6 channels: groups of 2,
        // offset groups of 3).
        DeformCase { bias: true, mask: true, ..case(&[2, 6, 7, 8], 9, &[3, 3], (3, 2)) },
        DeformCase { mask: true, ..case(&[1, 8, 6, 6], 4, &[3, 2], (2, 4)) },
        DeformCase {
            strides: vec![2, 1],
            pads: vec![1, 0, 2, 1],
            dilations: vec![2, 2],
            bias: true,
            ..case(&[2, 4, 9, 7], 6, &[3, 3], (2, 2))
        },
        DeformCase {
            strides: vec![2, 3],
            pads: vec![2, 2, 2, 2],
            mask: true,
            ..case(&[1, 3, 11, 13], 5, &[5, 4], (1, 3))
        },
        // Wide enough that a grid-stride loop wraps.
        DeformCase {
            pads: vec![1, 1, 1, 1],
            bias: true,
            mask: true,
            ..case(&[2, 16, 24, 24], 32, &[3, 3], (2, 4))
        },
        // 1-D and 3-D.
        DeformCase {
            strides: vec![2],
            pads: vec![1, 2],
            bias: true,
            mask: true,
            ..case(&[2, 4, 15], 6, &[3], (2, 2))
        },
        DeformCase {
            pads: vec![1, 0, 1, 1, 0, 1],
            dilations: vec![1, 2, 1],
            bias: true,
            mask: true,
            ..case(&[1, 4, 5, 6, 4], 2, &[2, 2, 3], (2, 2))
        },
    ];
    for c in &cases {
        deform_case(&mut rng, c);
    }
}
