//! Constant folding of exporter-style shape chains and dead-node elimination.

use super::*;
use crate::op::{self, Op};
use crate::shape_infer::infer;
use crate::tensor_info::{DType, Dim, Shape};

/// The exporter pattern: `Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))`.
fn exporter_chain(batch: Dim) -> (Graph, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [batch, Dim::Known(3), Dim::Known(4), Dim::Known(5)]);
    let shape = g.shape_of(x);
    let zero = g.initializer("zero", ConstTensor::scalar_i64(0));
    let b = g.gather(shape, zero, 0);
    let axes = g.const_i64("axes", &[1], &[0]);
    let ub = g.unsqueeze(b, axes);
    let rest = g.const_i64("rest", &[1], &[-1]);
    let target = g.concat(&[ub, rest], 0);
    let y = g.reshape(x, target);
    g.output(y);
    (g, y)
}

#[test]
fn folds_exporter_chain_to_static_shape() {
    let (g, _) = exporter_chain(Dim::Known(2));
    let out = run(&g).unwrap();
    assert_eq!(out.nodes.len(), 1, "{:?}", out.nodes);
    let reshape = &out.nodes[0];
    assert_eq!(reshape.op.name(), "Reshape");
    let shape_in = reshape.input(1).unwrap();
    let folded = out.constant(shape_in).expect("shape input folded to an initializer");
    assert_eq!(folded.dims, vec![2]);
    assert_eq!(folded.to_i64s(), Some(vec![2, -1]));
    assert_eq!(out.initializers.len(), 1, "unused initializers dropped");
    let infos = infer(&out).unwrap();
    assert_eq!(infos[out.outputs[0].index()].shape, Shape::known(&[2, 60]));
}

#[test]
fn symbolic_chain_is_not_folded_but_infers() {
    let (g, y) = exporter_chain(Dim::from("batch"));
    let out = run(&g).unwrap();
    // Shape and Gather depend on the symbolic batch; nothing may be folded into a wrong constant.
    assert!(out.nodes.iter().any(|n| n.op.name() == "Shape"));
    let infos = infer(&g).unwrap();
    assert_eq!(infos[y.index()].shape, Shape(vec![Dim::from("batch"), Dim::Known(60)]));
    let infos = infer(&out).unwrap();
    assert_eq!(infos[out.outputs[0].index()].shape, Shape(vec![Dim::from("batch"), Dim::Known(60)]));
}

#[test]
fn folds_partially_known_shape_entries() {
    // Gather(Shape(x), 1) only reads a static dim, so it folds even with a symbolic batch.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::from("b"), Dim::Known(7)]);
    let shape = g.shape_of(x);
    let one = g.initializer("one", ConstTensor::scalar_i64(1));
    let d = g.gather(shape, one, 0);
    let two = g.initializer("two", ConstTensor::scalar_i64(2));
    let prod = g.mul(d, two);
    let sub = g.sub(prod, one);
    let q = g.div(sub, two);
    let c = g.cast(q, DType::I32);
    g.output(c);
    let out = run(&g).unwrap();
    assert!(out.nodes.is_empty(), "{:?}", out.nodes);
    let v = out.constant(out.outputs[0]).unwrap();
    assert_eq!((v.dtype, v.to_i64s()), (DType::I32, Some(vec![6])));
}

#[test]
fn folds_constant_nodes_ranges_and_slices() {
    let mut g = Graph::new();
    let c = g.op1(
        Op::Constant(op::Constant { value: ConstTensor::from_i64(&[4], &[10, 20, 30, 40]).unwrap() }),
        &[],
    );
    let (s, e) = (g.const_i64("s", &[1], &[1]), g.const_i64("e", &[1], &[-1]));
    let sl = g.op1(Op::Slice(Default::default()), &[c, s, e]);
    let fill = op::ConstantOfShape { value: ConstTensor::from_f32(&[1], &[0.5]).unwrap() };
    let cos = g.op1(Op::ConstantOfShape(fill), &[sl]);
    let start = g.initializer("start", ConstTensor::scalar_f32(0.0));
    let limit = g.initializer("limit", ConstTensor::scalar_f32(1.0));
    let delta = g.initializer("delta", ConstTensor::scalar_f32(0.25));
    let r = g.op1(Op::Range, &[start, limit, delta]);
    let x = g.input("x", DType::F32, [4usize]);
    let y = g.add(x, r);
    g.output(cos);
    g.output(y);
    let out = run(&g).unwrap();
    assert_eq!(out.nodes.len(), 1, "only the Add on a graph input remains");
    let cos_val = out.constant(out.outputs[0]).unwrap();
    assert_eq!(cos_val.dims, vec![20, 30]);
    assert_eq!(cos_val.to_f64s()[599], 0.5);
    let add = &out.nodes[0];
    let range_val = out.constant(add.input(1).unwrap()).unwrap();
    assert_eq!(range_val.to_f64s(), vec![0.0, 0.25, 0.5, 0.75]);
}

#[test]
fn never_folds_float_arithmetic_or_runtime_values() {
    let mut g = Graph::new();
    let a = g.initializer("a", ConstTensor::from_f32(&[2], &[1.0, 2.0]).unwrap());
    let x = g.input("x", DType::I64, [2usize]);
    let s = g.add(a, a);
    let t = g.add(x, x);
    g.output(s);
    g.output(t);
    let out = run(&g).unwrap();
    assert_eq!(out.nodes.len(), 2);
}

