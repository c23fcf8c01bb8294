//! Comparison, logical ops, IsNaN/IsInf and Where.

use planner::Op;
use planner::op;

use super::{assert_op_err, bools, f32s, i64s, run1, t};

#[test]
fn comparisons_broadcast_and_treat_nan_as_unordered() {
    let a = t(&[2, 2], vec![1f32, 2.0, f32::NAN, 4.0]);
    let b = t(&[2], vec![2f32, 2.0]);
    assert_eq!(bools(&run1(Op::Equal, &[&a, &b]).unwrap()), [false, true, false, false]);
    assert_eq!(bools(&run1(Op::Less, &[&a, &b]).unwrap()), [true, false, false, false]);
    assert_eq!(bools(&run1(Op::Greater, &[&a, &b]).unwrap()), [false, false, false, true]);
    assert_eq!(bools(&run1(Op::LessOrEqual, &[&a, &b]).unwrap()), [true, true, false, false]);
    assert_eq!(bools(&run1(Op::GreaterOrEqual, &[&a, &b]).unwrap()), [false, true, false, true]);
    let big = t(&[2], vec![i64::MAX, i64::MAX - 1]);
    assert_eq!(bools(&run1(Op::Equal, &[&big, &t(&[], vec![i64::MAX])]).unwrap()), [true, false]);
    let flags = t(&[2], vec![true, false]);
    assert_eq!(bools(&run1(Op::Equal, &[&flags, &t(&[], vec![false])]).unwrap()), [false, true]);
    assert_op_err(run1(Op::Less, &[&a, &t(&[1], vec![1i64])]), "dtype");
}

#[test]
fn logical_ops() {
    let a = t(&[4], vec![true, true, false, false]);
    let b = t(&[4], vec![true, false, true, false]);
    assert_eq!(bools(&run1(Op::And, &[&a, &b]).unwrap()), [true, false, false, false]);
    assert_eq!(bools(&run1(Op::Or, &[&a, &b]).unwrap()), [true, true, true, false]);
    assert_eq!(bools(&run1(Op::Xor, &[&a, &b]).unwrap()), [false, true, true, false]);
    assert_eq!(bools(&run1(Op::Not, &[&a]).unwrap()), [false, false, true, true]);
    let s = run1(Op::And, &[&t(&[2, 1], vec![true, false]), &t(&[3], vec![true, false, true])]).unwrap();
    assert_eq!(s.shape(), [2, 3]);
    assert_eq!(bools(&s), [true, false, true, false, false, false]);
    assert_op_err(run1(Op::And, &[&a, &t(&[4], vec![1u8, 0, 1, 0])]), "bool");
}

#[test]
fn nan_and_inf_tests() {
    let x = t(&[4], vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0]);
    assert_eq!(bools(&run1(Op::IsNaN, &[&x]).unwrap()), [true, false, false, false]);
    assert_eq!(bools(&run1(Op::IsInf(op::IsInf::default()), &[&x]).unwrap()), [false, true, true, false]);
    let neg = op::IsInf { detect_positive: false, detect_negative: true };
    assert_eq!(bools(&run1(Op::IsInf(neg), &[&x]).unwrap()), [false, false, true, false]);
}

#[test]
fn where_broadcasts_three_ways() {
    // ONNX Where example: condition [[1, 0], [1, 1]], x [[1, 2], [3, 4]], y [[9, 8], [7, 6]].
    let c = t(&[2, 2], vec![true, false, true, true]);
    let x = t(&[2, 2], vec![1f32, 2.0, 3.0, 4.0]);
    let y = t(&[2, 2], vec![9f32, 8.0, 7.0, 6.0]);
    assert_eq!(f32s(&run1(Op::Where, &[&c, &x, &y]).unwrap()), [1., 8., 3., 4.]);
    let c = t(&[2, 1], vec![true, false]);
    let r = run1(Op::Where, &[&c, &t(&[3], vec![1i64, 2, 3]), &t(&[], vec![0i64])]).unwrap();
    assert_eq!(r.shape(), [2, 3]);
    assert_eq!(i64s(&r), [1, 2, 3, 0, 0, 0]);
    assert_op_err(run1(Op::Where, &[&t(&[1], vec![1f32]), &x, &y]), "bool");
}
