//! The sequence kernels (selective scan, SSD scan, RG-LRU, WKV6, causal conv) and SOFIE's three
//! operators through `Session` against the CPU reference: sequence lengths 1, 7, 64 and 300;
//! state sizes that leave lanes, slots, warps and WKV row chunks partly empty; grouped B/C;
//! optional inputs present and absent; initial and final states.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use kernels_gpu::abi::{SELECTIVE_CHUNKED_MAX_STATE, WKV_SMALL_HEAD};
use planner::op::{self, Op};
use planner::{DType, Dim, Graph};

use crate::ctx;

/// `|got - want| <= tol * (|want| + m)`, `m` the largest `|want|` of the tensor (at least 1): the
/// kernels sum in f32 what the reference sums in f64, and sums of terms of mixed sign are only
/// accurate relative to the terms. `tol` is 1e-5, 1e-4 from 256 steps on (long scans drift).
pub fn assert_close(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)], len: usize) {
    let tol = if len >= 256 { 1e-4 } else { 1e-5 };
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
        let m = wv.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!(
                (a - b).abs() <= tol * (b.abs() + m),
                "{what}: {gn}[{i}] of {:?}: gpu {a}, reference {b} (max |reference| {m})",
                w.shape()
            );
        }
    }
}

/// How a graph input's values are drawn.
#[derive(Clone, Copy, Debug)]
pub enum Values {
    /// f32 uniform in `[lo, hi)`.
    Uniform(f32, f32),
    /// A bool mask, each element set with probability `p`.
    Mask(f32),
    /// An f32 mask of 0 and 1, each element 1 with probability `p`.
    MaskF32(f32),
}

/// One graph input of a test case.
#[derive(Clone, Debug)]
pub struct Operand {
    /// Input name.
    pub name: &'static str,
    /// Its dims.
    pub dims: Vec<usize>,
    /// Its values.
    pub values: Values,
}

/// An operand with values uniform in `[lo, hi)`.
pub fn uniform(name: &'static str, dims: &[usize], lo: f32, hi: f32) -> Option<Operand> {
    Some(Operand { name, dims: dims.to_vec(), values: Values::Uniform(lo, hi) })
}

/// A random tensor of `dims` drawn as `values`.
pub fn draw(rng: &mut Rng, dims: &[usize], values: Values) -> HostTensor {
    let n: usize = dims.iter().product();
    let t = match values {
        Values::Uniform(lo, hi) => return rng.tensor(dims, lo, hi),
        Values::Mask(p) => {
            HostTensor::new(dims.to_vec(), (0..n).map(|_| rng.uniform(0.0, 1.0) < p).collect::<Vec<bool>>())
        }
        Values::MaskF32(p) => HostTensor::new(
            dims.to_vec(),
            (0..n).map(|_| (rng.uniform(0.0, 1.0) < p) as u8 as f32).collect::<Vec<f32>>(),
        ),
    };
    t.expect("length matches")
}

/// Runs one node of `op` over graph inputs `operands` (`None`: an omitted optional input), with
/// `outputs` outputs, on the GPU and on the reference; checks the plan launches `symbol` (each of
/// several kernels joined by `+`).
pub fn check(
    what: &str,
    rng: &mut Rng,
    op: Op,
    operands: &[Option<Operand>],
    outputs: usize,
    len: usize,
    symbol: &str,
) {
    check_with(SessionOptions::default(), what, rng, op, operands, outputs, len, symbol);
}

/// [`check`] in a session of `options`.
#[allow(clippy::too_many_arguments)]
pub fn check_with(
    options: SessionOptions,
    what: &str,
    rng: &mut Rng,
    op: Op,
    operands: &[Option<Operand>],
    outputs: usize,
    len: usize,
    symbol: &str,
) {
    let mut g = Graph::new();
    let mut ins = Vec::new();
    let mut inputs = Vec::new();
    for o in operands {
        ins.push(o.as_ref().map(|o| {
            let dtype = if matches!(o.values, Values::Mask(_)) { DType::Bool } else { DType::F32 };
            inputs.push((o.name.to_owned(), draw(rng, &o.dims, o.values)));
            g.input(o.name, dtype, o.dims.iter().map(|&d| Dim::Known(d)))
        }));
    }
    for y in g.push_opt(op, ins, outputs) {
        g.output(y);
    }
    let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let mut s = Session::new(ctx(), g, options).unwrap();
    let got = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: gpu: {e}"));
    assert_close(what, &got, &want, len);
    let plan = s.last_plan().unwrap().to_string();
    for symbol in symbol.split('+') {
        assert!(plan.contains(&format!(" {symbol} ")), "{what}: no {symbol} in {plan}");
    }
    // A second run replays the captured CUDA graph: same result (no state carried over).
    assert_close(&format!("{what} (replay)"), &s.run(&inputs).unwrap(), &want, len);
}

