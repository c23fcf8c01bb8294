//! f32 GEMM with a fused epilogue (`alpha * A B + beta * C`, then an activation): a shared-memory
//! tiled kernel for general shapes and a GEMV-style kernel for small `m` (batch-1 inference), both
//! over arbitrary element strides (transposes, broadcast bias, batched and broadcast-batched
//! operands). FP32 FMA on the CUDA cores: exact FP32 semantics, no TF32. With the tensor cores on
//! (the default) the planner sends few GEMMs here: small-`m` ones that would underfill the device
//! with these tiles run on `gemm_tc.rs` (3xTF32), large ones with unit-stride operands on the
//! large-tile kernels of `gemm_tile.rs`, or on Hopper, where B is a weight, their `wgmma` twins of
//! `gemm_wg.rs`.
//!
//! Each kernel has a `*_program_f32` twin whose epilogue continues with an elementwise program
//! ([`EwProgramParams`], the interpreter of `program.rs`): the GEMM result is the program's input
//! 0 and its other inputs are read at the output element's broadcast offsets (a residual stream,
//! a bias row). The plain entries are monomorphized without it, so their code is unchanged.

use crate::abi::{
    Activation, EW_MAX_INPUTS, EwProgramParams, GEMM_SHARED_BYTES, GEMM_THREADS, GEMM_TILE, GEMV_COLS,
    GEMV_MAX_M, GEMV_WARPS, GemmParams, MAX_RANK,
};
use crate::intrinsics::*;
use crate::math;

/// Output tile of the tiled kernel (rows x columns), its k step, and per-thread micro-tile.
const BM: u32 = GEMM_TILE;
const BN: u32 = GEMM_TILE;
const BK: u32 = crate::abi::GEMM_BK;
const TM: u32 = GEMM_TILE / GEMM_THREADS;
const TN: u32 = GEMM_TILE / GEMM_THREADS;
// The A tile `[BK][BM]` and the B tile `[BK][BN]` must fit the shared memory the host provides,
// and so must the GEMV partial sums `[8 warps][GEMV_MAX_M][32]`.
// The program epilogue stages a whole `[BM][BN]` output tile there too.
const _: () = assert!(
    (BK * BM + BK * BN) * 4 <= GEMM_SHARED_BYTES
        && 8 * GEMV_MAX_M * 32 * 4 <= GEMM_SHARED_BYTES
        && BM * BN * 4 <= GEMM_SHARED_BYTES
);

#[inline(always)]
fn epilogue(p: &GemmParams, c: *const f32, i: u32, j: u32, acc: f32) -> f32 {
    epilogue_with(p, Activation::from_code(p.act), c, i, j, acc)
}

/// [`epilogue`] with the activation `act` (fixed by the caller, e.g. per launch).
#[inline(always)]
pub(crate) fn epilogue_with(p: &GemmParams, act: Activation, c: *const f32, i: u32, j: u32, acc: f32) -> f32 {
    let mut v = p.alpha * acc;
    if p.has_c != 0 {
        let at = i as u64 * p.c_rs + j as u64 * p.c_cs;
        // SAFETY: the host checked that C covers every (batch, i, j) of the output through its
        // strides (the launch contract).
        v = math::fma(p.beta, unsafe { *c.add(at as usize) }, v);
    }
    math::activate(act, v, p.act_alpha)
}

/// C's matrix `batch` (its first element); `c` itself when C is not read.
#[inline(always)]
pub(crate) fn c_of(p: &GemmParams, c: *const f32, batch: u64) -> *const f32 {
    if p.has_c != 0 { c.wrapping_add(p.c_at(batch) as usize) } else { c }
}

/// A program epilogue: the program and its input pointers (input 0 is the GEMM result and is not
/// read from memory).
pub(crate) type Program<'a> = Option<(&'a EwProgramParams, [*const f32; 4])>;

