//! Recurrent layers and the state-space operators of OPS.md.

use super::{dims, info};
use crate::error::PlanError;
use crate::graph::Graph;
use crate::op::{self, Op, Recurrent, RnnDirection, RnnLayout};
use crate::shape_infer::infer;
use crate::tensor_info::DType;

const F: DType = DType::F32;

fn recurrent(direction: RnnDirection, layout: RnnLayout) -> Recurrent {
    Recurrent {
        activation_alpha: Vec::new(),
        activation_beta: Vec::new(),
        activations: Vec::new(),
        clip: None,
        direction,
        hidden_size: 16,
        layout,
    }
}

#[test]
fn lstm_and_gru_outputs() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("s,b,8"));
    let w = g.input("w", F, dims("1,64,8"));
    let r = g.input("r", F, dims("1,64,16"));
    let lstm =
        op::Lstm { common: recurrent(RnnDirection::Forward, RnnLayout::SeqFirst), input_forget: false };
    let outs = g.push(Op::Lstm(lstm), &[x, w, r], 3);
    g.output(outs[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(F, "s,1,b,16"));
    assert_eq!(infos[outs[1].index()], info(F, "1,b,16"));
    assert_eq!(infos[outs[2].index()], info(F, "1,b,16"));

    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,s,8"));
    let w = g.input("w", F, dims("2,48,8"));
    let r = g.input("r", F, dims("2,48,16"));
    let gru = op::Gru {
        common: recurrent(RnnDirection::Bidirectional, RnnLayout::BatchFirst),
        linear_before_reset: true,
    };
    let outs = g.push_opt(Op::Gru(gru), vec![Some(x), Some(w), Some(r)], 2);
    g.output(outs[1]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(F, "b,s,2,16"));
    assert_eq!(infos[outs[1].index()], info(F, "b,2,16"));
}

#[test]
fn rnn_weight_mismatch_is_reported() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("s,b,8"));
    let w = g.input("w", F, dims("1,16,9"));
    let r = g.input("r", F, dims("1,16,16"));
    let rnn = op::Rnn { common: recurrent(RnnDirection::Forward, RnnLayout::SeqFirst) };
    let outs = g.push(Op::Rnn(rnn), &[x, w, r], 2);
    g.output(outs[0]);
    assert!(matches!(infer(&g), Err(PlanError::ShapeMismatch { op: "RNN", .. })));
}

#[test]
fn selective_scan_and_sofie_mamba() {
    let mut g = Graph::new();
    let u = g.input("u", DType::BF16, dims("b,1536,l"));
    let dt = g.input("dt", DType::BF16, dims("b,1536,l"));
    let a = g.input("a", F, dims("1536,16"));
    let bm = g.input("bm", DType::BF16, dims("b,1,16,l"));
    let cm = g.input("cm", DType::BF16, dims("b,1,16,l"));
    let z = g.input("z", DType::BF16, dims("b,1536,l"));
    let outs = g.push_opt(
        Op::SelectiveScan(op::SelectiveScan { delta_softplus: true }),
        vec![Some(u), Some(dt), Some(a), Some(bm), Some(cm), None, Some(z)],
        2,
    );
    g.output(outs[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[outs[0].index()], info(DType::BF16, "b,1536,l"));
    assert_eq!(infos[outs[1].index()], info(F, "b,1536,16"));

    let mut g = Graph::new();
    let ins: Vec<_> =
        [("u", "2,8,5"), ("dt", "2,8,5"), ("a", "8,4"), ("b", "2,4,5"), ("c", "2,4,5"), ("d", "8")]
            .iter()
            .map(|(n, d)| g.input(n, F, dims(d)))
            .collect();
    let y = g.op1(Op::MambaScan, &ins);
    g.output(y);
    assert_eq!(infer(&g).unwrap()[y.index()], info(F, "2,8,5"));
    g.nodes[0].inputs[2] = Some(ins[1]);
    assert!(matches!(infer(&g), Err(PlanError::ShapeMismatch { op: "MambaScan", .. })));
}

#[test]
fn ssd_rglru_wkv6_causal_conv() {
    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,l,24,64"));
    let dt = g.input("dt", F, dims("b,l,24"));
    let a = g.input("a", F, dims("24"));
    let bm = g.input("bm", F, dims("b,l,1,128"));
    let cm = g.input("cm", F, dims("b,l,1,128"));
    let ssd = g.push(Op::SsdScan(Default::default()), &[x, dt, a, bm, cm], 2);
    g.output(ssd[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[ssd[0].index()], info(F, "b,l,24,64"));
    assert_eq!(infos[ssd[1].index()], info(F, "b,24,64,128"));

    let mut g = Graph::new();
    let x = g.input("x", DType::BF16, dims("b,l,256"));
    let a = g.input("a", DType::BF16, dims("b,l,256"));
    let reset = g.input("reset", DType::Bool, dims("b,l"));
    let rg = g.push(Op::Rglru, &[x, a, reset], 2);
    g.output(rg[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[rg[1].index()], info(F, "b,256"));

    for (layout, spec) in [(op::Wkv6Layout::Bthn, "b,t,4,64"), (op::Wkv6Layout::Bhtn, "b,4,t,64")] {
        let mut g = Graph::new();
        let rkvw: Vec<_> = ["r", "k", "v", "w"].iter().map(|n| g.input(n, F, dims(spec))).collect();
        let u = g.input("u", F, dims("4,64"));
        let mut ins = rkvw.clone();
        ins.push(u);
        let outs = g.push(Op::Wkv6(op::Wkv6 { layout }), &ins, 2);
        g.output(outs[0]);
        let infos = infer(&g).unwrap();
        assert_eq!(infos[outs[0].index()], info(F, spec));
        assert_eq!(infos[outs[1].index()], info(F, "b,4,64,64"));
    }

    let mut g = Graph::new();
    let x = g.input("x", F, dims("b,512,l"));
    let w = g.input("w", F, dims("512,4"));
    let cc = g.push(Op::CausalConvWithState(Default::default()), &[x, w], 2);
    g.output(cc[0]);
    let infos = infer(&g).unwrap();
    assert_eq!(infos[cc[0].index()], info(F, "b,512,l"));
    assert_eq!(infos[cc[1].index()], info(F, "b,512,3"));
}
