//! Lowering of the sequence ops: kernels, parameter bytes, argument order (optional operands as
//! null, final state as an extra output), launch shapes, persistent state slots in stateful plans,
//! the limits, and the plan's state invariants.

use kernels_gpu::abi::{
    CausalConvParams, KernelId, Params, RESET_BOOL, RglruParams, SCAN_MAX_CHUNKS, SEQUENCE_THREADS,
    SSD_CHUNK_MAX_SHARED, SSD_CHUNK_THREADS, SelectiveScanParams, SsdChunkLayout, SsdChunkParams, SsdRows,
    SsdScanParams, WKV_MAX_HEAD, WKV_ROWS, WKV_SMALL_HEAD, WKV_SPAN_OUTPUTS, WKV_SPAN_STATES, Wkv6Params,
    linear_scan_chunks, linear_scan_shared_bytes, wkv_chunks, wkv_shared_bytes, wkv_span_stride, wkv_threads,
};

use crate::error::PlanError;
use crate::graph::{Graph, ValueId};
use crate::op::{self, Op};
use crate::plan::{Arg, Plan, PlanOptions, StateSlot, Step, compile};
use crate::tensor_info::{Binding, DType, Dim};

const F: DType = DType::F32;

fn input(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    g.input(name, F, dims.iter().map(|&d| Dim::Known(d)))
}

fn stateful() -> PlanOptions {
    PlanOptions { stateful: true, ..PlanOptions::default() }
}

/// A kernel step: (kernel, args, grid, block, shared bytes).
type Launch<'a> = (KernelId, &'a [Arg], [u32; 3], [u32; 3], u32);

/// The kernel steps of `plan`.
fn kernels(plan: &Plan) -> Vec<Launch<'_>> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { kernel, args, grid, block, shared_bytes, .. } => {
                Some((*kernel, args.as_slice(), *grid, *block, *shared_bytes))
            }
            Step::Copy { .. } => None,
        })
        .collect()
}

fn params(p: &impl Params) -> Arg {
    Arg::Params(p.as_bytes().to_vec())
}

fn no_kernel_reason(g: &Graph, o: &PlanOptions) -> String {
    match compile(g, &Binding::new(), o) {
        Err(PlanError::NoKernel { nodes }) => {
            nodes.iter().map(|n| n.2.clone()).collect::<Vec<_>>().join("; ")
        }
        other => panic!("expected NoKernel, got {other:?}"),
    }
}

#[test]
fn selective_scan_lowers_with_groups_optionals_and_states() {
    let (b, d, l, n, groups) = (2, 6, 5, 16, 2);
    let mut g = Graph::new();
    let u = input(&mut g, "u", &[b, d, l]);
    let delta = input(&mut g, "delta", &[b, d, l]);
    let a = input(&mut g, "A", &[d, n]);
    let bm = input(&mut g, "Bm", &[b, groups, n, l]);
    let cm = input(&mut g, "Cm", &[b, groups, n, l]);
    let dskip = input(&mut g, "D", &[d]);
    let bias = input(&mut g, "bias", &[d]);
    let init = input(&mut g, "h0", &[b, d, n]);
    let ins =
        vec![Some(u), Some(delta), Some(a), Some(bm), Some(cm), Some(dskip), None, Some(bias), Some(init)];
    let outs = g.push_opt(Op::SelectiveScan(op::SelectiveScan { delta_softplus: true }), ins, 2);
    g.output(outs[0]);
    g.output(outs[1]);
    // Sequential over time with the chunked scan switched off.
    let sequential = PlanOptions { chunked_selective_scan: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &sequential).unwrap();
    let ks = kernels(&plan);
    assert_eq!(ks.len(), 1, "{plan}");
    let (kernel, args, grid, block, shared) = ks[0];
    assert_eq!(kernel, KernelId::SelectiveScanF32);
    let mut p = SelectiveScanParams {
        batch: 2,
        channels: 6,
        len: 5,
        state: 16,
        groups: 2,
        lanes: 16,
        delta_softplus: 1,
        chunks: 0,
    };
    let v = Arg::Value;
    let want = [
        params(&p),
        v(u),
        v(delta),
        v(a),
        v(bm),
        v(cm),
        v(dskip),
        Arg::Null,
        v(bias),
        v(init),
        Arg::Null,
        Arg::Output(outs[1]),
        v(outs[0]),
    ];
    assert_eq!(args, want);
    // 12 channels, two per warp: 6 warps in one block.
    assert_eq!((grid, block, shared), ([1, 1, 1], [SEQUENCE_THREADS, 1, 1], 0));
    assert!(plan.states.is_empty());
    assert!(plan.to_string().contains("selective_scan_f32") && plan.to_string().contains("out:"), "{plan}");

    // Chunked over time by default (more than one step, N <= 32): the same operands, one 8-step
    // chunk (a warp) per block, a block per two channels (lanes of 16).
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let ks = kernels(&plan);
    assert_eq!(ks.len(), 1, "{plan}");
    let (kernel, args, grid, block, shared) = ks[0];
    assert_eq!(kernel, KernelId::SelectiveScanChunkedF32);
    p.chunks = 1;
    assert_eq!(args[0], params(&p));
    assert_eq!(args[1..], want[1..]);
    assert_eq!((grid, block, shared), ([6, 1, 1], [32, 1, 1], linear_scan_shared_bytes(1)));
    // Longer sequences take more chunks, up to SCAN_MAX_CHUNKS; N > 32 or one step stays sequential.
    assert_eq!(linear_scan_chunks(64), 8);
    assert_eq!(linear_scan_chunks(300), SCAN_MAX_CHUNKS);
}

