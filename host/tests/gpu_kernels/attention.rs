//! The fused attention kernels (`attention_flash_f32` and `attention_tc_f32` on the tensor cores
//! and `attention_f32` on the CUDA cores, through the planner's attention fusion) against
//! the CPU reference running the unfused graph: GPT-2's layout (Q, K, V split out of one
//! projection and reshaped / transposed per head, the output transposed back, all read and written
//! in place) with a causal mask, BERT's layout (per-head transposes of separate projections) with
//! an additive padding mask broadcast over heads and rows, no score program at all, a value head
//! size different from the key's, sequence lengths around the 32-key block and up to a few
//! thousand, one and several heads, and fully masked rows (NaN, as the unfused softmax gives).
//! Tolerance: ‖gpu − ref‖ / ‖ref‖ ≤ 1e-4 and no element off by more than 1e-4 · max |ref|; NaNs
//! must sit exactly where the reference has them.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{Softmax, Split, Transpose};
use planner::{ConstTensor, DType, Dim, Graph, Op, ValueId};

use crate::ctx;

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

fn transpose(g: &mut Graph, x: ValueId, perm: [usize; 4]) -> ValueId {
    g.op1(Op::Transpose(Transpose { perm: Some(perm.to_vec()) }), &[x])
}

fn reshape(g: &mut Graph, name: &str, x: ValueId, dims: &[usize]) -> ValueId {
    let dims_i64: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let shape = g.initializer(name, ConstTensor::from_i64(&[dims.len()], &dims_i64).unwrap());
    g.op1(Op::Reshape(Default::default()), &[x, shape])
}

/// Runs `g` on the GPU three times, with the default options (attention fused, on the tensor
/// cores where the planner takes `attention_tc_f32` or `attention_small_f32`), with the flash
/// kernel on (`attention_flash_f32` where it fits), and with attention on the CUDA cores
/// (`attention_f32`), and on the reference; checks each plan has its attention launch and no
/// `softmax_f32`, and the outputs agree. Returns whether the default plan ran on the tensor cores.
fn check(what: &str, g: Graph, inputs: Vec<(String, HostTensor)>) -> bool {
    let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let flash = SessionOptions { flash_attention: true, ..SessionOptions::default() };
    let cores = SessionOptions { tensor_core_attention: false, ..SessionOptions::default() };
    let mut tensor_cores = false;
    for (i, (options, kernel)) in
        [(SessionOptions::default(), "attention"), (flash, "attention"), (cores, "attention_f32")]
            .into_iter()
            .enumerate()
    {
        let mut s = Session::new(ctx(), g.clone(), options).unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
        let plan = s.last_plan().unwrap().to_string();
        assert!(plan.contains(kernel) && !plan.contains("softmax_f32"), "{what}: not fused:\n{plan}");
        let name = ["attention_flash_f32", "attention_tc_f32", "attention_small_f32"]
            .into_iter()
            .find(|k| plan.contains(k))
            .unwrap_or("attention_f32");
        if i == 0 {
            tensor_cores = name != "attention_f32";
        }
        compare(&format!("{what} ({name})"), &got, &want);
    }
    tensor_cores
}

/// `got` against `want`: NaNs in the same places, the tolerance of the module doc elsewhere.
fn compare(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    for ((name, g), (_, w)) in got.iter().zip(want) {
        assert_eq!(g.shape(), w.shape(), "{what}: `{name}` shape");
        let (gv, wv) = (g.f32s("gpu").unwrap(), w.data().to_f64s());
        let (mut diff, mut norm, mut scale) = (0.0f64, 0.0f64, 0.0f64);
        for (i, (&a, &b)) in gv.iter().zip(&wv).enumerate() {
            assert_eq!(a.is_nan(), b.is_nan(), "{what}: `{name}`[{i}]: gpu {a}, reference {b}");
            if b.is_nan() {
                continue;
            }
            diff += (a as f64 - b) * (a as f64 - b);
            norm += b * b;
            scale = scale.max(b.abs());
        }
        let rel = diff.sqrt() / norm.sqrt().max(f64::MIN_POSITIVE);
        assert!(rel <= 1e-4, "{what}: `{name}` relative error {rel:e}");
        for (i, (&a, &b)) in gv.iter().zip(&wv).enumerate() {
            if !b.is_nan() {
                let err = (a as f64 - b).abs();
                assert!(err <= 1e-4 * scale.max(1e-30), "{what}: `{name}`[{i}]: gpu {a}, reference {b}");
            }
        }
    }
}

