//! If, Loop and Scan with captured outer values.

use planner::op::{self, Scan};
use planner::{Capture, DType, Graph, Op, ValueId};

use super::{f32s, i64s, run_op, t};
use crate::error::HostError;
use crate::reference::eval;

/// A body with no inputs that applies `op` to the captured outer value `outer`.
fn branch(outer: ValueId, op: Op) -> Box<Graph> {
    let mut b = Graph::new();
    let inner = b.add_value("x_in", None);
    b.captures.push(Capture { inner, outer });
    let y = b.op1(op, &[inner]);
    b.output(y);
    Box::new(b)
}

#[test]
fn if_runs_the_selected_branch_with_captures() {
    let mut g = Graph::new();
    let cond = g.input("cond", DType::Bool, [] as [usize; 0]);
    let x = g.input("x", DType::F32, [3usize]);
    let iff = Op::If(op::If { then_branch: branch(x, Op::Neg), else_branch: branch(x, Op::Abs) });
    let y = g.op1(iff, &[cond]);
    g.output(y);
    let xs = t(&[3], vec![-1f32, 2.0, -3.0]);
    let run = |c: bool| {
        eval(&g, &[("cond".into(), t(&[], vec![c])), ("x".into(), xs.clone())]).unwrap().remove(0).1
    };
    assert_eq!(f32s(&run(true)), [1., -2., 3.]);
    assert_eq!(f32s(&run(false)), [1., 2., 3.]);
}

/// Loop body: `(i, cond_in, acc) -> (cond_out, acc + i, acc + i)`; `cond_out` is `acc + i < limit`
/// when `limit` is given, else `cond_in`.
fn accumulate_body(limit: Option<f32>) -> Box<Graph> {
    let mut b = Graph::new();
    let i = b.input("i", DType::I64, [] as [usize; 0]);
    let c = b.input("cond_in", DType::Bool, [] as [usize; 0]);
    let acc = b.input("acc", DType::F32, [] as [usize; 0]);
    let fi = b.cast(i, DType::F32);
    let next = b.add(acc, fi);
    let cond_out = match limit {
        Some(l) => {
            let lim = b.initializer("limit", planner::ConstTensor::scalar_f32(l));
            b.op1(Op::Less, &[next, lim])
        }
        None => b.op1(Op::Identity, &[c]),
    };
    let scan = b.op1(Op::Identity, &[next]);
    b.output(cond_out);
    b.output(next);
    b.output(scan);
    b.values[scan.index()].info = Some(planner::TensorInfo::scalar(DType::F32));
    Box::new(b)
}

#[test]
fn loop_with_trip_count_condition_and_scan_outputs() {
    let acc0 = t(&[], vec![0f32]);
    let for_loop = Op::Loop(op::Loop { body: accumulate_body(None) });
    let out = run_op(for_loop.clone(), &[Some(&t(&[], vec![4i64])), None, Some(&acc0)], 2).unwrap();
    assert_eq!(f32s(&out[0]), [6.]);
    assert_eq!((out[1].shape(), f32s(&out[1])), (&[4usize][..], vec![0., 1., 3., 6.]));
    let while_loop = Op::Loop(op::Loop { body: accumulate_body(Some(5.0)) });
    let out = run_op(while_loop, &[None, Some(&t(&[], vec![true])), Some(&acc0)], 2).unwrap();
    assert_eq!(f32s(&out[0]), [6.]);
    assert_eq!(out[1].shape(), [4]);
    let none =
        run_op(for_loop.clone(), &[Some(&t(&[], vec![0i64])), Some(&t(&[], vec![true])), Some(&acc0)], 2)
            .unwrap();
    assert_eq!((f32s(&none[0]), none[1].shape()), (vec![0.], &[0usize][..]));
    let forever = run_op(for_loop, &[None, None, Some(&acc0)], 2);
    assert!(matches!(forever, Err(HostError::Unsupported { .. })), "{forever:?}");
}

/// Scan body: `(state, x_t) -> (state + x_t, state + x_t)`.
fn running_sum_body() -> Box<Graph> {
    let mut b = Graph::new();
    let s = b.input("s", DType::F32, [2usize]);
    let x = b.input("x_t", DType::F32, [2usize]);
    let next = b.add(s, x);
    let copy = b.op1(Op::Identity, &[next]);
    b.output(next);
    b.output(copy);
    Box::new(b)
}

fn scan_op(in_axis: i64, in_dir: i64, out_axis: i64, out_dir: i64) -> Op {
    Op::Scan(Scan {
        body: running_sum_body(),
        num_scan_inputs: 1,
        scan_input_axes: vec![in_axis],
        scan_input_directions: vec![in_dir],
        scan_output_axes: vec![out_axis],
        scan_output_directions: vec![out_dir],
    })
}