/// An `SSDScan` of `len` steps, heads 8, head dim 64, state `n`, batch `b`, on a device of
/// `sm_count` multiprocessors: its one kernel step.
fn ssd_launch(
    b: usize,
    len: usize,
    n: usize,
    sm_count: u32,
) -> (KernelId, Vec<Arg>, [u32; 3], [u32; 3], u32) {
    let mut g = Graph::new();
    let (h, p) = (8, 64);
    let x = input(&mut g, "x", &[b, len, h, p]);
    let dt = input(&mut g, "dt", &[b, len, h]);
    let a = input(&mut g, "A", &[h]);
    let bm = input(&mut g, "B", &[b, len, 1, n]);
    let cm = input(&mut g, "C", &[b, len, 1, n]);
    let z = input(&mut g, "z", &[b, len, h, p]);
    let attrs = op::SsdScan { dt_softplus: true, dt_min: None, dt_max: Some(0.5), ..Default::default() };
    let y = g.push_opt(
        Op::SsdScan(attrs),
        vec![Some(x), Some(dt), Some(a), Some(bm), Some(cm), None, Some(z)],
        1,
    );
    g.output(y[0]);
    // One span: `a_short_batch_runs_its_chunks_in_spans` tests the spans.
    let options = PlanOptions { sm_count, ssd_spans: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &options).unwrap();
    let ks = kernels(&plan);
    assert_eq!(ks.len(), 1, "{plan}");
    let (k, args, grid, block, shared) = ks[0];
    (k, args.to_vec(), grid, block, shared)
}

#[test]
fn a_short_batch_runs_its_chunks_in_spans() {
    // Batch 1 x 256 steps, 8 heads of 64, N 64: 64 blocks of 8 head channels, eight chunks; four
    // blocks a multiprocessor want 528: eight spans of one chunk.
    let mut g = Graph::new();
    let (b, l, h, p, n) = (1, 256, 8, 64, 64);
    let x = input(&mut g, "x", &[b, l, h, p]);
    let dt = input(&mut g, "dt", &[b, l, h]);
    let a = input(&mut g, "A", &[h]);
    let bm = input(&mut g, "B", &[b, l, 1, n]);
    let init = input(&mut g, "s0", &[b, h, p, n]);
    let ins = vec![Some(x), Some(dt), Some(a), Some(bm), Some(bm), None, None, None, Some(init)];
    let outs = g.push_opt(Op::SsdScan(op::SsdScan::default()), ins, 2);
    g.output(outs[0]);
    g.output(outs[1]);
    let plan = compile(
        &g,
        &Binding::new(),
        &PlanOptions { sm_count: 132, ssd_spans: true, ..PlanOptions::default() },
    )
    .unwrap();
    let ks = kernels(&plan);
    let names: Vec<KernelId> = ks.iter().map(|k| k.0).collect();
    assert_eq!(
        names,
        [KernelId::SsdChunkStatesF32, KernelId::SsdChunkPassF32, KernelId::SsdChunkF32],
        "{plan}"
    );
    let Arg::Params(bytes) = &ks[0].1[0] else { panic!() };
    assert_eq!(u32::from_le_bytes(bytes[100..104].try_into().unwrap()), 1, "one chunk a span");
    assert_eq!(ks[0].2, [512, 1, 1]);
    // Spans only where the blocks leave multiprocessors idle: batch 2 (128 blocks) in spans of
    // two chunks, batch 8 (512) in one span (measured slower in spans on the H200).
    use kernels_gpu::abi::ssd_chunk_span;
    assert_eq!((ssd_chunk_span(128, 8, 132), ssd_chunk_span(512, 8, 132)), (2, 8));
    // The states step reads x, dt, A, B and no dt_bias, writes the deltas and decays; the pass
    // reads them and the initial state, writes the final state (an output) and the starts, which
    // the full step reads as its initial states, writing no state itself.
    let (states, pass, full) = (ks[0].1, ks[1].1, ks[2].1);
    assert_eq!(states[1..6], [Arg::Value(x), Arg::Value(dt), Arg::Value(a), Arg::Value(bm), Arg::Null]);
    let (deltas, decays) = (states[6].clone(), states[7].clone());
    assert_eq!(pass[1..4], [deltas, decays, Arg::Value(init)]);
    assert_eq!((&pass[4], &pass[5]), (&Arg::Null, &Arg::Output(outs[1])));
    assert_eq!(
        (&full[9], &full[10], &full[11], &full[12]),
        (&pass[6], &Arg::Null, &Arg::Null, &Arg::Value(outs[0]))
    );
    // Off: one launch.
    let off = PlanOptions { sm_count: 132, ssd_spans: false, ..PlanOptions::default() };
    assert_eq!(kernels(&compile(&g, &Binding::new(), &off).unwrap()).len(), 1);
}