/// GPT-2's attention: `qkv [B, S, 3·H·D]` split, reshaped to heads and transposed, scores scaled
/// by `1/√D` and masked by `mask [1, 1, S, S]` (added), softmax, `· V`, transposed and reshaped
/// back to `[B, S, H·D]`.
fn gpt2_layout(b: usize, n: usize, h: usize, d: usize, mask: &[f32]) -> Graph {
    let hd = h * d;
    let mut g = Graph::new();
    let qkv = g.input("qkv", DType::F32, known(&[b, n, 3 * hd]));
    let parts = g.push(Op::Split(Split { axis: 2, split: None, num_outputs: Some(3) }), &[qkv], 3);
    let mut ops = Vec::new();
    for (i, perm) in [[0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]].into_iter().enumerate() {
        let r = reshape(&mut g, &format!("heads{i}"), parts[i], &[b, n, h, d]);
        ops.push(transpose(&mut g, r, perm));
    }
    let scores = g.op1(Op::MatMul, &[ops[0], ops[1]]);
    let root = g.initializer("root", ConstTensor::scalar_f32((d as f32).sqrt()));
    let scaled = g.op1(Op::Div, &[scores, root]);
    let mask = g.initializer("mask", ConstTensor::from_f32(&[1, 1, n, n], mask).unwrap());
    let masked = g.op1(Op::Add, &[scaled, mask]);
    let probs = g.op1(Op::Softmax(Softmax { axis: -1 }), &[masked]);
    let o = g.op1(Op::MatMul, &[probs, ops[2]]);
    let t = transpose(&mut g, o, [0, 2, 1, 3]);
    let y = reshape(&mut g, "merged", t, &[b, n, hd]);
    g.output(y);
    g
}

fn causal(n: usize) -> Vec<f32> {
    (0..n * n).map(|k| if k % n > k / n { f32::NEG_INFINITY } else { 0.0 }).collect()
}

#[test]
fn gpt2_layout_with_a_causal_mask_matches_the_reference() {
    let mut rng = Rng::new(0xa77e);
    for (b, n, h, d) in [
        (1, 1, 1, 4),
        (1, 5, 3, 4),
        (2, 31, 2, 16),
        (1, 32, 4, 64),
        (1, 33, 4, 64),
        (2, 100, 1, 32),
        (1, 257, 3, 64),
    ] {
        let g = gpt2_layout(b, n, h, d, &causal(n));
        let x = rng.tensor(&[b, n, 3 * h * d], -1.0, 1.0);
        check(&format!("gpt2 b={b} s={n} h={h} d={d}"), g, vec![("qkv".into(), x)]);
    }
}

#[test]
fn long_sequences_loop_over_key_blocks() {
    let mut rng = Rng::new(0x10c);
    for (n, h, d) in [(1030, 2, 64), (2049, 1, 32)] {
        let g = gpt2_layout(1, n, h, d, &causal(n));
        let x = rng.tensor(&[1, n, 3 * h * d], -1.0, 1.0);
        // 130 and 129 query tiles: on the tensor cores.
        assert!(check(&format!("long s={n} h={h} d={d}"), g, vec![("qkv".into(), x)]));
    }
}

#[test]
fn fully_masked_rows_are_nan_like_the_unfused_softmax() {
    let mut rng = Rng::new(0x4a4);
    let n = 40;
    // Rows 0 and 35 masked everywhere; row 7 masked but for its last key (past the first block).
    let mut mask = causal(n);
    for j in 0..n {
        mask[j] = f32::NEG_INFINITY;
        mask[35 * n + j] = f32::NEG_INFINITY;
        mask[7 * n + j] = if j == n - 1 { 0.0 } else { f32::NEG_INFINITY };
    }
    let g = gpt2_layout(1, n, 2, 8, &mask);
    let x = rng.tensor(&[1, n, 3 * 2 * 8], -1.0, 1.0);
    check("fully masked rows", g, vec![("qkv".into(), x)]);
    // The same mask over 30 heads: 90 query tiles, on the tensor cores.
    let g = gpt2_layout(1, n, 30, 8, &mask);
    let x = rng.tensor(&[1, n, 3 * 30 * 8], -1.0, 1.0);
    assert!(check("fully masked rows, 30 heads", g, vec![("qkv".into(), x)]));
}

/// A constant causal mask lets the kernels skip the 32-key groups past a block's last row: a NaN
/// key (token 40, head 0) then leaves the rows that hide it finite up to the group boundary (rows
/// 0..32, the reference without the NaN), where the reference and the unskipped kernels give NaN
/// for the whole head; with `skip_hidden_keys` off every output matches the reference.
#[test]
fn a_nan_key_past_the_diagonal_reaches_only_the_rows_that_read_its_group() {
    let (n, h, d, poisoned) = (70, 30, 8, 40);
    let g = gpt2_layout(1, n, h, d, &causal(n));
    let clean = Rng::new(0x5c1).tensor(&[1, n, 3 * h * d], -1.0, 1.0);
    let mut x = clean.f32s("qkv").unwrap().to_vec();
    x[poisoned * 3 * h * d + h * d] = f32::NAN;
    let x = HostTensor::new(vec![1, n, 3 * h * d], x).unwrap();
    let want = host::reference::eval(&g, &[("qkv".into(), x.clone())]).unwrap();
    let finite = host::reference::eval(&g, &[("qkv".into(), clean)]).unwrap();
    let (w, f) = (want[0].1.data().to_f64s(), finite[0].1.data().to_f64s());
    // Head 0 of rows below 32 from the clean run, everything else as the reference.
    let skipped: Vec<f32> = (0..w.len())
        .map(|e| if (e / (h * d)) < 32 && e % (h * d) < d { f[e] as f32 } else { w[e] as f32 })
        .collect();
    let skipped = vec![(want[0].0.clone(), HostTensor::new(want[0].1.shape().to_vec(), skipped).unwrap())];
    let cores = SessionOptions { tensor_core_attention: false, ..SessionOptions::default() };
    for (options, expect, what) in [
        (SessionOptions::default(), &skipped, "tensor cores, skipped"),
        (cores, &skipped, "CUDA cores, skipped"),
        (SessionOptions { skip_hidden_keys: false, ..SessionOptions::default() }, &want, "tensor cores"),
        (SessionOptions { skip_hidden_keys: false, ..cores }, &want, "CUDA cores"),
    ] {
        let mut s = Session::new(ctx(), g.clone(), options).unwrap();
        let got = s.run(&[("qkv".into(), x.clone())]).unwrap();
        compare(&format!("NaN key, {what}"), &got, expect);
    }
}

