//! Reshape, Slice, Gather, Concat, Split and other data-movement inference, incl. symbolic shape chains.

use super::{dims, infer_one, info, is_fresh};
use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::Graph;
use crate::op::{self, Op};
use crate::shape_infer::{analyse, infer};
use crate::tensor_info::{DType, Dim};

const F: DType = DType::F32;

#[test]
fn reshape_with_constant_shape() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("2,3,4"));
    let s = g.const_i64("s", &[3], &[0, -1, 2]);
    let y = g.reshape(x, s);
    g.output(y);
    assert_eq!(infer_one(&g, y), info(F, "2,6,2"));
    let bad = g.const_i64("bad", &[2], &[5, -1]);
    let z = g.reshape(x, bad);
    g.output(z);
    assert!(matches!(infer(&g), Err(PlanError::ShapeMismatch { op: "Reshape", .. })));
}

#[test]
fn reshape_solves_minus_one_symbolically() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,s,768"));
    let s = g.const_i64("s", &[4], &[0, 0, 12, -1]);
    let y = g.reshape(x, s);
    let s2 = g.const_i64("s2", &[3], &[0, -1, 768]);
    let z = g.reshape(x, s2);
    g.output(y);
    g.output(z);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[y.index()], info(F, "b,s,12,64"));
    assert_eq!(infos[z.index()], info(F, "b,s,768"));
}

#[test]
fn exporter_shape_chain_keeps_symbols_without_folding() {
    // Shape -> Gather(0), Gather(1) -> Unsqueeze -> Concat([b, s, 12, 64]) -> Reshape.
    let mut g = Graph::new();
    let x = g.input("x", F, dims("batch,seq,768"));
    let shape = g.shape_of(x);
    let (i0, i1) =
        (g.initializer("i0", ConstTensor::scalar_i64(0)), g.initializer("i1", ConstTensor::scalar_i64(1)));
    let ax = g.const_i64("ax", &[1], &[0]);
    let b = g.gather(shape, i0, 0);
    let s = g.gather(shape, i1, 0);
    let (ub, us) = (g.unsqueeze(b, ax), g.unsqueeze(s, ax));
    let heads = g.const_i64("heads", &[2], &[12, 64]);
    let target = g.concat(&[ub, us, heads], 0);
    let y = g.reshape(x, target);
    let t = g.transpose(y, &[0, 2, 1, 3]);
    g.output(t);
    let inf = analyse(&g).unwrap();
    assert_eq!(inf.infos[t.index()], info(F, "batch,12,seq,64"));
    assert_eq!(inf.infos[target.index()], info(DType::I64, "4"));
}

#[test]
fn data_dependent_reshape_gets_fresh_symbols() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("2,3"));
    let s = g.input("s", DType::I64, dims("2"));
    let y = g.reshape(x, s);
    g.output(y);
    let out = infer_one(&g, y);
    assert_eq!(out.rank(), 2);
    assert!(out.shape.dims().iter().all(is_fresh), "{out}");
    let nz = g.op1(Op::NonZero, &[x]);
    g.output(nz);
    let out = infer_one(&g, nz);
    assert_eq!(out.shape.dims()[0], Dim::Known(2));
    assert!(is_fresh(&out.shape.dims()[1]));
}

#[test]
fn flatten_squeeze_unsqueeze_transpose() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("n,1,4,5"));
    let f = g.op1(Op::Flatten(Default::default()), &[x]);
    let f0 = g.op1(Op::Flatten(op::Flatten { axis: 0 }), &[x]);
    let sq = g.op1(Op::Squeeze(op::Squeeze { axes: Some(vec![1]) }), &[x]);
    let ax = g.const_i64("ax", &[2], &[0, -1]);
    let us = g.unsqueeze(sq, ax);
    let tr = g.op1(Op::Transpose(Default::default()), &[x]);
    for v in [f, f0, us, tr] {
        g.output(v);
    }
    let infos = infer(&g).unwrap();
    assert_eq!(infos[f.index()], info(F, "n,20"));
    assert!(is_fresh(&infos[f0.index()].shape.dims()[1]));
    assert_eq!(infos[us.index()], info(F, "1,n,4,5,1"));
    assert_eq!(infos[tr.index()], info(F, "5,4,1,n"));
    let bad = g.op1(Op::Squeeze(op::Squeeze { axes: Some(vec![2]) }), &[x]);
    g.output(bad);
    assert!(matches!(infer(&g), Err(PlanError::ShapeMismatch { op: "Squeeze", .. })));
}