/// [`epilogue`], then the program of `program` (if any) on output element `(batch, i, j)`, whose
/// index into the program's output is `(batch * m + i) * n + j`. `c` points at C's matrix `batch`
/// ([`c_of`]: offset once per block, not per element).
///
/// # Safety
/// The program's inputs `1..n_inputs` hold every element their strides address for the outputs.
#[inline(always)]
pub(crate) unsafe fn finish(
    p: &GemmParams,
    c: *const f32,
    program: Program,
    batch: u64,
    i: u32,
    j: u32,
    acc: f32,
) -> f32 {
    let v = epilogue(p, c, i, j, acc);
    match program {
        None => v,
        Some((e, x)) => {
            let at = (batch * p.m as u64 + i as u64) * p.n as u64 + j as u64;
            // Parameters over [batch, m, n] (the planner writes them so when the inputs' offsets
            // are linear in the row and the column) or contiguous ones: offsets without dividing.
            let o = if e.aligned_to(p.batch as u64, p.m as u64, p.n as u64) {
                e.aligned_offsets(batch, i as u64, j as u64)
            } else if e.rank == 0 {
                [at; EW_MAX_INPUTS]
            } else {
                // SAFETY: forwarded (the caller's contract).
                return unsafe { crate::program::ew_element(e, at, Some(v), x) };
            };
            // A short program (a bias or residual add) inline: its one load and one or two
            // operations, without the interpreter's state and dispatch (the same bits).
            if let Some(short) = short_program(e) {
                // SAFETY: input 1 holds element (batch, i, j) at `o[1]` (the caller's contract).
                let x1 = if short.reads_x1() { unsafe { *x[1].add(o[1] as usize) } } else { 0.0 };
                return short.eval(v, x1);
            }
            // SAFETY: forwarded (the caller's contract); `o` are element (batch, i, j)'s offsets.
            unsafe { crate::program::ew_element_at(e, o, Some(v), x) }
        }
    }
}

/// The program `e` of a program epilogue as a [`crate::program::ShortProgram`] (a bias or
/// residual add: input 0 and at most input 1), when it is one.
#[inline(always)]
pub(crate) fn short_program(e: &EwProgramParams) -> Option<crate::program::ShortProgram> {
    crate::program::ShortProgram::of(&e.instrs, e.n_instr, e.out_reg)
        .filter(|s| e.n_inputs <= 2 && (!s.reads_x1() || e.n_inputs == 2))
}

/// The program epilogue of a `*_program_f32` entry: `e` with inputs `x1..x3` (input 0 is the
/// GEMM result). Traps when the parameters are unusable (a corrupt rank would index past the
/// shape arrays).
#[inline(always)]
pub(crate) fn program<'a>(
    e: &'a EwProgramParams,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
) -> Program<'a> {
    if e.rank as usize > MAX_RANK {
        trap();
    }
    Some((e, [core::ptr::null(), x1, x2, x3]))
}

/// Tiled f32 GEMM.
///
/// # Safety
/// `a`, `b`, `c` (when `p.has_c != 0`) are valid for every offset the strides produce for indices
/// below `p.batch`, `p.m`, `p.n`, `p.k`; `y` holds `p.batch` matrices of `p.m x p.n` at `p.y_bs`
/// apart and overlaps no operand.
///
/// # Parameters
/// See [`GemmParams`].
///
/// # Thread mapping
/// Block (16, 16) threads computes a 64x64 output tile, each thread a 4x4 micro-tile strided by 16
/// (rows `ty + 16 r`, columns `tx + 16 s`); grid (ceil(n/64), ceil(m/64), batch);
/// [`GEMM_SHARED_BYTES`] of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_f32(
    p: GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tiled(&p, a, b, c, y, None) }
}

