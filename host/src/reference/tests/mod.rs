//! Tests of the reference executor: the driver (input checks, freeing, optional slots) here, one
//! file per op family below. Every op test goes through [`eval`] on a one-node graph, so the
//! dispatch arm is tested with the op.

mod control;
mod generate;
mod index;
mod logic;
mod math;
mod reduce;
mod shape;
mod slice;
mod text;

use planner::{DType, Graph, Op, op};

use super::eval;
use crate::error::HostError;
use crate::tensor::{HostTensor, TensorData};

/// A tensor from a shape and data (test fixture; panics on a length mismatch).
pub(super) fn t(shape: &[usize], data: impl Into<TensorData>) -> HostTensor {
    HostTensor::new(shape.to_vec(), data).expect("fixture: data fills shape")
}

/// Runs one node of `op` on `inputs` (`None` = omitted slot) with `n_out` outputs.
pub(super) fn run_op(
    op: Op,
    inputs: &[Option<&HostTensor>],
    n_out: usize,
) -> Result<Vec<HostTensor>, HostError> {
    let mut g = Graph::new();
    let mut named = Vec::new();
    let mut slots = Vec::new();
    for (i, x) in inputs.iter().enumerate() {
        slots.push(x.map(|x| {
            let name = format!("in{i}");
            named.push((name.clone(), x.clone()));
            g.input(&name, x.dtype(), x.shape().iter().copied())
        }));
    }
    for v in g.push_opt(op, slots, n_out) {
        g.output(v);
    }
    Ok(eval(&g, &named)?.into_iter().map(|(_, t)| t).collect())
}

/// Runs a single-output op on present inputs and returns the output.
pub(super) fn run1(op: Op, inputs: &[&HostTensor]) -> Result<HostTensor, HostError> {
    let slots: Vec<Option<&HostTensor>> = inputs.iter().copied().map(Some).collect();
    let mut out = run_op(op, &slots, 1)?;
    Ok(out.remove(0))
}

/// The f32 elements of `t` (panics on another dtype; tests only).
pub(super) fn f32s(t: &HostTensor) -> Vec<f32> {
    t.f32s("test output").expect("test: f32 output").to_vec()
}

/// The i64 elements of `t` (panics on another dtype; tests only).
pub(super) fn i64s(t: &HostTensor) -> Vec<i64> {
    match t.data() {
        TensorData::I64(v) => v.clone(),
        other => panic!("expected int64 output, got {:?}", other.dtype()),
    }
}

/// The bool elements of `t` (panics on another dtype; tests only).
pub(super) fn bools(t: &HostTensor) -> Vec<bool> {
    match t.data() {
        TensorData::Bool(v) => v.clone(),
        other => panic!("expected bool output, got {:?}", other.dtype()),
    }
}

/// Asserts that `r` is an op error of `node` whose detail mentions `needle`.
pub(super) fn assert_op_err(r: Result<impl std::fmt::Debug, HostError>, needle: &str) {
    match r {
        Err(HostError::Op { node, detail, .. }) => {
            assert!(!node.is_empty(), "error names no node");
            assert!(detail.contains(needle), "detail `{detail}` lacks `{needle}`");
        }
        other => panic!("expected an Op error mentioning `{needle}`, got {other:?}"),
    }
}

#[test]
fn inputs_are_checked_by_name_dtype_and_shape() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, ["batch", "n"]);
    let b = g.input("b", DType::F32, [planner::Dim::from("batch"), planner::Dim::Known(3)]);
    let c = g.add(a, b);
    g.output(c);
    let ok = [("a".to_string(), t(&[2, 3], vec![1f32; 6])), ("b".to_string(), t(&[2, 3], vec![2f32; 6]))];
    assert_eq!(f32s(&eval(&g, &ok).unwrap()[0].1), vec![3f32; 6]);
    let input_err = |r: Result<Vec<(String, HostTensor)>, HostError>, name: &str, needle: &str| match r {
        Err(HostError::Input { name: n, detail }) => {
            assert!(n == name && detail.contains(needle), "{n}: {detail}")
        }
        other => panic!("expected an input error, got {other:?}"),
    };
    input_err(eval(&g, &ok[..1]), "b", "missing");
    let unknown = [ok[0].clone(), ok[1].clone(), ("zz".to_string(), t(&[1], vec![0f32]))];
    input_err(eval(&g, &unknown), "zz", "not an input");
    input_err(eval(&g, &[ok[0].clone(), ok[0].clone()]), "a", "more than once");
    input_err(eval(&g, &[ok[0].clone(), ("b".into(), t(&[2, 3], vec![2i64; 6]))]), "b", "dtype");
    input_err(eval(&g, &[ok[0].clone(), ("b".into(), t(&[2, 4], vec![2f32; 8]))]), "b", "dim 1 must be 3");
    input_err(eval(&g, &[ok[0].clone(), ("b".into(), t(&[3, 3], vec![2f32; 9]))]), "b", "`batch`");
    input_err(eval(&g, &[ok[0].clone(), ("b".into(), t(&[6], vec![2f32; 6]))]), "b", "shape");
}

