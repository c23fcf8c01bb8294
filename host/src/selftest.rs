//! Device self-tests, shared by `ferrofuse doctor` and the GPU test suite: the intrinsic probes
//! (whose every output word is predicted here) and one pass of every elementwise kernel against the
//! CPU reference on fresh random data with poisoned outputs.

use cudarc::driver::{CudaSlice, DevicePtr};
use kernels_gpu::abi::{BinaryOp, KernelId, ProbeParams, UnaryOp};

use crate::compare::{Tolerance, check_close};
use crate::device::{Context, DeviceTensor, KernelArg, LaunchShape, PtxFlavour, params_bytes};
use crate::error::HostError;
use crate::ops::elementwise;
use crate::reference;
use crate::tensor::HostTensor;

mod dtypes;
mod exports;
mod unrolled;
pub use dtypes::*;
pub use exports::*;
pub use unrolled::*;

/// Value written into outputs before a kernel runs: no kernel under test can produce it, so an
/// element still holding it was never written.
pub const POISON: f32 = -3.0e38;

/// A small deterministic generator (SplitMix64) for test data; tests seed it freshly each run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// A tensor of `shape` with elements uniform in `[lo, hi)`.
    pub fn tensor(&mut self, shape: &[usize], lo: f32, hi: f32) -> HostTensor {
        let n = shape.iter().product();
        HostTensor::new(shape.to_vec(), (0..n).map(|_| self.uniform(lo, hi)).collect::<Vec<f32>>())
            .expect("length matches")
    }
}

/// Input range a binary op is tested over (Pow: positive bases, so that results are finite).
pub fn binary_input_range(op: BinaryOp) -> [(f32, f32); 2] {
    match op {
        BinaryOp::Pow => [(0.25, 4.0), (-3.0, 3.0)],
        _ => [(-8.0, 8.0), (-8.0, 8.0)],
    }
}

fn failure(check: impl Into<String>, detail: impl Into<String>) -> HostError {
    HostError::SelfTest { check: check.into(), detail: detail.into() }
}

/// Runs `op` on the GPU over `a` and `b` (each placed `offset` elements into its allocation) into a
/// poisoned output, and compares with the reference.
pub fn check_binary(
    ctx: &Context,
    op: BinaryOp,
    a: &HostTensor,
    b: &HostTensor,
    offset: usize,
) -> Result<(), HostError> {
    let want = reference::elementwise::binary(op, a, b)?;
    let da = DeviceTensor::from_host_at_offset(ctx, a, offset)?;
    let db = DeviceTensor::from_host_at_offset(ctx, b, offset)?;
    let mut dy = DeviceTensor::filled(ctx, want.shape(), POISON)?;
    elementwise::binary(ctx, op, &da, &db, &mut dy)?;
    let got = dy.to_host(ctx)?;
    check_close(&got, &want, Tolerance::for_binary(op))
        .map_err(|d| failure(format!("{op:?} {:?} x {:?} (offset {offset})", a.shape(), b.shape()), d))
}

/// Runs `op` on the GPU over `x` (placed `offset` elements into its allocation) into a poisoned
/// output, and compares with the reference.
pub fn check_unary(ctx: &Context, op: UnaryOp, x: &HostTensor, offset: usize) -> Result<(), HostError> {
    let want = reference::elementwise::unary(op, x)?;
    let dx = DeviceTensor::from_host_at_offset(ctx, x, offset)?;
    let mut dy = DeviceTensor::filled(ctx, x.shape(), POISON)?;
    elementwise::unary(ctx, op, &dx, &mut dy)?;
    let got = dy.to_host(ctx)?;
    check_close(&got, &want, Tolerance::for_unary(op))
        .map_err(|d| failure(format!("{op:?} {:?} (offset {offset})", x.shape()), d))
}