#[test]
fn scan_axes_and_directions() {
    // ONNX Scan example (cumulative sum): initial [0, 0], x = [[1, 2], [3, 4], [5, 6]].
    let init = t(&[2], vec![0f32, 0.0]);
    let x = t(&[3, 2], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run_op(scan_op(0, 0, 0, 0), &[Some(&init), Some(&x)], 2).unwrap();
    assert_eq!(f32s(&out[0]), [9., 12.]);
    assert_eq!((out[1].shape(), f32s(&out[1])), (&[3usize, 2][..], vec![1., 2., 4., 6., 9., 12.]));
    let rev = run_op(scan_op(0, 1, 0, 0), &[Some(&init), Some(&x)], 2).unwrap();
    assert_eq!(f32s(&rev[1]), [5., 6., 8., 10., 9., 12.]);
    let prepend = run_op(scan_op(0, 0, 0, 1), &[Some(&init), Some(&x)], 2).unwrap();
    assert_eq!(f32s(&prepend[1]), [9., 12., 4., 6., 1., 2.]);
    let xt = t(&[2, 3], vec![1f32, 3.0, 5.0, 2.0, 4.0, 6.0]);
    let cols = run_op(scan_op(-1, 0, 1, 0), &[Some(&init), Some(&xt)], 2).unwrap();
    assert_eq!((cols[1].shape(), f32s(&cols[1])), (&[2usize, 3][..], vec![1., 4., 9., 2., 6., 12.]));
}

#[test]
fn loop_counter_reaches_body() {
    // The iteration number is an I64 scalar: collect it as a scan output.
    let mut b = Graph::new();
    let i = b.input("i", DType::I64, [] as [usize; 0]);
    let c = b.input("cond_in", DType::Bool, [] as [usize; 0]);
    let c_out = b.op1(Op::Identity, &[c]);
    let i_out = b.op1(Op::Identity, &[i]);
    b.output(c_out);
    b.output(i_out);
    let out =
        run_op(Op::Loop(op::Loop { body: Box::new(b) }), &[Some(&t(&[], vec![3i64])), None], 1).unwrap();
    assert_eq!(i64s(&out[0]), [0, 1, 2]);
}

#[test]
fn loop_body_reads_a_captured_outer_value_every_iteration() {
    let mut g = Graph::new();
    let step = g.input("step", DType::F32, [2usize]);
    let mut b = Graph::new();
    b.input("i", DType::I64, [] as [usize; 0]);
    let c = b.input("cond_in", DType::Bool, [] as [usize; 0]);
    let acc = b.input("acc", DType::F32, [2usize]);
    let inner = b.add_value("step_in", None);
    b.captures.push(Capture { inner, outer: step });
    let c_out = b.op1(Op::Identity, &[c]);
    let next = b.add(acc, inner);
    b.output(c_out);
    b.output(next);
    let m = g.const_i64("m", &[], &[3]);
    let acc0 = g.initializer("acc0", planner::ConstTensor::from_f32(&[2], &[0.0, 1.0]).unwrap());
    let outs = g.push_opt(Op::Loop(op::Loop { body: Box::new(b) }), vec![Some(m), None, Some(acc0)], 1);
    g.output(outs[0]);
    let out = eval(&g, &[("step".into(), t(&[2], vec![1f32, 10.0]))]).unwrap();
    assert_eq!(f32s(&out[0].1), [3., 31.]);
}

#[test]
fn a_loop_that_never_runs_stacks_outputs_of_the_inferred_element_shape() {
    // Body: (i, cond, v[2]) -> (cond, v, v[i : i + 1] ⊕ v): the scan element is [3], known only
    // by inference (no declared info) and only with the counter's value (a slice bound).
    let mut b = Graph::new();
    let i = b.input("i", DType::I64, [] as [usize; 0]);
    let c = b.input("c", DType::Bool, [] as [usize; 0]);
    let v = b.input("v", DType::F32, [2usize]);
    let ax = b.const_i64("ax", &[1], &[0]);
    let start = b.unsqueeze(i, ax);
    let one = b.const_i64("one", &[1], &[1]);
    let end = b.add(start, one);
    let piece = b.op1(Op::Slice(Default::default()), &[v, start, end]);
    let cat = b.concat(&[piece, v], 0);
    b.output(c);
    b.output(v);
    b.output(cat);
    let lp = Op::Loop(op::Loop { body: Box::new(b) });
    let v0 = t(&[2], vec![1f32, 2.0]);
    let out = run_op(lp.clone(), &[Some(&t(&[], vec![0i64])), None, Some(&v0)], 2).unwrap();
    assert_eq!(out[1].shape(), [0, 3]);
    let out = run_op(lp, &[Some(&t(&[], vec![2i64])), None, Some(&v0)], 2).unwrap();
    assert_eq!((out[1].shape(), f32s(&out[1])), (&[2usize, 3][..], vec![1., 1., 2., 2., 1., 2.]));
}