/// `If(cond)` with a then branch `relu(x) + k` (x captured, k its own constant) and an else branch
/// passing x through, each with a second output repeating the first.
fn if_graph(cond: bool) -> (Graph, ValueId, ValueId) {
    use crate::graph::Capture;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::Known(3)]);
    let c = g.initializer("c", ConstTensor::new(DType::Bool, vec![], vec![cond as u8]).unwrap());
    let mut then_b = Graph::new();
    let xt = then_b.add_value("x", None);
    then_b.captures.push(Capture { inner: xt, outer: x });
    let k = then_b.initializer("k", ConstTensor::from_f32(&[], &[2.0]).unwrap());
    let r = then_b.relu(xt);
    let s = then_b.add(r, k);
    then_b.output(s);
    then_b.output(s);
    let mut else_b = Graph::new();
    let xe = else_b.add_value("x", None);
    else_b.captures.push(Capture { inner: xe, outer: x });
    else_b.output(xe);
    else_b.output(xe);
    let iff = crate::op::If { then_branch: Box::new(then_b), else_branch: Box::new(else_b) };
    let outs = g.push(Op::If(iff), &[c], 2);
    let y = g.sigmoid(outs[0]);
    g.output(y);
    g.output(outs[1]);
    (g, y, outs[1])
}

#[test]
fn an_if_of_constant_condition_becomes_its_branch() {
    for cond in [true, false] {
        let (g, y, second) = if_graph(cond);
        let out = run(&g).unwrap();
        let ops: Vec<&str> = out.nodes.iter().map(|n| n.op.name()).collect();
        assert!(!ops.contains(&"If"), "{ops:?}");
        if cond {
            assert_eq!(ops.iter().filter(|o| ["Relu", "Add"].contains(o)).count(), 2, "{ops:?}");
        }
        // The If's outputs keep their values: the graph outputs and the Sigmoid read them.
        let names = |g: &Graph, vs: &[ValueId]| vs.iter().map(|&v| g.value_name(v)).collect::<Vec<_>>();
        assert_eq!(names(&out, &out.outputs), names(&g, &[y, second]));
        crate::shape_infer::infer(&out).unwrap();
    }
}

#[test]
fn a_split_of_a_constant_folds_and_what_its_pieces_shape_folds_next() {
    // size = [2, 3, 5] split into N, C, W; ConstantOfShape(Concat(W, N)) then has a known shape.
    let mut g = Graph::new();
    let size = g.const_i64("size", &[3], &[2, 3, 5]);
    let parts = g.push(Op::Split(op::Split { axis: 0, split: None, num_outputs: Some(3) }), &[size], 3);
    let shape = g.concat(&[parts[2], parts[0]], 0);
    let zeros = g.op1(Op::ConstantOfShape(Default::default()), &[shape]);
    let x = g.input("x", DType::F32, [Dim::Known(5), Dim::Known(2)]);
    let y = g.add(x, zeros);
    g.output(y);
    let out = run(&g).unwrap();
    let ops: Vec<&str> = out.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(ops, ["Add"], "everything but the Add folds");
    assert_eq!(infer(&out).unwrap()[out.outputs[0].index()].shape, Shape(vec![Dim::Known(5), Dim::Known(2)]));
}

/// Casts whose result depends on what folding cannot see stay for the kernels / reference: from
/// uint64 past i64::MAX, to float8 (saturate, round_mode); and shape tracking does not carry an
/// integer through a cast that would wrap it (9 as int4 is -7).
#[test]
fn casts_that_would_fold_wrong_are_left() {
    let mut g = Graph::new();
    let big = g.initializer("big", ConstTensor::from_i64s_as(DType::U64, &[1], &[-1]).unwrap());
    let as_float = g.op1(Op::Cast(op::Cast::to(DType::F32)), &[big]);
    let k = g.initializer("k", ConstTensor::from_f32(&[1], &[1000.0]).unwrap());
    let f8 = DType::Coded(crate::Coded::F8E4M3FN);
    let wild = g.op1(Op::Cast(op::Cast { saturate: false, ..op::Cast::to(f8) }), &[k]);
    let x = g.input("x", DType::F32, [Dim::Known(9)]);
    let n = g.op1(Op::Shape(Default::default()), &[x]);
    let i4 = g.op1(Op::Cast(op::Cast::to(DType::Coded(crate::Coded::I4))), &[n]);
    let back = g.op1(Op::Cast(op::Cast::to(DType::I64)), &[i4]);
    for v in [as_float, wild, back] {
        g.output(v);
    }
    let folded = run(&g).unwrap();
    let casts = folded.nodes.iter().filter(|n| matches!(n.op, Op::Cast(_))).count();
    assert!(casts >= 2, "the uint64 and float8 casts stay: {:?}", folded.nodes);
    // Whatever folded, the int4 round trip is not 9.
    let out = folded.outputs[2];
    assert!(
        folded.constant(out).and_then(|c| c.to_i64s()).is_none_or(|v| v == [-7]),
        "{:?}",
        folded.constant(out)
    );
}