#[test]
fn initializers_unordered_nodes_and_repeated_outputs() {
    let mut g = Graph::new();
    let x = g.input("x", DType::I64, [3usize]);
    let w = g.const_i64("w", &[3], &[10, 20, 30]);
    let s = g.add_value("s", None);
    let r = g.add_value("r", None);
    // Stored out of order: the consumer first.
    g.add_node(planner::Node {
        name: "mul".into(),
        op: Op::Mul,
        inputs: vec![Some(s), Some(x)],
        outputs: vec![Some(r)],
    });
    g.add_node(planner::Node {
        name: "add".into(),
        op: Op::Add,
        inputs: vec![Some(x), Some(w)],
        outputs: vec![Some(s)],
    });
    g.output(r);
    g.output(s);
    g.output(r);
    g.output(x);
    let out = eval(&g, &[("x".into(), t(&[3], vec![1i64, 2, 3]))]).unwrap();
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["r", "s", "r", "x"]);
    assert_eq!(i64s(&out[0].1), [11, 44, 99]);
    assert_eq!(i64s(&out[1].1), [11, 22, 33]);
    assert_eq!(out[2].1, out[0].1);
    assert_eq!(i64s(&out[3].1), [1, 2, 3]);
}

#[test]
fn optional_outputs_and_omitted_slots() {
    let x = t(&[2], vec![1f32, -1.0]);
    let mut g = Graph::new();
    let xv = g.input("x", DType::F32, [2usize]);
    let mask = g.add_value("mask", None);
    g.add_node(planner::Node {
        name: "drop".into(),
        op: Op::Dropout(op::Dropout::default()),
        inputs: vec![Some(xv), None, None],
        outputs: vec![None, Some(mask)],
    });
    g.output(mask);
    let out = eval(&g, &[("x".into(), x)]).unwrap();
    assert_eq!(bools(&out[0].1), [true, true]);
}

#[test]
fn errors_name_the_failing_node() {
    let a = t(&[2, 3], vec![0f32; 6]);
    let b = t(&[4], vec![0f32; 4]);
    match run1(Op::Add, &[&a, &b]) {
        Err(HostError::Op { node, op, detail }) => {
            assert_eq!((node.as_str(), op), ("add_0", "Add"));
            assert!(detail.contains("broadcast"), "{detail}");
        }
        other => panic!("expected an op error, got {other:?}"),
    }
}

#[test]
fn invalid_graphs_are_rejected_before_running() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2usize]);
    g.push(Op::Add, &[x], 1);
    assert!(matches!(eval(&g, &[("x".into(), t(&[2], vec![0f32; 2]))]), Err(HostError::Plan(_))));
}

#[test]
fn values_are_released_after_their_last_reader() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2usize]);
    let a = g.relu(x);
    let b = g.op1(Op::Neg, &[a]);
    let c = g.add(a, b);
    g.output(c);
    let order = planner::validate::topo_order(&g).unwrap();
    let release = super::release_schedule(&g, &order);
    assert_eq!(release, vec![vec![x], vec![], vec![a, b]]);
    let out = eval(&g, &[("x".into(), t(&[2], vec![-1f32, 2.0]))]).unwrap();
    assert_eq!(f32s(&out[0].1), [0., 0.]);
}

#[test]
fn nn_ops_are_routed_through_the_dispatch() {
    let a = t(&[2, 2], vec![1f32, 2.0, 3.0, 4.0]);
    let b = t(&[2, 1], vec![1f32, 1.0]);
    assert_eq!(f32s(&run1(Op::MatMul, &[&a, &b]).unwrap()), [3., 7.]);
    let s = f32s(&run1(Op::Softmax(op::Softmax { axis: -1 }), &[&t(&[2], vec![0f32, 0.0])]).unwrap());
    assert_eq!(s, [0.5, 0.5]);
}