/// Sequence lengths every op is tested at.
pub const LENS: [usize; 4] = [1, 7, 64, 300];

/// The selective scan's kernel for `len` steps of state size `n`: chunked over time where the
/// session's option allows it.
fn selective_kernel(chunked: bool, len: usize, n: usize) -> &'static str {
    if chunked && len > 1 && n <= SELECTIVE_CHUNKED_MAX_STATE as usize {
        "selective_scan_chunked_f32"
    } else {
        "selective_scan_f32"
    }
}

#[test]
fn selective_scan_matches_the_reference() {
    let mut rng = Rng::new(0x5e1ec7);
    // (B, D, N, G): lanes of one (N = 1: 32 channels a warp), partly empty lanes (3), two channels
    // a warp with an odd channel count (16), a full warp of state (32), lanes of 2 (N = 2), of 8
    // partly empty (6), of 32 partly empty (20), partly empty slots (33),
    // the largest N (256). Both kernels: the sequential one and the one chunked over time (N <= 32,
    // more than one step; 300 steps are three windows of 16 chunks, the last partly empty).
    let shapes = [
        (2, 37, 1, 1),
        (1, 5, 3, 1),
        (3, 5, 16, 1),
        (2, 3, 32, 1),
        (1, 9, 2, 1),
        (2, 5, 6, 1),
        (1, 3, 20, 1),
        (2, 6, 33, 3),
        (1, 4, 64, 2),
        (2, 3, 256, 1),
    ];
    for chunked in [false, true] {
        let options = SessionOptions { chunked_selective_scan: chunked, ..SessionOptions::default() };
        for (i, &(b, d, n, groups)) in shapes.iter().enumerate() {
            if chunked && n > 32 {
                continue;
            }
            for len in LENS {
                let full = (i + len) % 2 == 0;
                let bc = if groups == 1 && i % 2 == 0 { vec![b, n, len] } else { vec![b, groups, n, len] };
                let delta = if full { (-3.0, 1.0) } else { (0.01, 0.5) };
                let operands = [
                    uniform("u", &[b, d, len], -1.0, 1.0),
                    uniform("delta", &[b, d, len], delta.0, delta.1),
                    uniform("A", &[d, n], -2.0, -0.1),
                    uniform("Bm", &bc, -1.0, 1.0),
                    uniform("Cm", &bc, -1.0, 1.0),
                    uniform("D", &[d], -1.0, 1.0).filter(|_| full || len == 7),
                    uniform("z", &[b, d, len], -2.0, 2.0).filter(|_| full),
                    uniform("delta_bias", &[d], -1.0, 0.5).filter(|_| full),
                    uniform("h0", &[b, d, n], -1.0, 1.0).filter(|_| full || len == 1),
                ];
                let attrs = op::SelectiveScan { delta_softplus: full };
                let what = format!(
                    "selective scan B={b} D={d} N={n} G={groups} L={len} full={full} chunked={chunked}"
                );
                let kernel = selective_kernel(chunked, len, n);
                check_with(options, &what, &mut rng, Op::SelectiveScan(attrs), &operands, 2, len, kernel);
            }
        }
    }
}

