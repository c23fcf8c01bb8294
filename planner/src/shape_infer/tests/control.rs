//! If, Loop and Scan inference with captured outer values.

use super::{dims, info, is_fresh};
use crate::constant::ConstTensor;
use crate::graph::{Capture, Graph};
use crate::op::{self, Op};
use crate::shape_infer::infer;
use crate::tensor_info::{DType, Dim};
use crate::validate;

const F: DType = DType::F32;

#[test]
fn if_joins_branches_and_sees_captures() {
    let mut g = Graph::new();
    let cond = g.input("cond", DType::Bool, dims(""));
    let x = g.input("x", F, dims("b,4"));

    let mut then_b = Graph::new();
    let xi = then_b.add_value("x", None);
    then_b.captures.push(Capture { inner: xi, outer: x });
    let r = then_b.relu(xi);
    then_b.output(r);

    let mut else_b = Graph::new();
    let xe = else_b.add_value("x", None);
    else_b.captures.push(Capture { inner: xe, outer: x });
    let c = else_b.concat(&[xe, xe], 1);
    else_b.output(c);

    let same = op::If { then_branch: Box::new(then_b.clone()), else_branch: Box::new(then_b.clone()) };
    let y_same = g.op1(Op::If(same), &[cond]);
    let differ = op::If { then_branch: Box::new(then_b), else_branch: Box::new(else_b) };
    let y = g.op1(Op::If(differ), &[cond]);
    g.output(y_same);
    g.output(y);
    validate::graph(&g).unwrap();
    let infos = infer(&g).unwrap();
    assert_eq!(infos[y_same.index()], info(F, "b,4"));
    let out = &infos[y.index()];
    assert_eq!(out.shape.dims()[0], Dim::from("b"));
    assert!(is_fresh(&out.shape.dims()[1]), "{out}");
}

fn loop_body(grow: bool) -> Graph {
    let mut body = Graph::new();
    let _iter = body.input("iter", DType::I64, dims(""));
    let cond_in = body.input("cond_in", DType::Bool, dims(""));
    let v = body.input("v", F, dims("1,3"));
    let cond_out = body.op1(Op::Identity, &[cond_in]);
    let v_out = if grow { body.concat(&[v, v], 0) } else { body.add(v, v) };
    let scan = body.relu(v);
    body.output(cond_out);
    body.output(v_out);
    body.output(scan);
    body
}

#[test]
fn loop_with_constant_trip_count() {
    let mut g = Graph::new();
    let v0 = g.input("v0", F, dims("1,3"));
    let m = g.initializer("m", ConstTensor::scalar_i64(5));
    let outs =
        g.push_opt(Op::Loop(op::Loop { body: Box::new(loop_body(false)) }), vec![Some(m), None, Some(v0)], 2);
    g.output(outs[0]);
    g.output(outs[1]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(F, "1,3"));
    assert_eq!(infos[outs[1].index()], info(F, "5,1,3"));
}

#[test]
fn loop_with_growing_state_generalizes() {
    let mut g = Graph::new();
    let v0 = g.input("v0", F, dims("1,3"));
    let m = g.input("m", DType::I64, dims(""));
    let c = g.input("c", DType::Bool, dims(""));
    let outs = g.push(Op::Loop(op::Loop { body: Box::new(loop_body(true)) }), &[m, c, v0], 2);
    g.output(outs[1]);
    let infos = infer(&g).unwrap();
    let fin = &infos[outs[0].index()];
    assert!(is_fresh(&fin.shape.dims()[0]) && fin.shape.dims()[1] == Dim::Known(3), "{fin}");
    let scan = &infos[outs[1].index()];
    assert_eq!(scan.rank(), 3);
    assert!(is_fresh(&scan.shape.dims()[0]));
}

#[test]
fn scan_stacks_outputs() {
    let mut body = Graph::new();
    let s = body.input("s", F, dims("4"));
    let x = body.input("x", F, dims("4"));
    let s2 = body.add(s, x);
    let y = body.mul(s, x);
    body.output(s2);
    body.output(y);
    let mut g = Graph::new();
    let s0 = g.input("s0", F, dims("4"));
    let xs = g.input("xs", F, dims("t,4"));
    let scan = op::Scan {
        body: Box::new(body),
        num_scan_inputs: 1,
        scan_input_axes: Vec::new(),
        scan_input_directions: Vec::new(),
        scan_output_axes: vec![1],
        scan_output_directions: Vec::new(),
    };
    let outs = g.push(Op::Scan(scan), &[s0, xs], 2);
    g.output(outs[1]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(F, "4"));
    assert_eq!(infos[outs[1].index()], info(F, "4,t"));
}

#[test]
fn an_if_on_a_tracked_condition_infers_only_its_taken_branch() {
    // cond = Equal(Split(shape)[1], 4): known once the shape is; the branches differ in rank.
    let mut g = Graph::new();
    let x = g.input("x", F, dims("2,4"));
    let shape = g.shape_of(x);
    let parts = g.push(Op::Split(op::Split { axis: 0, split: None, num_outputs: Some(2) }), &[shape], 2);
    let four = g.const_i64("four", &[1], &[4]);
    let cond = g.op1(Op::Equal, &[parts[1], four]);
    let cond = g.op1(Op::Squeeze(Default::default()), &[cond]);
    let mut then_b = Graph::new();
    let xt = then_b.add_value("x", None);
    then_b.captures.push(crate::graph::Capture { inner: xt, outer: x });
    let r = then_b.relu(xt);
    then_b.output(r);
    let mut else_b = Graph::new();
    let xe = else_b.add_value("x", None);
    else_b.captures.push(crate::graph::Capture { inner: xe, outer: x });
    let flat = else_b.const_i64("flat", &[1], &[-1]);
    let f = else_b.reshape(xe, flat);
    else_b.output(f);
    let y = g.op1(Op::If(op::If { then_branch: Box::new(then_b), else_branch: Box::new(else_b) }), &[cond]);
    g.output(y);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[y.index()], info(F, "2,4"), "the then branch (rank 2), not a join with rank 1");
}