#[test]
fn ssd_scan_runs_chunked_from_one_chunk_of_steps() {
    // Decode steps and short sequences: the recurrent form.
    assert_eq!(ssd_launch(1, 1, 64, 132).0, KernelId::SsdScanF32);
    assert_eq!(ssd_launch(1, 31, 64, 132).0, KernelId::SsdScanF32);
    // The largest states too.
    assert_eq!(ssd_launch(1, 256, 129, 132).0, KernelId::SsdScanF32);
    // Batch 1, 8 heads of 64: tiles of 8 give 64 blocks, fewer than the multiprocessors.
    let (k, args, grid, block, shared) = ssd_launch(1, 256, 64, 132);
    assert_eq!(k, KernelId::SsdChunkF32);
    let scan = SsdScanParams {
        batch: 1,
        len: 256,
        heads: 8,
        head_dim: 64,
        groups: 1,
        state: 64,
        lanes: 32,
        d_per_channel: 0,
        dt_softplus: 1,
        dt_min: f32::NEG_INFINITY,
        dt_max: 0.5,
        _pad: 0,
        rows: SsdRows::dense(8, 64, 1, 64),
    };
    let p = SsdChunkParams { scan, p_tile: 8, state_pad: 64, vector: 1, span: 8 };
    assert_eq!(args[0], Arg::Params(p.as_bytes().to_vec()));
    assert_eq!(
        (grid, block, shared),
        ([64, 1, 1], [SSD_CHUNK_THREADS, 1, 1], SsdChunkLayout::new(64, 8).bytes())
    );
    // D absent, z present, no dt_bias, no state: x, dt, A, B, C, null, z, null, three nulls, y.
    assert_eq!((&args[6], &args[8..12]), (&Arg::Null, &[Arg::Null, Arg::Null, Arg::Null, Arg::Null][..]));
    assert!(matches!(args[7], Arg::Value(_)) && matches!(args[12], Arg::Value(_)) && args.len() == 13);
    // Batch 8: tiles grow while every multiprocessor still gets a block (16: 256 blocks; 32 would
    // leave 128 for 132), within 2048 state values a tile (N 64: at most 32).
    let (_, args, grid, ..) = ssd_launch(8, 64, 64, 132);
    let tile = |args: &[Arg]| match &args[0] {
        Arg::Params(bytes) => u32::from_le_bytes(bytes[88..92].try_into().unwrap()),
        a => panic!("{a:?}"),
    };
    assert_eq!((tile(&args), grid), (16, [256, 1, 1]));
    assert_eq!(tile(&ssd_launch(64, 64, 64, 132).1), 32);
    assert_eq!(tile(&ssd_launch(64, 64, 32, 132).1), 64);
    // N 98 pads to 128 (tiles of at most 16) and is read four bytes at a time.
    let (_, args, _, _, shared) = ssd_launch(64, 64, 98, 132);
    let Arg::Params(bytes) = &args[0] else { unreachable!() };
    assert_eq!((tile(&args), &bytes[92..100]), (16, &[128, 0, 0, 0, 0, 0, 0, 0][..]));
    assert!(shared <= SSD_CHUNK_MAX_SHARED && shared == SsdChunkLayout::new(128, 16).bytes());
}