/// [`gemm_f32`] with a program epilogue: `y[b, i, j] = program(epilogue(b, i, j), x1, x2, x3)`,
/// the GEMM result as the program's input 0 (not read from memory) and inputs `1..e.n_inputs`
/// read from `x1`..`x3` at the offsets of output index `(b * m + i) * n + j` ([`EwProgramParams`]
/// over the output's shape, `e.elems = batch * m * n`). Not for split-K partials (`p.splits > 1`:
/// [`gemm_f32`] writes those, [`gemm_reduce_program_f32`] finishes them).
///
/// # Safety
/// As [`gemm_f32`]; the program's inputs hold every element their strides address. `y` may equal
/// a program input of the output's shape read without broadcast (each output element's input is
/// read by the thread that writes it, right before), but no other operand.
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`].
///
/// # Thread mapping
/// As [`gemm_f32`]; the results are staged in shared memory and each thread runs the program over
/// its sixteen outputs in a rolled loop (one copy of the interpreter).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemm_program_f32(
    p: GemmParams,
    e: EwProgramParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    if p.splits > 1 {
        trap();
    }
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemm_tiled(&p, a, b, c, y, program(&e, x1, x2, x3)) }
}

/// The body of [`gemm_f32`] and [`gemm_program_f32`].
///
/// # Safety
/// As [`gemm_program_f32`].
#[inline(always)]
unsafe fn gemm_tiled(
    p: &GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
    program: Program,
) {
    let p = *p;
    if p.m == 0 || p.n == 0 {
        return;
    }
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let tid = ty * 16 + tx;
    let splits = p.splits.max(1);
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);
    let (batch, split, k_begin, k_end) = crate::gemm_split::split_of(&p, crate::intrinsics::block_idx_z());
    let smem = dynamic_shared_ptr() as *mut f32;
    // SAFETY: the two tiles lie inside the GEMM_SHARED_BYTES the launch provides.
    let (a_tile, b_tile) = (smem, unsafe { smem.add((BK * BM) as usize) });
    let (a0, b0) = (p.a_at(batch), p.b_at(batch));
    // The 64x16 A tile and the 16x64 B tile at k0, four elements each per thread, into registers
    // (zero outside the matrices or past this split's k range).
    let load = |k0: u32| {
        let (mut av, mut bv) = ([0f32; 4], [0f32; 4]);
        for r in 0..4u32 {
            let e = tid + r * 256;
            let (ai, ak) = (e / BK, e % BK);
            let (gi, gk) = (row0 + ai, k0 + ak);
            if gi < p.m && gk < k_end {
                // SAFETY: gi < m and gk < k (launch contract).
                av[r as usize] = unsafe { *a.add((a0 + gi as u64 * p.a_rs + gk as u64 * p.a_cs) as usize) };
            }
            let (bk, bj) = (e / BN, e % BN);
            let (gk2, gj) = (k0 + bk, col0 + bj);
            if gk2 < k_end && gj < p.n {
                // SAFETY: gk2 < k and gj < n.
                bv[r as usize] = unsafe { *b.add((b0 + gk2 as u64 * p.b_rs + gj as u64 * p.b_cs) as usize) };
            }
        }
        (av, bv)
    };
    let mut acc = [[0f32; TN as usize]; TM as usize];
    let (mut av, mut bv) = load(k_begin);
    let mut k0 = k_begin;
    while k0 < k_end {
        for r in 0..4u32 {
            let e = tid + r * 256;
            // SAFETY: e / BK < BM, e % BK < BK; e / BN < BK, e % BN < BN: inside the tiles.
            unsafe {
                *a_tile.add(((e % BK) * BM + e / BK) as usize) = av[r as usize];
                *b_tile.add(((e / BN) * BN + e % BN) as usize) = bv[r as usize];
            }
        }
        sync_threads();
        // The next tile's loads are in flight while this one is multiplied.
        let next = k0 + BK;
        if next < k_end {
            (av, bv) = load(next);
        }
        for kk in 0..BK {
            let mut fa = [0f32; TM as usize];
            let mut fb = [0f32; TN as usize];
            for r in 0..TM {
                // SAFETY: kk < BK, ty + 16 r < BM.
                fa[r as usize] = unsafe { *a_tile.add((kk * BM + ty + 16 * r) as usize) };
            }
            for s in 0..TN {
                // SAFETY: kk < BK, tx + 16 s < BN.
                fb[s as usize] = unsafe { *b_tile.add((kk * BN + tx + 16 * s) as usize) };
            }
            for r in 0..TM as usize {
                for s in 0..TN as usize {
                    acc[r][s] = math::fma(fa[r], fb[s], acc[r][s]);
                }
            }
        }
        sync_threads();
        k0 = next;
    }
    if splits > 1 {
        // Raw partial sums into the workspace `[batch][split][i][j]`.
        let base = (batch * splits as u64 + split as u64) * p.m as u64 * p.n as u64;
        macro_rules! partial {
            ($($r:literal $s:literal),*) => {$({
                let (i, j) = (row0 + ty + 16 * $r, col0 + tx + 16 * $s);
                if i < p.m && j < p.n {
                    // SAFETY: inside the splits * batch * m * n workspace.
                    unsafe { *y.add((base + i as u64 * p.n as u64 + j as u64) as usize) = acc[$r][$s] };
                }
            })*};
        }
        partial!(0 0, 0 1, 0 2, 0 3, 1 0, 1 1, 1 2, 1 3, 2 0, 2 1, 2 2, 2 3, 3 0, 3 1, 3 2, 3 3);
        return;
    }
    let (yv, cb) = (p.y_view(batch), c_of(&p, c, batch));
    if let Some((e, x)) = program {
        // Stage the 64x64 results in shared memory (the tiles are free after the k loop's last
        // barrier; each thread reads back only its own cells), then run the program over them in a
        // rolled loop: one inlined interpreter instead of sixteen.
        macro_rules! stage {
            ($($r:literal $s:literal),*) => {$(
                // SAFETY: (ty + 16 r) * BN + tx + 16 s < BM * BN floats = GEMM_SHARED_BYTES.
                unsafe { *smem.add(((ty + 16 * $r) * BN + tx + 16 * $s) as usize) = acc[$r][$s] };
            )*};
        }
        stage!(0 0, 0 1, 0 2, 0 3, 1 0, 1 1, 1 2, 1 3, 2 0, 2 1, 2 2, 2 3, 3 0, 3 1, 3 2, 3 3);
        for q in 0..TM * TN {
            let (li, lj) = (ty + 16 * (q / TN), tx + 16 * (q % TN));
            let (i, j) = (row0 + li, col0 + lj);
            if i < p.m && j < p.n {
                // SAFETY: li < BM, lj < BN: a cell this thread wrote.
                let v = unsafe { *smem.add((li * BN + lj) as usize) };
                // SAFETY: the program's inputs cover the output (the contract).
                let out = unsafe { finish(&p, cb, Some((e, x)), batch, i, j, v) };
                // SAFETY: i < m, j < n: inside output matrix `batch`.
                unsafe { *y.add(yv.offset(i, j) as usize) = out };
            }
        }
        return;
    }
    // The epilogue is unrolled by hand: a loop over `acc` that LLVM leaves rolled (the epilogue
    // call is large) would index it at run time and move all sixteen accumulators to local memory.
    macro_rules! store {
        ($($r:literal $s:literal),*) => {$({
            let (i, j) = (row0 + ty + 16 * $r, col0 + tx + 16 * $s);
            // The epilogue reads C at clamped indices so that only the store is conditional.
            let v = epilogue(&p, cb, i.min(p.m - 1), j.min(p.n - 1), acc[$r][$s]);
            if i < p.m && j < p.n {
                // SAFETY: i < m, j < n: inside output matrix `batch`.
                unsafe { *y.add(yv.offset(i, j) as usize) = v };
            }
        })*};
    }
    store!(0 0, 0 1, 0 2, 0 3, 1 0, 1 1, 1 2, 1 3, 2 0, 2 1, 2 2, 2 3, 3 0, 3 1, 3 2, 3 3);
}

/// Adds `A[i, k] * bv` to each row's accumulator. Rows past `m` repeat row `m - 1` (their
/// results are never stored): a branch-free body with a constant trip count keeps `acc` in
/// registers.
#[inline(always)]
fn accumulate(acc: &mut [f32; GEMV_MAX_M as usize], p: &GemmParams, a: *const f32, a0: u64, k: u32, bv: f32) {
    for (i, slot) in acc.iter_mut().enumerate() {
        let i = (i as u32).min(p.m - 1);
        // SAFETY: i < m and k < k (callers keep k in range): inside A.
        *slot =
            math::fma(unsafe { *a.add((a0 + i as u64 * p.a_rs + k as u64 * p.a_cs) as usize) }, bv, *slot);
    }
}

/// Accumulates `A[i, k] * B[k, j]` for k = `start`, `start + step`, ... below `p.k`, where `ld(k)`
/// loads `B[k, j]`. Four loads are issued before their products are accumulated: batch-1 GEMV is
/// latency-bound, and independent loads in flight hide the L2 round trip.
#[inline(always)]
fn accumulate_range(
    acc: &mut [f32; GEMV_MAX_M as usize],
    p: &GemmParams,
    a: *const f32,
    a0: u64,
    start: u32,
    step: u32,
    ld: impl Fn(u32) -> f32,
) {
    let mut k = start;
    while k + 3 * step < p.k {
        let (v0, v1, v2, v3) = (ld(k), ld(k + step), ld(k + 2 * step), ld(k + 3 * step));
        accumulate(acc, p, a, a0, k, v0);
        accumulate(acc, p, a, a0, k + step, v1);
        accumulate(acc, p, a, a0, k + 2 * step, v2);
        accumulate(acc, p, a, a0, k + 3 * step, v3);
        k += 4 * step;
    }
    while k < p.k {
        accumulate(acc, p, a, a0, k, ld(k));
        k += step;
    }
}

/// f32 GEMM for `m <= GEMV_MAX_M`: every weight element is read once per block and reused for all
/// `m` rows from registers. Batch-1 inference is latency-bound, so each thread keeps four
/// independent weight loads in flight per trip.
///
/// # Safety
/// As [`gemm_f32`]; additionally `1 <= p.m <= GEMV_MAX_M`.
///
/// # Parameters
/// See [`GemmParams`].
///
/// # Thread mapping
/// `GEMV_WARPS` warps per block, grid (ceil(n / cols), batch). When B's columns are contiguous
/// (`b_cs == 1`) a block owns `GEMV_COLS` columns; lane = (k offset, column), the block's threads
/// split k (stride `GEMV_WARPS * 32 / GEMV_COLS`) and combine partial sums by shuffles, then
/// through shared memory; otherwise (column-strided B) a block owns one column and all its
/// threads split k, combining by shuffles and shared memory. [`GEMM_SHARED_BYTES`] of dynamic
/// shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemv_f32(
    p: GemmParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemv(&p, a, b, c, y, None) }
}

/// [`gemv_f32`] with a program epilogue (see [`gemm_program_f32`]).
///
/// # Safety
/// As [`gemv_f32`] and, for the program's inputs and `y`, [`gemm_program_f32`].
///
/// # Parameters
/// See [`GemmParams`] and [`EwProgramParams`].
///
/// # Thread mapping
/// As [`gemv_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gemv_program_f32(
    p: GemmParams,
    e: EwProgramParams,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { gemv(&p, a, b, c, y, program(&e, x1, x2, x3)) }
}