/// Shapes whose 16-row query tiles fill at least half of a 132-SM H200 (the planner's condition
/// for `attention_tc_f32`, and `attention_small_f32` for heads up to 16): ragged rows and keys,
/// head sizes from 4 to 64 (not multiples of the
/// 32-wide k round), a value head different from the key's, the ONNX causal flag and a key
/// count below the query count. Each must run on the tensor cores and match the reference (and
/// the CUDA-core kernel).
#[test]
fn attention_that_fills_the_device_runs_on_the_tensor_cores() {
    let mut rng = Rng::new(0x7c0e);
    for (b, n, h, d) in [(2, 5, 40, 4), (1, 31, 40, 16), (2, 33, 20, 64), (1, 100, 20, 32), (1, 129, 9, 40)] {
        let g = gpt2_layout(b, n, h, d, &causal(n));
        let x = rng.tensor(&[b, n, 3 * h * d], -1.0, 1.0);
        assert!(check(&format!("tc gpt2 b={b} s={n} h={h} d={d}"), g, vec![("qkv".into(), x)]));
    }
    // (The last: a TICL-style encoder's heads of 8 over 300 tracksters, ten key groups a warp.)
    for (b, h, sq, skv, d, dv) in
        [(2, 24, 40, 40, 16, 16), (1, 40, 17, 5, 8, 24), (3, 12, 45, 45, 8, 40), (1, 4, 300, 300, 8, 8)]
    {
        let a = planner::op::Attention { is_causal: b != 3, ..Default::default() };
        let (g, inputs) =
            onnx_attention(a, [&[b, h, sq, d], &[b, h, skv, d], &[b, h, skv, dv]], None, &mut rng);
        let what = format!("tc onnx b={b} h={h} sq={sq} skv={skv} d={d} dv={dv}");
        assert!(check(&what, g, inputs), "{what}: not on the tensor cores");
    }
}