/// Every elementwise kernel once: binary ops on a broadcast and a same-shape (vector path) case,
/// unary ops on an odd length.
pub fn elementwise_kernels(ctx: &Context, seed: u64) -> Result<(), HostError> {
    let mut rng = Rng::new(seed);
    for op in BinaryOp::ALL {
        let [(alo, ahi), (blo, bhi)] = binary_input_range(op);
        for (sa, sb) in [(&[33usize, 65][..], &[65usize][..]), (&[1027], &[1027])] {
            let (a, b) = (rng.tensor(sa, alo, ahi), rng.tensor(sb, blo, bhi));
            check_binary(ctx, op, &a, &b, 0)?;
        }
    }
    for op in UnaryOp::ALL {
        check_unary(ctx, op, &rng.tensor(&[1025], -8.0, 8.0), 0)?;
    }
    Ok(())
}

fn upload<T: cudarc::driver::DeviceRepr>(ctx: &Context, data: &[T]) -> Result<CudaSlice<T>, HostError> {
    ctx.stream().clone_htod(data).map_err(HostError::driver("copying probe data to the device"))
}

fn download<T: cudarc::driver::DeviceRepr>(ctx: &Context, buf: &CudaSlice<T>) -> Result<Vec<T>, HostError> {
    let v = ctx.stream().clone_dtoh(buf).map_err(HostError::driver("copying probe results to the host"))?;
    ctx.synchronize()?;
    Ok(v)
}

fn ptr<T>(ctx: &Context, buf: &CudaSlice<T>) -> u64 {
    buf.device_ptr(ctx.stream()).0
}

/// `strided_copy_b16` on a 2-D copy of `rows` rows of `cols` 16-byte vectors (source rows
/// `cols + 1` vectors apart, destination rows `cols` apart, as a Concat part is read), from and
/// to buffers `x_words` and `y_words` 4-byte words past 256-byte aligned allocations (so the
/// vectors are unaligned unless both are multiples of 4): the copy equals the host's.
pub fn check_vector_copy(
    ctx: &Context,
    rows: usize,
    cols: usize,
    x_words: usize,
    y_words: usize,
) -> Result<(), HostError> {
    use kernels_gpu::abi::{MAX_RANK, StridedCopyParams};
    let x: Vec<u32> = (0..x_words + rows * (cols + 1) * 4).map(|i| i as u32 * 2_654_435_761).collect();
    let src = upload(ctx, &x)?;
    let dst = upload(ctx, &vec![0xDEAD_BEEFu32; y_words + rows * cols * 4])?;
    let mut p = StridedCopyParams { elems: (rows * cols) as u64, rank: 2, ..StridedCopyParams::default() };
    p.shape[MAX_RANK - 2..].copy_from_slice(&[rows as u64, cols as u64]);
    p.x_strides[MAX_RANK - 2..].copy_from_slice(&[cols as i64 + 1, 1]);
    p.y_strides[MAX_RANK - 2..].copy_from_slice(&[cols as i64, 1]);
    let shape = LaunchShape { grid: [3, 1, 1], block: [64, 1, 1], shared_bytes: 0 };
    let (xp, yp) = (ptr(ctx, &src) + 4 * x_words as u64, ptr(ctx, &dst) + 4 * y_words as u64);
    // SAFETY: strided_copy_b16 takes (StridedCopyParams, *const, *mut); every offset the shape and
    // strides produce is inside the two buffers (sized for them past their word offsets), which
    // do not overlap and are 4-byte aligned; any grid-stride launch shape.
    unsafe {
        ctx.launch(
            KernelId::StridedCopyB16,
            shape,
            &[KernelArg::Params(params_bytes(&p)), KernelArg::Ptr(xp), KernelArg::Ptr(yp)],
        )?
    };
    let got = download(ctx, &dst)?;
    for r in 0..rows {
        for w in 0..cols * 4 {
            let (want, at) = (x[x_words + r * (cols + 1) * 4 + w], y_words + r * cols * 4 + w);
            if got[at] != want {
                return Err(failure(
                    format!("strided_copy_b16 {rows}x{cols} (word offsets {x_words}, {y_words})"),
                    format!("row {r} word {w}: {:#x}, want {want:#x}", got[at]),
                ));
            }
        }
    }
    if got[..y_words].iter().any(|&v| v != 0xDEAD_BEEF) {
        return Err(failure("strided_copy_b16", "wrote before its destination"));
    }
    Ok(())
}