/// The body of [`gemv_f32`] and [`gemv_program_f32`].
///
/// # Safety
/// As [`gemv_program_f32`].
#[inline(always)]
unsafe fn gemv(p: &GemmParams, a: *const f32, b: *const f32, c: *const f32, y: *mut f32, program: Program) {
    let p = *p;
    if p.m == 0 || p.m > GEMV_MAX_M {
        trap();
    }
    let (lane, warp) = (thread_idx_x() % 32, thread_idx_x() / 32);
    let batch = block_idx_y() as u64;
    let (a0, b0) = (p.a_at(batch), p.b_at(batch));
    let mut acc = [0f32; GEMV_MAX_M as usize];
    if p.b_cs == 1 {
        // Lane = (k offset within the warp's group of 4 rows, column): each warp load reads four
        // 32-byte row segments, and a block owns only GEMV_COLS columns, so a 256-wide layer
        // spreads over 32 multiprocessors instead of 8.
        let (col, ksub) = (lane % GEMV_COLS, lane / GEMV_COLS);
        let j = block_idx_x() * GEMV_COLS + col;
        let ld = |k: u32| {
            if j < p.n {
                // SAFETY: k < p.k (callers), j < p.n.
                unsafe { *b.add((b0 + k as u64 * p.b_rs + j as u64) as usize) }
            } else {
                0.0
            }
        };
        accumulate_range(
            &mut acc,
            &p,
            a,
            a0,
            warp * (32 / GEMV_COLS) + ksub,
            GEMV_WARPS * (32 / GEMV_COLS),
            ld,
        );
        // Lanes of one column (ksub = 0..4) combine by shuffles, then warps through shared memory.
        let partial = dynamic_shared_ptr() as *mut f32;
        for (i, v) in acc.iter().enumerate() {
            let mut sum = *v;
            let mut m = GEMV_COLS;
            while m < 32 {
                sum += shfl_xor_f32(sum, m);
                m <<= 1;
            }
            if ksub == 0 {
                // SAFETY: warp < GEMV_WARPS, i < GEMV_MAX_M, col < GEMV_COLS: inside the shared
                // memory the launch provides.
                unsafe { *partial.add(((warp * GEMV_MAX_M + i as u32) * GEMV_COLS + col) as usize) = sum };
            }
        }
        sync_threads();
        if warp == 0 && ksub == 0 && j < p.n {
            for i in 0..p.m {
                let mut sum = 0.0;
                for w in 0..GEMV_WARPS {
                    // SAFETY: as for the writes.
                    sum += unsafe { *partial.add(((w * GEMV_MAX_M + i) * GEMV_COLS + col) as usize) };
                }
                // SAFETY: the program's inputs cover the output (the contract).
                let v = unsafe { finish(&p, c_of(&p, c, batch), program, batch, i, j, sum) };
                // SAFETY: i < m, j < n.
                unsafe { *y.add(p.y_offset(batch, i, j) as usize) = v };
            }
        }
    } else {
        // Column-strided B (a transposed weight, `[n, k]` in memory): the whole block reduces one
        // column, thread t taking k = t, t + block size, ... (contiguous when `b_rs == 1`), so a
        // narrow layer (a one-unit head) still spreads its reduction over 512 threads.
        let j = block_idx_x();
        if j >= p.n {
            return;
        }
        // SAFETY: k < p.k (callers), j < p.n.
        let ld = |k: u32| unsafe { *b.add((b0 + k as u64 * p.b_rs + j as u64 * p.b_cs) as usize) };
        accumulate_range(&mut acc, &p, a, a0, thread_idx_x(), GEMV_WARPS * 32, ld);
        let partial = dynamic_shared_ptr() as *mut f32;
        for (i, &v) in acc.iter().enumerate() {
            let sum = warp_sum_f32(v);
            if lane == 0 {
                // SAFETY: warp < GEMV_WARPS, i < GEMV_MAX_M: inside the shared memory.
                unsafe { *partial.add((warp * GEMV_MAX_M + i as u32) as usize) = sum };
            }
        }
        sync_threads();
        if warp == 0 && lane < p.m {
            let i = lane;
            let mut sum = 0.0;
            for w in 0..GEMV_WARPS {
                // SAFETY: as for the writes.
                sum += unsafe { *partial.add((w * GEMV_MAX_M + i) as usize) };
            }
            // SAFETY: the program's inputs cover the output (the contract).
            let v = unsafe { finish(&p, c_of(&p, c, batch), program, batch, i, j, sum) };
            // SAFETY: i < m, j < n.
            unsafe { *y.add(p.y_offset(batch, i, j) as usize) = v };
        }
    }
}
