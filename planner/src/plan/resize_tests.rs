use crate::op::{self, CoordinateTransformationMode as Ctm, KeepAspectRatioPolicy, Op, ResizeMode};
use crate::plan::{Arg, PlanOptions, Step, compile};
use crate::tensor_info::{Binding, DType, Dim};
use crate::{ConstTensor, Graph, ValueId};
use kernels_gpu::abi::{KernelId, MAX_RANK, RESIZE_MAX_AXES, ResizeParams, resize_ctm};

fn known(d: &[usize]) -> Vec<Dim> {
    d.iter().map(|&n| Dim::Known(n)).collect()
}

/// The params as 8-byte words (the struct is all 8-byte fields or pairs of u32).
fn words(step: &Step) -> (KernelId, Vec<u64>) {
    let Step::Kernel { kernel, args, .. } = step else { panic!("{step:?}") };
    let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
    assert_eq!(b.len(), core::mem::size_of::<ResizeParams>());
    (*kernel, b.chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect())
}

const OUT_SHAPE: usize = 5;
const COPY_STRIDES: usize = OUT_SHAPE + MAX_RANK;
const AXES: usize = COPY_STRIDES + MAX_RANK;

/// Slot `k` as (out_stride, out_len, in_len, in_stride, scale, roi_start, roi_end).
fn slot(w: &[u64], k: usize) -> (u64, u64, u64, u64, f64, f64, f64) {
    let s = &w[AXES + 8 * k..AXES + 8 * k + 8];
    (s[0], s[1], s[2], s[3], f64::from_bits(s[4]), f64::from_bits(s[6]), f64::from_bits(s[7]))
}

/// Slot `k`'s filter scale.
fn filter_scale(w: &[u64], k: usize) -> f64 {
    f64::from_bits(w[AXES + 8 * k + 5])
}

/// One Resize of an input `x` of `dims`/`dtype` with inputs roi, scales, sizes; the plan's steps.
fn plan(
    r: op::Resize,
    dims: &[usize],
    dtype: DType,
    operands: impl FnOnce(&mut Graph) -> [Option<ValueId>; 3],
) -> Result<Vec<Step>, String> {
    let mut g = Graph::new();
    let x = g.input("x", dtype, known(dims));
    let [roi, scales, sizes] = operands(&mut g);
    let y = g.push_opt(Op::Resize(r), vec![Some(x), roi, scales, sizes], 1)[0];
    g.output(y);
    // f16 not widened to f32: the nearest kernels move elements of any size natively.
    let native = PlanOptions { widen_narrow_floats: false, ..PlanOptions::default() };
    compile(&g, &Binding::new(), &native).map(|p| p.steps).map_err(|e| e.to_string())
}

fn f32s(g: &mut Graph, name: &str, v: &[f32]) -> Option<ValueId> {
    Some(g.initializer(name, ConstTensor::from_f32(&[v.len()], v).unwrap()))
}

#[test]
fn nearest_interpolates_only_the_scaled_axes_and_takes_any_element_size() {
    for (dtype, kernel) in [
        (DType::U8, KernelId::ResizeNearestB1),
        (DType::F16, KernelId::ResizeNearestB2),
        (DType::F32, KernelId::ResizeNearestB4),
        (DType::I64, KernelId::ResizeNearestB8),
    ] {
        let steps = plan(op::Resize::default(), &[2, 3, 4, 5], dtype, |g| {
            [None, f32s(g, "scales", &[1.0, 1.0, 2.0, 0.6]), None]
        })
        .unwrap();
        let [step] = steps.as_slice() else { panic!("{steps:?}") };
        let (k, w) = words(step);
        assert_eq!(k, kernel);
        // Output [2, 3, 8, 3].
        assert_eq!(w[0], 2 * 3 * 8 * 3);
        assert_eq!(&w[OUT_SHAPE + 4..COPY_STRIDES], &[2, 3, 8, 3]);
        // Axes 0 and 1 are copied (input strides 60, 20), 2 and 3 interpolated.
        assert_eq!(&w[COPY_STRIDES + 4..AXES], &[60, 20, 0, 0]);
        assert_eq!(slot(&w, 0), (3, 8, 4, 5, 2.0, 0.0, 1.0));
        assert_eq!(slot(&w, 1), (1, 3, 5, 1, 0.6f32 as f64, 0.0, 1.0));
        assert_eq!(slot(&w, 2), (1, 1, 1, 0, 1.0, 0.0, 1.0));
    }
}

#[test]
fn sizes_with_axes_and_an_aspect_policy_share_the_reference_geometry() {
    let r = op::Resize {
        mode: ResizeMode::Linear,
        axes: Some(vec![-2, -1]),
        keep_aspect_ratio_policy: KeepAspectRatioPolicy::NotLarger,
        ..op::Resize::default()
    };
    let steps =
        plan(r, &[1, 2, 4, 6], DType::F32, |g| [None, None, Some(g.const_i64("sizes", &[2], &[10, 9]))])
            .unwrap();
    let (k, w) = words(&steps[0]);
    assert_eq!(k, KernelId::ResizeLinearF32);
    // min(10 / 4, 9 / 6) = 1.5: [6, 9].
    assert_eq!(&w[OUT_SHAPE + 4..COPY_STRIDES], &[1, 2, 6, 9]);
    assert_eq!(slot(&w, 0), (9, 6, 4, 6, 1.5, 0.0, 1.0));
    assert_eq!(slot(&w, 1), (1, 9, 6, 1, 1.5, 0.0, 1.0));
}