/// `attention_flash_f32` (on by option) at each of its block sizes (1, 2 and 4 warps, picked by
/// how many blocks fill the device) and both tile copies (16-byte rows, element by element where a head is no
/// multiple of four or K is read transposed), heads from 3 to 64 with the value head different
/// from the key's, query and key counts no multiple of 16 or 32, causal with fewer keys than
/// queries, grouped heads and an additive mask with a fully masked row; every launch on the flash
/// kernel, matching the reference, the default kernels and the CUDA cores.
#[test]
fn flash_attention_matches_the_reference_at_every_block_size() {
    let mut rng = Rng::new(0xf1a5);
    // (b, hq, hkv, sq, skv, d, dv, causal): 4 warps (b * hq * ceil(sq / 64) >= 132 blocks), 2
    // (BERT's and GPT-2's attention at batch 16), 2, then 1.
    for (b, hq, hkv, sq, skv, d, dv, causal) in [
        (3, 48, 48, 70, 70, 16, 16, true),
        (16, 4, 4, 128, 128, 64, 64, false),
        (2, 40, 20, 33, 100, 40, 24, false),
        (1, 4, 4, 300, 300, 8, 8, true),
        (1, 3, 1, 45, 29, 6, 10, true),
        (2, 2, 2, 17, 65, 3, 64, false),
    ] {
        let a = planner::op::Attention { is_causal: causal, ..Default::default() };
        let shapes: [&[usize]; 3] = [&[b, hq, sq, d], &[b, hkv, skv, d], &[b, hkv, skv, dv]];
        let (g, inputs) = onnx_attention(a, shapes, None, &mut rng);
        let what = format!("flash b={b} hq={hq} hkv={hkv} sq={sq} skv={skv} d={d} dv={dv} causal={causal}");
        let flash = SessionOptions { flash_attention: true, ..SessionOptions::default() };
        let mut s = Session::new(ctx(), g.clone(), flash).unwrap();
        s.run(&inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
        let plan = s.last_plan().unwrap().to_string();
        assert!(plan.contains("attention_flash_f32"), "{what}:\n{plan}");
        // (check runs the flash kernel as its second configuration.)
        check(&what, g, inputs);
    }
    // An additive (B, 1, Sq, Skv) mask with -inf entries and a fully masked row (NaN).
    let (b, h, sq, skv, d) = (2, 3, 40, 50, 32);
    let n = b * sq * skv;
    let mut data: Vec<f32> =
        (0..n).map(|i| if i % 11 == 4 { f32::NEG_INFINITY } else { (i % 5) as f32 * 0.2 }).collect();
    data[3 * skv..4 * skv].iter_mut().for_each(|x| *x = f32::NEG_INFINITY);
    let a = planner::op::Attention { scale: Some(0.4), ..Default::default() };
    let shapes: [&[usize]; 3] = [&[b, h, sq, d], &[b, h, skv, d], &[b, h, skv, d]];
    let (g, inputs) = onnx_attention(a, shapes, Some((&[b, 1, sq, skv], data)), &mut rng);
    check("flash with an additive mask", g, inputs);
}

/// BERT's attention: separate `[B, S, H·D]` projections reshaped to heads, Q and V transposed to
/// `[B, H, S, D]` and K to `[B, H, D, S]`, scores scaled and added to `mask [B, 1, 1, S]`.
#[test]
fn bert_layout_with_an_additive_padding_mask_matches_the_reference() {
    let mut rng = Rng::new(0xbe27);
    for (b, n, h, d, dv) in [(2, 12, 4, 16, 16), (3, 45, 2, 8, 40), (1, 64, 1, 128, 256)] {
        let mut g = Graph::new();
        let q = g.input("q", DType::F32, known(&[b, n, h * d]));
        let k = g.input("k", DType::F32, known(&[b, n, h * d]));
        let v = g.input("v", DType::F32, known(&[b, n, h * dv]));
        let mask = g.input("mask", DType::F32, known(&[b, 1, 1, n]));
        let qh = reshape(&mut g, "qh", q, &[b, n, h, d]);
        let kh = reshape(&mut g, "kh", k, &[b, n, h, d]);
        let vh = reshape(&mut g, "vh", v, &[b, n, h, dv]);
        let (qt, kt, vt) = (
            transpose(&mut g, qh, [0, 2, 1, 3]),
            transpose(&mut g, kh, [0, 2, 3, 1]),
            transpose(&mut g, vh, [0, 2, 1, 3]),
        );
        let scores = g.op1(Op::MatMul, &[qt, kt]);
        let scale = g.initializer("scale", ConstTensor::scalar_f32(1.0 / (d as f32).sqrt()));
        let scaled = g.op1(Op::Mul, &[scores, scale]);
        let masked = g.op1(Op::Add, &[scaled, mask]);
        let probs = g.op1(Op::Softmax(Softmax { axis: 3 }), &[masked]);
        let o = g.op1(Op::MatMul, &[probs, vt]);
        let t = transpose(&mut g, o, [0, 2, 1, 3]);
        let y = reshape(&mut g, "merged", t, &[b, n, h * dv]);
        g.output(y);
        // Batch row r keeps its first n - 3r keys (at least one).
        let mask_data: Vec<f32> =
            (0..b * n).map(|i| if i % n < (n - 3 * (i / n)).max(1) { 0.0 } else { -10000.0 }).collect();
        let inputs = vec![
            ("q".into(), rng.tensor(&[b, n, h * d], -1.0, 1.0)),
            ("k".into(), rng.tensor(&[b, n, h * d], -1.0, 1.0)),
            ("v".into(), rng.tensor(&[b, n, h * dv], -1.0, 1.0)),
            ("mask".into(), HostTensor::new(vec![b, 1, 1, n], mask_data).unwrap()),
        ];
        check(&format!("bert b={b} s={n} h={h} d={d} dv={dv}"), g, inputs);
    }
}

/// `softmax(Q Kᵀ) V` on contiguous 4-D inputs, no score program, K given transposed.
#[test]
fn a_bare_softmax_between_the_matmuls_matches_the_reference() {
    let mut rng = Rng::new(0xba2e);
    for (b, h, n, m, d) in [(1, 1, 1, 1, 1), (2, 3, 7, 70, 24), (1, 2, 65, 33, 64)] {
        let mut g = Graph::new();
        let q = g.input("q", DType::F32, known(&[b, h, n, d]));
        let kt = g.input("kt", DType::F32, known(&[b, h, d, m]));
        let v = g.input("v", DType::F32, known(&[b, h, m, d]));
        let s = g.op1(Op::MatMul, &[q, kt]);
        let p = g.op1(Op::Softmax(Softmax { axis: -1 }), &[s]);
        let y = g.op1(Op::MatMul, &[p, v]);
        g.output(y);
        let inputs = vec![
            ("q".into(), rng.tensor(&[b, h, n, d], -2.0, 2.0)),
            ("kt".into(), rng.tensor(&[b, h, d, m], -2.0, 2.0)),
            ("v".into(), rng.tensor(&[b, h, m, d], -1.0, 1.0)),
        ];
        check(&format!("bare b={b} h={h} q={n} kv={m} d={d}"), g, inputs);
    }
}

/// One ONNX `Attention` node over graph inputs `q`, `k`, `v` (and `mask`, f32, when given).
fn onnx_attention(
    a: planner::op::Attention,
    shapes: [&[usize]; 3],
    mask: Option<(&[usize], Vec<f32>)>,
    rng: &mut Rng,
) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let mut ins = Vec::new();
    let mut inputs = Vec::new();
    for (name, s) in ["q", "k", "v"].into_iter().zip(shapes) {
        ins.push(Some(g.input(name, DType::F32, known(s))));
        inputs.push((name.to_string(), rng.tensor(s, -1.5, 1.5)));
    }
    if let Some((ms, data)) = mask {
        ins.push(Some(g.input("mask", DType::F32, known(ms))));
        inputs.push(("mask".into(), HostTensor::new(ms.to_vec(), data).unwrap()));
    }
    let y = g.push_opt(Op::Attention(a), ins, 1);
    g.output(y[0]);
    (g, inputs)
}

