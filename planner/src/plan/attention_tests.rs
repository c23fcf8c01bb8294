//! Attention fusion on hand-built GPT-2-style graphs: what fuses, the views it records, and the
//! variants that must keep the unfused nodes.

use super::*;
use crate::ConstTensor;
use crate::op::{Softmax, Split, Transpose};
use crate::plan::{PlanOptions, compile};
use crate::tensor_info::{Binding, Dim};

/// The knobs of [`gpt2_attention`].
#[derive(Clone, Copy)]
struct Shape {
    batch: usize,
    seq: usize,
    heads: usize,
    head: usize,
    softmax_axis: i64,
    probs_are_output: bool,
    /// PyTorch's exported scaled-dot-product attention: Q and Kᵀ each multiplied by
    /// `1 / sqrt(sqrt(D))` before the MatMul (no Div), and `Where(IsNaN(p), 0, p)` after the
    /// softmax.
    sdpa: bool,
}

const SMALL: Shape =
    Shape { batch: 2, seq: 5, heads: 3, head: 4, softmax_axis: -1, probs_are_output: false, sdpa: false };

/// `qkv [B, S, 3·H·D] -> Split -> Reshape [B, S, H, D] -> Transpose` to Q, Kᵀ and V, then
/// `softmax(QKᵀ / √D + causal mask) V`, transposed and reshaped back to `[B, S, H·D]`.
fn gpt2_attention(s: Shape) -> Graph {
    let (b, n, h, d) = (s.batch, s.seq, s.heads, s.head);
    let hd = h * d;
    let mut g = Graph::new();
    let qkv = g.input("qkv", DType::F32, vec![Dim::Known(b), Dim::Known(n), Dim::Known(3 * hd)]);
    let parts = g.push(Op::Split(Split { axis: 2, split: None, num_outputs: Some(3) }), &[qkv], 3);
    let heads_shape = g.initializer(
        "heads",
        ConstTensor::from_i64(&[4], &[b as i64, n as i64, h as i64, d as i64]).unwrap(),
    );
    let mut ops = Vec::new();
    for (i, perm) in [[0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]].into_iter().enumerate() {
        let r = g.op1(Op::Reshape(Default::default()), &[parts[i], heads_shape]);
        if s.sdpa && i == 1 {
            // As the dynamo export writes `k.transpose(-2, -1)`: through merged batch and heads.
            let k = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1, 3]) }), &[r]);
            let merged = g.initializer(
                "merged",
                ConstTensor::from_i64(&[3], &[(b * h) as i64, n as i64, d as i64]).unwrap(),
            );
            let m = g.op1(Op::Reshape(Default::default()), &[k, merged]);
            let t = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1]) }), &[m]);
            let split = g.initializer(
                "split",
                ConstTensor::from_i64(&[4], &[b as i64, h as i64, d as i64, n as i64]).unwrap(),
            );
            ops.push(g.op1(Op::Reshape(Default::default()), &[t, split]));
            continue;
        }
        ops.push(g.op1(Op::Transpose(Transpose { perm: Some(perm.to_vec()) }), &[r]));
    }
    let scaled = if s.sdpa {
        let c = g.initializer("c", ConstTensor::scalar_f32(1.0 / (d as f32).sqrt().sqrt()));
        let (q, kt) = (g.op1(Op::Mul, &[ops[0], c]), g.op1(Op::Mul, &[c, ops[1]]));
        g.op1(Op::MatMul, &[q, kt])
    } else {
        let scores = g.op1(Op::MatMul, &[ops[0], ops[1]]);
        let root = g.initializer("root", ConstTensor::scalar_f32((d as f32).sqrt()));
        g.op1(Op::Div, &[scores, root])
    };
    let mask: Vec<f32> = (0..n * n).map(|k| if k % n > k / n { f32::NEG_INFINITY } else { 0.0 }).collect();
    let mask = g.initializer("mask", ConstTensor::from_f32(&[1, 1, n, n], &mask).unwrap());
    let masked = g.op1(Op::Add, &[scaled, mask]);
    let probs = g.op1(Op::Softmax(Softmax { axis: s.softmax_axis }), &[masked]);
    let guarded = if s.sdpa {
        let nan = g.op1(Op::IsNaN, &[probs]);
        let zero = g.initializer("zero", ConstTensor::scalar_f32(0.0));
        g.op1(Op::Where, &[nan, zero, probs])
    } else {
        probs
    };
    let o = g.op1(Op::MatMul, &[guarded, ops[2]]);
    let t = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1, 3]) }), &[o]);
    let out_shape =
        g.initializer("out", ConstTensor::from_i64(&[3], &[b as i64, n as i64, hd as i64]).unwrap());
    let y = g.op1(Op::Reshape(Default::default()), &[t, out_shape]);
    g.output(y);
    if s.probs_are_output {
        g.output(probs);
    }
    g
}

