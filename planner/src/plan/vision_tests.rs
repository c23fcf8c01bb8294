//! RoiAlign and DeformConv lowering: which graphs become one `roi_align_f32` /
//! `deform_conv_f32` launch (with which parameters and operands) and which are refused, with what
//! reason.

use kernels_gpu::abi::{DeformConvParams, KernelId, RoiAlignParams};

use crate::error::PlanError;
use crate::op::{DeformConv, Op, RoiAlign};
use crate::plan::{Arg, Plan, PlanOptions, Step, compile};
use crate::tensor_info::{Binding, DType, Dim};
use crate::{Graph, ValueId};

fn known(d: &[usize]) -> Vec<Dim> {
    d.iter().map(|&x| Dim::Known(x)).collect()
}

/// The one kernel step of `plan`: its kernel, parameter bytes and pointer arguments.
fn only_step(plan: &Plan) -> (KernelId, &[u8], &[Arg]) {
    let [Step::Kernel { kernel, args, .. }] = plan.steps.as_slice() else { panic!("{plan}") };
    let Some((Arg::Params(bytes), rest)) = args.split_first() else { panic!("{plan}") };
    (*kernel, bytes, rest)
}

/// A graph of one RoiAlign over X `x`, `rois` rois and batch indices of `idx`.
fn roi_graph(a: RoiAlign, x: &[usize], rois: usize, xt: DType, idx: DType) -> Graph {
    let mut g = Graph::new();
    let xv = g.input("x", xt, known(x));
    let r = g.input("rois", xt, known(&[rois, 4]));
    let i = g.input("idx", idx, known(&[rois]));
    let y = g.op1(Op::RoiAlign(a), &[xv, r, i]);
    g.output(y);
    g
}

#[test]
fn roi_align_is_one_launch_with_the_attributes_and_refuses_other_types() {
    let a = RoiAlign {
        half_pixel: false,
        max: true,
        output_height: 3,
        output_width: 5,
        sampling_ratio: 2,
        spatial_scale: 0.25,
    };
    let plan = compile(
        &roi_graph(a, &[2, 4, 10, 12], 6, DType::F32, DType::I64),
        &Binding::new(),
        &PlanOptions::default(),
    )
    .unwrap();
    let (kernel, bytes, args) = only_step(&plan);
    assert_eq!(kernel, KernelId::RoiAlignF32);
    let want = RoiAlignParams {
        n: 2,
        c: 4,
        h: 10,
        w: 12,
        rois: 6,
        out_h: 3,
        out_w: 5,
        sampling_ratio: 2,
        spatial_scale: 0.25,
        half_pixel: 0,
        max: 1,
        index_bytes: 8,
    };
    assert_eq!(bytes, kernels_gpu::abi::Params::as_bytes(&want));
    assert_eq!(args.len(), 4);
    assert!(args.iter().all(|a| matches!(a, Arg::Value(_))));

    let opts = (Binding::new(), PlanOptions::default());
    let refused = |g: Graph| compile(&g, &opts.0, &opts.1).unwrap_err().to_string();
    let d = RoiAlign::default();
    assert!(refused(roi_graph(d.clone(), &[1, 2, 4, 4], 2, DType::F64, DType::I64)).contains("takes f32"));
    assert!(refused(roi_graph(d.clone(), &[1, 2, 4, 4], 2, DType::F32, DType::F32)).contains("int64"));
    assert!(refused(roi_graph(d, &[1, 2, 0, 4], 2, DType::F32, DType::I64)).contains("empty image"));
}

/// A graph of one DeformConv: X `x`, W `w`, offset `off`, and B / mask when given.
fn deform_graph(
    a: DeformConv,
    x: &[usize],
    w: &[usize],
    off: &[usize],
    bias: bool,
    mask: Option<&[usize]>,
) -> Graph {
    let mut g = Graph::new();
    let mut ins: Vec<Option<ValueId>> = vec![
        Some(g.input("x", DType::F32, known(x))),
        Some(g.input("w", DType::F32, known(w))),
        Some(g.input("offset", DType::F32, known(off))),
    ];
    ins.push(bias.then(|| g.input("b", DType::F32, known(&w[..1]))));
    if let Some(m) = mask {
        ins.push(Some(g.input("mask", DType::F32, known(m))));
    }
    let y = g.push_opt(Op::DeformConv(a), ins, 1);
    g.output(y[0]);
    g
}