#[test]
fn cubic_and_tf_crop_carry_roi_extrapolation_and_coefficients() {
    let r = op::Resize {
        mode: ResizeMode::Cubic,
        coordinate_transformation_mode: Ctm::TfCropAndResize,
        extrapolation_value: 10.0,
        cubic_coeff_a: -0.5,
        exclude_outside: true,
        ..op::Resize::default()
    };
    let steps = plan(r, &[1, 1, 4, 4], DType::F32, |g| {
        [
            f32s(g, "roi", &[0.0, 0.0, 0.4, 0.6, 1.0, 1.0, 0.7, 0.8]),
            None,
            Some(g.const_i64("sizes", &[4], &[1, 1, 3, 3])),
        ]
    })
    .unwrap();
    let (k, w) = words(&steps[0]);
    assert_eq!(k, KernelId::ResizeCubicF32);
    assert_eq!(w[1] >> 32, resize_ctm::TF_CROP_AND_RESIZE as u64);
    assert_eq!(w[2] >> 32, 1, "exclude_outside");
    assert_eq!((f64::from_bits(w[3]), w[4]), (-0.5, 10f32.to_bits() as u64));
    assert_eq!(slot(&w, 0), (3, 3, 4, 4, 0.75, 0.4f32 as f64, 0.7f32 as f64));
    assert_eq!(slot(&w, 1), (1, 3, 4, 1, 0.75, 0.6f32 as f64, 0.8f32 as f64));
}

#[test]
fn a_scale_of_one_with_a_partial_roi_still_interpolates() {
    let r = op::Resize { coordinate_transformation_mode: Ctm::TfCropAndResize, ..op::Resize::default() };
    let steps = plan(r, &[3, 4], DType::F32, |g| {
        [f32s(g, "roi", &[0.0, 0.5, 1.0, 1.0]), f32s(g, "scales", &[1.0, 1.0]), None]
    })
    .unwrap();
    let (_, w) = words(&steps[0]);
    assert_eq!(&w[COPY_STRIDES + MAX_RANK - 2..AXES], &[4, 0]);
    assert_eq!(slot(&w, 0).5, 0.5);
}

#[test]
fn empty_outputs_take_no_step() {
    let steps =
        plan(op::Resize::default(), &[2, 3], DType::F32, |g| [None, f32s(g, "scales", &[1.0, 0.2]), None])
            .unwrap();
    assert!(steps.iter().all(|s| !matches!(s, Step::Kernel { .. })), "{steps:?}");
}

#[test]
fn unsupported_forms_are_refused_with_the_reason() {
    let linear = op::Resize { mode: ResizeMode::Linear, ..op::Resize::default() };
    let cases: Vec<(op::Resize, &[usize], DType, &str)> = vec![
        (linear.clone(), &[2, 4], DType::I64, "linear / cubic Resize of"),
        (
            op::Resize {
                coordinate_transformation_mode: Ctm::TfCropAndResize,
                extrapolation_value: 1.0,
                ..op::Resize::default()
            },
            &[2, 4],
            DType::I32,
            "non-zero extrapolation_value",
        ),
    ];
    for (r, dims, dtype, reason) in cases {
        let e = plan(r, dims, dtype, |g| [None, f32s(g, "scales", &[2.0, 0.5]), None]).unwrap_err();
        assert!(e.contains("1 node(s)") && e.contains(reason), "{reason}: {e}");
    }
    // More interpolated axes than slots.
    let scales = vec![2.0; RESIZE_MAX_AXES + 1];
    let dims = vec![2; RESIZE_MAX_AXES + 1];
    let e = plan(op::Resize::default(), &dims, DType::F32, |g| [None, f32s(g, "scales", &scales), None])
        .unwrap_err();
    assert!(e.contains("interpolated axes"), "{e}");
    // Scales computed at run time.
    let e = plan(op::Resize::default(), &[2, 4], DType::F32, |g| {
        [None, Some(g.input("s", DType::F32, known(&[2]))), None]
    })
    .unwrap_err();
    assert!(e.contains("1 node(s)"), "{e}");
}

#[test]
fn antialias_widens_the_filter_of_shrunk_axes_within_a_tap_budget() {
    let aa = op::Resize { mode: ResizeMode::Cubic, antialias: true, ..op::Resize::default() };
    let steps =
        plan(aa.clone(), &[2, 8], DType::F32, |g| [None, f32s(g, "scales", &[2.0, 0.5]), None]).unwrap();
    let (k, w) = words(&steps[0]);
    assert_eq!(k, KernelId::ResizeCubicF32);
    assert_eq!((filter_scale(&w, 0), filter_scale(&w, 1), filter_scale(&w, 2)), (1.0, 0.5, 1.0));
    // Without antialias the filter keeps its width.
    let plain = op::Resize { antialias: false, ..aa.clone() };
    let steps = plan(plain, &[2, 8], DType::F32, |g| [None, f32s(g, "scales", &[2.0, 0.5]), None]).unwrap();
    assert_eq!(filter_scale(&words(&steps[0]).1, 1), 1.0);
    // 1 / 100 widens each cubic filter to 400 taps: 160000 per element.
    let e =
        plan(aa, &[200, 400], DType::F32, |g| [None, f32s(g, "scales", &[0.01, 0.01]), None]).unwrap_err();
    assert!(e.contains("taps per element"), "{e}");
}
