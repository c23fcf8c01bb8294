//! Control flow run by the session on the device (If, Loop, Scan), against the CPU reference:
//! a recurrent cell in a Loop whose condition the body computes on the device, with captured
//! weights and a stacked scan output; Scan over a non-leading axis in both directions (elementwise
//! steps: one `scan_program_f32` launch); an If whose
//! condition the device computes and whose branches differ in shape (the graph after it planned for
//! the branch taken); an If nested in a Loop; a loop counter used as a shape operand; and no device
//! allocation once a control-flow model is warm.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{Capture, ConstTensor, DType, Graph, ValueId};

use crate::ctx;
use crate::indexing::{compare, known, pick};

const F: DType = DType::F32;

fn random(rng: &mut Rng, shape: &[usize]) -> HostTensor {
    let n: usize = shape.iter().product();
    HostTensor::new(shape.to_vec(), (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect::<Vec<_>>()).unwrap()
}

fn weight(rng: &mut Rng, shape: &[usize]) -> ConstTensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.uniform(-0.5, 0.5)).collect();
    ConstTensor::from_f32(shape, &v).unwrap()
}

/// A body value capturing `outer` of the enclosing graph, named `name`.
fn capture(body: &mut Graph, name: &str, outer: ValueId) -> ValueId {
    let inner = body.add_value(name, None);
    body.captures.push(Capture { inner, outer });
    inner
}

/// `h_{t+1} = tanh(h_t W + b)` for `t < M` while `t < limit` (the condition computed on the device
/// from the counter and a captured input), every `h_{t+1}` stacked: outputs (h_final, hs).
fn rnn_loop(rng: &mut Rng, batch: usize, hidden: usize) -> Graph {
    let mut g = Graph::new();
    let h0 = g.input("h0", F, known(&[batch, hidden]));
    let m = g.input("m", DType::I64, known(&[]));
    let limit = g.input("limit", DType::I64, known(&[]));
    let w = g.initializer("w", weight(rng, &[hidden, hidden]));
    let b = g.initializer("b", weight(rng, &[hidden]));
    let go = g.initializer("go", ConstTensor::new(DType::Bool, vec![], vec![1]).unwrap());

    let mut body = Graph::new();
    let i = body.input("i", DType::I64, known(&[]));
    let _cond = body.input("cond", DType::Bool, known(&[]));
    let h = body.input("h", F, known(&[batch, hidden]));
    let (wi, bi, li) =
        (capture(&mut body, "w", w), capture(&mut body, "b", b), capture(&mut body, "limit", limit));
    let one = body.const_i64("one", &[], &[1]);
    let next_i = body.add(i, one);
    let cond = body.op1(Op::Less, &[next_i, li]);
    let z = body.matmul(h, wi);
    let z = body.add(z, bi);
    let h2 = body.op1(Op::Tanh, &[z]);
    body.output(cond);
    body.output(h2);
    body.output(h2);

    let outs = g.push(Op::Loop(op::Loop { body: Box::new(body) }), &[m, go, h0], 2);
    // Something after the loop, planned for the trip count the run took.
    let y = g.relu(outs[1]);
    g.output(outs[0]);
    g.output(y);
    g
}

#[test]
fn a_recurrent_loop_matches_the_reference() {
    let mut rng = Rng::new(0xc0f1);
    for _ in 0..6 {
        let (batch, hidden) = (pick(&mut rng, &[1, 3, 8]), pick(&mut rng, &[4, 32, 96]));
        let (m, limit) = (pick(&mut rng, &[0i64, 1, 5, 9]), pick(&mut rng, &[0i64, 3, 100]));
        let g = rnn_loop(&mut rng, batch, hidden);
        let inputs = [
            ("h0".to_string(), random(&mut rng, &[batch, hidden])),
            ("m".to_string(), HostTensor::new(vec![], vec![m]).unwrap()),
            ("limit".to_string(), HostTensor::new(vec![], vec![limit]).unwrap()),
        ];
        compare(&format!("rnn loop {batch}x{hidden} M {m} limit {limit}"), g, &inputs, 1e-5);
    }
}