#[test]
fn every_sequence_op_lowers_to_its_kernel() {
    let mut g = Graph::new();
    // SOFIE MambaScan: D required, nothing else; no state pointers.
    let (b, d, l, n) = (1, 40, 3, 64);
    let ins: Vec<ValueId> = [("mu", vec![b, d, l]), ("md", vec![b, d, l]), ("ma", vec![d, n])]
        .into_iter()
        .chain([("mb", vec![b, n, l]), ("mc", vec![b, n, l]), ("mD", vec![d])])
        .map(|(name, dims)| input(&mut g, name, &dims))
        .collect();
    let y = g.op1(Op::MambaScan, &ins);
    g.output(y);
    // SSDScan with per-channel D, dt limits, no z.
    let (l2, h, p, n2) = (7, 4, 8, 32);
    let x = input(&mut g, "x", &[2, l2, h, p]);
    let dt = input(&mut g, "dt", &[2, l2, h]);
    let sa = input(&mut g, "sa", &[h]);
    let sb = input(&mut g, "sb", &[2, l2, 2, n2]);
    let sc = input(&mut g, "sc", &[2, l2, 2, n2]);
    let sd = input(&mut g, "sd", &[h * p]);
    let attrs = op::SsdScan { dt_softplus: true, dt_min: Some(0.01), dt_max: None, ..Default::default() };
    let ssd =
        g.push_opt(Op::SsdScan(attrs), vec![Some(x), Some(dt), Some(sa), Some(sb), Some(sc), Some(sd)], 1);
    g.output(ssd[0]);
    // RGLRU with a bool reset; GriffinRGLRU.
    let rx = input(&mut g, "rx", &[3, 5, 10]);
    let ra = input(&mut g, "ra", &[3, 5, 10]);
    let reset = g.input("reset", DType::Bool, [Dim::Known(3), Dim::Known(5)]);
    let lru = g.push(Op::Rglru, &[rx, ra, reset], 1);
    g.output(lru[0]);
    let gy = g.op1(Op::GriffinRglru, &[rx, ra]);
    g.output(gy);
    // LinearScan over 20 steps (3 chunks of 8) from an initial state.
    let (lx, la) = (input(&mut g, "lx", &[3, 20, 10]), input(&mut g, "la", &[3, 20, 10]));
    let l0 = input(&mut g, "l0", &[3, 10]);
    let lin = g.push(Op::LinearScan, &[lx, la, l0], 1);
    g.output(lin[0]);
    // RWKV_WKV6 ([B,H,T,N], exp bonus) and WKV6 ([B,T,H,N]) with N = 64.
    let wk: Vec<ValueId> = ["r", "k", "v", "w"].iter().map(|s| input(&mut g, s, &[2, 3, 9, 64])).collect();
    let u = input(&mut g, "u", &[3, 64]);
    let sofie = g.op1(Op::RwkvWkv6, &[wk[0], wk[1], wk[2], wk[3], u]);
    g.output(sofie);
    let attrs = op::Wkv6 { layout: op::Wkv6Layout::Bthn };
    let u9 = input(&mut g, "u9", &[9, 64]);
    let wkv = g.push(Op::Wkv6(attrs), &[wk[0], wk[1], wk[2], wk[3], u9], 1);
    g.output(wkv[0]);
    // CausalConvWithState, width 4, SiLU, no bias.
    let cx = input(&mut g, "cx", &[2, 16, 11]);
    let cw = input(&mut g, "cw", &[16, 4]);
    let conv = op::CausalConvWithState { activation: op::ConvActivation::Silu, ..Default::default() };
    let cy = g.push(Op::CausalConvWithState(conv), &[cx, cw], 1);
    g.output(cy[0]);

    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let ks = kernels(&plan);
    let find = |k: KernelId| ks.iter().filter(|s| s.0 == k).collect::<Vec<_>>();
    let mamba = find(KernelId::SelectiveScanF32);
    let p = SelectiveScanParams {
        batch: 1,
        channels: 40,
        len: 3,
        state: 64,
        groups: 1,
        lanes: 32,
        delta_softplus: 0,
        chunks: 0,
    };
    assert_eq!(mamba[0].1[0], params(&p));
    assert_eq!(
        mamba[0].1[6..],
        [Arg::Value(ins[5]), Arg::Null, Arg::Null, Arg::Null, Arg::Null, Arg::Null, Arg::Value(y)]
    );
    // 40 channels, a warp each: 1280 threads, 5 blocks.
    assert_eq!(mamba[0].2, [5, 1, 1]);

    let s = find(KernelId::SsdScanF32);
    let p = SsdScanParams {
        batch: 2,
        len: 7,
        heads: 4,
        head_dim: 8,
        groups: 2,
        state: 32,
        lanes: 32,
        d_per_channel: 1,
        dt_softplus: 1,
        dt_min: 0.01,
        dt_max: f32::INFINITY,
        _pad: 0,
        rows: SsdRows::dense(4, 8, 2, 32),
    };
    assert_eq!(s[0].1[0], params(&p));
    assert_eq!(s[0].1[6..9], [Arg::Value(sd), Arg::Null, Arg::Null]);

    let r = find(KernelId::RglruF32);
    assert_eq!(r.len(), 3);
    let p = RglruParams { batch: 3, len: 5, width: 10, reset: RESET_BOOL, normalized: 1, chunks: 1 };
    assert_eq!(r[0].1[..4], [params(&p), Arg::Value(rx), Arg::Value(ra), Arg::Value(reset)]);
    assert_eq!((r[0].2, r[0].3, r[0].4), ([1, 1, 1], [32, 1, 1], 2 * 32 * 4));
    let p = RglruParams { reset: 0, ..p };
    assert_eq!(r[1].1[..4], [params(&p), Arg::Value(rx), Arg::Value(ra), Arg::Null]);
    // Three time chunks (warps) of 8 steps; the state input is the kernel's state_in.
    let p = RglruParams { len: 20, normalized: 0, chunks: 3, ..p };
    assert_eq!(r[2].1[..5], [params(&p), Arg::Value(lx), Arg::Value(la), Arg::Null, Arg::Value(l0)]);
    assert_eq!((r[2].2, r[2].3, r[2].4), ([1, 1, 1], [96, 1, 1], 2 * 3 * 32 * 4));
    assert_eq!((linear_scan_chunks(0), linear_scan_chunks(129), linear_scan_chunks(1 << 20)), (1, 16, 16));

    let w = find(KernelId::Wkv6F32);
    let p = Wkv6Params {
        batch: 2,
        len: 9,
        heads: 3,
        head: 64,
        layout_bhtn: 1,
        exp_bonus: 1,
        chunks: 2,
        ..Wkv6Params::default()
    };
    assert_eq!(w[0].1[0], params(&p));
    assert_eq!((w[0].2, w[0].3, w[0].4), ([6, 1, 1], [128, 1, 1], wkv_shared_bytes(64)));
    assert_eq!(wkv_shared_bytes(64), (4 * 64 + 2 * 64) * 4);
    let p = Wkv6Params { len: 3, heads: 9, layout_bhtn: 0, exp_bonus: 0, ..p };
    assert_eq!(w[1].1[0], params(&p));

    let c = find(KernelId::CausalConvF32);
    let p = CausalConvParams { batch: 2, channels: 16, len: 11, width: 4, silu: 1, _pad: 0 };
    assert_eq!(c[0].1[..4], [params(&p), Arg::Value(cx), Arg::Value(cw), Arg::Null]);
    assert_eq!(ks.len(), 8, "{plan}");
}

