//! Slice, Split, Concat, Pad, DepthToSpace, SpaceToDepth.

use planner::Op;
use planner::op::{self, DepthToSpaceMode, PadMode};

use super::{assert_op_err, f32s, i64s, run_op, run1, t};
use crate::tensor::HostTensor;

fn ints(v: &[i64]) -> HostTensor {
    t(&[v.len()], v.to_vec())
}

#[test]
fn slice_examples_negative_clamped_and_steps() {
    // ONNX Slice example: data [[1, 2, 3, 4], [5, 6, 7, 8]], starts [1, 0], ends [2, 3], axes [0, 1], steps [1, 2] -> [[5, 7]].
    let x = t(&[2, 4], (1..=8).collect::<Vec<i64>>());
    let sl = |s: &[i64], e: &[i64], a: Option<&[i64]>, st: Option<&[i64]>| {
        let (a, st) = (a.map(ints), st.map(ints));
        run_op(
            Op::Slice(op::Slice::default()),
            &[Some(&x), Some(&ints(s)), Some(&ints(e)), a.as_ref(), st.as_ref()],
            1,
        )
        .map(|mut v| v.remove(0))
    };
    assert_eq!(i64s(&sl(&[1, 0], &[2, 3], Some(&[0, 1]), Some(&[1, 2])).unwrap()), [5, 7]);
    // starts [0, 1], ends [-1, 1000] -> [[2, 3, 4]].
    assert_eq!(i64s(&sl(&[0, 1], &[-1, 1000], None, None).unwrap()), [2, 3, 4]);
    // Negative step reverses: the whole row backwards.
    let r = sl(&[-1], &[i64::MIN], Some(&[1]), Some(&[-1])).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[2usize, 4][..], vec![4, 3, 2, 1, 8, 7, 6, 5]));
    let r = sl(&[10], &[-10], Some(&[-1]), Some(&[-3])).unwrap();
    assert_eq!(i64s(&r), [4, 1, 8, 5]);
    let r = sl(&[3], &[1], Some(&[1]), None).unwrap();
    assert_eq!(r.shape(), [2, 0]);
    assert_op_err(sl(&[0], &[1], Some(&[1]), Some(&[0])), "step");
    let legacy = op::Slice { starts: Some(vec![1]), ends: Some(vec![i64::MAX]), axes: Some(vec![0]) };
    assert_eq!(i64s(&run1(Op::Slice(legacy), &[&x]).unwrap()), [5, 6, 7, 8]);
}

#[test]
fn split_even_uneven_and_sized() {
    let x = t(&[6], (1..=6).map(|v| v as f32).collect::<Vec<_>>());
    let outs = run_op(Op::Split(op::Split::default()), &[Some(&x)], 3).unwrap();
    assert_eq!(outs.iter().map(f32s).collect::<Vec<_>>(), [vec![1., 2.], vec![3., 4.], vec![5., 6.]]);
    let outs = run_op(Op::Split(op::Split::default()), &[Some(&x), Some(&ints(&[2, 4]))], 2).unwrap();
    assert_eq!(outs.iter().map(f32s).collect::<Vec<_>>(), [vec![1., 2.], vec![3., 4., 5., 6.]]);
    let uneven = op::Split { axis: 0, split: None, num_outputs: Some(4) };
    let outs = run_op(Op::Split(uneven), &[Some(&t(&[7], vec![0f32; 7]))], 4).unwrap();
    assert_eq!(outs.iter().map(|o| o.shape()[0]).collect::<Vec<_>>(), [2, 2, 2, 1]);
    let m = t(&[2, 4], (1..=8).collect::<Vec<i64>>());
    let cols = op::Split { axis: -1, split: Some(vec![1, 3]), num_outputs: None };
    let outs = run_op(Op::Split(cols), &[Some(&m)], 2).unwrap();
    assert_eq!((i64s(&outs[0]), i64s(&outs[1])), (vec![1, 5], vec![2, 3, 4, 6, 7, 8]));
    assert_op_err(run_op(Op::Split(op::Split::default()), &[Some(&x), Some(&ints(&[2, 2]))], 2), "add up");
}