/// Scan with states `s` (`[d]`): `s' = s + x`, `y = s * x`, over `xs` (`[d, t]`) along axis 1 in
/// direction `dir_in`, `y` stacked along axis 1 in direction `dir_out`.
fn scan_graph(d: usize, t: usize, dir_in: i64, dir_out: i64) -> Graph {
    let mut body = Graph::new();
    let s = body.input("s", F, known(&[d]));
    let x = body.input("x", F, known(&[d]));
    let s2 = body.add(s, x);
    let y = body.mul(s, x);
    body.output(s2);
    body.output(y);
    let mut g = Graph::new();
    let s0 = g.input("s0", F, known(&[d]));
    let xs = g.input("xs", F, known(&[d, t]));
    let scan = op::Scan {
        body: Box::new(body),
        num_scan_inputs: 1,
        scan_input_axes: vec![1],
        scan_input_directions: vec![dir_in],
        scan_output_axes: vec![-1],
        scan_output_directions: vec![dir_out],
    };
    let outs = g.push(Op::Scan(scan), &[s0, xs], 2);
    g.output(outs[0]);
    g.output(outs[1]);
    g
}

#[test]
fn scan_over_an_inner_axis_in_both_directions_matches_the_reference() {
    let mut rng = Rng::new(0xc0f2);
    for (d, t) in [(1, 1), (5, 7), (64, 3), (3, 0)] {
        for (dir_in, dir_out) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let inputs =
                [("s0".to_string(), random(&mut rng, &[d])), ("xs".to_string(), random(&mut rng, &[d, t]))];
            let what = format!("scan {d}x{t} {dir_in}/{dir_out}");
            let plan = compare(&what, scan_graph(d, t, dir_in, dir_out), &inputs, 1e-6);
            // Elementwise steps: one kernel launch runs the loop, not a plan per step.
            assert!(plan.contains("scan_program_f32"), "{what}: {plan}");
        }
    }
}

/// `If(sum(x) > 0)`: then `relu(x)` (`[n]`), else `concat(x, -x)` (`[2n]`); then `+ 1`.
fn if_graph(n: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", F, known(&[n]));
    let zero = g.initializer("zero", ConstTensor::from_f32(&[], &[0.0]).unwrap());
    let sum = g.op1(Op::ReduceSum(op::Reduce { keepdims: false, ..Default::default() }), &[x]);
    let cond = g.op1(Op::Greater, &[sum, zero]);
    let mut then_b = Graph::new();
    let xt = capture(&mut then_b, "x", x);
    let r = then_b.relu(xt);
    then_b.output(r);
    let mut else_b = Graph::new();
    let xe = capture(&mut else_b, "x", x);
    let neg = else_b.op1(Op::Neg, &[xe]);
    let c = else_b.concat(&[xe, neg], 0);
    else_b.output(c);
    let y = g.op1(Op::If(op::If { then_branch: Box::new(then_b), else_branch: Box::new(else_b) }), &[cond]);
    let one = g.initializer("one", ConstTensor::from_f32(&[], &[1.0]).unwrap());
    let z = g.add(y, one);
    g.output(z);
    g
}

#[test]
fn an_if_on_a_device_condition_with_branches_of_different_shapes() {
    let mut rng = Rng::new(0xc0f3);
    for n in [1, 6, 1000] {
        for sign in [1.0f32, -1.0] {
            let x: Vec<f32> = (0..n).map(|_| sign * (0.1 + rng.uniform(0.0, 1.0))).collect();
            let inputs = [("x".to_string(), HostTensor::new(vec![n], x).unwrap())];
            compare(&format!("if n {n} sign {sign}"), if_graph(n), &inputs, 1e-6);
        }
    }
}

