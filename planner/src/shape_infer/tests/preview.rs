//! FlexAttention, Binarizer, ArrayFeatureExtractor and TreeEnsemble inference.

use super::{dims, info};
use crate::graph::Graph;
use crate::op::{self, Op};
use crate::shape_infer::infer;
use crate::tensor_info::{DType, TensorInfo};

const F: DType = DType::F32;
const I: DType = DType::I64;

fn one(op: Op, inputs: &[(&str, DType, &str)]) -> Result<TensorInfo, String> {
    let mut g = Graph::new();
    let ins: Vec<_> = inputs.iter().map(|(n, t, d)| g.input(n, *t, dims(d))).collect();
    let outs = g.push(op, &ins, 1);
    g.output(outs[0]);
    let infos = infer(&g).map_err(|e| e.to_string())?;
    Ok(infos[outs[0].index()].clone())
}

#[test]
fn flex_attention_takes_query_rows_and_value_width() {
    let flex = || Op::FlexAttention(op::FlexAttention { scale: None, score_mod: None, prob_mod: None });
    let ins = [("q", F, "b,8,4,16"), ("k", F, "b,2,6,16"), ("v", F, "b,2,6,32")];
    assert_eq!(one(flex(), &ins), Ok(info(F, "b,8,4,32")));
    let bad = [("q", F, "b,3,4,16"), ("k", F, "b,2,6,16"), ("v", F, "b,2,6,32")];
    assert!(one(flex(), &bad).is_err());
}

#[test]
fn ml_operators() {
    let bin = Op::Binarizer(op::Binarizer { threshold: 1.0 });
    assert_eq!(one(bin, &[("x", F, "3,4")]), Ok(info(F, "3,4")));
    let afe = || Op::ArrayFeatureExtractor;
    assert_eq!(one(afe(), &[("x", F, "n,3,4"), ("i", I, "2")]), Ok(info(F, "n,3,2")));
    assert_eq!(one(afe(), &[("x", F, "5"), ("i", I, "1,3")]), Ok(info(F, "1,3")));
    let tree = Op::TreeEnsemble(op::TreeEnsemble { n_targets: 4, ..Default::default() });
    assert_eq!(one(tree, &[("x", F, "n,1")]), Ok(info(F, "n,4")));
}