fn kernels(plan: &super::super::Plan) -> Vec<KernelId> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { kernel, .. } => Some(*kernel),
            Step::Copy { .. } => None,
        })
        .collect()
}

#[test]
fn reshape_strides_split_and_merge_contiguous_groups_only() {
    // A column slice [S, 768)[:, 0:256] split into heads.
    assert_eq!(reshape_strides(&[16, 256], &[768, 1], &[16, 4, 64]), Some(vec![768, 64, 1]));
    assert_eq!(reshape_strides(&[16, 4, 64], &[768, 64, 1], &[16, 256]), Some(vec![768, 1]));
    assert_eq!(reshape_strides(&[1, 16, 256], &[0, 768, 1], &[16, 1, 256]), Some(vec![768, 256, 1]));
    // (The stride of an extent-1 dim is never used.) Merging a transposed pair needs a copy.
    assert_eq!(reshape_strides(&[4, 16], &[1, 4], &[64]), None);
    assert_eq!(reshape_strides(&[2, 3], &[3, 1], &[7]), None);
}

#[test]
fn a_gpt2_attention_is_one_launch_reading_the_qkv_projection_in_place() {
    let g = gpt2_attention(SMALL);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    // Six 16-row tiles do not fill half of 132 SMs: on the CUDA cores; on a device of 12 or
    // fewer SMs they do, and the tensor cores take it unless switched off.
    assert_eq!(kernels(&plan), [KernelId::AttentionF32], "{plan}");
    let small = PlanOptions { sm_count: 12, ..PlanOptions::default() };
    // (Its heads of 4 take the small-head kernel.)
    assert_eq!(kernels(&compile(&g, &Binding::new(), &small).unwrap()), [KernelId::AttentionSmallF32]);
    let cores = PlanOptions { tensor_core_attention: false, ..small };
    assert_eq!(kernels(&compile(&g, &Binding::new(), &cores).unwrap()), [KernelId::AttentionF32]);
    // With the flash kernel on, heads of 4 fit it, on any grid (here blocks of one warp).
    let flash = PlanOptions { flash_attention: true, ..PlanOptions::default() };
    assert_eq!(kernels(&compile(&g, &Binding::new(), &flash).unwrap()), [KernelId::AttentionFlashF32]);
    // Nothing between the input and the output needs a buffer.
    assert_eq!(plan.memory.arena_bytes, 0, "{plan}");
    let unfused =
        compile(&g, &Binding::new(), &PlanOptions { fuse_attention: false, ..PlanOptions::default() })
            .unwrap();
    assert!(unfused.steps.len() >= 7, "{unfused}");
    assert!(
        !kernels(&unfused).iter().any(|k| matches!(k, KernelId::AttentionF32 | KernelId::AttentionTcF32))
    );

    let infos = crate::shape_infer::infer(&g).unwrap();
    let (fused, _, _, attentions) = fuse(g.clone(), &infos, Vec::new(), Programs::new());
    assert_eq!(fused.nodes.len(), 1, "Split, Reshapes and Transposes are gone");
    let p = attentions.values().next().unwrap();
    let (n, hd) = (SMALL.seq as u64, (SMALL.heads * SMALL.head) as u64);
    assert_eq!((p.batch, p.heads, p.q_len, p.kv_len, p.dk, p.dv), (2, 3, 5, 5, 4, 4));
    assert_eq!(p.q, AttnView { offset: 0, strides: [n * 3 * hd, 4, 3 * hd, 1] });
    assert_eq!(p.k, AttnView { offset: hd, strides: [n * 3 * hd, 4, 3 * hd, 1] });
    assert_eq!(p.v, AttnView { offset: 2 * hd, strides: [n * 3 * hd, 4, 3 * hd, 1] });
    assert_eq!(p.y, AttnView { offset: 0, strides: [n * hd, 4, hd, 1] });
    // The mask [1, 1, S, S] broadcasts over batch and heads; the scale is an immediate.
    assert_eq!(p.n_inputs, 2);
    assert_eq!(p.extra[0], AttnView { offset: 0, strides: [0, 0, n, 1] });
    assert_eq!(p.n_instr, 2);
    assert_eq!(p.instrs[0].a, ew_src::INPUT0, "the scores are input 0");
    // The constant mask hides every key past the diagonal: the kernels may skip them.
    assert_eq!((p.causal, p.causal_offset), (ATTN_CAUSAL_SKIP, 0));
}

