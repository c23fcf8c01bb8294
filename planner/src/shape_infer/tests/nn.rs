//! MatMul, Gemm, conv, pooling, normalization, softmax, reduction and attention inference.

use super::{dims, info, is_fresh};
use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::Graph;
use crate::op::{self, AutoPad, Op};
use crate::shape_infer::infer;
use crate::tensor_info::{DType, Dim};

fn single(op: Op, inputs: &[(&str, DType, &str)]) -> Result<Vec<crate::TensorInfo>, PlanError> {
    let mut g = Graph::new();
    let ins: Vec<_> = inputs.iter().map(|(n, t, d)| g.input(n, *t, dims(d))).collect();
    let outs = g.push(op, &ins, 1);
    g.output(outs[0]);
    Ok(vec![infer(&g)?[outs[0].index()].clone()])
}

fn one(op: Op, inputs: &[(&str, DType, &str)]) -> crate::TensorInfo {
    single(op, inputs).unwrap_or_else(|e| panic!("{e}")).remove(0)
}

const F: DType = DType::F32;

#[test]
fn matmul_variants() {
    assert_eq!(one(Op::MatMul, &[("a", F, "b,s,64"), ("w", F, "64,128")]), info(F, "b,s,128"));
    assert_eq!(one(Op::MatMul, &[("a", F, "8,1,3,4"), ("w", F, "5,4,6")]), info(F, "8,5,3,6"));
    assert_eq!(one(Op::MatMul, &[("a", F, "4"), ("w", F, "2,4,6")]), info(F, "2,6"));
    assert_eq!(one(Op::MatMul, &[("a", F, "3,4"), ("w", F, "4")]), info(F, "3"));
    assert_eq!(one(Op::MatMul, &[("a", F, "k"), ("w", F, "k")]), info(F, ""));
    assert!(matches!(
        single(Op::MatMul, &[("a", F, "3,4"), ("w", F, "5,6")]),
        Err(PlanError::ShapeMismatch { op: "MatMul", .. })
    ));
}

#[test]
fn gemm_transposes() {
    let g = op::Gemm { trans_b: true, ..Default::default() };
    assert_eq!(
        one(Op::Gemm(g.clone()), &[("a", F, "n,16"), ("b", F, "32,16"), ("c", F, "32")]),
        info(F, "n,32")
    );
    assert!(single(Op::Gemm(g), &[("a", F, "n,16"), ("b", F, "32,16"), ("c", F, "31")]).is_err());
}

#[test]
fn conv_resnet_stem_and_symbolic_batch() {
    let c = op::Conv {
        kernel_shape: vec![7, 7],
        strides: vec![2, 2],
        pads: vec![3, 3, 3, 3],
        ..Default::default()
    };
    let x = [("x", F, "n,3,224,224"), ("w", F, "64,3,7,7"), ("b", F, "64")];
    assert_eq!(one(Op::Conv(c), &x), info(F, "n,64,112,112"));
    let same = op::Conv { auto_pad: AutoPad::SameUpper, strides: vec![2, 2], ..Default::default() };
    assert_eq!(one(Op::Conv(same), &[("x", F, "1,8,15,16"), ("w", F, "4,8,3,3")]), info(F, "1,4,8,8"));
    let dw = op::Conv { group: 8, ..Default::default() };
    assert_eq!(one(Op::Conv(dw.clone()), &[("x", F, "1,8,h,w"), ("w", F, "8,1,1,1")]), info(F, "1,8,h,w"));
    let out = one(Op::Conv(dw.clone()), &[("x", F, "1,8,h,5"), ("w", F, "8,1,3,3")]);
    assert!(is_fresh(&out.shape.dims()[2]) && out.shape.dims()[3] == Dim::Known(3), "{out}");
    assert!(matches!(
        single(Op::Conv(dw), &[("x", F, "1,8,5,5"), ("w", F, "8,2,1,1")]),
        Err(PlanError::ShapeMismatch { op: "Conv", .. })
    ));
}

