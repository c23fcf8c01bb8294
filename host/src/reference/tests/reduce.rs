//! Reduce*, ArgMax/ArgMin and CumSum.

use planner::Op;
use planner::op::{self, Reduce};

use super::{assert_op_err, f32s, i64s, run_op, run1, t};
use crate::tensor::TensorData;

fn reduce(
    make: fn(Reduce) -> Op,
    x: &crate::tensor::HostTensor,
    axes: Option<&[i64]>,
    keepdims: bool,
) -> crate::tensor::HostTensor {
    let attrs = Reduce { axes: None, keepdims, noop_with_empty_axes: false };
    let ax = axes.map(|a| t(&[a.len()], a.to_vec()));
    run_op(make(attrs), &[Some(x), ax.as_ref()], 1).unwrap().remove(0)
}

#[test]
fn onnx_reduce_examples() {
    // ReduceSum example: shape [3, 2, 2], axes [1], keepdims 1 -> [[[4, 6]], [[12, 14]], [[20, 22]]].
    let x = t(&[3, 2, 2], (1..=12).map(|v| v as f32).collect::<Vec<_>>());
    let s = reduce(Op::ReduceSum, &x, Some(&[1]), true);
    assert_eq!((s.shape(), f32s(&s)), (&[3usize, 1, 2][..], vec![4., 6., 12., 14., 20., 22.]));
    let s = reduce(Op::ReduceSum, &x, Some(&[-2]), false);
    assert_eq!(s.shape(), [3, 2]);
    let all = reduce(Op::ReduceMean, &x, None, false);
    assert_eq!((all.shape(), f32s(&all)), (&[][..], vec![6.5]));
    assert_eq!(f32s(&reduce(Op::ReduceMax, &x, Some(&[0, 2]), false)), [10., 12.]);
    assert_eq!(f32s(&reduce(Op::ReduceMin, &x, Some(&[2]), false)), [1., 3., 5., 7., 9., 11.]);
    assert_eq!(f32s(&reduce(Op::ReduceProd, &x, Some(&[1]), false))[..2], [3., 8.]);
    let small = t(&[2, 2], vec![-1f32, 2.0, -3.0, 4.0]);
    assert_eq!(f32s(&reduce(Op::ReduceL1, &small, Some(&[1]), false)), [3., 7.]);
    assert_eq!(f32s(&reduce(Op::ReduceL2, &small, Some(&[1]), false)), [5f32.sqrt(), 5.]);
    assert_eq!(f32s(&reduce(Op::ReduceSumSquare, &small, Some(&[0]), false)), [10., 20.]);
    let pos = t(&[2], vec![1f32, 2.0]);
    assert_eq!(f32s(&reduce(Op::ReduceLogSum, &pos, None, false)), [3f32.ln()]);
    let lse = f32s(&reduce(Op::ReduceLogSumExp, &t(&[2], vec![1000f32, 1000.0]), None, false));
    assert_eq!(lse, [(1000.0 + 2f64.ln()) as f32]);
}

#[test]
fn reduce_axes_attribute_noop_and_empty_sets() {
    let x = t(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]);
    let legacy = Reduce { axes: Some(vec![1]), keepdims: false, noop_with_empty_axes: false };
    assert_eq!(i64s(&run1(Op::ReduceSum(legacy), &[&x]).unwrap()), [6, 15]);
    let noop = Reduce { axes: None, keepdims: true, noop_with_empty_axes: true };
    assert_eq!(run1(Op::ReduceSum(noop.clone()), &[&x]).unwrap(), x);
    let sq = run_op(Op::ReduceSumSquare(noop), &[Some(&x), Some(&t(&[0], Vec::<i64>::new()))], 1).unwrap();
    assert_eq!(i64s(&sq[0]), [1, 4, 9, 16, 25, 36]);
    let empty = t(&[0, 2], Vec::<f32>::new());
    assert_eq!(f32s(&reduce(Op::ReduceSum, &empty, Some(&[0]), false)), [0., 0.]);
    assert_eq!(f32s(&reduce(Op::ReduceProd, &empty, Some(&[0]), false)), [1., 1.]);
    assert_eq!(f32s(&reduce(Op::ReduceMax, &empty, Some(&[0]), true)), [f32::NEG_INFINITY; 2]);
    let ei = t(&[0], Vec::<i32>::new());
    assert_eq!(reduce(Op::ReduceMin, &ei, None, false).data(), &TensorData::I32(vec![i32::MAX]));
    let bad = Reduce { axes: Some(vec![0, -2]), keepdims: true, noop_with_empty_axes: false };
    assert_op_err(run1(Op::ReduceSum(bad), &[&x]), "repeated");
    let out_of_range = Reduce { axes: Some(vec![2]), keepdims: true, noop_with_empty_axes: false };
    assert_op_err(run1(Op::ReduceSum(out_of_range), &[&x]), "out of range");
}

