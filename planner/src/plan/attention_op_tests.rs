//! ONNX `Attention` lowering: which variants become one `attention_f32` launch (and with which
//! views, program, causal flag and KV grouping) and which are refused with a reason.

use super::*;
use crate::error::PlanError;
use crate::plan::{PlanOptions, Step, compile};
use crate::tensor_info::{Binding, Dim};
use crate::{Graph, Op};
use kernels_gpu::abi::KernelId;

fn known(d: &[usize]) -> Vec<Dim> {
    d.iter().map(|&x| Dim::Known(x)).collect()
}

fn ops<'a>(q: &'a [usize], k: &'a [usize], v: &'a [usize], y: &'a [usize]) -> Operands<'a> {
    Operands { q, k, v, y, mask: None, past: 0 }
}

/// A graph of one `Attention` node: Q, K, V (and the mask, when given) as graph inputs, `outputs`
/// outputs all present.
fn graph(a: Attention, q: &[usize], k: &[usize], v: &[usize], mask: Option<(&[usize], DType)>) -> Graph {
    let mut g = Graph::new();
    let mut ins = vec![
        Some(g.input("q", DType::F32, known(q))),
        Some(g.input("k", DType::F32, known(k))),
        Some(g.input("v", DType::F32, known(v))),
    ];
    if let Some((m, dt)) = mask {
        ins.push(Some(g.input("mask", dt, known(m))));
    }
    let y = g.push_opt(Op::Attention(a), ins, 1);
    g.output(y[0]);
    g
}

/// A graph of one `Attention` node with Q, K, V of dims `q`, a cache of 3 rows (`past_key`,
/// `past_value` (1, 2, 3, 8)) and its first `outputs` outputs, all graph outputs.
fn cached(a: Attention, q: &[usize], outputs: usize) -> (Graph, Vec<crate::ValueId>) {
    let mut g = Graph::new();
    let mut ins: Vec<Option<crate::ValueId>> =
        ["q", "k", "v"].iter().map(|n| Some(g.input(n, DType::F32, known(q)))).collect();
    ins.push(None);
    for n in ["pk", "pv"] {
        ins.push(Some(g.input(n, DType::F32, known(&[1, 2, 3, 8]))));
    }
    let outs = g.push_opt(Op::Attention(a), ins, outputs);
    outs.iter().for_each(|&o| g.output(o));
    (g, outs)
}

/// Why `g` is refused, its f16 / bf16 values not widened (so that the attention kernels' own
/// dtype check shows).
fn refusal(g: &Graph) -> String {
    let native = PlanOptions { widen_narrow_floats: false, ..PlanOptions::default() };
    match compile(g, &Binding::new(), &native) {
        Err(PlanError::NoKernel { nodes }) => nodes.iter().map(|(_, _, why)| why.clone()).collect(),
        Err(e) => panic!("unexpected error {e}"),
        Ok(p) => panic!("lowered:\n{p}"),
    }
}

#[test]
fn a_4d_attention_is_one_launch_with_the_default_scale() {
    let (b, h, s, d) = (2, 3, 5, 8);
    let g = graph(Attention::default(), &[b, h, s, d], &[b, h, 7, d], &[b, h, 7, d], None);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let kernels: Vec<KernelId> = plan
        .steps
        .iter()
        .filter_map(|st| match st {
            Step::Kernel { kernel, .. } => Some(*kernel),
            Step::Copy { .. } => None,
        })
        .collect();
    assert_eq!(kernels, [KernelId::AttentionF32]);
    let p = attention_params(
        &Attention::default(),
        &ops(&[b, h, s, d], &[b, h, 7, d], &[b, h, 7, d], &[b, h, s, d]),
    )
    .unwrap();
    assert_eq!((p.batch, p.heads, p.q_len, p.kv_len, p.dk, p.dv), (2, 3, 5, 7, 8, 8));
    assert_eq!((p.kv_group, p.causal, p.causal_offset, p.n_inputs), (1, 0, 0, 1));
    assert_eq!(p.n_instr, 1);
    assert_eq!(p.instrs[0].op, ew_binary_code(BinaryOp::Mul));
    assert_eq!(p.instrs[0].imm, 1.0 / 8f32.sqrt());
    assert_eq!((p.instrs[0].a, p.instrs[0].b, p.out_reg), (ew_src::INPUT0, ew_src::IMM, 0));
    assert_eq!(p.q.strides, [(h * s * d) as u64, (s * d) as u64, d as u64, 1]);
    assert_eq!(p.k.strides, [(h * 7 * d) as u64, (7 * d) as u64, d as u64, 1]);
}