fn attn(q_heads: Option<usize>, kv_heads: Option<usize>) -> planner::op::Attention {
    planner::op::Attention { q_num_heads: q_heads, kv_num_heads: kv_heads, ..Default::default() }
}

/// ONNX `Attention` on 4-D `(B, H, S, D)` and 3-D `(B, S, H·D)` operands, default and explicit
/// scales, Sq ≠ Skv, a value head size different from the key's, keys past one chunk.
#[test]
fn onnx_attention_4d_and_3d_match_the_reference() {
    let mut rng = Rng::new(0x0a77);
    for (b, h, sq, skv, d, dv, scale) in [
        (1, 1, 1, 1, 4, 4, None),
        (2, 3, 4, 6, 8, 8, None),
        (1, 2, 33, 70, 16, 24, Some(0.3)),
        (2, 1, 9, 150, 64, 64, Some(0.25)),
    ] {
        let a = planner::op::Attention { scale, ..Default::default() };
        let (g, inputs) =
            onnx_attention(a, [&[b, h, sq, d], &[b, h, skv, d], &[b, h, skv, dv]], None, &mut rng);
        check(&format!("onnx 4d b={b} h={h} sq={sq} skv={skv} d={d} dv={dv} scale={scale:?}"), g, inputs);
        let a = planner::op::Attention { scale, ..attn(Some(h), Some(h)) };
        let (g, inputs) =
            onnx_attention(a, [&[b, sq, h * d], &[b, skv, h * d], &[b, skv, h * dv]], None, &mut rng);
        check(&format!("onnx 3d b={b} h={h} sq={sq} skv={skv} d={d} dv={dv} scale={scale:?}"), g, inputs);
    }
}

/// `is_causal` masks keys `j > i` (top-left aligned without a past): square, fewer queries than
/// keys, more queries than keys, 4-D and 3-D, one and several key chunks.
#[test]
fn onnx_attention_causal_matches_the_reference() {
    let mut rng = Rng::new(0xca05);
    for (b, h, sq, skv, d) in
        [(1, 2, 7, 7, 8), (2, 3, 40, 40, 16), (1, 2, 5, 12, 8), (1, 1, 12, 5, 8), (1, 2, 70, 130, 32)]
    {
        let a = planner::op::Attention { is_causal: true, ..Default::default() };
        let (g, inputs) =
            onnx_attention(a, [&[b, h, sq, d], &[b, h, skv, d], &[b, h, skv, d]], None, &mut rng);
        check(&format!("onnx causal 4d b={b} h={h} sq={sq} skv={skv} d={d}"), g, inputs);
        let a = planner::op::Attention { is_causal: true, ..attn(Some(h), Some(h)) };
        let (g, inputs) =
            onnx_attention(a, [&[b, sq, h * d], &[b, skv, h * d], &[b, skv, h * d]], None, &mut rng);
        check(&format!("onnx causal 3d b={b} h={h} sq={sq} skv={skv} d={d}"), g, inputs);
    }
}

/// A float `attn_mask` added to the scaled scores, broadcast from `(Skv)`, `(Sq, Skv)`,
/// `(H, Sq, Skv)` (3-D, right-aligned) and `(B, 1, Sq, Skv)`, with `-inf` entries (a fully
/// masked row is NaN, as in the reference), alone and with the causal mask.
#[test]
fn onnx_attention_with_an_additive_mask_matches_the_reference() {
    let mut rng = Rng::new(0x3a5c);
    let (b, h, sq, skv, d) = (2, 3, 6, 10, 8);
    for (ms, causal) in [
        (vec![skv], false),
        (vec![sq, skv], false),
        (vec![h, sq, skv], true),
        (vec![b, 1, sq, skv], false),
        (vec![b, 1, sq, skv], true),
    ] {
        let n: usize = ms.iter().product();
        let data: Vec<f32> = (0..n)
            .map(|i| match i % 7 {
                3 => f32::NEG_INFINITY,
                5 => -2.5,
                _ => (i % 5) as f32 * 0.25,
            })
            .collect();
        let mut data = data;
        if ms.len() >= 2 {
            // Row 1 of the first (batch, head) masked everywhere: NaN.
            data[skv..2 * skv].iter_mut().for_each(|x| *x = f32::NEG_INFINITY);
        }
        let a = planner::op::Attention { is_causal: causal, scale: Some(0.7), ..Default::default() };
        let shapes: [&[usize]; 3] = [&[b, h, sq, d], &[b, h, skv, d], &[b, h, skv, d]];
        let (g, inputs) = onnx_attention(a, shapes, Some((&ms, data)), &mut rng);
        check(&format!("onnx mask {ms:?} causal={causal}"), g, inputs);
    }
}