#[test]
fn deform_conv_is_one_launch_with_null_for_absent_operands() {
    let a = DeformConv {
        dilations: vec![2, 1],
        group: 2,
        kernel_shape: vec![],
        offset_group: 2,
        pads: vec![1, 0, 1, 2],
        strides: vec![1, 2],
    };
    // X (1, 4, 7, 8), W (6, 2, 3, 2): output (7 + 2 - 5 + 1, (8 + 2 - 2) / 2 + 1) = (5, 5).
    let (x, w, off, mask) = ([1, 4, 7, 8], [6, 2, 3, 2], [1, 2 * 6 * 2, 5, 5], [1, 2 * 6, 5, 5]);
    let opts = (Binding::new(), PlanOptions::default());
    let plan = compile(&deform_graph(a.clone(), &x, &w, &off, false, Some(&mask)), &opts.0, &opts.1).unwrap();
    let (kernel, bytes, args) = only_step(&plan);
    assert_eq!(kernel, KernelId::DeformConvF32);
    let want = DeformConvParams {
        n: 1,
        c: 4,
        m: 6,
        points: 25,
        kprod: 6,
        image: [7, 8, 1],
        kernel: [3, 2, 1],
        out: [5, 5, 1],
        stride: [1, 2, 1],
        dilation: [2, 1, 1],
        pad_begin: [1, 0, 0],
        group: 2,
        offset_group: 2,
        rank: 2,
        has_bias: 0,
        has_mask: 1,
        _pad: 0,
    };
    assert_eq!(bytes, kernels_gpu::abi::Params::as_bytes(&want));
    assert!(matches!(
        args,
        [Arg::Value(_), Arg::Value(_), Arg::Value(_), Arg::Null, Arg::Value(_), Arg::Value(_)]
    ));

    let plan = compile(&deform_graph(a, &x, &w, &off, true, None), &opts.0, &opts.1).unwrap();
    let (_, _, args) = only_step(&plan);
    assert!(matches!(
        args,
        [Arg::Value(_), Arg::Value(_), Arg::Value(_), Arg::Value(_), Arg::Null, Arg::Value(_)]
    ));
}

#[test]
fn deform_conv_refuses_what_the_kernel_cannot_take() {
    let opts = (Binding::new(), PlanOptions::default());
    let refused = |g: Graph| match compile(&g, &opts.0, &opts.1) {
        Err(e @ PlanError::NoKernel { .. }) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    let d = DeformConv::default();
    // Four spatial dims.
    let e = refused(deform_graph(
        d.clone(),
        &[1, 1, 3, 3, 3, 3],
        &[1, 1, 1, 1, 1, 1],
        &[1, 4, 3, 3, 3, 3],
        false,
        None,
    ));
    assert!(e.contains("up to 3"), "{e}");
    // The offset's channels are not offset_group * prod(kernel) * r.
    let e = refused(deform_graph(d.clone(), &[1, 2, 4, 4], &[1, 2, 2, 2], &[1, 6, 3, 3], false, None));
    assert!(e.contains("disagree"), "{e}");
    // A group that does not divide the channels.
    let g3 = DeformConv { group: 3, ..d.clone() };
    let e = refused(deform_graph(g3, &[1, 4, 4, 4], &[3, 1, 2, 2], &[1, 8, 3, 3], false, None));
    assert!(e.contains("disagree"), "{e}");
    // A mask of the wrong shape.
    let e = refused(deform_graph(d, &[1, 2, 4, 4], &[1, 2, 2, 2], &[1, 8, 3, 3], false, Some(&[1, 4, 3, 2])));
    assert!(e.contains("mask"), "{e}");
}