#[test]
fn a_3d_attention_reads_heads_in_place_and_groups_kv_heads() {
    // Q (B, S, 6·4), K (B, 9, 2·4), V (B, 9, 2·5): 6 query heads over 2 KV heads, dv 5.
    let a = Attention { q_num_heads: Some(6), kv_num_heads: Some(2), scale: Some(1.0), ..Default::default() };
    let p = attention_params(&a, &ops(&[2, 3, 24], &[2, 9, 8], &[2, 9, 10], &[2, 3, 30])).unwrap();
    assert_eq!((p.heads, p.q_len, p.kv_len, p.dk, p.dv, p.kv_group), (6, 3, 9, 4, 5, 3));
    // Scale 1: no program at all.
    assert_eq!((p.n_instr, p.out_reg), (0, ew_src::INPUT0));
    assert_eq!(p.q.strides, [3 * 24, 4, 24, 1]);
    assert_eq!(p.k.strides, [9 * 8, 4, 8, 1]);
    assert_eq!(p.v.strides, [9 * 10, 5, 10, 1]);
    assert_eq!(p.y.strides, [3 * 30, 5, 30, 1]);
    // Without the head counts, or with ones that do not divide, it is refused.
    let no_heads = Attention::default();
    assert!(attention_params(&no_heads, &ops(&[2, 3, 24], &[2, 9, 8], &[2, 9, 10], &[2, 3, 30])).is_err());
    let bad = Attention { q_num_heads: Some(5), kv_num_heads: Some(2), ..Default::default() };
    assert!(attention_params(&bad, &ops(&[2, 3, 24], &[2, 9, 8], &[2, 9, 10], &[2, 3, 30])).is_err());
    // 4 query heads over 3 KV heads: not a group.
    let g = attention_params(
        &Attention::default(),
        &ops(&[1, 4, 2, 8], &[1, 3, 2, 8], &[1, 3, 2, 8], &[1, 4, 2, 8]),
    );
    assert!(g.unwrap_err().contains("multiple"));
}

#[test]
fn scale_softcap_then_mask_in_the_references_order() {
    let a = Attention { scale: Some(0.5), softcap: 3.0, is_causal: true, ..Default::default() };
    let (q, kv) = ([1, 2, 4, 8], [1, 2, 6, 8]);
    let mut o = ops(&q, &kv, &kv, &q);
    o.mask = Some((&[4, 6], DType::F32));
    let p = attention_params(&a, &o).unwrap();
    let codes: Vec<(u32, u32, u32, f32)> =
        p.instrs[..p.n_instr as usize].iter().map(|i| (i.op, i.a, i.b, i.imm)).collect();
    let x0 = ew_src::INPUT0;
    assert_eq!(
        codes,
        [
            (ew_binary_code(BinaryOp::Mul), x0, ew_src::IMM, 0.5),
            (ew_binary_code(BinaryOp::Div), 0, ew_src::IMM, 3.0),
            (ew_unary_code(UnaryOp::Tanh), 0, 0, 0.0),
            (ew_binary_code(BinaryOp::Mul), 0, ew_src::IMM, 3.0),
            (ew_binary_code(BinaryOp::Add), 0, x0 + 1, 0.0),
        ]
    );
    let causal = kernels_gpu::abi::ATTN_CAUSAL_MASK | kernels_gpu::abi::ATTN_CAUSAL_SKIP;
    assert_eq!((p.n_inputs, p.out_reg, p.causal, p.causal_offset), (2, 0, causal, 0));
    // The (Sq, Skv) mask broadcasts over batch and heads.
    assert_eq!(p.extra[0], AttnView { offset: 0, strides: [0, 0, 6, 1] });
    // A non-positive softcap is off, as in the reference.
    let off = Attention { softcap: -1.0, ..a };
    assert_eq!(attention_params(&off, &o).unwrap().n_instr, 2);
    // The softcap's tanh keeps the attention on the CUDA cores (the tensor-core kernel runs
    // arithmetic score programs only); without it, the tensor cores take it.
    let o = PlanOptions { sm_count: 1, ..PlanOptions::default() };
    assert!(!super::super::attention::tensor_core_attention(&p, &o));
    let plain = attention_params(&off, &ops(&q, &kv, &kv, &q)).unwrap();
    assert!(super::super::attention::tensor_core_attention(&plain, &o));
}

#[test]
fn masks_broadcast_from_the_right() {
    let (q, kv) = ([2, 3, 4, 8], [2, 3, 5, 8]);
    let with = |m: &[usize]| {
        let mut o = ops(&q, &kv, &kv, &q);
        o.mask = Some((m, DType::F32));
        attention_params(&Attention::default(), &o).map(|p| p.extra[0].strides)
    };
    assert_eq!(with(&[5]), Ok([0, 0, 0, 1]));
    assert_eq!(with(&[3, 1, 5]), Ok([0, 5, 0, 1]));
    assert_eq!(with(&[2, 1, 4, 5]), Ok([20, 0, 5, 1]));
    assert_eq!(with(&[2, 3, 4, 5]), Ok([60, 20, 5, 1]));
    // Narrower than the keys (the reference pads with -inf), wider, or not broadcastable.
    assert!(with(&[4, 4]).is_err());
    assert!(with(&[4, 6]).is_err());
    assert!(with(&[2, 4, 5]).is_err());
    assert!(with(&[1, 1, 1, 4, 5]).is_err());
}

