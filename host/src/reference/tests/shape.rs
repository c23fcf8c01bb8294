//! Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, Expand, Transpose, Tile, Identity.

use planner::Op;
use planner::op;

use super::{assert_op_err, f32s, i64s, run_op, run1, t};

#[test]
fn reshape_zero_and_minus_one() {
    let x = t(&[2, 3, 4], (0..24).collect::<Vec<i64>>());
    let shape_of = |r: Result<crate::tensor::HostTensor, _>| r.map(|t| t.shape().to_vec());
    let rs = |spec: Vec<i64>, allowzero| {
        run1(Op::Reshape(op::Reshape { allowzero }), &[&x, &t(&[spec.len()], spec)])
    };
    assert_eq!(shape_of(rs(vec![4, 2, 3], false)).unwrap(), [4, 2, 3]);
    assert_eq!(shape_of(rs(vec![0, -1], false)).unwrap(), [2, 12]);
    assert_eq!(shape_of(rs(vec![-1, 0, 2], false)).unwrap(), [4, 3, 2]);
    assert_eq!(i64s(&rs(vec![24], false).unwrap()), (0..24).collect::<Vec<_>>());
    assert_op_err(rs(vec![5, -1], false), "infer");
    assert_op_err(rs(vec![-1, -1], false), "invalid shape");
    let empty = t(&[0, 3], Vec::<f32>::new());
    let r = run1(Op::Reshape(op::Reshape { allowzero: true }), &[&empty, &t(&[2], vec![3i64, 0])]).unwrap();
    assert_eq!(r.shape(), [3, 0]);
    let scalar =
        run1(Op::Reshape(op::Reshape::default()), &[&t(&[1, 1], vec![5f32]), &t(&[0], Vec::<i64>::new())])
            .unwrap();
    assert_eq!(scalar.shape(), [] as [usize; 0]);
}

#[test]
fn flatten_squeeze_unsqueeze() {
    let x = t(&[2, 1, 3, 1], vec![0f32; 6]);
    let fl = |axis| run1(Op::Flatten(op::Flatten { axis }), &[&x]).unwrap().shape().to_vec();
    assert_eq!(fl(0), [1, 6]);
    assert_eq!(fl(2), [2, 3]);
    assert_eq!(fl(4), [6, 1]);
    assert_eq!(fl(-1), [6, 1]);
    let sq = run_op(Op::Squeeze(op::Squeeze::default()), &[Some(&x), None], 1).unwrap();
    assert_eq!(sq[0].shape(), [2, 3]);
    let sq = run1(Op::Squeeze(op::Squeeze::default()), &[&x, &t(&[1], vec![-1i64])]).unwrap();
    assert_eq!(sq.shape(), [2, 1, 3]);
    assert_op_err(run1(Op::Squeeze(op::Squeeze { axes: Some(vec![0]) }), &[&x]), "cannot squeeze");
    let y = t(&[3, 4], vec![0f32; 12]);
    let un = run1(Op::Unsqueeze(op::Unsqueeze::default()), &[&y, &t(&[2], vec![0i64, -1])]).unwrap();
    assert_eq!(un.shape(), [1, 3, 4, 1]);
    let un = run1(Op::Unsqueeze(op::Unsqueeze { axes: Some(vec![1, 3]) }), &[&y]).unwrap();
    assert_eq!(un.shape(), [3, 1, 4, 1]);
    let s =
        run1(Op::Unsqueeze(op::Unsqueeze::default()), &[&t(&[], vec![1f32]), &t(&[1], vec![0i64])]).unwrap();
    assert_eq!(s.shape(), [1]);
}

#[test]
fn shape_and_size() {
    let x = t(&[2, 3, 4], vec![0f32; 24]);
    let sh = |start, end| i64s(&run1(Op::Shape(op::ShapeOf { start, end }), &[&x]).unwrap());
    assert_eq!(sh(0, None), [2, 3, 4]);
    assert_eq!(sh(-1, None), [4]);
    assert_eq!(sh(1, Some(-1)), [3]);
    assert_eq!(sh(-10, Some(10)), [2, 3, 4]);
    assert_eq!(sh(2, Some(1)), [] as [i64; 0]);
    let sz = run1(Op::Size, &[&x]).unwrap();
    assert_eq!((sz.shape(), i64s(&sz)), (&[][..], vec![24]));
}

#[test]
fn expand_transpose_tile_identity() {
    // ONNX Expand example: [[1], [2], [3]] to shape [2, 1, 6] -> [2, 3, 6].
    let x = t(&[3, 1], vec![1f32, 2.0, 3.0]);
    let e = run1(Op::Expand, &[&x, &t(&[3], vec![2i64, 1, 6])]).unwrap();
    assert_eq!(e.shape(), [2, 3, 6]);
    assert_eq!(f32s(&e)[..7], [1., 1., 1., 1., 1., 1., 2.]);
    let e = run1(Op::Expand, &[&x, &t(&[2], vec![1i64, 1])]).unwrap();
    assert_eq!(e.shape(), [3, 1]);
    assert_op_err(run1(Op::Expand, &[&x, &t(&[2], vec![4i64, 1])]), "broadcast");
    let m = t(&[2, 3], vec![1i64, 2, 3, 4, 5, 6]);
    let tr = run1(Op::Transpose(op::Transpose::default()), &[&m]).unwrap();
    assert_eq!((tr.shape(), i64s(&tr)), (&[3usize, 2][..], vec![1, 4, 2, 5, 3, 6]));
    let cube = t(&[2, 3, 4], (0..24).collect::<Vec<i64>>());
    let tr = run1(Op::Transpose(op::Transpose { perm: Some(vec![1, 2, 0]) }), &[&cube]).unwrap();
    assert_eq!(tr.shape(), [3, 4, 2]);
    assert_eq!(i64s(&tr)[..4], [0, 12, 1, 13]);
    assert_op_err(run1(Op::Transpose(op::Transpose { perm: Some(vec![0, 0, 1]) }), &[&cube]), "permutation");
    // ONNX Tile example: [[0, 1], [2, 3]] tiled [2, 2].
    let tl = run1(Op::Tile, &[&t(&[2, 2], vec![0i64, 1, 2, 3]), &t(&[2], vec![2i64, 2])]).unwrap();
    assert_eq!(
        (tl.shape(), i64s(&tl)),
        (&[4usize, 4][..], vec![0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3])
    );
    assert_eq!(run1(Op::Identity, &[&m]).unwrap(), m);
}