/// `probe_warp` on two warps: indices, lane ids, shuffles, votes, warp reductions, the block
/// barrier, dynamic shared memory and five kinds of atomics.
pub fn probe_warp(ctx: &Context) -> Result<(), HostError> {
    const THREADS: u32 = 64;
    const WORDS: u32 = 10;
    let out_words = THREADS * WORDS + 5;
    let out = upload(ctx, &vec![0xDEAD_BEEFu32; out_words as usize])?;
    let p = ProbeParams { threads: THREADS, out_words };
    let shape = LaunchShape { grid: [1, 1, 1], block: [THREADS, 1, 1], shared_bytes: THREADS * 4 };
    // SAFETY: probe_warp takes (ProbeParams, *mut u32) and writes `out_words` words, the buffer's
    // length; one block of `threads` threads with 4 bytes of shared memory each, as it requires.
    unsafe {
        ctx.launch(
            KernelId::ProbeWarp,
            shape,
            &[KernelArg::Params(params_bytes(&p)), KernelArg::Ptr(ptr(ctx, &out))],
        )?
    };
    let got = download(ctx, &out)?;
    let names = [
        "tid",
        "lane",
        "warp_sum",
        "ballot",
        "shfl_idx",
        "shfl_down",
        "shared",
        "votes",
        "warp_max",
        "shfl_xor",
    ];
    for t in 0..THREADS {
        let (lane, warp) = (t % 32, t / 32);
        let want = [
            t,
            lane,
            528f32.to_bits(),
            0xAAAA_AAAA,
            (warp * 32 + 3) * 10,
            if lane < 31 { t + 1 } else { t },
            ((t + 1) % THREADS) * 7,
            1,
            31f32.to_bits(),
            lane ^ 1,
        ];
        for (k, w) in want.iter().enumerate() {
            let g = got[(t * WORDS) as usize + k];
            if g != *w {
                return Err(failure(
                    "probe_warp",
                    format!("thread {t} {}: got {g:#x}, expected {w:#x}", names[k]),
                ));
            }
        }
    }
    let c = &got[(THREADS * WORDS) as usize..];
    let counters_ok = c[0] == THREADS
        && f32::from_bits(c[1]) == THREADS as f32 * 0.5
        && c[2] == THREADS - 1
        && (1..=THREADS).contains(&c[3])
        && c[4] == 1;
    if !counters_ok {
        return Err(failure(
            "probe_warp atomics",
            format!("counters {c:?}, expected [64, 32.0, 63, 1..=64, 1]"),
        ));
    }
    Ok(())
}

/// `probe_mma`: one m16n8k16 bf16 tile through `cp.async`, `ldmatrix` and `mma.sync`, compared
/// exactly (small integers, so every product and sum is exact in f32).
pub fn probe_mma(ctx: &Context, seed: u64) -> Result<(), HostError> {
    let mut rng = Rng::new(seed);
    let mut int = || (rng.next_u64() % 7) as f32 - 3.0;
    let a: Vec<f32> = (0..256).map(|_| int()).collect();
    let bt: Vec<f32> = (0..128).map(|_| int()).collect();
    // Small integers are exact in bf16: the top half of the f32 bits.
    let bf16 = |v: &[f32]| v.iter().map(|x| (x.to_bits() >> 16) as u16).collect::<Vec<u16>>();
    let (da, db) = (upload(ctx, &bf16(&a))?, upload(ctx, &bf16(&bt))?);
    let dc = upload(ctx, &[POISON; 128])?;
    let p = ProbeParams { threads: 32, out_words: 128 };
    let shape = LaunchShape { grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 768 };
    let args = [
        KernelArg::Params(params_bytes(&p)),
        KernelArg::Ptr(ptr(ctx, &da)),
        KernelArg::Ptr(ptr(ctx, &db)),
        KernelArg::Ptr(ptr(ctx, &dc)),
    ];
    // SAFETY: probe_mma takes (ProbeParams, *const u16 [256], *const u16 [128], *mut f32 [128]);
    // the buffers have those lengths and cudaMalloc's 256-byte alignment; one warp, 768 bytes of
    // shared memory.
    unsafe { ctx.launch(KernelId::ProbeMma, shape, &args)? };
    let got = download(ctx, &dc)?;
    for m in 0..16 {
        for n in 0..8 {
            let want: f32 = (0..16).map(|k| a[m * 16 + k] * bt[n * 16 + k]).sum();
            if got[m * 8 + n] != want {
                return Err(failure(
                    "probe_mma",
                    format!("C[{m}][{n}] = {}, expected {want}", got[m * 8 + n]),
                ));
            }
        }
    }
    Ok(())
}