#[test]
fn squeeze_with_runtime_axes_is_unsupported() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("1,4"));
    let axes = g.input("axes", DType::I64, dims("1"));
    let y = g.op1(Op::Squeeze(Default::default()), &[x, axes]);
    g.output(y);
    assert_eq!(infer(&g), Err(PlanError::Unsupported { node: "squeeze_0".into(), op: "Squeeze" }));
}

#[test]
fn concat_split_expand_tile() {
    let mut g = Graph::new();
    let a = g.input("a", F, dims("b,3"));
    let c = g.input("c", F, dims("b,5"));
    let d = g.input("d", F, dims("p,5"));
    let ac = g.concat(&[a, c], 1);
    let cd = g.concat(&[c, d], 0);
    let sp = g.push(Op::Split(op::Split { axis: 1, ..Default::default() }), &[ac], 2);
    let sizes = g.const_i64("sizes", &[2], &[1, 7]);
    let sp2 = g.push(Op::Split(op::Split { axis: 1, ..Default::default() }), &[ac, sizes], 2);
    let shape = g.const_i64("shape", &[3], &[2, 1, 3]);
    let ex = g.op1(Op::Expand, &[a, shape]);
    let reps = g.const_i64("reps", &[2], &[2, 2]);
    let ti = g.op1(Op::Tile, &[a, reps]);
    for v in [ac, cd, sp[1], sp2[1], ex, ti] {
        g.output(v);
    }
    let infos = infer(&g).unwrap();
    assert_eq!(infos[ac.index()], info(F, "b,8"));
    assert!(is_fresh(&infos[cd.index()].shape.dims()[0]));
    assert_eq!(infos[sp[1].index()], info(F, "b,4"));
    assert_eq!(infos[sp2[0].index()], info(F, "b,1"));
    assert_eq!(infos[sp2[1].index()], info(F, "b,7"));
    assert_eq!(infos[ex.index()], info(F, "2,b,3"));
    assert!(is_fresh(&infos[ti.index()].shape.dims()[0]));
    assert_eq!(infos[ti.index()].shape.dims()[1], Dim::Known(6));
}

#[test]
fn slice_constant_and_symbolic() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,s,10"));
    let starts = g.const_i64("st", &[2], &[0, -4]);
    let ends = g.const_i64("en", &[2], &[i64::MAX, i64::MAX]);
    let axes = g.const_i64("ax", &[2], &[1, 2]);
    let y = g.op1(Op::Slice(Default::default()), &[x, starts, ends, axes]);
    let steps = g.const_i64("steps", &[1], &[-2]);
    let (s1, e1, a1) =
        (g.const_i64("s1", &[1], &[-1]), g.const_i64("e1", &[1], &[i64::MIN]), g.const_i64("a1", &[1], &[2]));
    let z = g.op1(Op::Slice(Default::default()), &[x, s1, e1, a1, steps]);
    let legacy = op::Slice { starts: Some(vec![1]), ends: Some(vec![3]), axes: Some(vec![-1]) };
    let w = g.op1(Op::Slice(legacy), &[x]);
    for v in [y, z, w] {
        g.output(v);
    }
    let infos = infer(&g).unwrap();
    assert_eq!(infos[y.index()], info(F, "b,s,4"));
    assert_eq!(infos[z.index()], info(F, "b,s,5"));
    assert_eq!(infos[w.index()], info(F, "b,s,2"));
}

#[test]
fn gathers_and_scatters() {
    let mut g = Graph::new();
    let emb = g.input("emb", F, dims("50000,768"));
    let ids = g.input("ids", DType::I64, dims("b,s"));
    let e = g.gather(emb, ids, 0);
    let idx = g.input("idx", DType::I64, dims("b,s,1"));
    let gnd = g.op1(Op::GatherNd(Default::default()), &[emb, idx]);
    let ge = g.op1(Op::GatherElements(Default::default()), &[e, idx]);
    let upd = g.input("upd", F, dims("b,s,1"));
    let sc = g.op1(Op::ScatterElements(Default::default()), &[e, idx, upd]);
    for v in [e, gnd, ge, sc] {
        g.output(v);
    }
    let infos = infer(&g).unwrap();
    assert_eq!(infos[e.index()], info(F, "b,s,768"));
    assert_eq!(infos[gnd.index()], info(F, "b,s,768"));
    assert_eq!(infos[ge.index()], info(F, "b,s,1"));
    assert_eq!(infos[sc.index()], info(F, "b,s,768"));
}