#[test]
fn sofie_mamba_scan_matches_the_reference() {
    let mut rng = Rng::new(0x3a3ba);
    for (b, d, n) in [(1, 3, 16), (2, 33, 4)] {
        for len in LENS {
            let operands = [
                uniform("u", &[b, d, len], -1.0, 1.0),
                uniform("delta", &[b, d, len], 0.01, 0.5),
                uniform("A", &[d, n], -2.0, -0.1),
                uniform("Bm", &[b, n, len], -1.0, 1.0),
                uniform("Cm", &[b, n, len], -1.0, 1.0),
                uniform("Dskip", &[d], -1.0, 1.0),
            ];
            let what = format!("MambaScan B={b} D={d} N={n} L={len}");
            let sequential = SessionOptions { chunked_selective_scan: false, ..SessionOptions::default() };
            check_with(sequential, &what, &mut rng, Op::MambaScan, &operands, 1, len, "selective_scan_f32");
            let kernel = selective_kernel(true, len, n);
            check_with(
                SessionOptions::default(),
                &format!("{what} chunked"),
                &mut rng,
                Op::MambaScan,
                &operands,
                1,
                len,
                kernel,
            );
        }
    }
}

#[test]
fn ssd_scan_matches_the_reference() {
    let mut rng = Rng::new(0x55d);
    // (B, H, P, G, N): the recurrent kernel's one, two, four and eight state slots a lane; the
    // chunked kernel's states padded to 32, 64 and 128, read 16 or 4 bytes at a time.
    let shapes = [
        (1, 1, 1, 1, 1),
        (2, 4, 8, 2, 16),
        (1, 3, 5, 1, 33),
        (2, 2, 16, 2, 64),
        (1, 2, 4, 1, 100),
        (1, 2, 3, 1, 256),
        // The chunked form's wider tiles of head channels (16, 32, 64) come with larger batches.
        (8, 8, 64, 1, 128),
        (16, 8, 64, 2, 64),
        (32, 8, 64, 1, 32),
    ];
    for (i, &(b, h, p, groups, n)) in shapes.iter().enumerate() {
        let lens: &[usize] = if b < 8 { &LENS } else { &[40, 300] };
        for &len in lens {
            let full = (i + len) % 2 == 1;
            let d_dims = if i % 2 == 0 { vec![h] } else { vec![h * p] };
            let dt = if full { (-3.0, 1.0) } else { (0.01, 0.5) };
            let operands = [
                uniform("x", &[b, len, h, p], -1.0, 1.0),
                uniform("dt", &[b, len, h], dt.0, dt.1),
                uniform("A", &[h], -2.0, -0.1),
                uniform("Bm", &[b, len, groups, n], -1.0, 1.0),
                uniform("Cm", &[b, len, groups, n], -1.0, 1.0),
                uniform("D", &d_dims, -1.0, 1.0).filter(|_| full || len == 64),
                uniform("z", &[b, len, h, p], -2.0, 2.0).filter(|_| full),
                uniform("dt_bias", &[h], -1.0, 0.5).filter(|_| full),
                uniform("s0", &[b, h, p, n], -1.0, 1.0).filter(|_| full || len == 7),
            ];
            let attrs = if full {
                op::SsdScan { dt_softplus: true, dt_min: Some(0.05), dt_max: Some(0.8), ..Default::default() }
            } else {
                op::SsdScan::default()
            };
            let what = format!("SSD B={b} H={h} P={p} G={groups} N={n} L={len} full={full}");
            // From one chunk of steps on, states up to SSD_CHUNK_MAX_STATE run chunked.
            let kernel = if len >= 32 && n <= 128 { "ssd_chunk_f32" } else { "ssd_scan_f32" };
            check(&what, &mut rng, Op::SsdScan(attrs), &operands, 2, len, kernel);
        }
    }
}

#[test]
fn rglru_and_griffin_rglru_match_the_reference() {
    let mut rng = Rng::new(0x6c7);
    for (i, (b, w)) in [(1, 1), (2, 33), (3, 300)].into_iter().enumerate() {
        for len in LENS {
            let reset = match (i + len) % 3 {
                0 => None,
                1 => Some(Operand { name: "reset", dims: vec![b, len], values: Values::Mask(0.2) }),
                _ => Some(Operand { name: "reset", dims: vec![b, len], values: Values::MaskF32(0.2) }),
            };
            let operands = [
                uniform("x", &[b, len, w], -1.0, 1.0),
                uniform("a", &[b, len, w], 0.0, 0.999),
                reset,
                uniform("h0", &[b, w], -1.0, 1.0).filter(|_| len != 64),
            ];
            let what = format!("RGLRU B={b} W={w} L={len}");
            check(&what, &mut rng, Op::Rglru, &operands, 2, len, "rglru_f32");
            let what = format!("GriffinRGLRU B={b} W={w} L={len}");
            check(&what, &mut rng, Op::GriffinRglru, &operands[..2], 1, len, "rglru_f32");
        }
    }
}