/// A WKV6 of 4 heads of 64 over 2048 steps at batch 1 on 132 multiprocessors: 4 blocks alone, so it
/// runs in 64 spans of 32 steps (about four blocks a multiprocessor, spans of at least
/// `WKV_MIN_SPAN`): the spans' state changes into one scratch buffer, the pass chaining them into
/// their first states (and writing the final state), then every span from its own.
#[test]
fn wkv_runs_in_spans_where_its_heads_leave_the_device_idle() {
    let (b, l, h, n) = (1, 2048, 4, 64);
    let mut g = Graph::new();
    let rkvw: Vec<ValueId> = ["r", "k", "v", "w"].iter().map(|s| input(&mut g, s, &[b, l, h, n])).collect();
    let u = input(&mut g, "u", &[h, n]);
    let ins = rkvw.iter().chain([&u]).map(|&v| Some(v)).collect();
    let outs = g.push_opt(Op::Wkv6(op::Wkv6::default()), ins, 2);
    let (y, fin) = (outs[0], outs[1]);
    g.output(y);
    g.output(fin);
    let options = PlanOptions { sm_count: 132, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &options).unwrap();
    let ks = kernels(&plan);
    let names: Vec<KernelId> = ks.iter().map(|k| k.0).collect();
    assert_eq!(names, [KernelId::Wkv6F32, KernelId::Wkv6PassF32, KernelId::Wkv6F32], "{plan}");
    let p = Wkv6Params {
        batch: 1,
        len: 2048,
        heads: 4,
        head: 64,
        chunks: 2,
        span: 32,
        mode: WKV_SPAN_STATES,
        ..Wkv6Params::default()
    };
    let v = Arg::Value;
    let (states, pass, outputs) = (ks[0].1, ks[1].1, ks[2].1);
    let Arg::Output(changes) = states[8] else { panic!("{plan}") };
    let Arg::Value(starts) = pass[5] else { panic!("{plan}") };
    assert_eq!(states[0], params(&p));
    assert_eq!(states[1..6], rkvw.iter().chain([&u]).map(|&x| v(x)).collect::<Vec<_>>()[..]);
    assert_eq!(states[6..], [Arg::Null, Arg::Null, Arg::Output(changes), Arg::Null]);
    assert_eq!(pass[1..], [v(changes), Arg::Null, Arg::Null, Arg::Output(fin), v(starts)]);
    assert_eq!(outputs[0], params(&Wkv6Params { mode: WKV_SPAN_OUTPUTS, ..p }));
    assert_eq!(outputs[6..], [v(starts), Arg::Null, Arg::Null, v(y)]);
    // A block per (head, span); the pass a thread per state element.
    assert_eq!((ks[0].2, ks[0].3), ([256, 1, 1], [128, 1, 1]));
    assert_eq!(ks[2].2, [256, 1, 1]);
    assert_eq!(ks[1].2[0] * ks[1].3[0], (h * n * n) as u32);
    assert_eq!(plan.values[changes.index()].bytes(), Some(4 * 64 * wkv_span_stride(64) as u64 * 4));
    assert_eq!(plan.values[starts.index()].bytes(), Some(4 * 64 * 64 * 64 * 4));
    // Off, or with heads enough for every multiprocessor, one launch over whole sequences.
    let off = compile(&g, &Binding::new(), &PlanOptions { wkv_spans: false, ..options }).unwrap();
    assert_eq!(kernels(&off).iter().map(|k| k.0).collect::<Vec<_>>(), [KernelId::Wkv6F32]);
    let few = compile(&g, &Binding::new(), &PlanOptions { sm_count: 4, ..options }).unwrap();
    assert_eq!(kernels(&few).len(), 1);
    // `wkv6_f32`'s launch bound (`.maxntid 128`, host/build.rs) holds every head it takes.
    assert!((1..=WKV_SMALL_HEAD).all(|n| wkv_threads(n) <= 128));
    assert_eq!(wkv_threads(WKV_MAX_HEAD), 512);
}