/// The `causal` field of the first attention launch's parameters in `plan`.
fn launched_causal(plan: &super::super::Plan) -> u32 {
    plan.steps
        .iter()
        .find_map(|s| match s {
            Step::Kernel { args, .. } => args.iter().find_map(|a| match a {
                // Seven u32 extents before it (batch, heads, q_len, kv_len, dk, dv, kv_group).
                Arg::Params(b) => Some(u32::from_le_bytes(b[28..32].try_into().unwrap())),
                _ => None,
            }),
            _ => None,
        })
        .unwrap()
}

#[test]
fn hidden_keys_are_skipped_only_with_the_option() {
    let g = gpt2_attention(Shape { seq: 40, ..SMALL });
    let on = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    assert_eq!(launched_causal(&on), ATTN_CAUSAL_SKIP);
    let off = PlanOptions { skip_hidden_keys: false, ..PlanOptions::default() };
    assert_eq!(launched_causal(&compile(&g, &Binding::new(), &off).unwrap()), 0);
}

#[test]
fn variants_that_cannot_fuse_keep_the_unfused_nodes() {
    let cases = [
        ("softmax over a non-last axis", Shape { softmax_axis: 2, ..SMALL }),
        ("probabilities are a graph output", Shape { probs_are_output: true, ..SMALL }),
        ("value head over ATTN_MAX_DV", Shape { head: ATTN_MAX_DV as usize + 4, heads: 1, ..SMALL }),
    ];
    for (what, shape) in cases {
        let plan = compile(&gpt2_attention(shape), &Binding::new(), &PlanOptions::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            !kernels(&plan).iter().any(|k| matches!(k, KernelId::AttentionF32 | KernelId::AttentionTcF32)),
            "{what}:\n{plan}"
        );
        assert!(kernels(&plan).contains(&KernelId::SoftmaxF32), "{what}:\n{plan}");
    }
}

#[test]
fn a_bare_softmax_between_the_matmuls_fuses_without_a_program() {
    let (b, h, n, d) = (1, 2, 33, 8);
    let mut g = Graph::new();
    let dims = |r: usize, c: usize| vec![Dim::Known(b), Dim::Known(h), Dim::Known(r), Dim::Known(c)];
    let q = g.input("q", DType::F32, dims(n, d));
    let kt = g.input("kt", DType::F32, dims(d, n));
    let v = g.input("v", DType::F32, dims(n, d));
    let s = g.op1(Op::MatMul, &[q, kt]);
    let p = g.op1(Op::Softmax(Softmax { axis: 3 }), &[s]);
    let y = g.op1(Op::MatMul, &[p, v]);
    g.output(y);
    let infos = crate::shape_infer::infer(&g).unwrap();
    let (_, _, _, attentions) = fuse(g.clone(), &infos, Vec::new(), Programs::new());
    let a = attentions.values().next().unwrap();
    assert_eq!((a.n_instr, a.n_inputs, a.out_reg), (0, 1, ew_src::INPUT0));
    // Kᵀ [d, n] contiguous: K row j, column c is at c * n + j.
    assert_eq!(a.k.strides, [(h * d * n) as u64, (d * n) as u64, 1, n as u64]);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    assert_eq!(kernels(&plan), [KernelId::AttentionF32]);
}

