//! Elementwise, broadcast, comparison and cast inference; declared-info merging.

use super::{dims, infer_one, info, is_fresh};
use crate::error::PlanError;
use crate::graph::Graph;
use crate::op::{self, Op};
use crate::shape_infer::infer;
use crate::tensor_info::{DType, Dim, TensorInfo};

#[test]
fn binary_broadcast_keeps_symbols() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("batch,1,64"));
    let b = g.input("b", DType::F32, dims("seq,1"));
    let c = g.add(a, b);
    g.output(c);
    assert_eq!(infer_one(&g, c), info(DType::F32, "batch,seq,64"));
}

#[test]
fn different_symbols_give_fresh_symbol() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("n"));
    let b = g.input("b", DType::F32, dims("m"));
    let c = g.mul(a, b);
    g.output(c);
    let out = infer_one(&g, c);
    assert!(is_fresh(&out.shape.dims()[0]), "{out}");
}

#[test]
fn incompatible_broadcast_names_node_and_op() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("2,3"));
    let b = g.input("b", DType::F32, dims("4"));
    let c = g.add(a, b);
    g.output(c);
    match infer(&g) {
        Err(PlanError::ShapeMismatch { node, op, detail }) => {
            assert_eq!((node.as_str(), op), ("add_0", "Add"));
            assert!(detail.contains('3') && detail.contains('4'), "{detail}");
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
}

#[test]
fn dtype_mismatch_is_reported() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("2"));
    let b = g.input("b", DType::F16, dims("2"));
    let c = g.add(a, b);
    g.output(c);
    assert!(matches!(infer(&g), Err(PlanError::DTypeMismatch { op: "Add", .. })));
}

#[test]
fn comparisons_and_logic_give_bool() {
    let mut g = Graph::new();
    let a = g.input("a", DType::I64, dims("5"));
    let b = g.input("b", DType::I64, dims("1"));
    let lt = g.op1(Op::Less, &[a, b]);
    let eq = g.op1(Op::Equal, &[a, b]);
    let both = g.op1(Op::And, &[lt, eq]);
    let not = g.op1(Op::Not, &[both]);
    g.output(not);
    assert_eq!(infer_one(&g, not), info(DType::Bool, "5"));
    let bad = g.op1(Op::And, &[a, b]);
    g.output(bad);
    assert!(matches!(infer(&g), Err(PlanError::DTypeMismatch { op: "And", .. })));
}

#[test]
fn where_broadcasts_three_ways() {
    let mut g = Graph::new();
    let c = g.input("c", DType::Bool, dims("s,1"));
    let x = g.input("x", DType::F16, dims("1,8"));
    let y = g.input("y", DType::F16, dims(""));
    let w = g.where_(c, x, y);
    g.output(w);
    assert_eq!(infer_one(&g, w), info(DType::F16, "s,8"));
}

#[test]
fn unary_float_ops_reject_ints() {
    let mut g = Graph::new();
    let x = g.input("x", DType::I32, dims("3"));
    let y = g.op1(Op::Exp, &[x]);
    g.output(y);
    assert!(matches!(infer(&g), Err(PlanError::DTypeMismatch { op: "Exp", .. })));
    let mut g = Graph::new();
    let x = g.input("x", DType::I32, dims("3"));
    let y = g.op1(Op::Abs, &[x]);
    g.output(y);
    assert_eq!(infer_one(&g, y), info(DType::I32, "3"));
}

#[test]
fn activations_keep_info() {
    let ops = [
        Op::LeakyRelu(op::LeakyRelu::default()),
        Op::Gelu(op::Gelu { approximate: op::GeluApproximation::Tanh }),
        Op::HardSigmoid(op::HardSigmoid::default()),
        Op::Selu(op::Selu::default()),
        Op::Mish,
        Op::Erf,
    ];
    for o in ops {
        let mut g = Graph::new();
        let x = g.input("x", DType::BF16, dims("b,7"));
        let y = g.op1(o.clone(), &[x]);
        g.output(y);
        assert_eq!(infer_one(&g, y), info(DType::BF16, "b,7"), "{}", o.name());
    }
}

#[test]
fn variadic_cast_clip_prelu_dropout() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("4,1"));
    let b = g.input("b", DType::F32, dims("3"));
    let c = g.input("c", DType::F32, dims("1"));
    let s = g.op1(Op::Sum, &[a, b, c]);
    let m = g.op1(Op::Max, &[a, b, c]);
    let h = g.cast(m, DType::F16);
    let lo = g.input("lo", DType::F16, dims(""));
    let cl = g.push_opt(Op::Clip(op::Clip::default()), vec![Some(h), Some(lo), None], 1)[0];
    let slope = g.input("slope", DType::F32, dims("3"));
    let pr = g.op1(Op::PRelu, &[s, slope]);
    let d = g.push(Op::Dropout(op::Dropout::default()), &[pr], 2);
    let nan = g.op1(Op::IsNaN, &[pr]);
    g.output(cl);
    g.output(d[1]);
    g.output(nan);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[s.index()], info(DType::F32, "4,3"));
    assert_eq!(infos[cl.index()], info(DType::F16, "4,3"));
    assert_eq!(infos[d[0].index()], info(DType::F32, "4,3"));
    assert_eq!(infos[d[1].index()], info(DType::Bool, "4,3"));
    assert_eq!(infos[nan.index()], info(DType::Bool, "4,3"));
}

#[test]
fn pow_keeps_base_dtype_and_mod_checks_fmod() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("2"));
    let e = g.input("e", DType::I64, dims(""));
    let p = g.op1(Op::Pow, &[a, e]);
    g.output(p);
    assert_eq!(infer_one(&g, p), info(DType::F32, "2"));
    let m = g.op1(Op::Mod(op::Mod { fmod: false }), &[a, a]);
    g.output(m);
    assert!(matches!(infer(&g), Err(PlanError::InvalidAttribute { op: "Mod", .. })));
}

#[test]
fn declared_output_info_is_checked_and_fills_fresh_dims() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, dims("n"));
    let b = g.input("b", DType::F32, dims("m"));
    let c = g.add(a, b);
    g.output(c);
    g.values[c.index()].info = Some(info(DType::F32, "tokens"));
    assert_eq!(infer_one(&g, c), info(DType::F32, "tokens"));
    g.values[c.index()].info = Some(info(DType::F16, "tokens"));
    assert!(matches!(infer(&g), Err(PlanError::DTypeMismatch { .. })));
    g.values[c.index()].info = Some(TensorInfo::new(DType::F32, [Dim::Known(2), Dim::Known(2)]));
    assert!(matches!(infer(&g), Err(PlanError::ShapeMismatch { .. })));
}

#[test]
fn missing_input_info_is_an_error() {
    let mut g = Graph::new();
    let x = g.add_value("x", None);
    g.inputs.push(x);
    let y = g.relu(x);
    g.output(y);
    assert_eq!(infer(&g), Err(PlanError::MissingInputInfo { value: "x".into() }));
}