/// `probe_hopper`: on the Hopper flavour every thread of the warpgroup must report that the
/// `wgmma` fences ran; on the portable flavour that they were compiled out.
pub fn probe_hopper(ctx: &Context) -> Result<(), HostError> {
    let out = upload(ctx, &[0xDEAD_BEEFu32; 128])?;
    let p = ProbeParams { threads: 128, out_words: 128 };
    // SAFETY: probe_hopper takes (ProbeParams, *mut u32 [128]); one block of 128 threads, 4 KiB of
    // shared memory.
    unsafe {
        ctx.launch(
            KernelId::ProbeHopper,
            LaunchShape { grid: [1, 1, 1], block: [128, 1, 1], shared_bytes: 4096 },
            &[KernelArg::Params(params_bytes(&p)), KernelArg::Ptr(ptr(ctx, &out))],
        )?
    };
    let got = download(ctx, &out)?;
    let want = (ctx.flavour() == PtxFlavour::Hopper) as u32;
    match got.iter().position(|&g| g != want) {
        None => Ok(()),
        Some(t) => Err(failure("probe_hopper", format!("thread {t} wrote {:#x}, expected {want}", got[t]))),
    }
}

/// Every self-test, by name, with its outcome (for `doctor`).
pub fn run_all(ctx: &Context, seed: u64) -> Vec<(&'static str, Result<(), HostError>)> {
    vec![
        ("intrinsics: indices, shuffles, votes, shared memory, atomics", probe_warp(ctx)),
        ("intrinsics: cp.async + ldmatrix + mma.sync bf16", probe_mma(ctx, seed)),
        ("intrinsics: sm_90a wgmma fences (Hopper flavour only)", probe_hopper(ctx)),
        ("elementwise kernels vs CPU reference", elementwise_kernels(ctx, seed)),
    ]
}

/// The staged-run workload of the GPU tests and the `staged` bench: `x [rows, 4]` f32; the rows
/// whose first column is positive (NonZero) go through a linear layer (4 -> 8, ReLU) and are summed;
/// `sigmoid(x)` is a second output that does not wait for the count. Outputs: the selected rows'
/// activations `[count, 8]`, their sum `[]`, `sigmoid(x)`.
pub fn selected_rows_graph(rows: usize) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{ConstTensor, DType, Dim, Graph};
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(rows), Dim::Known(4)]);
    let zero = g.const_i64("zero", &[], &[0]);
    let col = g.gather(x, zero, 1);
    let pos = g.relu(col);
    let nz = g.op1(Op::NonZero, &[pos]);
    let flat_shape = g.const_i64("flat", &[1], &[-1]);
    let idx = g.reshape(nz, flat_shape);
    let picked = g.gather(x, idx, 0);
    let w: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
    let w = g.initializer("w", ConstTensor::from_f32(&[4, 8], &w).expect("32 weights"));
    let b = g.initializer("b", ConstTensor::from_f32(&[8], &[0.1; 8]).expect("8 biases"));
    let h = g.matmul(picked, w);
    let hb = g.add(h, b);
    let y = g.relu(hb);
    let total = g.op1(Op::ReduceSum(op::Reduce { keepdims: false, ..Default::default() }), &[y]);
    let s = g.sigmoid(x);
    g.output(y);
    g.output(total);
    g.output(s);
    g
}