#[test]
fn gpt2_small_attention_launches_on_the_cores_that_fill_the_device() {
    // Batch 1, 4 heads, seq 128, head 64.
    let shape = Shape { batch: 1, seq: 128, heads: 4, head: 64, ..SMALL };
    let launch_of = |shape: Shape, o: &PlanOptions| {
        let plan = compile(&gpt2_attention(shape), &Binding::new(), o).unwrap();
        plan.steps.iter().find_map(|s| match s {
            Step::Kernel { kernel, grid, block, shared_bytes, .. } => {
                Some((*kernel, *grid, *block, *shared_bytes))
            }
            _ => None,
        })
    };
    let launch = |o: &PlanOptions| launch_of(shape, o);
    // The flash kernel, when on: 4 heads x 128 rows fill 132 SMs with neither 64- nor 32-row
    // blocks, so blocks of one warp (16 rows), 32 of them; K and V tiles of 32 rows of 64 + 4 f32.
    let flash_on = PlanOptions { flash_attention: true, ..PlanOptions::default() };
    let flash = (KernelId::AttentionFlashF32, [32, 1, 1], [32, 1, 1], 4 * 32 * 2 * 68);
    assert_eq!(launch(&flash_on), Some(flash));
    // At sequence 2048, 4-warp blocks: 4 * 2048 / 64 = 128 < 132 blocks, so 2-warp ones (256).
    let long = launch_of(Shape { seq: 2048, ..shape }, &flash_on);
    assert_eq!(long.map(|l| (l.1, l.2)), Some(([256, 1, 1], [64, 1, 1])));
    // A value head over 64 does not fit it.
    assert_eq!(launch_of(Shape { head: 72, ..shape }, &flash_on).map(|l| l.0), Some(KernelId::AttentionF32));
    // On the CUDA cores (32 tensor-core tiles would fill a quarter of 132 SMs): 4 * 128 / 2
    // blocks; 2 query rows of 64, then 4 warps' partial results of 64 + 3 for each row.
    let cuda = (KernelId::AttentionF32, [256, 1, 1], [ATTN_THREADS, 1, 1], 4 * (2 * 64 + 4 * 2 * 67));
    assert_eq!(launch(&PlanOptions::default()), Some(cuda));
    // On 64 SMs the tensor cores take it: 4 * 128 / 16 blocks of 4 warps, which split the keys;
    // each warp's partial results of 64 + 3 for each of 16 rows (f32).
    let tc = (KernelId::AttentionTcF32, [32, 1, 1], [ATTN_TC_THREADS, 1, 1], 4 * 4 * 16 * 67);
    let half = PlanOptions { sm_count: 64, ..PlanOptions::default() };
    assert_eq!(launch(&half), Some(tc));
    assert_eq!(launch(&PlanOptions { tensor_core_attention: false, ..half }), Some(cuda));
    // Sequence 512 fills 132 SMs with 128 tiles; a value head over 64 stays on the CUDA cores.
    assert_eq!(
        launch_of(Shape { seq: 512, ..shape }, &PlanOptions::default()).map(|l| l.1),
        Some([128, 1, 1])
    );
    let wide = Shape { seq: 512, head: 72, ..shape };
    assert_eq!(launch_of(wide, &PlanOptions::default()).map(|l| l.0), Some(KernelId::AttentionF32));
    // The largest value heads fit the default 48 KB; longer ones do not.
    assert!(attention_fits(256, 256) && attention_shared_bytes(256, 256) <= 48 * 1024);
    assert!(!attention_fits(64, 257) && attention_shared_bytes(64, 257) == 0);
}