/// Grouped-query attention (`kv_group`): 2 KV heads under 4 and 6 query heads, 4-D and 3-D, with
/// and without the causal mask.
#[test]
fn onnx_attention_grouped_query_heads_match_the_reference() {
    let mut rng = Rng::new(0x6a0a);
    for (b, hq, hkv, sq, skv, d, causal) in [
        (1, 4, 2, 5, 5, 8, false),
        (2, 6, 2, 9, 13, 16, true),
        (1, 6, 2, 33, 65, 32, false),
        (2, 4, 2, 12, 7, 8, true),
    ] {
        let a = planner::op::Attention { is_causal: causal, ..Default::default() };
        let shapes: [&[usize]; 3] = [&[b, hq, sq, d], &[b, hkv, skv, d], &[b, hkv, skv, d]];
        let (g, inputs) = onnx_attention(a, shapes, None, &mut rng);
        check(&format!("onnx gqa 4d hq={hq} hkv={hkv} sq={sq} skv={skv} causal={causal}"), g, inputs);
        let a = planner::op::Attention { is_causal: causal, ..attn(Some(hq), Some(hkv)) };
        let shapes: [&[usize]; 3] = [&[b, sq, hq * d], &[b, skv, hkv * d], &[b, skv, hkv * d]];
        let (g, inputs) = onnx_attention(a, shapes, None, &mut rng);
        check(&format!("onnx gqa 3d hq={hq} hkv={hkv} sq={sq} skv={skv} causal={causal}"), g, inputs);
    }
}

/// `softcap · tanh(s / softcap)` on the scaled scores, before the mask (a `-inf` mask entry stays
/// `-inf`), alone, with a mask, causal and grouped.
#[test]
fn onnx_attention_softcap_matches_the_reference() {
    let mut rng = Rng::new(0x50f7);
    let (b, h, sq, skv, d) = (2, 4, 8, 11, 16);
    let ms = [sq, skv];
    let mask: Vec<f32> = (0..sq * skv).map(|i| if i % 4 == 1 { f32::NEG_INFINITY } else { 0.5 }).collect();
    for (softcap, scale, masked, causal, hkv) in
        [(2.0, None, false, false, h), (0.5, Some(3.0), true, false, h), (5.0, None, true, true, 2)]
    {
        let a = planner::op::Attention { softcap, scale, is_causal: causal, ..Default::default() };
        let shapes: [&[usize]; 3] = [&[b, h, sq, d], &[b, hkv, skv, d], &[b, hkv, skv, d]];
        let m = masked.then(|| (&ms[..], mask.clone()));
        let (g, inputs) = onnx_attention(a, shapes, m, &mut rng);
        check(
            &format!("onnx softcap={softcap} scale={scale:?} mask={masked} causal={causal} hkv={hkv}"),
            g,
            inputs,
        );
    }
}

#[test]
fn rotary_embedding_matches_the_reference() {
    use crate::indexing::{compare, known};
    let mut rng = Rng::new(0x407a);
    // (X dims, num_heads, rotary dim, interleaved, cache kind: 0 positions, 1 by sequence, 2 per token)
    type Case = (&'static [usize], Option<usize>, usize, bool, u8);
    let cases: [Case; 6] = [
        (&[2, 3, 5, 8], None, 0, false, 0),
        (&[2, 3, 5, 8], None, 4, true, 0),
        (&[1, 7, 24], Some(3), 0, true, 1),
        (&[2, 4, 32], Some(2), 8, false, 2),
        (&[1, 2, 130, 64], None, 0, false, 1),
        (&[3, 9, 12], Some(2), 6, false, 0),
    ];
    for (xd, heads, rot, interleaved, kind) in cases {
        let (b, s, d) = match (xd, heads) {
            (&[b, _, s, d], None) => (b, s, d),
            (&[b, s, hidden], Some(h)) => (b, s, hidden / h),
            _ => unreachable!(),
        };
        let half = if rot == 0 { d / 2 } else { rot / 2 };
        let rows = s + 3;
        let cache_dims: Vec<usize> = if kind == 2 { vec![b, s, half] } else { vec![rows, half] };
        let n: usize = cache_dims.iter().product();
        let angles: Vec<f32> = (0..n).map(|_| rng.uniform(-3.0, 3.0)).collect();
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(xd));
        let cos = g.initializer(
            "cos",
            ConstTensor::from_f32(&cache_dims, &angles.iter().map(|a| a.cos()).collect::<Vec<_>>()).unwrap(),
        );
        let sin = g.initializer(
            "sin",
            ConstTensor::from_f32(&cache_dims, &angles.iter().map(|a| a.sin()).collect::<Vec<_>>()).unwrap(),
        );
        let mut ins = vec![x, cos, sin];
        let mut inputs = vec![("x".to_string(), rng.tensor(xd, -1.0, 1.0))];
        if kind == 0 {
            ins.push(g.input("pos", DType::I64, known(&[b, s])));
            let p: Vec<i64> = (0..b * s).map(|_| (rng.next_u64() % rows as u64) as i64).collect();
            inputs.push(("pos".into(), HostTensor::new(vec![b, s], p).unwrap()));
        }
        let attrs = planner::op::RotaryEmbedding {
            interleaved,
            num_heads: heads,
            rotary_embedding_dim: rot,
            ..Default::default()
        };
        let y = g.op1(Op::RotaryEmbedding(attrs), &ins);
        g.output(y);
        let plan = compare(
            &format!("RotaryEmbedding {xd:?} rot {rot} interleaved {interleaved} cache {kind}"),
            g,
            &inputs,
            1e-5,
        );
        assert!(plan.contains("rotary_f32"), "{plan}");
    }
}

