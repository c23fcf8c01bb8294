//! Constant, ConstantOfShape, Range, OneHot, Trilu, TopK, NonZero.

use planner::op::{self, TopK};
use planner::{ConstTensor, DType, Op};

use super::{assert_op_err, f32s, i64s, run_op, run1, t};
use crate::tensor::TensorData;

#[test]
fn constants() {
    let c = ConstTensor::from_f32(&[2], &[1.5, -2.0]).unwrap();
    let r = run_op(Op::Constant(op::Constant { value: c }), &[], 1).unwrap();
    assert_eq!(f32s(&r[0]), [1.5, -2.0]);
    let value = ConstTensor::from_i64s_as(DType::I32, &[1], &[7]).unwrap();
    let r = run1(Op::ConstantOfShape(op::ConstantOfShape { value }), &[&t(&[2], vec![2i64, 3])]).unwrap();
    assert_eq!((r.shape(), r.data()), (&[2usize, 3][..], &TensorData::I32(vec![7; 6])));
    let r =
        run1(Op::ConstantOfShape(op::ConstantOfShape::default()), &[&t(&[0], Vec::<i64>::new())]).unwrap();
    assert_eq!((r.shape(), f32s(&r)), (&[][..], vec![0.0]));
    let r = run1(Op::ConstantOfShape(op::ConstantOfShape::default()), &[&t(&[2], vec![0i64, 4])]).unwrap();
    assert_eq!(r.shape(), [0, 4]);
}

#[test]
fn range_examples() {
    // ONNX examples: Range(3, 9, 3) = [3, 6]; Range(10, 4, -3) = [10, 7] (float).
    let r = run1(Op::Range, &[&t(&[], vec![3i32]), &t(&[], vec![9i32]), &t(&[], vec![3i32])]).unwrap();
    assert_eq!(r.data(), &TensorData::I32(vec![3, 6]));
    let r = run1(Op::Range, &[&t(&[], vec![10f32]), &t(&[], vec![4f32]), &t(&[], vec![-3f32])]).unwrap();
    assert_eq!(f32s(&r), [10., 7.]);
    let r = run1(Op::Range, &[&t(&[], vec![0f32]), &t(&[], vec![1f32]), &t(&[], vec![0.25f32])]).unwrap();
    assert_eq!(f32s(&r), [0., 0.25, 0.5, 0.75]);
    let r = run1(Op::Range, &[&t(&[], vec![5i64]), &t(&[], vec![1i64]), &t(&[], vec![1i64])]).unwrap();
    assert_eq!(r.shape(), [0]);
    assert_op_err(run1(Op::Range, &[&t(&[], vec![0i64]), &t(&[], vec![1i64]), &t(&[], vec![0i64])]), "delta");
    // A NaN bound or step is refused, not an empty range.
    for (s, l, d) in [(0f32, f32::NAN, 1f32), (f32::NAN, 1.0, 1.0), (0.0, 1.0, f32::NAN)] {
        let r = run1(Op::Range, &[&t(&[], vec![s]), &t(&[], vec![l]), &t(&[], vec![d])]);
        assert_op_err(r, "not finite");
    }
}

#[test]
fn one_hot_axes_and_negative_indices() {
    // ONNX example (axis 1): indices [[1, 9], [2, 4]], depth 10, values [1, 3].
    let idx = t(&[2, 2], vec![1f32, 9.0, 2.0, 4.0]);
    let values = t(&[2], vec![1f32, 3.0]);
    let r = run1(Op::OneHot(op::OneHot { axis: 1 }), &[&idx, &t(&[1], vec![10f32]), &values]).unwrap();
    assert_eq!(r.shape(), [2, 10, 2]);
    let v = f32s(&r);
    assert_eq!((v[2], v[19], v[20 + 4], v[20 + 9]), (3., 3., 3., 3.));
    assert_eq!(v.iter().filter(|&&e| e == 3.0).count(), 4);
    // Negative indices count from depth; out of range gives all off.
    let r = run1(
        Op::OneHot(op::OneHot::default()),
        &[&t(&[3], vec![-1i64, 0, 7]), &t(&[], vec![3i64]), &t(&[2], vec![0i64, 5])],
    )
    .unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[3usize, 3][..], vec![0, 0, 5, 5, 0, 0, 0, 0, 0]));
}