#[test]
fn pytorchs_scaled_dot_product_attention_fuses_with_its_scales_and_nan_guard() {
    // The scales of Q and Kᵀ become one immediate of the score program (before the mask), and the
    // NaN guard the NaN-rows-zero bit: the whole pattern is one node reading the projection.
    // Kᵀ spelled through merged batch and heads (no view of the projection at batch 2) is
    // canonicalized into one transpose first, as `compile` does.
    let g = gpt2_attention(Shape { sdpa: true, ..SMALL });
    let infos = crate::shape_infer::infer(&g).unwrap();
    let g = crate::plan::canon::run(&g, &infos).expect("the merged transpose is rewritten");
    let infos = crate::shape_infer::infer(&g).unwrap();
    let (fused, _, _, attentions) = fuse(g.clone(), &infos, Vec::new(), Programs::new());
    assert_eq!(fused.nodes.len(), 1, "{fused:?}");
    let p = attentions.values().next().unwrap();
    let hd = (SMALL.heads * SMALL.head) as u64;
    assert_eq!(p.k, AttnView { offset: hd, strides: [SMALL.seq as u64 * 3 * hd, 4, 3 * hd, 1] });
    assert_eq!(p.n_instr, 2);
    let c = 1.0 / (SMALL.head as f32).sqrt().sqrt();
    let mul = kernels_gpu::abi::ew_binary_code(kernels_gpu::abi::BinaryOp::Mul);
    assert_eq!((p.instrs[0].op, p.instrs[0].a, p.instrs[0].b), (mul, ew_src::INPUT0, ew_src::IMM));
    assert_eq!(p.instrs[0].imm, c * c);
    assert_eq!(p.causal, ATTN_CAUSAL_SKIP | ATTN_NAN_ROWS_ZERO);
    // Without the guard's zero (any other constant), or with the probabilities read elsewhere,
    // the guard stays and so does the unfused softmax.
    let mut other = g.clone();
    let zero = other.values.iter().position(|v| v.name == "zero").map(|i| ValueId(i as u32)).unwrap();
    other.initializers.insert(zero, ConstTensor::scalar_f32(1.0));
    let infos = crate::shape_infer::infer(&other).unwrap();
    assert!(fuse(other, &infos, Vec::new(), Programs::new()).3.is_empty());
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    assert_eq!(kernels(&plan), [KernelId::AttentionF32], "{plan}");
}

#[test]
fn a_scale_joins_the_score_program_in_a_free_register() {
    use kernels_gpu::abi::{BinaryOp, EwInstr, ew_binary_code};
    let add = ew_binary_code(BinaryOp::Add);
    let x1 = ew_src::INPUT0 + 1;
    // `x0 + x1` into register 0: the scaled scores go to register 1 and the add reads them.
    let p = EwProgram {
        instrs: vec![EwInstr { op: add, dst: 0, a: ew_src::INPUT0, b: x1, ..Default::default() }],
        out_reg: 0,
    };
    let s = scaled_program(&p, 0.5).unwrap();
    assert_eq!(s.instrs.len(), 2);
    assert_eq!(
        (s.instrs[0].dst, s.instrs[0].a, s.instrs[0].b, s.instrs[0].imm),
        (1, ew_src::INPUT0, ew_src::IMM, 0.5)
    );
    assert_eq!((s.instrs[1].a, s.instrs[1].b, s.out_reg), (1, x1, 0));
    // An empty program (the raw scores) becomes the scale alone; a leading scale absorbs it.
    let empty = scaled_program(&EwProgram { instrs: Vec::new(), out_reg: ew_src::INPUT0 }, 0.25).unwrap();
    assert_eq!((empty.instrs.len(), empty.out_reg, empty.instrs[0].imm), (1, 0, 0.25));
    let twice = scaled_program(&empty, 2.0).unwrap();
    assert_eq!((twice.instrs.len(), twice.instrs[0].imm), (1, 0.5));
    // A leading scale whose program reads the raw scores again is not the place: a new register.
    let mul = ew_binary_code(BinaryOp::Mul);
    let both = EwProgram {
        instrs: vec![
            EwInstr { op: mul, dst: 0, a: ew_src::INPUT0, b: ew_src::IMM, imm: 2.0, ..Default::default() },
            EwInstr { op: add, dst: 0, a: 0, b: ew_src::INPUT0, ..Default::default() },
        ],
        out_reg: 0,
    };
    let s = scaled_program(&both, 0.5).unwrap();
    assert_eq!((s.instrs.len(), s.instrs[0].dst, s.instrs[1].imm), (3, 1, 2.0));
    assert_eq!((s.instrs[1].a, s.instrs[2].b), (1, 1), "every read of the scores reads the scaled ones");
    // Every register taken: no room.
    let full = EwProgram {
        instrs: (0..4)
            .map(|r| EwInstr { op: add, dst: r, a: ew_src::INPUT0, b: x1, ..Default::default() })
            .collect(),
        out_reg: 3,
    };
    assert!(scaled_program(&full, 0.5).is_none());
}