#[test]
fn conv_transpose_upsamples() {
    let c = op::ConvTranspose { strides: vec![2, 2], pads: vec![1, 1, 1, 1], ..Default::default() };
    assert_eq!(
        one(Op::ConvTranspose(c), &[("x", F, "1,16,8,8"), ("w", F, "16,8,4,4")]),
        info(F, "1,8,16,16")
    );
    let c = op::ConvTranspose { output_shape: vec![10, 12], group: 2, ..Default::default() };
    assert_eq!(one(Op::ConvTranspose(c), &[("x", F, "1,4,5,6"), ("w", F, "4,3,2,2")]), info(F, "1,6,10,12"));
}

#[test]
fn pools() {
    let mp = op::MaxPool {
        kernel_shape: vec![3, 3],
        strides: vec![2, 2],
        pads: vec![1, 1, 1, 1],
        ..Default::default()
    };
    let mut g = Graph::new();
    let x = g.input("x", F, dims("n,64,112,112"));
    let outs = g.push(Op::MaxPool(mp), &[x], 2);
    g.output(outs[1]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(F, "n,64,56,56"));
    assert_eq!(infos[outs[1].index()], info(DType::I64, "n,64,56,56"));
    let ap =
        op::AveragePool { kernel_shape: vec![2], strides: vec![2], ceil_mode: true, ..Default::default() };
    assert_eq!(one(Op::AveragePool(ap), &[("x", F, "1,2,5")]), info(F, "1,2,3"));
    let lp = op::LpPool { kernel_shape: vec![2, 2], auto_pad: AutoPad::Valid, ..Default::default() };
    assert_eq!(one(Op::LpPool(lp), &[("x", F, "1,2,5,5")]), info(F, "1,2,4,4"));
    assert_eq!(one(Op::GlobalAveragePool, &[("x", F, "n,c,7,7")]), info(F, "n,c,1,1"));
    let too_big = op::MaxPool { kernel_shape: vec![9], ..Default::default() };
    assert!(matches!(
        single(Op::MaxPool(too_big), &[("x", F, "1,1,4")]),
        Err(PlanError::ShapeMismatch { .. })
    ));
}

#[test]
fn normalizations() {
    let bn = [("x", F, "n,16,h,w"), ("s", F, "16"), ("b", F, "16"), ("m", F, "16"), ("v", F, "16")];
    assert_eq!(one(Op::BatchNormalization(Default::default()), &bn), info(F, "n,16,h,w"));
    let inorm = [("x", F, "n,16,8"), ("s", F, "16"), ("b", F, "16")];
    assert_eq!(one(Op::InstanceNormalization(Default::default()), &inorm), info(F, "n,16,8"));
    let mut g = Graph::new();
    let x = g.input("x", DType::F16, dims("b,s,768"));
    let scale = g.input("scale", DType::F16, dims("768"));
    let outs = g.push(Op::LayerNormalization(Default::default()), &[x, scale], 3);
    g.output(outs[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(DType::F16, "b,s,768"));
    assert_eq!(infos[outs[1].index()], info(DType::F32, "b,s,1"));
    let rms = [("x", F, "b,s,512"), ("scale", F, "512")];
    assert_eq!(one(Op::RmsNormalization(Default::default()), &rms), info(F, "b,s,512"));
    let gn = op::GroupNormalization { epsilon: 1e-5, num_groups: 3, stash_type: F };
    let r = single(Op::GroupNormalization(gn), &[("x", F, "1,16,4"), ("s", F, "16"), ("b", F, "16")]);
    assert!(matches!(r, Err(PlanError::InvalidAttribute { op: "GroupNormalization", .. })));
}

#[test]
fn softmax_axis_checked() {
    assert_eq!(one(Op::Softmax(op::Softmax { axis: -1 }), &[("x", F, "b,12,s,s")]), info(F, "b,12,s,s"));
    let r = single(Op::LogSoftmax(op::Softmax { axis: 4 }), &[("x", F, "b,12,s,s")]);
    assert!(matches!(r, Err(PlanError::InvalidAttribute { op: "LogSoftmax", .. })));
}

#[test]
fn reductions() {
    let r = op::Reduce { axes: Some(vec![-1]), ..Default::default() };
    assert_eq!(one(Op::ReduceMean(r), &[("x", F, "b,s,64")]), info(F, "b,s,1"));
    let r = op::Reduce { axes: Some(vec![0, 2]), keepdims: false, ..Default::default() };
    assert_eq!(one(Op::ReduceSum(r), &[("x", F, "b,s,64")]), info(F, "s"));
    assert_eq!(one(Op::ReduceMax(Default::default()), &[("x", F, "b,s")]), info(F, "1,1"));
    let noop = op::Reduce { noop_with_empty_axes: true, ..Default::default() };
    assert_eq!(one(Op::ReduceL2(noop), &[("x", F, "b,s")]), info(F, "b,s"));
    let am = op::ArgReduce { axis: 1, keepdims: false, ..Default::default() };
    assert_eq!(one(Op::ArgMax(am), &[("x", F, "b,10")]), info(DType::I64, "b"));

    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,s,64"));
    let axes = g.const_i64("axes", &[1], &[1]);
    let y = g.op1(Op::ReduceSumSquare(op::Reduce { keepdims: false, ..Default::default() }), &[x, axes]);
    let dyn_axes = g.input("dyn", DType::I64, dims("1"));
    let z = g.op1(Op::ReduceSum(Default::default()), &[x, dyn_axes]);
    g.output(y);
    g.output(z);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[y.index()], info(F, "b,64"));
    assert!(infos[z.index()].shape.dims().iter().all(is_fresh), "{}", infos[z.index()]);
}

