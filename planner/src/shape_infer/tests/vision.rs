//! Loss, GridSample, Det and data-dependent selection inference.

use super::{dims, info, is_fresh};
use crate::graph::Graph;
use crate::op::{self, Op};
use crate::shape_infer::infer;
use crate::tensor_info::{DType, Dim, TensorInfo};

const F: DType = DType::F32;
const I: DType = DType::I64;

fn all(op: Op, inputs: &[(&str, DType, &str)], n_out: usize) -> Vec<TensorInfo> {
    let mut g = Graph::new();
    let ins: Vec<_> = inputs.iter().map(|(n, t, d)| g.input(n, *t, dims(d))).collect();
    let outs = g.push(op, &ins, n_out);
    for &o in &outs {
        g.output(o);
    }
    let infos = infer(&g).unwrap_or_else(|e| panic!("{e}"));
    outs.iter().map(|o| infos[o.index()].clone()).collect()
}

#[test]
fn losses_reduce_or_keep_the_target_shape() {
    let none = op::NegativeLogLikelihoodLoss { reduction: op::LossReduction::None, ignore_index: None };
    let ins = [("x", F, "n,3,4"), ("t", I, "n,4"), ("w", F, "3")];
    assert_eq!(all(Op::NegativeLogLikelihoodLoss(none), &ins, 1), [info(F, "n,4")]);
    let mean = Op::SoftmaxCrossEntropyLoss(op::SoftmaxCrossEntropyLoss::default());
    assert_eq!(all(mean, &ins[..2], 2), [info(F, ""), info(F, "n,3,4")]);
    let mut g = Graph::new();
    let x = g.input("x", F, dims("2,3"));
    let t = g.input("t", I, dims("2,5"));
    let out = g.push(Op::NegativeLogLikelihoodLoss(Default::default()), &[x, t], 1);
    g.output(out[0]);
    assert!(infer(&g).is_err());
}

#[test]
fn grid_sample_det_and_selection() {
    let gs = Op::GridSample(op::GridSample::default());
    assert_eq!(all(gs, &[("x", F, "n,3,8,8"), ("g", F, "n,5,6,2")], 1), [info(F, "n,3,5,6")]);
    assert_eq!(all(Op::Det, &[("x", F, "4,3,3")], 1), [info(F, "4")]);
    let nms = all(Op::NonMaxSuppression(Default::default()), &[("b", F, "1,6,4"), ("s", F, "1,2,6")], 1);
    assert!(is_fresh(&nms[0].shape.dims()[0]) && nms[0].shape.dims()[1] == Dim::Known(3));
    let u = all(Op::Unique(op::Unique { axis: Some(0), sorted: true }), &[("x", F, "5,2")], 4);
    assert!(is_fresh(&u[0].shape.dims()[0]));
    assert_eq!(u[2], info(I, "5"));
    let c = all(Op::Compress(op::Compress { axis: None }), &[("x", F, "2,3"), ("c", DType::Bool, "4")], 1);
    assert_eq!(c[0].rank(), 1);
}

/// Infers a node whose inputs are graph inputs (`Err`) or i64 constants (`Ok`).
fn with_consts(op: Op, inputs: &[Result<(DType, &str), Vec<i64>>], n_out: usize) -> Vec<TensorInfo> {
    let mut g = Graph::new();
    let ins: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, inp)| match inp {
            Ok((t, d)) => g.input(&format!("in{i}"), *t, dims(d)),
            Err(v) => {
                let c = crate::constant::ConstTensor::from_i64(&[v.len()], v).expect("constant");
                g.initializer(&format!("c{i}"), c)
            }
        })
        .collect();
    let outs = g.push(op, &ins, n_out);
    for &o in &outs {
        g.output(o);
    }
    let infos = infer(&g).unwrap_or_else(|e| panic!("{e}"));
    outs.iter().map(|o| infos[o.index()].clone()).collect()
}

#[test]
fn signal_and_block_ops_use_constant_inputs() {
    let rfft = Op::Dft(op::Dft { axis: Some(1), inverse: false, onesided: true });
    assert_eq!(with_consts(rfft, &[Ok((F, "1,10,3,1"))], 1), [info(F, "1,6,3,2")]);
    let irfft = Op::Dft(op::Dft { axis: None, inverse: true, onesided: true });
    assert_eq!(
        with_consts(irfft, &[Ok((F, "1,6,3,2")), Err(vec![10]), Err(vec![1])], 1),
        [info(F, "1,10,3,1")]
    );
    let crop = Op::CenterCropPad(op::CenterCropPad { axes: Some(vec![-1]) });
    assert_eq!(with_consts(crop, &[Ok((F, "2,5")), Err(vec![3])], 1), [info(F, "2,3")]);
    let col = Op::Col2Im(op::Col2Im::default());
    assert_eq!(
        with_consts(col, &[Ok((F, "1,8,6")), Err(vec![3, 4]), Err(vec![2, 2])], 1),
        [info(F, "1,2,3,4")]
    );
    let grid = Op::AffineGrid(op::AffineGrid::default());
    assert_eq!(with_consts(grid, &[Ok((F, "2,2,3")), Err(vec![2, 1, 4, 5])], 1), [info(F, "2,4,5,2")]);
    let stft = Op::Stft(op::Stft::default());
    let ins = [Ok((F, "1,128,1")), Err(vec![8]), Ok((F, "16"))];
    assert_eq!(with_consts(stft, &ins, 1), [info(F, "1,15,9,2")]);
    let unpool = Op::MaxUnpool(op::MaxUnpool { kernel_shape: vec![2, 2], strides: vec![2, 2], pads: vec![] });
    assert_eq!(with_consts(unpool, &[Ok((F, "1,3,2,2")), Ok((I, "1,3,2,2"))], 1), [info(F, "1,3,4,4")]);
}

#[test]
fn attention_roi_and_deformable_shapes() {
    let la =
        Op::LinearAttention(op::LinearAttention { kv_num_heads: 2, q_num_heads: 4, ..Default::default() });
    let outs = all(la, &[("q", F, "b,5,32"), ("k", F, "b,5,16"), ("v", F, "b,5,12")], 2);
    assert_eq!(outs, [info(F, "b,5,24"), info(F, "b,2,8,6")]);
    let roi = Op::RoiAlign(op::RoiAlign { output_height: 3, output_width: 4, ..Default::default() });
    assert_eq!(all(roi, &[("x", F, "2,8,10,10"), ("r", F, "5,4"), ("i", I, "5")], 1), [info(F, "5,8,3,4")]);
    let dc = Op::DeformConv(op::DeformConv::default());
    let ins = [("x", F, "1,4,9,9"), ("w", F, "6,4,3,3"), ("o", F, "1,18,7,7")];
    assert_eq!(all(dc, &ins, 1), [info(F, "1,6,7,7")]);
}