/// The chunked linear scan: lengths inside one chunk, exactly one (8), across chunks (9, 100),
/// one whole window of 16 chunks (128), windows and a partial one (129, 300, 1000); negative
/// decays; with and without an initial state; channel counts that leave a block partly idle.
#[test]
fn linear_scan_matches_the_reference() {
    let mut rng = Rng::new(0x11ea5);
    for (i, (b, w)) in [(1, 1), (2, 33), (3, 64)].into_iter().enumerate() {
        for len in [1, 5, 8, 9, 100, 128, 129, 300, 1000] {
            let operands = [
                uniform("x", &[b, len, w], -1.0, 1.0),
                uniform("a", &[b, len, w], -1.0, 1.0),
                uniform("h0", &[b, w], -1.0, 1.0).filter(|_| (i + len) % 2 == 0),
            ];
            let what = format!("LinearScan B={b} W={w} L={len}");
            check(&what, &mut rng, Op::LinearScan, &operands, 2, len, "rglru_f32");
        }
    }
}

#[test]
fn wkv6_matches_the_reference() {
    let mut rng = Rng::new(0x3c76);
    // (B, H, N): one row chunk (1, 7, 16), a partial second chunk (33),
    // two (64), a partial fourth (100), four (128). With spans on, every case of 64
    // steps or more runs in spans of at least 32 (its heads fill few multiprocessors): 2 spans at
    // 64, 10 at 300 (the last of 12 steps), 32 at 1000 (the last of 8) (the default); off, in one
    // launch.
    let shapes = [(1, 1, 1), (2, 3, 7), (1, 2, 16), (2, 1, 33), (1, 2, 64), (1, 1, 100), (1, 1, 128)];
    for spans in [true, false] {
        let options = SessionOptions { wkv_spans: spans, ..SessionOptions::default() };
        for (i, &(b, h, n)) in shapes.iter().enumerate() {
            for len in LENS.into_iter().chain((i == 4).then_some(1000)) {
                let bhtn = (i + len) % 2 == 0;
                let dims = if bhtn { vec![b, h, len, n] } else { vec![b, len, h, n] };
                let operands = [
                    uniform("r", &dims, -1.0, 1.0),
                    uniform("k", &dims, -1.0, 1.0),
                    uniform("v", &dims, -1.0, 1.0),
                    uniform("w", &dims, -2.0, 1.0),
                    uniform("u", &[h, n], -1.0, 1.0),
                    uniform("s0", &[b, h, n, n], -1.0, 1.0).filter(|_| len != 64),
                ];
                let layout = if bhtn { op::Wkv6Layout::Bhtn } else { op::Wkv6Layout::Bthn };
                let wkv = if n > WKV_SMALL_HEAD as usize { "wkv6_wide_f32" } else { "wkv6_f32" };
                let kernel =
                    if spans && len >= 64 { format!("{wkv}+wkv6_pass_f32") } else { wkv.to_string() };
                let what = format!("WKV6 B={b} H={h} N={n} L={len} bhtn={bhtn} spans={spans}");
                check_with(
                    options,
                    &what,
                    &mut rng,
                    Op::Wkv6(op::Wkv6 { layout }),
                    &operands,
                    2,
                    len,
                    &kernel,
                );
                if bhtn {
                    let what = format!("RWKV_WKV6 B={b} H={h} N={n} L={len} spans={spans}");
                    check_with(options, &what, &mut rng, Op::RwkvWkv6, &operands[..5], 1, len, &kernel);
                }
            }
        }
    }
}

