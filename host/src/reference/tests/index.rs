//! Gather, GatherElements, GatherND and the scatter ops.

use planner::Op;
use planner::op::{self, ScatterReduction};

use super::{assert_op_err, f32s, i64s, run1, t};

#[test]
fn gather_axis_0_and_1_with_negative_indices() {
    // ONNX Gather example (axis 0): data [[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], indices [[0, 1], [1, 2]].
    let data = t(&[3, 2], vec![1.0f32, 1.2, 2.3, 3.4, 4.5, 5.7]);
    let idx = t(&[2, 2], vec![0i64, 1, 1, 2]);
    let r = run1(Op::Gather(op::Gather { axis: 0 }), &[&data, &idx]).unwrap();
    assert_eq!(r.shape(), [2, 2, 2]);
    assert_eq!(f32s(&r), [1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7]);
    // Axis 1 example: data [[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], indices [[0, 2]].
    let data = t(&[3, 3], vec![1.0f32, 1.2, 1.9, 2.3, 3.4, 3.9, 4.5, 5.7, 5.9]);
    let r = run1(Op::Gather(op::Gather { axis: 1 }), &[&data, &t(&[1, 2], vec![0i32, -1])]).unwrap();
    assert_eq!(r.shape(), [3, 1, 2]);
    assert_eq!(f32s(&r), [1.0, 1.9, 2.3, 3.9, 4.5, 5.9]);
    let scalar = run1(Op::Gather(op::Gather { axis: 0 }), &[&data, &t(&[], vec![2i64])]).unwrap();
    assert_eq!((scalar.shape(), f32s(&scalar)), (&[3usize][..], vec![4.5, 5.7, 5.9]));
    assert_op_err(run1(Op::Gather(op::Gather { axis: 0 }), &[&data, &t(&[1], vec![3i64])]), "out of range");
}

#[test]
fn gather_elements_examples() {
    // ONNX example: data [[1, 2], [3, 4]], indices [[0, 0], [1, 0]], axis 1 -> [[1, 1], [4, 3]].
    let data = t(&[2, 2], vec![1i64, 2, 3, 4]);
    let r =
        run1(Op::GatherElements(op::GatherElements { axis: 1 }), &[&data, &t(&[2, 2], vec![0i64, 0, 1, 0])])
            .unwrap();
    assert_eq!(i64s(&r), [1, 1, 4, 3]);
    // Second example: 3x3 data, indices [[1, 2, 0], [2, 0, 0]], axis 0 -> [[4, 8, 3], [7, 2, 3]].
    let data = t(&[3, 3], (1..=9).collect::<Vec<i64>>());
    let r = run1(
        Op::GatherElements(op::GatherElements { axis: 0 }),
        &[&data, &t(&[2, 3], vec![1i64, 2, 0, 2, 0, 0])],
    )
    .unwrap();
    assert_eq!(i64s(&r), [4, 8, 3, 7, 2, 3]);
    let neg =
        run1(Op::GatherElements(op::GatherElements { axis: -1 }), &[&data, &t(&[3, 1], vec![-1i64, -2, -3])])
            .unwrap();
    assert_eq!(i64s(&neg), [3, 5, 7]);
}

#[test]
fn gather_nd_examples_with_batch_dims() {
    let data = t(&[2, 2], vec![0i64, 1, 2, 3]);
    let r = run1(Op::GatherNd(op::GatherNd { batch_dims: 0 }), &[&data, &t(&[2, 2], vec![0i64, 0, 1, 1])])
        .unwrap();
    assert_eq!(i64s(&r), [0, 3]);
    let r = run1(Op::GatherNd(op::GatherNd { batch_dims: 0 }), &[&data, &t(&[2, 1], vec![1i64, 0])]).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[2usize, 2][..], vec![2, 3, 0, 1]));
    // Example 5: data [[[0,1],[2,3]],[[4,5],[6,7]]], indices [[1],[0]], batch_dims 1 -> [[2,3],[4,5]].
    let data = t(&[2, 2, 2], (0..8).collect::<Vec<i64>>());
    let r = run1(Op::GatherNd(op::GatherNd { batch_dims: 1 }), &[&data, &t(&[2, 1], vec![1i64, 0])]).unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[2usize, 2][..], vec![2, 3, 4, 5]));
    // Example 3: indices [[[0, 1]], [[1, 0]]] -> [[[2, 3]], [[4, 5]]].
    let r = run1(Op::GatherNd(op::GatherNd { batch_dims: 0 }), &[&data, &t(&[2, 1, 2], vec![0i64, 1, 1, 0])])
        .unwrap();
    assert_eq!((r.shape(), i64s(&r)), (&[2usize, 1, 2][..], vec![2, 3, 4, 5]));
    assert_op_err(
        run1(Op::GatherNd(op::GatherNd { batch_dims: 0 }), &[&data, &t(&[1, 4], vec![0i64; 4])]),
        "does not fit",
    );
}