/// Full-width caches (`rotary_lift`: an exporter's spelled-out `x·cos + rotate_half(x)·sin`):
/// caches broadcast over the heads, the batch or both, 4-D and 3-D X, whole and partial rotation.
#[test]
fn rotary_embedding_with_full_width_caches_matches_the_reference() {
    use crate::indexing::{compare, known};
    let mut rng = Rng::new(0x4f11);
    // (X dims, num_heads, rotary dim, cache dims)
    type Case = (&'static [usize], Option<usize>, usize, &'static [usize]);
    let cases: [Case; 5] = [
        (&[2, 3, 5, 8], None, 8, &[2, 1, 5, 8]),
        (&[2, 3, 5, 8], None, 4, &[5, 4]),
        (&[2, 5, 24], Some(3), 8, &[2, 1, 5, 8]),
        (&[1, 64, 256], Some(4), 32, &[1, 1, 64, 32]),
        (&[3, 2, 7, 6], None, 6, &[3, 2, 7, 6]),
    ];
    for (xd, heads, rot, cache_dims) in cases {
        let n: usize = cache_dims.iter().product();
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(xd));
        let mut cache = |name| {
            let v: Vec<f32> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            g.initializer(name, ConstTensor::from_f32(cache_dims, &v).unwrap())
        };
        let (cos, sin) = (cache("cos"), cache("sin"));
        let attrs = planner::op::RotaryEmbedding {
            num_heads: heads,
            rotary_embedding_dim: rot,
            full_caches: true,
            ..Default::default()
        };
        let y = g.op1(Op::RotaryEmbedding(attrs), &[x, cos, sin]);
        g.output(y);
        let inputs = vec![("x".to_string(), rng.tensor(xd, -1.0, 1.0))];
        let plan =
            compare(&format!("RotaryEmbedding {xd:?} rot {rot} caches {cache_dims:?}"), g, &inputs, 1e-6);
        assert!(plan.contains("rotary_f32"), "{plan}");
    }
}

/// ONNX `Attention` with a KV cache: `past_key` / `past_value` concatenated with K / V into the
/// `present_key` / `present_value` outputs, the causal mask aligned bottom-right (`j > i + past`);
/// 4-D and 3-D Q/K/V, grouped-query heads, a mask over all the keys, decoding one token.
#[test]
fn onnx_attention_with_a_kv_cache_matches_the_reference() {
    let mut rng = Rng::new(0x6b76);
    // (batch, q heads, kv heads, new rows, past rows, head size, causal, masked, 3-D)
    for (b, hq, hkv, s, past, d, causal, masked, three_d) in [
        (1, 2, 2, 1, 7, 8, true, false, false),
        (2, 4, 2, 3, 5, 16, true, false, false),
        (1, 3, 3, 4, 6, 8, false, true, false),
        (2, 2, 1, 2, 9, 8, true, false, true),
        (1, 4, 4, 1, 130, 32, true, true, true),
    ] {
        let a = planner::op::Attention {
            is_causal: causal,
            ..if three_d { attn(Some(hq), Some(hkv)) } else { attn(None, None) }
        };
        let shape = |h: usize, seq: usize| if three_d { vec![b, seq, h * d] } else { vec![b, h, seq, d] };
        let mut g = Graph::new();
        let mut inputs = Vec::new();
        let mut ins = Vec::new();
        let total = past + s;
        let named: [(&str, Vec<usize>); 6] = [
            ("q", shape(hq, s)),
            ("k", shape(hkv, s)),
            ("v", shape(hkv, s)),
            ("mask", vec![s, total]),
            ("past_k", vec![b, hkv, past, d]),
            ("past_v", vec![b, hkv, past, d]),
        ];
        for (name, dims) in named {
            if name == "mask" && !masked {
                ins.push(None);
                continue;
            }
            ins.push(Some(g.input(name, DType::F32, known(&dims))));
            inputs.push((name.to_string(), rng.tensor(&dims, -1.5, 1.5)));
        }
        let outs = g.push_opt(Op::Attention(a), ins, 3);
        for o in outs {
            g.output(o);
        }
        let what = format!(
            "kv cache b={b} hq={hq} hkv={hkv} s={s} past={past} causal={causal} masked={masked} 3d={three_d}"
        );
        check(&what, g, inputs);
    }
}