#[test]
fn causal_conv_matches_the_reference() {
    let mut rng = Rng::new(0xc0de);
    for (i, (b, d, k)) in [(1, 1, 1), (2, 5, 2), (3, 40, 4), (1, 300, 16)].into_iter().enumerate() {
        for len in LENS {
            let full = (i + len) % 2 == 1;
            let operands = [
                uniform("x", &[b, d, len], -1.0, 1.0),
                uniform("weight", &[d, k], -1.0, 1.0),
                uniform("bias", &[d], -1.0, 1.0).filter(|_| full),
                uniform("s0", &[b, d, k - 1], -1.0, 1.0).filter(|_| k > 1 && (full || len == 1)),
            ];
            let activation = if full { op::ConvActivation::Silu } else { op::ConvActivation::None };
            let attrs = op::CausalConvWithState { activation, ..Default::default() };
            let what = format!("causal conv B={b} D={d} K={k} L={len} full={full}");
            check(&what, &mut rng, Op::CausalConvWithState(attrs), &operands, 2, len, "causal_conv_f32");
        }
    }
}

#[test]
fn linear_attention_matches_the_reference_for_every_rule() {
    use planner::op::{LinearAttention, LinearAttentionRule as R};
    let mut rng = Rng::new(0x1a77);
    // (rule, batch, len, q heads, kv heads, dk, dv, past, decay per key row, beta per head, present)
    let cases = [
        (R::Linear, 2, 5, 2, 2, 4, 3, false, false, false, true),
        (R::Gated, 1, 7, 4, 2, 8, 8, true, true, false, true),
        (R::Delta, 2, 3, 3, 1, 4, 6, true, false, true, true),
        (R::GatedDelta, 1, 9, 4, 4, 16, 8, false, false, false, false),
        (R::GatedDelta, 2, 1, 2, 1, 8, 4, true, true, true, true),
    ];
    for (rule, b, t, hq, hkv, dk, dv, past, row_decay, head_beta, present) in cases {
        let mut g = Graph::new();
        let mut inputs = Vec::new();
        let mut add = |g: &mut Graph, name: &str, dims: Vec<usize>, lo: f32, hi: f32| {
            inputs.push((name.to_string(), rng.tensor(&dims, lo, hi)));
            Some(g.input(name, DType::F32, crate::indexing::known(&dims)))
        };
        let mut ins = vec![
            add(&mut g, "q", vec![b, t, hq * dk], -1.0, 1.0),
            add(&mut g, "k", vec![b, t, hkv * dk], -1.0, 1.0),
            add(&mut g, "v", vec![b, t, hkv * dv], -1.0, 1.0),
        ];
        ins.push(if past { add(&mut g, "past", vec![b, hkv, dk, dv], -0.5, 0.5) } else { None });
        let gated = matches!(rule, R::Gated | R::GatedDelta);
        let delta = matches!(rule, R::Delta | R::GatedDelta);
        let decay_w = if row_decay { hkv * dk } else { hkv };
        ins.push(if gated { add(&mut g, "decay", vec![b, t, decay_w], -0.7, 0.0) } else { None });
        let beta_w = if head_beta { hkv } else { 1 };
        ins.push(if delta { add(&mut g, "beta", vec![b, t, beta_w], 0.1, 0.9) } else { None });
        let attrs = LinearAttention { kv_num_heads: hkv, q_num_heads: hq, scale: None, update_rule: rule };
        let outs = g.push_opt(Op::LinearAttention(attrs), ins, if present { 2 } else { 1 });
        outs.iter().for_each(|&o| g.output(o));
        let what =
            format!("LinearAttention {rule:?} b={b} t={t} hq={hq} hkv={hkv} dk={dk} dv={dv} past={past}");
        let plan = crate::indexing::compare(&what, g, &inputs, 1e-4);
        assert!(plan.contains("linear_attention_f32"), "{plan}");
    }
}