/// Grouped-query attention as transformers writes it (`repeat_kv`: K and V `(B, Hkv, S, D)`
/// unsqueezed, expanded over groups of `g` query heads and reshaped to `(B, Hkv·g, S, D)`): one
/// launch reading each key head once per group (`kv_group`), no Expand copied.
#[test]
fn grouped_query_heads_repeated_by_expand_read_their_key_head() {
    let (b, h, kvh, s, d) = (2usize, 4usize, 2usize, 5usize, 8usize);
    let g_ = h / kvh;
    let mut g = Graph::new();
    let q = g.input("q", DType::F32, vec![Dim::Known(b), Dim::Known(h), Dim::Known(s), Dim::Known(d)]);
    let shape = |g: &mut Graph, name: &str, dims: &[i64]| {
        g.initializer(name, ConstTensor::from_i64(&[dims.len()], dims).unwrap())
    };
    let axis2 = shape(&mut g, "axis2", &[2]);
    let wide = shape(&mut g, "wide", &[b as i64, kvh as i64, g_ as i64, s as i64, d as i64]);
    let heads = shape(&mut g, "heads", &[b as i64, h as i64, s as i64, d as i64]);
    let mut repeated = Vec::new();
    for name in ["k", "v"] {
        let x = g.input(name, DType::F32, vec![Dim::Known(b), Dim::Known(kvh), Dim::Known(s), Dim::Known(d)]);
        let u = g.op1(Op::Unsqueeze(Default::default()), &[x, axis2]);
        let e = g.op1(Op::Expand, &[u, wide]);
        repeated.push(g.op1(Op::Reshape(Default::default()), &[e, heads]));
    }
    let kt = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 1, 3, 2]) }), &[repeated[0]]);
    let scores = g.op1(Op::MatMul, &[q, kt]);
    let probs = g.op1(Op::Softmax(Softmax { axis: -1 }), &[scores]);
    let o = g.op1(Op::MatMul, &[probs, repeated[1]]);
    g.output(o);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    assert_eq!(kernels(&plan), [KernelId::AttentionF32], "{plan}");
    let infos = crate::shape_infer::infer(&g).unwrap();
    let (_, _, _, attentions) = fuse(g.clone(), &infos, Vec::new(), Programs::new());
    let p = attentions.values().next().unwrap();
    let (sd, hs) = ((s * d) as u64, (kvh * s * d) as u64);
    assert_eq!((p.heads, p.kv_group), (h as u32, g_ as u32));
    assert_eq!(p.k, AttnView { offset: 0, strides: [hs, sd, d as u64, 1] });
    assert_eq!(p.v, AttnView { offset: 0, strides: [hs, sd, d as u64, 1] });
}