#[test]
fn pad_resize_onehot_trilu_depth_to_space() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("n,4,6,6"));
    let pads = g.const_i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 1, 0]);
    let p = g.op1(Op::Pad(Default::default()), &[x, pads]);
    let empty = g.initializer("roi", ConstTensor::from_f32(&[0], &[]).unwrap());
    let scales = g.initializer("scales", ConstTensor::from_f32(&[4], &[1.0, 1.0, 2.0, 0.5]).unwrap());
    let r = g.op1(Op::Resize(Default::default()), &[x, empty, scales]);
    let sizes = g.const_i64("sizes", &[4], &[1, 4, 9, 9]);
    let r2 = g.push_opt(Op::Resize(Default::default()), vec![Some(x), None, None, Some(sizes)], 1)[0];
    let ids = g.input("ids", DType::I64, dims("b"));
    let depth = g.initializer("depth", ConstTensor::scalar_i64(10));
    let vals = g.initializer("vals", ConstTensor::from_f32(&[2], &[0.0, 1.0]).unwrap());
    let oh = g.op1(Op::OneHot(Default::default()), &[ids, depth, vals]);
    let tr = g.op1(Op::Trilu(Default::default()), &[x]);
    let d2s = g.op1(Op::DepthToSpace(op::DepthToSpace { blocksize: 2, mode: Default::default() }), &[x]);
    let s2d = g.op1(Op::SpaceToDepth(op::SpaceToDepth { blocksize: 3 }), &[x]);
    for v in [p, r, r2, oh, tr, d2s, s2d] {
        g.output(v);
    }
    let infos = infer(&g).unwrap();
    assert_eq!(infos[p.index()], info(F, "n,4,8,8"));
    assert_eq!(infos[r.index()], info(F, "n,4,12,3"));
    assert_eq!(infos[r2.index()], info(F, "1,4,9,9"));
    assert_eq!(infos[oh.index()], info(F, "b,10"));
    assert_eq!(infos[tr.index()], info(F, "n,4,6,6"));
    assert_eq!(infos[d2s.index()], info(F, "n,1,12,12"));
    assert_eq!(infos[s2d.index()], info(F, "n,36,2,2"));
}

#[test]
fn shape_size_range_constant_of_shape() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,3,4"));
    let sh = g.op1(Op::Shape(op::ShapeOf { start: 1, end: None }), &[x]);
    let sz = g.op1(Op::Size, &[x]);
    let cos = g.op1(Op::ConstantOfShape(Default::default()), &[sh]);
    let (s, l, d) = (
        g.initializer("s", ConstTensor::scalar_i64(2)),
        g.initializer("l", ConstTensor::scalar_i64(11)),
        g.initializer("d", ConstTensor::scalar_i64(3)),
    );
    let r = g.op1(Op::Range, &[s, l, d]);
    let full = g.shape_of(x);
    let dynamic = g.op1(Op::ConstantOfShape(Default::default()), &[full]);
    for v in [sz, cos, r, dynamic] {
        g.output(v);
    }
    let inf = analyse(&g).unwrap();
    assert_eq!(inf.infos[sh.index()], info(DType::I64, "2"));
    assert_eq!(inf.infos[sz.index()], info(DType::I64, ""));
    assert_eq!(inf.infos[cos.index()], info(F, "3,4"));
    assert_eq!(inf.infos[r.index()], info(DType::I64, "3"));
    assert_eq!(inf.infos[dynamic.index()], info(F, "b,3,4"));
    let range_vals = inf.values[r.index()].as_ref().and_then(|p| p.ints());
    assert_eq!(range_vals, Some(vec![2, 5, 8]));
}

#[test]
fn torch_expand_pattern_tracks_where_equal() {
    // target = Where(Equal(shape, -1), ones, shape) with shape = [b, 4, 64]; Expand(x, target).
    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,1,64"));
    let sh = g.shape_of(x);
    let i0 = g.initializer("i0", ConstTensor::scalar_i64(0));
    let b = g.gather(sh, i0, 0);
    let ax = g.const_i64("ax", &[1], &[0]);
    let ub = g.unsqueeze(b, ax);
    let rest = g.const_i64("rest", &[2], &[4, 64]);
    let shape = g.concat(&[ub, rest], 0);
    let minus = g.const_i64("minus", &[1], &[-1]);
    let eq = g.op1(Op::Equal, &[shape, minus]);
    let ones = g.const_i64("ones", &[3], &[1, 1, 1]);
    let target = g.where_(eq, ones, shape);
    let y = g.op1(Op::Expand, &[x, target]);
    g.output(y);
    let inf = analyse(&g).unwrap();
    assert_eq!(inf.infos[y.index()], info(F, "b,4,64"));
    let eq_vals = inf.values[eq.index()].as_ref().and_then(|p| p.ints());
    assert_eq!(eq_vals, Some(vec![0, 0, 0]));
}
