//! The contraction reading the SSD lift matches by. The lift itself is tested on transformers'
//! exact exports (`tests/pytorch_models.rs`: the reference on the original and the lifted
//! graph, both against PyTorch; `tests/gpu_models.rs` on the GPU).

use super::*;
use crate::op::{Einsum, Reduce, Transpose, Unsqueeze};
use crate::tensor_info::Dim;

fn input(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    g.input(name, DType::F32, dims.iter().map(|&d| Dim::Known(d)))
}

fn axes(g: &mut Graph, name: &str, a: &[i64]) -> ValueId {
    g.const_i64(name, &[a.len()], a)
}

fn cx_of(g: &Graph) -> (Vec<TensorInfo>, Vec<Option<(usize, usize)>>) {
    (crate::shape_infer::infer(g).unwrap(), super::super::fuse::producers(g))
}

/// `G = Σ_n C[b,c,l,h,n] B[b,c,s,h,n]` as transformers 5.17 spells it: `(C[:, :, :, None] *
/// B[:, :, None]).sum(-1)`, read as the einsum it is, either operand order; a wrong spec or a
/// transposed operand does not match.
#[test]
fn a_summed_broadcast_product_reads_as_its_einsum() {
    let mut g = Graph::new();
    let c = input(&mut g, "C", &[2, 3, 4, 5, 6]);
    let b = input(&mut g, "B", &[2, 3, 4, 5, 6]);
    let (a3, a2, last) = (axes(&mut g, "a3", &[3]), axes(&mut g, "a2", &[2]), axes(&mut g, "last", &[-1]));
    let cu = g.op1(Op::Unsqueeze(Unsqueeze { axes: None }), &[c, a3]);
    let bu = g.op1(Op::Unsqueeze(Unsqueeze { axes: None }), &[b, a2]);
    let prod = g.op1(Op::Mul, &[cu, bu]);
    let red = Reduce { axes: None, keepdims: false, noop_with_empty_axes: false };
    let gm = g.op1(Op::ReduceSum(red.clone()), &[prod, last]);
    // Summed over l instead: another contraction.
    let (a2s,) = (axes(&mut g, "sum_l", &[2]),);
    let gl = g.op1(Op::ReduceSum(red), &[prod, a2s]);
    g.output(gm);
    g.output(gl);
    let (infos, defs) = cx_of(&g);
    let cx = Cx { g: &g, infos: &infos, defs, sm_count: None };
    assert_eq!(cx.einsum(gm, ["bclhn", "bcshn"], "bclsh"), Some([c, b]));
    assert_eq!(cx.einsum(gm, ["bcshn", "bclhn"], "bclsh"), Some([b, c]));
    // (Read with the operands swapped, l and s swap: that is the same contraction.)
    assert_eq!(cx.einsum(gm, ["bclhn", "bcshn"], "bcslh"), Some([b, c]));
    assert_eq!(cx.einsum(gm, ["bclhn", "bcshn"], "blcsh"), None, "output order");
    assert_eq!(cx.einsum(gm, ["bclhn", "bclhn"], "bclh"), None, "another contraction");
    assert_eq!(cx.einsum(gl, ["bclhn", "bcshn"], "bclsh"), None, "summed over l");
    assert_eq!(cx.einsum(gl, ["bclhn", "bcshn"], "bcshn"), Some([c, b]));
}

/// The same contraction written as an `Einsum` node over a transposed operand reads the same.
#[test]
fn an_einsum_node_over_views_reads_as_its_contraction() {
    let mut g = Graph::new();
    let c = input(&mut g, "C", &[2, 3, 4, 5, 6]);
    let bt = input(&mut g, "Bt", &[2, 3, 5, 4, 6]);
    // B = Bt transposed back to [b, c, s, h, n].
    let b = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 1, 3, 2, 4]) }), &[bt]);
    let gm = g.op1(Op::Einsum(Einsum { equation: "bclhn, bcshn -> bclsh".into() }), &[c, b]);
    g.output(gm);
    let (infos, defs) = cx_of(&g);
    let cx = Cx { g: &g, infos: &infos, defs, sm_count: None };
    assert_eq!(cx.einsum(gm, ["bclhn", "bcshn"], "bclsh"), None, "B's base is the transposed input");
    assert_eq!(cx.einsum(gm, ["bclhn", "bcjsn"], "bclsj"), None, "letters name axes, not sizes");
    assert_eq!(cx.einsum(gm, ["bclhn", "bchsn"], "bclsh"), Some([c, bt]));
}