/// A Loop of `m` iterations whose body holds an If on the counter (`i > 2`: `v * 2`, else `v + 1`)
/// and slices `xs[i : i + 1]` with the counter (a shape operand: plans specialized on its value).
fn nested_graph(len: usize) -> Graph {
    let mut g = Graph::new();
    let v0 = g.input("v0", F, known(&[1]));
    let xs = g.input("xs", F, known(&[len]));
    let m = g.input("m", DType::I64, known(&[]));
    let mut body = Graph::new();
    let i = body.input("i", DType::I64, known(&[]));
    let c = body.input("c", DType::Bool, known(&[]));
    let v = body.input("v", F, known(&[1]));
    let xs_in = capture(&mut body, "xs", xs);
    let two = body.const_i64("two", &[], &[2]);
    let gt = body.op1(Op::Greater, &[i, two]);
    let mut then_b = Graph::new();
    let vt = capture(&mut then_b, "v", v);
    let k2 = then_b.initializer("k2", ConstTensor::from_f32(&[1], &[2.0]).unwrap());
    let o = then_b.mul(vt, k2);
    then_b.output(o);
    let mut else_b = Graph::new();
    let ve = capture(&mut else_b, "v", v);
    let k1 = else_b.initializer("k1", ConstTensor::from_f32(&[1], &[1.0]).unwrap());
    let o = else_b.add(ve, k1);
    else_b.output(o);
    let branch =
        body.op1(Op::If(op::If { then_branch: Box::new(then_b), else_branch: Box::new(else_b) }), &[gt]);
    let one = body.const_i64("one", &[1], &[1]);
    let ax = body.const_i64("ax", &[1], &[0]);
    let start = body.unsqueeze(i, ax);
    let end = body.add(start, one);
    let piece = body.op1(Op::Slice(Default::default()), &[xs_in, start, end]);
    let v2 = body.add(branch, piece);
    body.output(c);
    body.output(v2);
    body.output(piece);
    let outs = g.push_opt(Op::Loop(op::Loop { body: Box::new(body) }), vec![Some(m), None, Some(v0)], 2);
    g.output(outs[0]);
    g.output(outs[1]);
    g
}

#[test]
fn an_if_nested_in_a_loop_and_a_counter_as_a_slice_bound() {
    let mut rng = Rng::new(0xc0f4);
    for m in [0i64, 1, 3, 6] {
        let inputs = [
            ("v0".to_string(), random(&mut rng, &[1])),
            ("xs".to_string(), random(&mut rng, &[6])),
            ("m".to_string(), HostTensor::new(vec![], vec![m]).unwrap()),
        ];
        compare(&format!("nested m {m}"), nested_graph(6), &inputs, 1e-6);
    }
}

#[test]
fn a_warm_control_flow_model_allocates_nothing() {
    let mut rng = Rng::new(0xc0f5);
    let g = rnn_loop(&mut rng, 4, 64);
    let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
    let run = |s: &mut Session, m: i64, rng: &mut Rng| {
        let inputs = [
            ("h0".to_string(), random(rng, &[4, 64])),
            ("m".to_string(), HostTensor::new(vec![], vec![m]).unwrap()),
            ("limit".to_string(), HostTensor::new(vec![], vec![100i64]).unwrap()),
        ];
        let got = s.run(&inputs).unwrap();
        let want = host::reference::eval(&g, &inputs).unwrap();
        assert_eq!(got[1].1.shape(), want[1].1.shape());
    };
    for m in [7, 3, 7] {
        run(&mut s, m, &mut rng);
    }
    let warm = s.allocation_count();
    for m in [7, 3, 1, 7] {
        run(&mut s, m, &mut rng);
        assert_eq!(s.allocation_count(), warm, "a warm run of {m} iterations allocated");
    }
    assert_eq!(s.region_stats().used, 0, "every block is freed after a run");
}