#[test]
fn attention_with_past_and_3d_heads() {
    let mut g = Graph::new();
    let q = g.input("q", F, dims("b,8,s,64"));
    let k = g.input("k", F, dims("b,2,s,64"));
    let v = g.input("v", F, dims("b,2,s,32"));
    let pk = g.input("pk", F, dims("b,2,16,64"));
    let pv = g.input("pv", F, dims("b,2,16,32"));
    let outs = g.push_opt(
        Op::Attention(Default::default()),
        vec![Some(q), Some(k), Some(v), None, Some(pk), Some(pv)],
        3,
    );
    g.output(outs[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(F, "b,8,s,32"));
    let present = &infos[outs[1].index()];
    assert_eq!(present.shape.dims()[..2], dims("b,2")[..]);
    assert!(is_fresh(&present.shape.dims()[2]));

    let a = op::Attention { q_num_heads: Some(12), kv_num_heads: Some(12), ..Default::default() };
    let x = [("q", F, "b,s,768"), ("k", F, "b,t,768"), ("v", F, "b,t,768")];
    assert_eq!(one(Op::Attention(a), &x), info(F, "b,s,768"));
    let r = single(
        Op::Attention(Default::default()),
        &[("q", F, "b,s,768"), ("k", F, "b,t,768"), ("v", F, "b,t,768")],
    );
    assert!(matches!(r, Err(PlanError::InvalidAttribute { op: "Attention", .. })));
}

#[test]
fn rotary_einsum_cumsum_topk() {
    let rope = [("x", F, "b,h,s,64"), ("cos", F, "s,32"), ("sin", F, "s,32")];
    assert_eq!(one(Op::RotaryEmbedding(Default::default()), &rope), info(F, "b,h,s,64"));
    let e = |eq: &str| Op::Einsum(op::Einsum { equation: eq.into() });
    assert_eq!(one(e("bij,bjk->bik"), &[("a", F, "n,2,3"), ("b", F, "n,3,4")]), info(F, "n,2,4"));
    assert_eq!(one(e("ij,jk"), &[("a", F, "2,3"), ("b", F, "3,4")]), info(F, "2,4"));
    assert_eq!(one(e("...ij->...ji"), &[("a", F, "5,6,2,3")]), info(F, "5,6,3,2"));
    assert_eq!(one(e("i,i->"), &[("a", F, "7"), ("b", F, "7")]), info(F, ""));
    assert!(single(e("ij,jk->ik"), &[("a", F, "2,3"), ("b", F, "4,4")]).is_err());

    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,100"));
    let axis = g.initializer("axis", ConstTensor::scalar_i64(1));
    let cs = g.op1(Op::CumSum(Default::default()), &[x, axis]);
    let k = g.const_i64("k", &[1], &[5]);
    let tk = g.push(Op::TopK(Default::default()), &[cs, k], 2);
    g.output(tk[1]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[cs.index()], info(F, "b,100"));
    assert_eq!(infos[tk[0].index()], info(F, "b,5"));
    assert_eq!(infos[tk[1].index()], info(DType::I64, "b,5"));
}