#[test]
fn scatter_elements_with_reductions() {
    // ONNX example: data 3x3 zeros, indices [[1, 0, 2], [0, 2, 1]], updates [[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]].
    let data = t(&[3, 3], vec![0f32; 9]);
    let idx = t(&[2, 3], vec![1i64, 0, 2, 0, 2, 1]);
    let upd = t(&[2, 3], vec![1.0f32, 1.1, 1.2, 2.0, 2.1, 2.2]);
    let r = run1(Op::ScatterElements(op::ScatterElements::default()), &[&data, &idx, &upd]).unwrap();
    assert_eq!(f32s(&r), [2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2]);
    let legacy = run1(Op::Scatter(op::Scatter { axis: 0 }), &[&data, &idx, &upd]).unwrap();
    assert_eq!(legacy, r);
    // Reduction example: data [[1, 2, 3, 4, 5]], indices [[1, 1]], updates [[1.1, 2.1]], axis 1.
    let data = t(&[1, 5], vec![1f32, 2.0, 3.0, 4.0, 5.0]);
    let (idx, upd) = (t(&[1, 2], vec![1i64, -4]), t(&[1, 2], vec![1.1f32, 2.1]));
    let sc = |reduction| {
        f32s(
            &run1(Op::ScatterElements(op::ScatterElements { axis: 1, reduction }), &[&data, &idx, &upd])
                .unwrap(),
        )
    };
    assert_eq!(sc(ScatterReduction::Add), [1.0, (2.0 + 1.1f32 as f64 + 2.1f32 as f64) as f32, 3.0, 4.0, 5.0]);
    assert_eq!(sc(ScatterReduction::Mul), [1.0, (2.0 * 1.1f32 as f64 * 2.1f32 as f64) as f32, 3.0, 4.0, 5.0]);
    assert_eq!(sc(ScatterReduction::Max)[1], 2.1);
    assert_eq!(sc(ScatterReduction::Min)[1], 1.1);
    assert_eq!(sc(ScatterReduction::None)[1], 2.1);
}

#[test]
fn scatter_nd_examples() {
    // ONNX example 1: data [1..8], indices [[4], [3], [1], [7]], updates [9, 10, 11, 12].
    let data = t(&[8], (1..=8).collect::<Vec<i64>>());
    let r = run1(
        Op::ScatterNd(op::ScatterNd::default()),
        &[&data, &t(&[4, 1], vec![4i64, 3, 1, 7]), &t(&[4], vec![9i64, 10, 11, 12])],
    )
    .unwrap();
    assert_eq!(i64s(&r), [1, 11, 3, 10, 9, 6, 7, 12]);
    // Slice updates with add: data 2x2x2, indices [[0], [0]], updates two 2x2 blocks.
    let data = t(&[2, 2, 2], vec![1i64; 8]);
    let add = op::ScatterNd { reduction: ScatterReduction::Add };
    let r = run1(
        Op::ScatterNd(add),
        &[&data, &t(&[2, 1], vec![0i64, -2]), &t(&[2, 2, 2], (1..=8).collect::<Vec<i64>>())],
    )
    .unwrap();
    assert_eq!(i64s(&r), [7, 9, 11, 13, 1, 1, 1, 1]);
    assert_op_err(
        run1(
            Op::ScatterNd(op::ScatterNd::default()),
            &[&data, &t(&[1, 1], vec![0i64]), &t(&[2], vec![0i64; 2])],
        ),
        "updates shape",
    );
}