#[test]
fn concat_axes_and_empty_parts() {
    let a = t(&[2, 2], vec![1i64, 2, 3, 4]);
    let b = t(&[2, 1], vec![5i64, 6]);
    let c = run1(Op::Concat(op::Concat { axis: -1 }), &[&a, &b]).unwrap();
    assert_eq!((c.shape(), i64s(&c)), (&[2usize, 3][..], vec![1, 2, 5, 3, 4, 6]));
    let e = t(&[0, 2], Vec::<i64>::new());
    let c = run1(Op::Concat(op::Concat { axis: 0 }), &[&e, &a, &e]).unwrap();
    assert_eq!(c, a);
    assert_op_err(run1(Op::Concat(op::Concat { axis: 0 }), &[&a, &b]), "cannot concatenate");
}

#[test]
fn pad_modes() {
    // ONNX Pad examples on [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]] with pads [0, 2, 0, 0].
    let x = t(&[3, 2], vec![1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let pads = ints(&[0, 2, 0, 0]);
    let pad = |mode, x: &HostTensor, pads: &HostTensor, value: Option<&HostTensor>| {
        run_op(Op::Pad(op::Pad { mode, pads: None, value: None }), &[Some(x), Some(pads), value], 1)
            .unwrap()
            .remove(0)
    };
    let c = pad(PadMode::Constant, &x, &pads, Some(&t(&[], vec![0f32])));
    assert_eq!(f32s(&c), [0., 0., 1.0, 1.2, 0., 0., 2.3, 3.4, 0., 0., 4.5, 5.7]);
    let r = pad(PadMode::Reflect, &x, &pads, None);
    assert_eq!(f32s(&r), [1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7]);
    let e = pad(PadMode::Edge, &x, &pads, None);
    assert_eq!(f32s(&e), [1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7]);
    // Wrap example: pads [2, 1, 1, 1].
    let w = pad(PadMode::Wrap, &x, &ints(&[2, 1, 1, 1]), None);
    assert_eq!(w.shape(), [6, 4]);
    assert_eq!(f32s(&w)[..8], [3.4, 2.3, 3.4, 2.3, 5.7, 4.5, 5.7, 4.5]);
    let row = t(&[4], vec![1i64, 2, 3, 4]);
    let r = pad(PadMode::Reflect, &row, &ints(&[3, 2]), None);
    assert_eq!(i64s(&r), [4, 3, 2, 1, 2, 3, 4, 3, 2]);
    let cropped = pad(PadMode::Constant, &row, &ints(&[-1, 2]), Some(&t(&[], vec![9i64])));
    assert_eq!(i64s(&cropped), [2, 3, 4, 9, 9]);
    let axes =
        run_op(Op::Pad(op::Pad::default()), &[Some(&x), Some(&ints(&[1, 1])), None, Some(&ints(&[-1]))], 1)
            .unwrap();
    assert_eq!(axes[0].shape(), [3, 4]);
    assert_op_err(run_op(Op::Pad(op::Pad::default()), &[Some(&x), Some(&ints(&[1, 1]))], 1), "pads has");
}

#[test]
fn depth_to_space_and_back() {
    // ONNX DepthToSpace DCR example: shape [1, 8, 2, 3], blocksize 2.
    let x = t(&[1, 8, 2, 3], (0..48).map(|v| v as f32).collect::<Vec<_>>());
    let d = run1(Op::DepthToSpace(op::DepthToSpace { blocksize: 2, mode: DepthToSpaceMode::Dcr }), &[&x])
        .unwrap();
    assert_eq!(d.shape(), [1, 2, 4, 6]);
    assert_eq!(f32s(&d)[..12], [0., 12., 1., 13., 2., 14., 24., 36., 25., 37., 26., 38.]);
    let c = run1(Op::DepthToSpace(op::DepthToSpace { blocksize: 2, mode: DepthToSpaceMode::Crd }), &[&x])
        .unwrap();
    assert_eq!(f32s(&c)[..12], [0., 6., 1., 7., 2., 8., 12., 18., 13., 19., 14., 20.]);
    let back = run1(Op::SpaceToDepth(op::SpaceToDepth { blocksize: 2 }), &[&d]).unwrap();
    assert_eq!(back, x);
    assert_op_err(run1(Op::SpaceToDepth(op::SpaceToDepth { blocksize: 4 }), &[&d]), "divisible");
}