/// Mamba-2's mixer as transformers writes it around the lifted ops (`planner`'s `row_views`): the
/// in-projection's output split into z, the conv's input and dt; the conv between transposes,
/// from an initial state, its final state an output; its output split into x, B and C, reshaped
/// for the scan. The planner runs the conv channels-last (`causal_conv_rows_f32`) and reads every
/// part where it lies, so no copy runs; the results equal the reference's, and the plan's with
/// `row_views` off. Chunked and recurrent scans, 16-byte and 4-byte B / C reads (N 16 and 10),
/// conv widths 4 and 6 (both register windows), runs of steps that split the sequence; the chunked
/// scans in spans (on) and in one (off).
#[test]
fn mamba2_mixer_reads_its_splits_where_they_lie() {
    let mut rng = Rng::new(0x5b1e);
    for (b, l, groups, n, k) in [(1, 1, 1, 16, 4), (2, 7, 2, 10, 6), (1, 40, 1, 16, 4), (3, 300, 2, 10, 4)] {
        let (h, p) = (4, 8);
        let e = h * p;
        let conv = e + 2 * groups * n;
        let width = e + conv + h;
        let mut g = Graph::new();
        let dims = |d: &[usize]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
        let mut inputs = Vec::new();
        let mut input = |g: &mut Graph, name: &str, d: &[usize], lo: f32, hi: f32| {
            inputs.push((name.to_owned(), rng.tensor(d, lo, hi)));
            g.input(name, DType::F32, dims(d))
        };
        let proj = input(&mut g, "proj", &[b, l, width], -1.0, 1.0);
        let weight = input(&mut g, "w", &[conv, k], -0.5, 0.5);
        let bias = input(&mut g, "bias", &[conv], -0.5, 0.5);
        let s0 = input(&mut g, "s0", &[b, conv, k - 1], -1.0, 1.0);
        let a = input(&mut g, "A", &[h], -2.0, -0.1);
        let dskip = input(&mut g, "D", &[h], -1.0, 1.0);
        let dt_bias = input(&mut g, "dt_bias", &[h], -1.0, 0.5);
        let split = |axis| Op::Split(op::Split { axis, split: None, num_outputs: None });
        let sizes = g.const_i64("sizes", &[3], &[e as i64, conv as i64, h as i64]);
        let zxd = g.push(split(2), &[proj, sizes], 3);
        let perm = || Op::Transpose(op::Transpose { perm: Some(vec![0, 2, 1]) });
        let xt = g.op1(perm(), &[zxd[1]]);
        let silu = op::CausalConvWithState { activation: op::ConvActivation::Silu, ..Default::default() };
        let yc =
            g.push_opt(Op::CausalConvWithState(silu), vec![Some(xt), Some(weight), Some(bias), Some(s0)], 2);
        let y = g.op1(perm(), &[yc[0]]);
        let gn = (groups * n) as i64;
        let sizes2 = g.const_i64("sizes2", &[3], &[e as i64, gn, gn]);
        let xbc = g.push(split(-1), &[y, sizes2], 3);
        let (bi, li) = (b as i64, l as i64);
        let mut reshape = |v, d: [i64; 4], name: &str| {
            let s = g.const_i64(name, &[4], &d);
            g.op1(Op::Reshape(op::Reshape { allowzero: false }), &[v, s])
        };
        let x = reshape(xbc[0], [bi, li, h as i64, p as i64], "xs");
        let bm = reshape(xbc[1], [bi, li, groups as i64, n as i64], "bs");
        let cm = reshape(xbc[2], [bi, li, groups as i64, n as i64], "cs");
        let z = reshape(zxd[0], [bi, li, h as i64, p as i64], "zs");
        let ins =
            vec![Some(x), Some(zxd[2]), Some(a), Some(bm), Some(cm), Some(dskip), Some(z), Some(dt_bias)];
        let scan = op::SsdScan { dt_softplus: true, ..Default::default() };
        let out = g.push_opt(Op::SsdScan(scan), ins, 1);
        g.output(out[0]);
        g.output(yc[1]);
        let what = format!("mixer B={b} L={l} G={groups} N={n} K={k}");
        let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
        for row_views in [true, false] {
            // Off: the chunked scan in one span as well (on: in spans where the batch is short).
            let options = SessionOptions { row_views, ssd_spans: row_views, ..SessionOptions::default() };
            let mut s = Session::new(ctx(), g.clone(), options).unwrap();
            let got = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: gpu: {e}"));
            assert_close(&format!("{what}, row_views {row_views}"), &got, &want, l);
            let plan = s.last_plan().unwrap().to_string();
            let steps = plan.lines().filter(|l| l.starts_with('#'));
            let copies = steps.filter(|l| l.contains("strided_copy") || l.contains("transpose")).count();
            assert_eq!(plan.contains("causal_conv_rows_f32"), row_views, "{what}: {plan}");
            assert_eq!(copies == 0, row_views, "{what}: {plan}");
            assert_close(&format!("{what} (replay)"), &s.run(&inputs).unwrap(), &want, l);
        }
    }
}