/// The GPU test's first two-chunk WKV case (B = 2, H = 1, N = 33, L = 1, `[B,H,T,N]`, initial
/// state, both outputs): 96 threads (rows 0..32 of every column by chunk 0, row 32 by chunk 1),
/// `4 N + 2 N` f32 of shared memory, the final state written through its own output buffer of
/// `B H N N` f32 and y through another, neither in the arena.
#[test]
fn wkv_two_chunk_launch_covers_every_state_row() {
    let (b, h, l, n) = (2, 1, 1, 33);
    let mut g = Graph::new();
    let rkvw: Vec<ValueId> = ["r", "k", "v", "w"].iter().map(|s| input(&mut g, s, &[b, h, l, n])).collect();
    let u = input(&mut g, "u", &[h, n]);
    let s0 = input(&mut g, "s0", &[b, h, n, n]);
    let ins = rkvw.iter().chain([&u, &s0]).map(|&v| Some(v)).collect();
    let outs = g.push_opt(Op::Wkv6(op::Wkv6 { layout: op::Wkv6Layout::Bhtn }), ins, 2);
    let (y, fin) = (outs[0], outs[1]);
    g.output(y);
    g.output(fin);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let ks = kernels(&plan);
    assert_eq!(ks.len(), 1, "{plan}");
    let (kernel, args, grid, block, shared) = ks[0];
    assert_eq!(kernel, KernelId::Wkv6F32);
    let p = Wkv6Params {
        batch: 2,
        len: 1,
        heads: 1,
        head: 33,
        layout_bhtn: 1,
        exp_bonus: 0,
        chunks: 2,
        ..Wkv6Params::default()
    };
    let v = Arg::Value;
    let want = [
        params(&p),
        v(rkvw[0]),
        v(rkvw[1]),
        v(rkvw[2]),
        v(rkvw[3]),
        v(u),
        v(s0),
        Arg::Null,
        Arg::Output(fin),
        v(y),
    ];
    assert_eq!(args, want);
    assert_eq!((grid, block, shared), ([2, 1, 1], [96, 1, 1], (4 * 33 + 2 * 33) * 4));
    assert_eq!(plan.outputs, [y, fin]);
    assert_eq!(plan.values[fin.index()].bytes(), Some(2 * 33 * 33 * 4));
    assert_eq!(plan.values[y.index()].bytes(), Some(2 * 33 * 4));
    assert!(plan.memory.slots[y.index()].is_none() && plan.memory.slots[fin.index()].is_none(), "{plan}");
    // Every head size: the chunks cover the rows, the block holds every owner, within 512 threads.
    for n in 1..=WKV_MAX_HEAD {
        let c = wkv_chunks(n);
        assert!(c * WKV_ROWS >= n && (c - 1) * WKV_ROWS < n, "N = {n}");
        assert!(
            wkv_threads(n) >= c * n && wkv_threads(n) <= 512 && wkv_threads(n).is_multiple_of(32),
            "N = {n}"
        );
        assert_eq!(wkv_shared_bytes(n), (4 * n + c * n) * 4, "N = {n}");
    }
}

/// An RGLRU node (with a final-state output), a MambaScan node and a WKV6 node.
fn recurrent_graph(with_init: bool) -> (Graph, [ValueId; 2]) {
    let mut g = Graph::new();
    let x = g.input("x", F, [Dim::Known(2), Dim::Symbol("len".into()), Dim::Known(8)]);
    let a = g.input("a", F, [Dim::Known(2), Dim::Symbol("len".into()), Dim::Known(8)]);
    let init = with_init.then(|| input(&mut g, "h0", &[2, 8]));
    let lru = g.push_opt(Op::Rglru, vec![Some(x), Some(a), None, init], 2);
    g.output(lru[0]);
    g.output(lru[1]);
    let l = Dim::Symbol("len".into());
    let dims = |d: &[Dim]| d.to_vec();
    let (k, one) = (Dim::Known(4), Dim::Known(1));
    let mu = g.input("mu", F, dims(&[one.clone(), k.clone(), l.clone()]));
    let ma = input(&mut g, "ma", &[4, 2]);
    let mb = g.input("mb", F, dims(&[one.clone(), Dim::Known(2), l.clone()]));
    let md = input(&mut g, "md", &[4]);
    let my = g.op1(Op::MambaScan, &[mu, mu, ma, mb, mb, md]);
    g.output(my);
    let r = g.input("r", F, dims(&[one, l, Dim::Known(2), Dim::Known(16)]));
    let u = input(&mut g, "u", &[2, 16]);
    let wkv = g.push(Op::Wkv6(op::Wkv6::default()), &[r, r, r, r, u], 1);
    g.output(wkv[0]);
    (g, [lru[1], wkv[0]])
}

#[test]
fn stateful_plans_bind_persistent_slots_named_after_nodes() {
    let (g, [lru_final, _]) = recurrent_graph(false);
    let binding = Binding::new().with("len", 1);
    let plan = compile(&g, &binding, &stateful()).unwrap();
    let lru = StateSlot { name: "rglru_0".into(), dims: vec![2, 8] };
    let wkv = StateSlot { name: "wkv6_2".into(), dims: vec![1, 2, 16, 16] };
    assert_eq!(plan.states, [lru.clone(), wkv.clone()], "MambaScan restarts every call: no slot");
    let ks = kernels(&plan);
    let rg = ks.iter().find(|k| k.0 == KernelId::RglruF32).unwrap();
    let st = Arg::State("rglru_0".into());
    assert_eq!(rg.1[4..7], [st.clone(), st, Arg::Output(lru_final)]);
    let mamba = ks.iter().find(|k| k.0 == KernelId::SelectiveScanF32).unwrap();
    assert_eq!(mamba.1[9..12], [Arg::Null, Arg::Null, Arg::Null]);
    let text = plan.to_string();
    assert!(text.contains("state:wkv6_2") && text.contains(", state 2112 bytes in 2 slots"), "{text}");
    assert_eq!(lru.bytes() + wkv.bytes(), 64 + 2048);
    let json = serde_json::to_string(&plan).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    // The same layout for a prefill binding, and none without stateful mode.
    let prefill = compile(&g, &Binding::new().with("len", 300), &stateful()).unwrap();
    assert_eq!(prefill.states, plan.states);
    assert!(compile(&g, &binding, &PlanOptions::default()).unwrap().states.is_empty());
}