#[test]
fn argmax_argmin_ties_and_keepdims() {
    // ONNX ArgMax example: [[2, 1], [3, 10]], axis 0 keepdims -> [[1, 1]]; axis 1 -> [[0], [1]].
    let x = t(&[2, 2], vec![2f32, 1.0, 3.0, 10.0]);
    let am = |axis, keepdims, last| op::ArgReduce { axis, keepdims, select_last_index: last };
    let r = run1(Op::ArgMax(am(0, true, false)), &[&x]).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[1usize, 2][..], vec![1, 1]));
    let r = run1(Op::ArgMax(am(-1, false, false)), &[&x]).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[2usize][..], vec![0, 1]));
    let ties = t(&[4], vec![1i32, 3, 3, 1]);
    assert_eq!(i64s(&run1(Op::ArgMax(am(0, false, false)), &[&ties]).unwrap()), [1]);
    assert_eq!(i64s(&run1(Op::ArgMax(am(0, false, true)), &[&ties]).unwrap()), [2]);
    assert_eq!(i64s(&run1(Op::ArgMin(am(0, false, true)), &[&ties]).unwrap()), [3]);
    assert_eq!(i64s(&run1(Op::ArgMin(am(0, false, false)), &[&ties]).unwrap()), [0]);
    // Integers compare exactly (both values round to 2^63 as f64); NaN wins, as in numpy.
    let big = t(&[2], vec![i64::MAX, i64::MAX - 1]);
    assert_eq!(i64s(&run1(Op::ArgMin(am(0, false, false)), &[&big]).unwrap()), [1]);
    let nan = t(&[3], vec![1f32, f32::NAN, 5.0]);
    assert_eq!(i64s(&run1(Op::ArgMax(am(0, false, false)), &[&nan]).unwrap()), [1]);
    assert_eq!(i64s(&run1(Op::ArgMin(am(0, false, false)), &[&nan]).unwrap()), [1]);
    // A scalar has no axis (ONNX's axis is in [-r, r - 1]): refused, as the planner does.
    let scalar = run1(Op::ArgMax(am(0, true, false)), &[&t(&[], vec![3f32])]).unwrap_err();
    assert!(scalar.to_string().contains("out of range for rank 0"), "{scalar}");
}

#[test]
fn cumsum_modes_in_f32_and_int() {
    // ONNX CumSum examples on [1, 2, 3, 4, 5].
    let x = t(&[5], vec![1f32, 2.0, 3.0, 4.0, 5.0]);
    let axis = t(&[], vec![0i32]);
    let cs = |exclusive, reverse| {
        f32s(&run1(Op::CumSum(op::CumSum { exclusive, reverse }), &[&x, &axis]).unwrap())
    };
    assert_eq!(cs(false, false), [1., 3., 6., 10., 15.]);
    assert_eq!(cs(true, false), [0., 1., 3., 6., 10.]);
    assert_eq!(cs(false, true), [15., 14., 12., 9., 5.]);
    assert_eq!(cs(true, true), [14., 12., 9., 5., 0.]);
    // 2-D along axis 1 (negative), int64.
    let m = t(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]);
    let r = run1(Op::CumSum(op::CumSum::default()), &[&m, &t(&[1], vec![-1i64])]).unwrap();
    assert_eq!(i64s(&r), [1, 3, 6, 4, 9, 15]);
    // f32 running sums are kept in f64 and rounded per output.
    let tiny = t(&[3], vec![1e8f32, 1.0, 1.0]);
    let r = run1(Op::CumSum(op::CumSum::default()), &[&tiny, &axis]).unwrap();
    assert_eq!(f32s(&r), [1e8, 1e8, (1e8f64 + 2.0) as f32]);
}