/// The hoisting workload of the GPU tests (`Plan::hoisted`): `x [1, seq]` f32 (`seq` symbolic).
/// Values of the weights and the bound length alone, as exporters build position tables:
/// `p = CumSum(Sin(Range(0, seq) * w))` with a weight `w` (the Range folds for each binding; the
/// Sin and the CumSum are the hoisted steps). Output: `relu(x + p) * exp(v)`, `v` another weight.
pub fn position_table_graph() -> planner::Graph {
    use planner::op::{CumSum, Op, ShapeOf};
    use planner::{ConstTensor, DType, Dim, Graph};
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(1), Dim::Symbol("seq".into())]);
    let shape = g.op1(Op::Shape(ShapeOf::default()), &[x]);
    let one = g.const_i64("one", &[], &[1]);
    let len = g.gather(shape, one, 0);
    let limit = g.cast(len, DType::F32);
    let start = g.initializer("start", ConstTensor::scalar_f32(0.0));
    let delta = g.initializer("delta", ConstTensor::scalar_f32(1.0));
    let range = g.op1(Op::Range, &[start, limit, delta]);
    let w = g.initializer("w", ConstTensor::scalar_f32(0.7));
    let scaled = g.mul(range, w);
    let sin = g.op1(Op::Sin, &[scaled]);
    let axis = g.const_i64("axis", &[], &[0]);
    let table = g.op1(Op::CumSum(CumSum::default()), &[sin, axis]);
    let v = g.initializer("v", ConstTensor::from_f32(&[1], &[-0.25]).expect("one weight"));
    let ev = g.op1(Op::Exp, &[v]);
    let sum = g.add(x, table);
    let r = g.relu(sum);
    let y = g.mul(r, ev);
    g.output(y);
    g
}

/// An input for [`selected_rows_graph`]: about `positive` of the rows are selected.
pub fn selected_rows_input(rng: &mut Rng, rows: usize, positive: f64) -> HostTensor {
    let v: Vec<f32> = (0..rows * 4)
        .map(|i| {
            let mag = (rng.next_u64() % 1000) as f32 / 250.0 + 0.01;
            let up = i % 4 != 0 || (rng.next_u64() % 1000) as f64 / 1000.0 < positive;
            if up { mag } else { -mag }
        })
        .collect();
    HostTensor::new(vec![rows, 4], v).expect("rows * 4 values")
}

/// How [`spelled_rms_norm_graph`] writes its RMS normalization (each a spelling transformers'
/// RMSNorm modules export to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmsSpelling {
    /// `x * Reciprocal(Sqrt(mean(Pow(x, 2)) + eps)) * w` (Gemma, Llama).
    ReciprocalSqrt,
    /// `Pow(mean(x * x) + eps, -0.5) * x`, no weight.
    PowHalf,
    /// `x / Sqrt(eps + mean(x²))`, then a weight of a higher rank than the normalized dims (not
    /// absorbed: it stays a Mul).
    DivSqrt,
    /// `x * Div(1, Sqrt(mean(x²) + eps)) * w`, reduced over the last two axes.
    DivOne,
}