#[test]
fn stateful_mode_refuses_an_initial_state_input() {
    let (g, _) = recurrent_graph(true);
    let binding = Binding::new().with("len", 3);
    let plain = compile(&g, &binding, &PlanOptions::default()).unwrap();
    let rg = kernels(&plain).into_iter().find(|k| k.0 == KernelId::RglruF32).unwrap();
    assert_eq!(rg.1[4], Arg::Value(g.inputs[2]), "the initial state is read from the input");
    match compile(&g, &binding, &stateful()) {
        Err(PlanError::NoKernel { nodes }) => {
            assert_eq!(nodes.len(), 1);
            assert!(nodes[0].2.contains("stateful mode") && nodes[0].2.contains("`h0`"), "{nodes:?}");
        }
        other => panic!("expected NoKernel, got {other:?}"),
    }
}

#[test]
fn the_plan_checks_its_state_slots() {
    let (g, _) = recurrent_graph(false);
    let plan = compile(&g, &Binding::new().with("len", 2), &stateful()).unwrap();
    let err = |p: &Plan| p.validate().unwrap_err().to_string();
    let mut p = plan.clone();
    p.states.remove(0);
    assert!(err(&p).contains("undeclared state `rglru_0`"), "{}", err(&p));
    let mut p = plan.clone();
    p.states.push(StateSlot { name: "extra".into(), dims: vec![3] });
    assert!(err(&p).contains("`extra` is used by 0 steps"), "{}", err(&p));
    let mut p = plan.clone();
    p.states.push(p.states[0].clone());
    assert!(err(&p).contains("two state slots are named `rglru_0`"), "{}", err(&p));
    let mut p = plan.clone();
    p.states[1].dims[0] = 0;
    assert!(err(&p).contains("is empty"), "{}", err(&p));
    let mut p = plan;
    let out = p
        .steps
        .iter_mut()
        .find_map(|s| match s {
            Step::Kernel { args, .. } => args.iter_mut().find(|a| matches!(a, Arg::Output(_))),
            Step::Copy { .. } => None,
        })
        .expect("the RGLRU step writes its final state");
    *out = Arg::Output(ValueId(1));
    assert!(err(&p).contains("which has no buffer"), "an extra output must have a home: {}", err(&p));
}

#[test]
fn limits_and_dtypes_are_reported() {
    // State size past the register budget of the scans.
    let mut g = Graph::new();
    let u = input(&mut g, "u", &[1, 2, 3]);
    let a = input(&mut g, "a", &[2, 257]);
    let bm = input(&mut g, "bm", &[1, 257, 3]);
    let y = g.push(Op::SelectiveScan(Default::default()), &[u, u, a, bm, bm], 1);
    g.output(y[0]);
    assert!(no_kernel_reason(&g, &PlanOptions::default()).contains("state size N = 257"));
    // WKV head size past 128.
    let mut g = Graph::new();
    let r = input(&mut g, "r", &[1, 1, 2, 130]);
    let uu = input(&mut g, "u", &[2, 130]);
    let y = g.push(Op::Wkv6(Default::default()), &[r, r, r, r, uu], 1);
    g.output(y[0]);
    assert!(no_kernel_reason(&g, &PlanOptions::default()).contains("head size N = 130"));
    // A conv wider than 16.
    let mut g = Graph::new();
    let x = input(&mut g, "x", &[1, 2, 3]);
    let w = input(&mut g, "w", &[2, 17]);
    let y = g.push(Op::CausalConvWithState(Default::default()), &[x, w], 1);
    g.output(y[0]);
    assert!(no_kernel_reason(&g, &PlanOptions::default()).contains("conv width K = 17"));
    // bf16 operands.
    let mut g = Graph::new();
    let x = g.input("x", DType::BF16, [Dim::Known(1), Dim::Known(2), Dim::Known(3)]);
    let y = g.op1(Op::GriffinRglru, &[x, x]);
    g.output(y);
    let native = PlanOptions { widen_narrow_floats: false, ..PlanOptions::default() };
    assert!(no_kernel_reason(&g, &native).contains("is bfloat16; the sequence kernels take f32"));
    // Widened to f32 (the default), it compiles.
    compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
}

/// `Scan` of states `s` (`[2, d]`) and a loop-invariant `w` (`[d]`, passed through): per step
/// `s' = max(s * w, x)`, `y = exp(s) + 1`, over `xs` (`[2, t, d]`) along axis 1 in direction
/// `dir`, `y` stacked along axis 0 in direction `dir`. `captured`: the body reads `w` from the
/// outer graph instead.
fn elementwise_scan(d: usize, t: usize, dir: i64, captured: bool) -> Graph {
    let mut body = Graph::new();
    let s = input(&mut body, "s", &[2, d]);
    let mut g = Graph::new();
    let s0 = input(&mut g, "s0", &[2, d]);
    let w0 = input(&mut g, "w0", &[d]);
    let xs = input(&mut g, "xs", &[2, t, d]);
    let w = if captured {
        let inner = body.add_value("w", None);
        body.captures.push(crate::graph::Capture { inner, outer: w0 });
        inner
    } else {
        input(&mut body, "w", &[d])
    };
    let x = input(&mut body, "x", &[2, d]);
    let sw = body.mul(s, w);
    let s2 = body.op1(Op::Max, &[sw, x]);
    let e = body.op1(Op::Exp, &[s]);
    let one = body.initializer("one", crate::ConstTensor::scalar_f32(1.0));
    let y = body.add(e, one);
    body.output(s2);
    if !captured {
        body.output(w);
    }
    body.output(y);
    let scan = op::Scan {
        body: Box::new(body),
        num_scan_inputs: 1,
        scan_input_axes: vec![1],
        scan_input_directions: vec![dir],
        scan_output_axes: vec![0],
        scan_output_directions: vec![dir],
    };
    let ins: Vec<ValueId> = if captured { vec![s0, xs] } else { vec![s0, w0, xs] };
    let outs = g.push(Op::Scan(scan), &ins, if captured { 2 } else { 3 });
    g.output(outs[0]);
    g.output(outs[outs.len() - 1]);
    g
}