#[test]
fn unsupported_variants_are_refused_with_a_reason() {
    let q = [1, 2, 4, 8];
    // A KV cache without the present outputs to hold the concatenated cache.
    let (g, _) = cached(Attention::default(), &q, 1);
    assert!(refusal(&g).contains("present_key"), "{}", refusal(&g));
    // qk_matmul_output of a mode ONNX does not define.
    let mut g = Graph::new();
    let ins: Vec<Option<crate::ValueId>> =
        ["q", "k", "v"].iter().map(|n| Some(g.input(n, DType::F32, known(&q)))).collect();
    let outs =
        g.push_opt(Op::Attention(Attention { qk_matmul_output_mode: 4, ..Default::default() }), ins, 4);
    g.output(outs[0]);
    g.output(outs[3]);
    assert!(refusal(&g).contains("qk_matmul_output_mode 4"), "{}", refusal(&g));
    // f16 operands.
    let mut g = Graph::new();
    let ins: Vec<Option<crate::ValueId>> =
        ["q", "k", "v"].iter().map(|n| Some(g.input(n, DType::F16, known(&q)))).collect();
    let y = g.push_opt(Op::Attention(Attention::default()), ins, 1);
    g.output(y[0]);
    assert!(refusal(&g).contains("f32"), "{}", refusal(&g));
    // Widened to f32 (the default), the same attention compiles.
    compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    // Head sizes past the kernel's limits.
    let big = attention_params(
        &Attention::default(),
        &ops(&[1, 1, 4, 8], &[1, 1, 4, 8], &[1, 1, 4, 512], &[1, 1, 4, 512]),
    );
    assert!(big.is_err());
}

#[test]
fn a_bool_mask_becomes_additive_and_qk_matmul_output_is_a_scores_launch() {
    let (q, kv) = ([1, 2, 4, 8], [1, 2, 4, 8]);
    let g = graph(Attention::default(), &q, &kv, &kv, Some((&[4, 4], DType::Bool)));
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let kernels = |plan: &crate::plan::Plan| -> Vec<KernelId> {
        (plan.steps.iter())
            .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
            .collect()
    };
    assert_eq!(kernels(&plan), [KernelId::WhereB4, KernelId::AttentionF32], "{plan}");
    for (mode, want) in [
        (0, vec![KernelId::AttentionF32, KernelId::AttentionScoresF32]),
        (3, vec![KernelId::AttentionF32, KernelId::AttentionScoresF32, KernelId::SoftmaxF32]),
    ] {
        let mut g = Graph::new();
        let ins: Vec<Option<crate::ValueId>> =
            ["q", "k", "v"].iter().map(|n| Some(g.input(n, DType::F32, known(&q)))).collect();
        let a = Attention { qk_matmul_output_mode: mode, ..Default::default() };
        let outs = g.push_opt(Op::Attention(a), ins, 4);
        g.output(outs[0]);
        g.output(outs[3]);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        // (The present outputs, unused, are still copied first.)
        assert!(kernels(&plan).ends_with(&want), "{plan}");
    }
}

#[test]
fn a_kv_cache_is_copied_into_the_present_outputs_and_read_from_them() {
    // Q (1, 2, 4, 8) after a cache of 3 rows: present (1, 2, 7, 8), causal aligned bottom-right.
    let (g, outs) = cached(Attention { is_causal: true, ..Default::default() }, &[1, 2, 4, 8], 3);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let kernels: Vec<KernelId> = (plan.steps.iter())
        .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
        .collect();
    assert_eq!(kernels.len(), 5, "{plan}");
    assert!(
        kernels[..4].iter().all(|k| matches!(k, KernelId::StridedCopyB4 | KernelId::StridedCopyB16)),
        "{plan}"
    );
    let Some(Step::Kernel { args, .. }) = plan.steps.last() else { panic!("{plan}") };
    let (Arg::Params(bytes), Arg::Value(k)) = (&args[0], &args[2]) else { panic!("{plan}") };
    assert_eq!(*k, outs[1], "the launch reads present_key");
    // kv_len, causal (masked, hidden keys skipped) and causal_offset: the 4th, 8th and 9th u32
    // of AttentionParams.
    let u32_at = |i: usize| u32::from_ne_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    assert_eq!((u32_at(3), u32_at(7), u32_at(8)), (7, 3, 3));
}