/// `qk_matmul_output` in its four modes (the scaled scores, after the soft cap, after the masks,
/// after the softmax), with a float mask, the causal mask, a soft cap and grouped heads; Y too.
#[test]
fn onnx_attention_qk_matmul_output_matches_the_reference() {
    let mut rng = Rng::new(0x9c4d);
    let (b, hq, hkv, sq, skv, d) = (2, 4, 2, 5, 7, 8);
    let ms = [sq, skv];
    let mask: Vec<f32> = (0..sq * skv).map(|i| if i % 5 == 2 { f32::NEG_INFINITY } else { 0.25 }).collect();
    for mode in 0..4 {
        for (softcap, causal, masked) in [(0.0, false, false), (3.0, true, true), (0.0, true, true)] {
            let a = planner::op::Attention {
                softcap,
                is_causal: causal,
                qk_matmul_output_mode: mode,
                ..Default::default()
            };
            let mut g = Graph::new();
            let mut ins = Vec::new();
            let mut inputs = Vec::new();
            for (name, s) in
                ["q", "k", "v"].into_iter().zip([[b, hq, sq, d], [b, hkv, skv, d], [b, hkv, skv, d]])
            {
                ins.push(Some(g.input(name, DType::F32, known(&s))));
                inputs.push((name.to_string(), rng.tensor(&s, -1.5, 1.5)));
            }
            if masked {
                ins.push(Some(g.input("mask", DType::F32, known(&ms))));
                inputs.push(("mask".into(), HostTensor::new(ms.to_vec(), mask.clone()).unwrap()));
            }
            let (y, qk) = (g.add_value("y", None), g.add_value("qk", None));
            g.add_node(planner::Node {
                name: "attention".into(),
                op: Op::Attention(a),
                inputs: ins,
                outputs: vec![Some(y), None, None, Some(qk)],
            });
            g.output(y);
            g.output(qk);
            let what =
                format!("qk_matmul_output mode {mode} softcap {softcap} causal {causal} masked {masked}");
            crate::indexing::compare(&what, g, &inputs, 2e-5);
        }
    }
}

#[test]
fn pytorchs_scaled_dot_product_attention_with_its_nan_guard_matches_the_reference() {
    // As `torch.onnx.export(dynamo=True)` writes SDPA: Kᵀ through merged batch and heads, Q and Kᵀ
    // each scaled by 1 / sqrt(sqrt(d)), an additive mask, the softmax, `Where(IsNaN(p), 0, p)`, then the MatMul with V. Rows whose
    // keys are all `-inf` are NaN after the softmax and zero after the guard: the fused kernels
    // write zeros there too (the plan has no softmax, IsNaN or Where left).
    let mut rng = Rng::new(0x5d9a);
    for (b, n, h, d) in [(2, 12, 4, 16), (16, 40, 4, 64)] {
        let mut g = Graph::new();
        let q = g.input("q", DType::F32, known(&[b, n, h * d]));
        let k = g.input("k", DType::F32, known(&[b, n, h * d]));
        let v = g.input("v", DType::F32, known(&[b, n, h * d]));
        let mask = g.input("mask", DType::F32, known(&[b, 1, n, n]));
        let qh = reshape(&mut g, "qh", q, &[b, n, h, d]);
        let kh = reshape(&mut g, "kh", k, &[b, n, h, d]);
        let vh = reshape(&mut g, "vh", v, &[b, n, h, d]);
        // Kᵀ as the export writes `k.transpose(-2, -1)`: through merged batch and heads.
        let (qt, vt) = (transpose(&mut g, qh, [0, 2, 1, 3]), transpose(&mut g, vh, [0, 2, 1, 3]));
        let k4 = transpose(&mut g, kh, [0, 2, 1, 3]);
        let k3 = reshape(&mut g, "k3", k4, &[b * h, n, d]);
        let k3t = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1]) }), &[k3]);
        let kt = reshape(&mut g, "kt", k3t, &[b, h, d, n]);
        let c = g.initializer("c", ConstTensor::scalar_f32(1.0 / (d as f32).sqrt().sqrt()));
        let (qs, ks) = (g.op1(Op::Mul, &[qt, c]), g.op1(Op::Mul, &[kt, c]));
        let scores = g.op1(Op::MatMul, &[qs, ks]);
        let masked = g.op1(Op::Add, &[scores, mask]);
        let probs = g.op1(Op::Softmax(Softmax { axis: -1 }), &[masked]);
        let nan = g.op1(Op::IsNaN, &[probs]);
        let zero = g.initializer("zero", ConstTensor::scalar_f32(0.0));
        let guarded = g.op1(Op::Where, &[nan, zero, probs]);
        let o = g.op1(Op::MatMul, &[guarded, vt]);
        let t = transpose(&mut g, o, [0, 2, 1, 3]);
        let y = reshape(&mut g, "merged", t, &[b, n, h * d]);
        g.output(y);
        // Causal, and in the first batch the last query row sees no key at all.
        let mask_data: Vec<f32> = (0..b * n * n)
            .map(|i| {
                let (bi, r, col) = (i / (n * n), i / n % n, i % n);
                if col > r || (bi == 0 && r == n - 1) { f32::NEG_INFINITY } else { 0.0 }
            })
            .collect();
        let inputs = vec![
            ("q".into(), rng.tensor(&[b, n, h * d], -1.0, 1.0)),
            ("k".into(), rng.tensor(&[b, n, h * d], -1.0, 1.0)),
            ("v".into(), rng.tensor(&[b, n, h * d], -1.0, 1.0)),
            ("mask".into(), HostTensor::new(vec![b, 1, n, n], mask_data).unwrap()),
        ];
        let what = format!("sdpa b={b} s={n} h={h} d={d}");
        let want = host::reference::eval(&g, &inputs).unwrap();
        let row = &want[0].1.data().to_f64s()[(n - 1) * h * d..n * h * d];
        assert!(row.iter().all(|&x| x == 0.0), "{what}: the reference's guarded row is zero");
        check(&what, g, inputs);
    }
}