/// An RMS normalization of `x` (`dims`, f32) over its last axis (two for [`RmsSpelling::DivOne`])
/// with epsilon 1e-6, spelled out per `spelling` (what `plan::decomposed` lifts to an
/// `RMSNormalization`); the weight is a graph input `w`.
pub fn spelled_rms_norm_graph(dims: &[usize], spelling: RmsSpelling) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{ConstTensor, DType, Dim, Graph};
    let known = |d: &[usize]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
    let rank = dims.len();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(dims));
    let scalar = |g: &mut Graph, name: &str, v: f32| g.initializer(name, ConstTensor::scalar_f32(v));
    let sq = match spelling {
        RmsSpelling::PowHalf => g.op1(Op::Mul, &[x, x]),
        _ => {
            let two = scalar(&mut g, "two", 2.0);
            g.op1(Op::Pow, &[x, two])
        }
    };
    let axes: Vec<i64> = if spelling == RmsSpelling::DivOne { vec![-2, -1] } else { vec![-1] };
    let axes = g.const_i64("axes", &[axes.len()], &axes);
    let mean = g.op1(Op::ReduceMean(op::Reduce::default()), &[sq, axes]);
    let eps = scalar(&mut g, "eps", 1e-6);
    let v = g.op1(Op::Add, &if spelling == RmsSpelling::DivSqrt { [eps, mean] } else { [mean, eps] });
    let y = match spelling {
        RmsSpelling::ReciprocalSqrt => {
            let s = g.op1(Op::Sqrt, &[v]);
            let r = g.op1(Op::Reciprocal, &[s]);
            g.op1(Op::Mul, &[x, r])
        }
        RmsSpelling::PowHalf => {
            let e = scalar(&mut g, "minus_half", -0.5);
            let r = g.op1(Op::Pow, &[v, e]);
            g.op1(Op::Mul, &[r, x])
        }
        RmsSpelling::DivSqrt => {
            let s = g.op1(Op::Sqrt, &[v]);
            g.op1(Op::Div, &[x, s])
        }
        RmsSpelling::DivOne => {
            let s = g.op1(Op::Sqrt, &[v]);
            let one = scalar(&mut g, "one", 1.0);
            let r = g.op1(Op::Div, &[one, s]);
            g.op1(Op::Mul, &[x, r])
        }
    };
    let w_dims: Vec<usize> = match spelling {
        RmsSpelling::PowHalf => Vec::new(),
        RmsSpelling::ReciprocalSqrt => vec![dims[rank - 1]],
        RmsSpelling::DivSqrt => vec![1, dims[rank - 1]],
        RmsSpelling::DivOne => dims[rank - 2..].to_vec(),
    };
    let out = if w_dims.is_empty() {
        y
    } else {
        let w = g.input("w", DType::F32, known(&w_dims));
        g.op1(Op::Mul, &[y, w])
    };
    g.output(out);
    g
}

/// transformers' `MambaRMSNormGated` as dynamo exports it: `x` (`[b, l, d]`, f32) viewed as
/// `[b, l, groups, d / groups]`, RMS-normalized over the last axis as
/// `x * Reciprocal(Sqrt(mean(x²) + eps))` with epsilon 1e-6, viewed back to `[b, l, d]` and
/// scaled by the graph input `w` of `[d]`, the weight first (`Mul(w, y)`).
pub fn grouped_rms_norm_graph(b: usize, l: usize, d: usize, groups: usize) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{ConstTensor, DType, Dim, Graph};
    let known = |d: &[usize]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[b, l, d]));
    let w = g.input("w", DType::F32, known(&[d]));
    let grouped = g.const_i64("grouped", &[4], &[b as i64, l as i64, groups as i64, (d / groups) as i64]);
    let back = g.const_i64("back", &[3], &[b as i64, l as i64, d as i64]);
    let v = g.op1(Op::Reshape(op::Reshape::default()), &[x, grouped]);
    let two = g.initializer("two", ConstTensor::scalar_f32(2.0));
    let sq = g.op1(Op::Pow, &[v, two]);
    let axes = g.const_i64("axes", &[1], &[-1]);
    let mean = g.op1(Op::ReduceMean(op::Reduce::default()), &[sq, axes]);
    let eps = g.initializer("eps", ConstTensor::scalar_f32(1e-6));
    let var = g.op1(Op::Add, &[mean, eps]);
    let root = g.op1(Op::Sqrt, &[var]);
    let r = g.op1(Op::Reciprocal, &[root]);
    let y = g.op1(Op::Mul, &[v, r]);
    let viewed = g.op1(Op::Reshape(op::Reshape::default()), &[y, back]);
    let out = g.op1(Op::Mul, &[w, viewed]);
    g.output(out);
    g
}

/// A uniform f32 tensor in `[lo, hi)` for every input of `g` (their declared, known shapes), by
/// name: the inputs of [`unrolled_scan_graph`] and [`spelled_rms_norm_graph`].
pub fn random_inputs(rng: &mut Rng, g: &planner::Graph, lo: f32, hi: f32) -> Vec<(String, HostTensor)> {
    g.inputs
        .iter()
        .map(|&v| {
            let value = &g.values[v.index()];
            let dims = value.info.as_ref().and_then(|i| i.shape.as_known()).expect("inputs of known shape");
            (value.name.clone(), rng.tensor(&dims, lo, hi))
        })
        .collect()
}