#[test]
fn trilu_upper_lower_and_k() {
    let x = t(&[3, 3], (1..=9).collect::<Vec<i64>>());
    let tri = |upper, k: Option<i64>| {
        let kt = k.map(|k| t(&[], vec![k]));
        i64s(&run_op(Op::Trilu(op::Trilu { upper }), &[Some(&x), kt.as_ref()], 1).unwrap()[0])
    };
    assert_eq!(tri(true, None), [1, 2, 3, 0, 5, 6, 0, 0, 9]);
    assert_eq!(tri(false, None), [1, 0, 0, 4, 5, 0, 7, 8, 9]);
    assert_eq!(tri(true, Some(1)), [0, 2, 3, 0, 0, 6, 0, 0, 0]);
    assert_eq!(tri(false, Some(-1)), [0, 0, 0, 4, 0, 0, 7, 8, 0]);
    assert_op_err(run1(Op::Trilu(op::Trilu::default()), &[&t(&[3], vec![1i64, 2, 3])]), "rank");
}

#[test]
fn top_k_largest_smallest_and_ties() {
    // ONNX example: X = [[0..3], [4..7], [8..11]], k = 3, axis 1 -> [[3, 2, 1], [7, 6, 5], [11, 10, 9]].
    let x = t(&[3, 4], (0..12).map(|v| v as f32).collect::<Vec<_>>());
    let k = t(&[1], vec![3i64]);
    let out = run_op(Op::TopK(TopK::default()), &[Some(&x), Some(&k)], 2).unwrap();
    assert_eq!(f32s(&out[0]), [3., 2., 1., 7., 6., 5., 11., 10., 9.]);
    assert_eq!(i64s(&out[1]), [3, 2, 1, 3, 2, 1, 3, 2, 1]);
    let ties = t(&[5], vec![2i32, 1, 2, 1, 3]);
    let smallest = TopK { axis: 0, largest: false, sorted: true, k: Some(3) };
    let out = run_op(Op::TopK(smallest), &[Some(&ties)], 2).unwrap();
    assert_eq!((out[0].data(), i64s(&out[1])), (&TensorData::I32(vec![1, 1, 2]), vec![1, 3, 0]));
    let largest =
        run_op(Op::TopK(TopK { axis: -1, k: Some(2), ..TopK::default() }), &[Some(&ties)], 2).unwrap();
    assert_eq!(i64s(&largest[1]), [4, 0]);
    let columns =
        run_op(Op::TopK(TopK { axis: 0, ..TopK::default() }), &[Some(&x), Some(&t(&[1], vec![1i64]))], 2)
            .unwrap();
    assert_eq!((columns[0].shape(), i64s(&columns[1])), (&[1usize, 4][..], vec![2, 2, 2, 2]));
    assert_op_err(run_op(Op::TopK(TopK::default()), &[Some(&x), Some(&t(&[1], vec![5i64]))], 2), "k = 5");
    let big = t(&[3], vec![i64::MAX - 1, i64::MAX, 0]);
    let out = run_op(Op::TopK(TopK { k: Some(1), ..TopK::default() }), &[Some(&big)], 2).unwrap();
    assert_eq!((i64s(&out[0]), i64s(&out[1])), (vec![i64::MAX], vec![1]));
    let nan = t(&[3], vec![1f32, f32::NAN, 3.0]);
    let out = run_op(Op::TopK(TopK { k: Some(2), ..TopK::default() }), &[Some(&nan)], 2).unwrap();
    assert_eq!(i64s(&out[1]), [1, 2]);
}

#[test]
fn non_zero_example() {
    // ONNX example: [[1, 0], [1, 1]] -> [[0, 1, 1], [0, 0, 1]].
    let r = run1(Op::NonZero, &[&t(&[2, 2], vec![true, false, true, true])]).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[2usize, 3][..], vec![0, 1, 1, 0, 0, 1]));
    let r = run1(Op::NonZero, &[&t(&[3], vec![0f32, 0.0, 0.0])]).unwrap();
    assert_eq!(r.shape(), [1, 0]);
    let r = run1(Op::NonZero, &[&t(&[], vec![5i64])]).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[1usize, 1][..], vec![0]));
}