/// The fields of `ScanProgramParams` bytes the test reads (safe: by `offset_of!`).
struct ScanBytes<'a>(&'a [u8]);

impl ScanBytes<'_> {
    fn u64(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.0[off..off + 8].try_into().unwrap())
    }
    fn u32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.0[off..off + 4].try_into().unwrap())
    }
    /// Input (`out` false) or output `k`: (strides of the last two dims, start, step, reg, per_step).
    fn operand(&self, out: bool, k: usize) -> ([u64; 2], u64, u64, u32, u32) {
        use kernels_gpu::abi::{ScanOperand, ScanProgramParams};
        use std::mem::{offset_of, size_of};
        let base =
            if out { offset_of!(ScanProgramParams, outputs) } else { offset_of!(ScanProgramParams, inputs) }
                + k * size_of::<ScanOperand>();
        let st = base + offset_of!(ScanOperand, strides);
        (
            [self.u64(st + 48), self.u64(st + 56)],
            self.u64(base + offset_of!(ScanOperand, start)),
            self.u64(base + offset_of!(ScanOperand, step)),
            self.u32(base + offset_of!(ScanOperand, reg)),
            self.u32(base + offset_of!(ScanOperand, per_step)),
        )
    }
}

#[test]
fn an_elementwise_scan_lowers_to_one_scan_program() {
    use kernels_gpu::abi::{EwInstr, SCAN_PROG_REGS, ScanProgramParams};
    use std::mem::{offset_of, size_of};
    let (d, t) = (5, 7);
    for dir in [0, 1] {
        let g = elementwise_scan(d, t, dir, false);
        assert_eq!(
            crate::stage::split(&g, &Binding::new()).unwrap(),
            None,
            "runs in the plan, not as control flow"
        );
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let ks = kernels(&plan);
        let [(KernelId::ScanProgramF32, args, _, [threads, 1, 1], shared)] = ks.as_slice() else {
            panic!("{plan}")
        };
        assert_eq!(*shared, kernels_gpu::abi::scan_program_shared_bytes(*threads));
        let Arg::Params(bytes) = &args[0] else { panic!() };
        assert_eq!(bytes.len(), size_of::<ScanProgramParams>());
        let p = ScanBytes(bytes);
        let head = |f: usize| p.u32(f);
        assert_eq!((p.u64(0), p.u64(8)), (10, 7), "channels, steps");
        let counts = [
            offset_of!(ScanProgramParams, rank),
            offset_of!(ScanProgramParams, n_inputs),
            offset_of!(ScanProgramParams, n_instr),
            offset_of!(ScanProgramParams, n_copies),
        ]
        .map(head);
        assert_eq!(counts, [2, 3, 4, 1], "rank, inputs, instructions, copies");
        // s (once), w (once, broadcast over the first dim), xs (each step: [2, t, d] strides).
        let (s, w, xs) = (p.operand(false, 0), p.operand(false, 1), p.operand(false, 2));
        assert_eq!((s.0, s.4), ([d as u64, 1], 0));
        assert_eq!((w.0, w.4), ([0, 1], 0));
        let (start, step) =
            if dir == 0 { (0, d as u64) } else { (((t - 1) * d) as u64, (d as u64).wrapping_neg()) };
        assert_eq!(xs, ([(t * d) as u64, 1], start, step, xs.3, 1));
        // The final state (slot 0, once), the stacked y (the last slot, along axis 0: steps of 2 * d).
        assert_eq!(p.operand(true, 0).4, 0);
        let y = p.operand(true, 3);
        let start = if dir == 0 { 0 } else { ((t - 1) * 2 * d) as u64 };
        let step = if dir == 0 { (2 * d) as u64 } else { ((2 * d) as u64).wrapping_neg() };
        assert_eq!((y.0, y.1, y.2, y.4), ([d as u64, 1], start, step, 1));
        // The state register is copied from the Max's after each step; y's `+ 1` an immediate.
        assert_eq!(p.u32(offset_of!(ScanProgramParams, copies)), s.3);
        let instr = |k: usize| {
            let o = offset_of!(ScanProgramParams, instrs) + k * size_of::<EwInstr>();
            (p.u32(o + offset_of!(EwInstr, b)), f32::from_bits(p.u32(o + offset_of!(EwInstr, imm))))
        };
        assert!((0..4).any(|k| instr(k) == (SCAN_PROG_REGS, 1.0)));
        // The final s and w (unread but planned), a null slot, then y.
        assert!(matches!(args[9..], [Arg::Output(_), Arg::Output(_), Arg::Null, Arg::Value(_)]), "{args:?}");
    }
    // A body reading the outer graph stays control flow.
    let g = elementwise_scan(d, t, 0, true);
    assert!(crate::stage::split(&g, &Binding::new()).unwrap().is_some());
}
