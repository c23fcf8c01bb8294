//! f32 GEMM on the tensor cores for the large shapes (batched inference: a physics MLP at batch
//! 16384, a transformer's projections at batch x sequence in the thousands), where the CUDA-core
//! `gemm_f32` ran at a fraction of the device: block tiles of 128 x 128 (8 warps) or 64 x 64 (4
//! warps), staged through shared memory by a three-stage `cp.async` pipeline, each warp a 64 x 32
//! or 32 x 32 tile of `mma.sync` m16n8k8 TF32 products in 3xTF32 (each operand split into a TF32
//! part and its TF32 remainder, `small·big + big·small + big·big`: f32 accuracy, as in
//! `gemm_tc.rs`, whose [`split`] this shares). The `_tf32` entries round the operands to TF32
//! instead and form one product per tile (the session's `tf32` precision), the `_f16` / `_bf16`
//! entries round them to f16 / bf16 and form one `m16n8k16` product per pair of k8 steps
//! ([`k_tile`]); each precision is an entry of its own, so that each compiles to its own register
//! allocation.
//!
//! Shared memory holds, per stage, the A tile `[BM][32]` (k contiguous) and the B tile, either
//! `[32][BN]` (B's columns contiguous in memory: MatMul with a `[k, n]` weight) or `[BN][32]` (B's
//! k contiguous: Gemm with `transB`), so each is filled by 16-byte copies straight from global
//! memory (`cp.async.cg`, zero-filled past the matrix's edges). Each row's 16-byte chunks are
//! permuted by an XOR with the row (the swizzle below) so that the fragment loads of a warp hit 32
//! different banks. The epilogue (`alpha`, `beta * C`, the activation and the elementwise program)
//! is `gemm.rs`'s [`finish`], applied to each accumulator as it is stored.
//!
//! Operand requirements (the planner checks them; the kernel traps otherwise): A unit-stride along
//! k with row and batch strides multiples of four and a 16-byte aligned base; B likewise along its
//! contiguous axis. Any m, n, k.

use crate::abi::{Activation, EwProgramParams, GEMM_TILE_BK, GEMM_TILE_STAGES, GemmParams};
use crate::gemm::{Program, finish, program};
use crate::gemm_tc::split;
use crate::intrinsics::{
    block_dim_x, block_idx_x, block_idx_y, block_idx_z, cp_async_16_zfill, cp_async_commit,
    cp_async_wait_group, cvt_rn_half2, cvt_rna_tf32, dynamic_shared_addr, dynamic_shared_ptr, ld_shared_u32,
    mma_m16n8k8_tf32_f32, mma_m16n8k16_half_f32, sync_threads, thread_idx_x, trap,
};

/// Expands `$body` for `$i` = 0, 1, 2, 3, each a constant: arrays indexed by it stay in registers
/// (a rolled loop over the accumulators would index them at run time and move them to local
/// memory). Bodies guard with `if $i < LEN` for shorter arrays (the test is resolved at compile
/// time).
macro_rules! unroll4 {
    ($i:ident => $body:block) => {{
        {
            const $i: usize = 0;
            $body
        }
        {
            const $i: usize = 1;
            $body
        }
        {
            const $i: usize = 2;
            $body
        }
        {
            const $i: usize = 3;
            $body
        }
    }};
}
#[cfg(ferrofuse_hopper)]
pub(crate) use unroll4;

const BK: u32 = GEMM_TILE_BK;
const STAGES: u32 = GEMM_TILE_STAGES;
const _: () = assert!(BK == 32 && STAGES == 3);

/// The 16-byte chunk (of eight per 32-wide k row) where chunk `c` of row `r` of a k-contiguous
/// tile is stored: distinct for the eight rows a fragment load reads at one chunk.
#[inline(always)]
const fn swizzle_k(r: u32, c: u32) -> u32 {
    c ^ (r & 7)
}

/// The products a tile entry forms (the session's precision, one entry each so that each compiles
/// to its own register allocation): 3xTF32 (f32 accuracy), operands rounded to TF32, to f16 or to
/// bf16 (one product each, f32 accumulation).
pub(crate) mod mode {
    /// 3xTF32.
    pub const EXACT: u32 = 0;
    /// One TF32 product.
    pub const TF32: u32 = 1;
    /// Operands rounded to f16, `m16n8k16` products.
    pub const F16: u32 = 2;
    /// Operands rounded to bf16, `m16n8k16` products.
    pub const BF16: u32 = 3;
}

/// `x` as the operand of a product: split into its TF32 parts ([`split`]) in 3xTF32, rounded to
/// TF32 in TF32 (the remainder zero, unused), its f32 bits for the half modes (rounded in pairs
/// when packed, [`k_tile`]).
#[inline(always)]
fn operand<const MODE: u32>(x: f32) -> (u32, u32) {
    match MODE {
        mode::EXACT => split(x),
        mode::TF32 => (cvt_rna_tf32(x), 0),
        _ => (x.to_bits(), 0),
    }
}

/// The chunk where chunk `c` of k row `k` of an n-contiguous B tile is stored: the four k rows
/// of a fragment load (`k & 3` = the lane's `t`) land on distinct pairs of chunks.
#[inline(always)]
const fn swizzle_n(k: u32, c: u32) -> u32 {
    c ^ ((k & 3) << 1)
}

/// `y = program(act(alpha A B + beta C))` over one block tile: `WM x WN` warps, each `MT` m16 by
/// `NT` n8 mma tiles; `KB`: B is k-contiguous (`b_rs == 1`), else n-contiguous (`b_cs == 1`).
///
/// # Safety
/// As `gemm_program_f32`, with the operand requirements of the module doc; the launch has
/// `32 * WM * WN` threads and [`crate::abi::GemmTile::shared_bytes`] of dynamic shared memory.
#[inline(always)]
unsafe fn gemm_tile<
    const WM: u32,
    const WN: u32,
    const MT: usize,
    const NT: usize,
    const KB: bool,
    const MODE: u32,
>(
    p: &GemmParams,
    a: *const f32,
    b: *const f32,
    c_ptr: *const f32,
    y: *mut f32,
    program: Program,
) {
    let p = *p;
    let bm = WM * MT as u32 * 16;
    let bn = WN * NT as u32 * 8;
    let threads = 32 * WM * WN;
    let aligned = |ptr: *const f32, s1: u64, s2: u64| (ptr as usize) % 16 == 0 && s1 % 4 == 0 && s2 % 4 == 0;
    let b_ok = if KB {
        p.b_rs == 1 && aligned(b, p.b_cs, p.b_bs | p.b_bs2)
    } else {
        p.b_cs == 1 && aligned(b, p.b_rs, p.b_bs | p.b_bs2)
    };
    let splits = p.splits.max(1);
    if block_dim_x() != threads
        || (splits > 1 && (p.k_chunk == 0 || p.k_chunk % BK != 0))
        || p.a_cs != 1
        || !aligned(a, p.a_rs, p.a_bs | p.a_bs2)
        || !b_ok
    {
        trap();
    }
    if p.m == 0 || p.n == 0 {
        return;
    }
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let (g, t) = (lane / 4, lane % 4);
    let z = block_idx_z();
    let (row0, col0) = (block_idx_y() * bm, block_idx_x() * bn);
    // This block's k range: all of k, or one chunk of it (a multiple of BK long).
    let (batch, _, k_begin, k_end) = crate::gemm_split::split_of(&p, z);
    let (a_at, b_at) = (p.a_at(batch), p.b_at(batch));
    let k_tiles = k_end.saturating_sub(k_begin).div_ceil(BK);
    // Stage `s`: the A tile (bm x BK f32) then the B tile (BK x bn f32).
    let stage_bytes = (bm + bn) * BK * 4;
    let smem = dynamic_shared_addr();
    const { assert!(MT <= 4 && NT <= 4) };

    // The copies of k tile `kt` into its stage: chunk `q` of a tile is copied by thread
    // `q % threads` (consecutive threads, consecutive 16 bytes of a row).
    let load = |kt: u32| {
        let k0 = k_begin + kt * BK;
        let base = smem + (kt % STAGES) * stage_bytes;
        // The bytes of a chunk of 4 k (or n) starting at `at` that lie inside `len`.
        let bytes = |at: u32, len: u32| if at >= len { 0 } else { (len - at).min(4) * 4 };
        let mut q = tid;
        while q < bm * BK / 4 {
            let (r, kc) = (q / 8, q % 8);
            let (row, k) = (row0 + r, k0 + 4 * kc);
            let n_bytes = if row < p.m { bytes(k, k_end) } else { 0 };
            let src = if n_bytes == 0 {
                a
            } else {
                a.wrapping_add((a_at + row as u64 * p.a_rs + k as u64) as usize)
            };
            // SAFETY: `src` holds `n_bytes` bytes of A (row < m, k < p.k, the planner's strides) or
            // nothing is read; the destination is inside this stage's A tile, 16-byte aligned.
            unsafe { cp_async_16_zfill(base + (r * BK + 4 * swizzle_k(r, kc)) * 4, src.cast(), n_bytes) };
            q += threads;
        }
        let b_base = base + bm * BK * 4;
        let mut q = tid;
        while q < bn * BK / 4 {
            let (src, n_bytes, dst) = if KB {
                let (r, kc) = (q / 8, q % 8);
                let (col, k) = (col0 + r, k0 + 4 * kc);
                let n_bytes = if col < p.n { bytes(k, k_end) } else { 0 };
                (b_at + col as u64 * p.b_cs + k as u64, n_bytes, r * BK + 4 * swizzle_k(r, kc))
            } else {
                let (kr, nc) = (q / (bn / 4), q % (bn / 4));
                let (k, col) = (k0 + kr, col0 + 4 * nc);
                let n_bytes = if k < k_end { bytes(col, p.n) } else { 0 };
                (b_at + k as u64 * p.b_rs + col as u64, n_bytes, kr * bn + 4 * swizzle_n(kr, nc))
            };
            let src = if n_bytes == 0 { b } else { b.wrapping_add(src as usize) };
            // SAFETY: as for A.
            unsafe { cp_async_16_zfill(b_base + dst * 4, src.cast(), n_bytes) };
            q += threads;
        }
        cp_async_commit();
    };

    // This warp's tile within the block's, and the lane's fixed parts of its fragment addresses
    // (in f32 within a stage's A or B tile).
    let (wm0, wn0) = ((warp / WN) * MT as u32 * 16, (warp % WN) * NT as u32 * 8);
    let a_row = |i: usize| (wm0 + 16 * i as u32 + g) * BK;
    // n-contiguous B: column `wn0 + 8j + g` of k row `8s + t (+4)`, whose chunk XOR is `2t`.
    let b_col = |j: usize| {
        let col = wn0 + 8 * j as u32 + g;
        4 * swizzle_n(t, col / 4) + col % 4
    };
    let mut acc = [[[0f32; 4]; NT]; MT];
    for st in 0..STAGES - 1 {
        if st < k_tiles {
            load(st);
        } else {
            cp_async_commit();
        }
    }
    let mut kt = 0;
    while kt < k_tiles {
        // Tile kt has landed (at most STAGES - 2 newer groups in flight), for every thread after
        // the barrier, which also ends every warp's reads of the stage refilled next.
        cp_async_wait_group::<{ STAGES - 2 }>();
        sync_threads();
        if kt + STAGES - 1 < k_tiles {
            load(kt + STAGES - 1);
        } else {
            cp_async_commit();
        }
        let a_s = smem + (kt % STAGES) * stage_bytes;
        let b_s = a_s + bm * BK * 4;
        // SAFETY: every address is inside this stage's tiles, written by the copies waited for.
        unsafe { k_tile::<MT, NT, KB, MODE>(&mut acc, a_s, b_s, bn, (g, t), &a_row, &b_col, wn0) };
        kt += 1;
    }

    // The epilogue stages the block's tile in shared memory (the pipeline's, once every copy has
    // landed and every warp has left its last k tile), row stride `bn + 8` (conflict-free pairs),
    // then thread `x` finishes outputs `x, x + threads, ...` of the tile in row-major order: one
    // rolled loop (one copy of the program interpreter), stores coalesced along rows.
    cp_async_wait_group::<0>();
    sync_threads();
    let ld_tile = bn + 8;
    let tile = dynamic_shared_ptr() as *mut f32;
    unroll4!(I => {
        if I < MT {
            unroll4!(J => {
                if J < NT {
                    // Accumulator (I, J, e) is row `wm0 + 16 I + g + 8 (e / 2)`, column
                    // `wn0 + 8 J + 2t + e % 2` of the block's tile.
                    let (r, c) = (wm0 + 16 * I as u32 + g, wn0 + 8 * J as u32 + 2 * t);
                    let v = acc[I][J];
                    // SAFETY: inside the tile (bm x ld_tile f32 fit the launch's shared memory).
                    unsafe {
                        let at = tile.add((r * ld_tile + c) as usize);
                        *at = v[0];
                        *at.add(1) = v[1];
                        let at = at.add(8 * ld_tile as usize);
                        *at = v[2];
                        *at.add(1) = v[3];
                    }
                }
            });
        }
    });
    sync_threads();
    // SAFETY: forwarded (the tile and the launch contract).
    unsafe {
        finish_tile(&p, c_ptr, program, y, tile, (row0, col0, z, batch), (bm, bn, ld_tile), tid, threads)
    };
}

/// Finishes and stores the block's output tile staged in shared memory at `tile` ([`store_tile`])
/// of the block at grid z `z`, which computes matrix `batch`: split-K partials go to matrix `z`
/// (`batch * splits + split`) of the workspace, through the identity epilogue the planner passes
/// with them; without program instructions (the identity program of a plain GEMM) the loop runs
/// without the interpreter.
///
/// # Safety
/// As [`store_tile`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn finish_tile(
    p: &GemmParams,
    c_ptr: *const f32,
    program: Program,
    y: *mut f32,
    tile: *const f32,
    (row0, col0, z, batch): (u32, u32, u32, u64),
    dims: (u32, u32, u32),
    tid: u32,
    threads: u32,
) {
    let y_batch = if p.splits > 1 { z as u64 } else { batch };
    let plain = program.is_none_or(|(e, _)| e.n_instr == 0);
    let at = (row0, col0, y_batch);
    // SAFETY: forwarded (the caller's contract).
    unsafe {
        if plain {
            // The activation fixed per launch for the common ones (no per-element dispatch).
            match Activation::from_code(p.act) {
                Activation::None => {
                    store_plain::<{ Activation::None as u32 }>(p, c_ptr, y, tile, at, dims, tid, threads)
                }
                Activation::Relu => {
                    store_plain::<{ Activation::Relu as u32 }>(p, c_ptr, y, tile, at, dims, tid, threads)
                }
                _ => store_plain::<ANY_ACTIVATION>(p, c_ptr, y, tile, at, dims, tid, threads),
            }
        } else {
            store_tile(p, c_ptr, program, y, tile, at, dims, tid, threads);
        }
    }
}

/// Where a tile epilogue writes matrix `batch`: split-K partials fill the workspace row by row;
/// the output goes through Y's strides.
#[inline(always)]
fn tile_y_view(p: &GemmParams, batch: u64) -> crate::abi::YView {
    match p.splits > 1 {
        true => crate::abi::YView { at: p.y_at(batch), rs: p.n as u64, cs: 1 },
        false => p.y_view(batch),
    }
}

/// [`store_plain`]'s activation code for "the launch's, `p.act`".
const ANY_ACTIVATION: u32 = u32::MAX;

/// The activation an epilogue fixed at `ACT` applies: `ACT` itself, or for [`ANY_ACTIVATION`] the
/// launch's (`p.act`).
#[inline(always)]
fn activation_of<const ACT: u32>(p: &GemmParams) -> Activation {
    Activation::from_code(if ACT == ANY_ACTIVATION { p.act } else { ACT })
}

/// Four f32 that a load or store moves as one 16-byte access.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct F4([f32; 4]);

/// [`store_tile`] without a program: alpha, beta C and the activation `ACT` (an
/// [`Activation`] code, or [`ANY_ACTIVATION`]: `p.act`), four columns per thread and step where
/// Y's rows are contiguous and 16-byte aligned (one 16-byte read of the staged tile, one 16-byte
/// store), element by element at the tile's right edge and for other layouts. The plain epilogue
/// was a fifth of a `wgmma` GEMM's instructions at k 128 (the GNN's edge GEMM), element by
/// element with the activation chosen at each.
///
/// # Safety
/// As [`store_tile`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_plain<const ACT: u32>(
    p: &GemmParams,
    c_ptr: *const f32,
    y: *mut f32,
    tile: *const f32,
    (row0, col0, batch): (u32, u32, u64),
    (bm, bn, ld_tile): (u32, u32, u32),
    tid: u32,
    threads: u32,
) {
    let yv = tile_y_view(p, batch);
    let cb = crate::gemm::c_of(p, c_ptr, batch);
    let act = activation_of::<ACT>(p);
    let finish = |v: f32, i: u32, j: u32| crate::gemm::epilogue_with(p, act, cb, i, j, v);
    let aligned = |x: u64| x.is_multiple_of(4);
    let vector = bn.is_multiple_of(4)
        && ld_tile.is_multiple_of(4)
        && (tile as usize).is_multiple_of(16)
        && yv.cs == 1
        && aligned(yv.rs)
        && aligned(yv.at)
        && (y as usize).is_multiple_of(16);
    if !vector {
        // SAFETY: forwarded.
        unsafe { store_tile(p, c_ptr, None, y, tile, (row0, col0, batch), (bm, bn, ld_tile), tid, threads) };
        return;
    }
    let quads = bn / 4;
    let mut q = tid;
    while q < bm * quads {
        let (r, c) = (q / quads, 4 * (q % quads));
        let (row, col) = (row0 + r, col0 + c);
        if row < p.m {
            // SAFETY: inside the staged tile (16-byte aligned: checked above), written before the
            // caller's barrier.
            let v = unsafe { *(tile.add((r * ld_tile + c) as usize) as *const F4) }.0;
            let at = yv.offset(row, col) as usize;
            if col + 4 <= p.n {
                let out = F4([
                    finish(v[0], row, col),
                    finish(v[1], row, col + 1),
                    finish(v[2], row, col + 2),
                    finish(v[3], row, col + 3),
                ]);
                // SAFETY: four output elements of a contiguous, 16-byte aligned row (checked).
                unsafe { *(y.add(at) as *mut F4) = out };
            } else {
                for e in 0..4 {
                    if col + e < p.n {
                        // SAFETY: an output element.
                        unsafe { *y.add(at + e as usize) = finish(v[e as usize], row, col + e) };
                    }
                }
            }
        }
        q += threads;
    }
}

/// Finishes and stores the block's output tile staged in shared memory at `tile` (`bm x bn`, row
/// stride `ld_tile`) whose first element is output `(row0, col0)` of matrix `batch`: thread
/// `tid` the elements `tid, tid + threads, ...` in row-major order (a warp's stores are 128
/// consecutive bytes of a row).
///
/// # Safety
/// The tile was written and ordered by a barrier; the launch contract of the entries for `y`, C
/// and the program's inputs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_tile(
    p: &GemmParams,
    c_ptr: *const f32,
    program: Program,
    y: *mut f32,
    tile: *const f32,
    (row0, col0, batch): (u32, u32, u64),
    (bm, bn, ld_tile): (u32, u32, u32),
    tid: u32,
    threads: u32,
) {
    let yv = tile_y_view(p, batch);
    let cb = crate::gemm::c_of(p, c_ptr, batch);
    if let Some((e, x)) = program
        && let Some(short) = crate::gemm::short_program(e)
        && (e.rank == 0 || e.aligned_to(p.batch as u64, p.m as u64, p.n as u64))
        && threads.is_multiple_of(bn)
    {
        let at = (row0, col0, batch);
        let dims = (bm, bn, ld_tile);
        // SAFETY: forwarded.
        unsafe {
            let program = (e, x, short);
            // The common residual add with no activation fixed at compile time (no per-element
            // dispatch over the program's operations and the activations).
            match Activation::from_code(p.act) {
                Activation::None if short.adds_x1() => store_short::<{ Activation::None as u32 }, true>(
                    p, cb, program, y, tile, at, dims, tid, threads,
                ),
                Activation::None => store_short::<{ Activation::None as u32 }, false>(
                    p, cb, program, y, tile, at, dims, tid, threads,
                ),
                _ => store_short::<ANY_ACTIVATION, false>(p, cb, program, y, tile, at, dims, tid, threads),
            }
        }
        return;
    }
    let mut q = tid;
    while q < bm * bn {
        let (r, c) = (q / bn, q % bn);
        let (row, col) = (row0 + r, col0 + c);
        if row < p.m && col < p.n {
            // SAFETY: (row, col) is an output element; `finish` reads C and the program's inputs
            // at its offsets (the launch contract); the tile entry was written before the barrier.
            unsafe {
                let v = *tile.add((r * ld_tile + c) as usize);
                let out = finish(p, cb, program, batch, row, col, v);
                *y.add(yv.offset(row, col) as usize) = out;
            }
        }
        q += threads;
    }
}

/// [`store_tile`] for a short program (a bias or residual add) over contiguous or `[batch, m, n]`
/// parameters, with the activation `ACT` (as [`store_plain`]'s; `ADD`: the program is `x0 + x1`),
/// where a thread's elements share
/// a column (`threads` a multiple of `bn`): the thread's rows eight at a time, all their loads (C,
/// input 1) before any of their stores, offsets stepped by rows. Element by element each load
/// waited behind the previous element's store (Y may be input 1, in place): a thread's 32
/// elements of a `wgmma` tile paid 32 global-load latencies in a row.
///
/// # Safety
/// As [`store_tile`]; `cb` is C's matrix `batch` ([`crate::gemm::c_of`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_short<const ACT: u32, const ADD: bool>(
    p: &GemmParams,
    cb: *const f32,
    (e, x, short): (&EwProgramParams, [*const f32; 4], crate::program::ShortProgram),
    y: *mut f32,
    tile: *const f32,
    (row0, col0, batch): (u32, u32, u64),
    (bm, bn, ld_tile): (u32, u32, u32),
    tid: u32,
    threads: u32,
) {
    let yv = tile_y_view(p, batch);
    let act = activation_of::<ACT>(p);
    // The thread's column, and the rows between its elements.
    let (c, dr) = (tid % bn, threads / bn);
    let col = col0 + c;
    // Input 1's element (row0, col) and its step per row.
    let (x_at, x_rs) = if e.rank == 0 {
        ((batch * p.m as u64 + row0 as u64) * p.n as u64 + col as u64, p.n as u64)
    } else {
        let first = e.aligned_offsets(batch, row0 as u64, col as u64)[1];
        (first, e.aligned_offsets(batch, row0 as u64 + 1, col as u64)[1].wrapping_sub(first))
    };
    let mut r0 = tid / bn;
    while r0 < bm {
        let (mut v, mut x1) = ([0f32; 8], [0f32; 8]);
        let inside = |g: usize| {
            let r = r0 + g as u32 * dr;
            (r < bm && row0 + r < p.m && col < p.n, r)
        };
        // (Const-indexed through `unroll4!`: a rolled loop kept the arrays in local memory.)
        let mut load = |g: usize| {
            let (inside, r) = inside(g);
            if inside {
                // SAFETY: the staged tile entry (written before the barrier); C and input 1 at
                // the element's offsets (the launch contract).
                unsafe {
                    let acc = *tile.add((r * ld_tile + c) as usize);
                    v[g] = crate::gemm::epilogue_with(p, act, cb, row0 + r, col, acc);
                    if short.reads_x1() {
                        x1[g] = *x[1].add(x_at.wrapping_add(r as u64 * x_rs) as usize);
                    }
                }
            }
        };
        unroll4!(G => { load(G) });
        unroll4!(G => { load(G + 4) });
        let store = |g: usize| {
            let (inside, r) = inside(g);
            if inside {
                let out = if ADD { crate::math::add(v[g], x1[g]) } else { short.eval(v[g], x1[g]) };
                // SAFETY: an output element.
                unsafe { *y.add(yv.offset(row0 + r, col) as usize) = out };
            }
        };
        unroll4!(G => { store(G) });
        unroll4!(G => { store(G + 4) });
        r0 += 8 * dr;
    }
}

/// The four k8 steps of one staged k tile: `acc += A B` in the entry's precision ([`mode`]) from
/// the stage's A tile at shared address `a_s` and B tile at `b_s` (row length `bn` when
/// n-contiguous).
///
/// The half modes form one `m16n8k16` product per pair of k8 steps from the fragments the TF32
/// modes load, without loading them again: a lane's k8 fragments hold k `t` and `t + 4` of each
/// step, and packed as the halves of the `m16n8k16` fragments (k `2t`, `2t + 1` of the first step,
/// `2t + 8`, `2t + 9` of the second) they put A's and B's k in the same permuted order, which the
/// sum over k does not see.
///
/// # Safety
/// The stage's tiles were written and ordered by a barrier before this.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn k_tile<const MT: usize, const NT: usize, const KB: bool, const MODE: u32>(
    acc: &mut [[[f32; 4]; NT]; MT],
    a_s: u32,
    b_s: u32,
    bn: u32,
    (g, t): (u32, u32),
    a_row: &impl Fn(usize) -> u32,
    b_col: &impl Fn(usize) -> u32,
    wn0: u32,
) {
    let ld = |base: u32, at: u32| {
        // SAFETY: forwarded (inside the stage's tiles, the caller's contract).
        unsafe { ld_shared_u32(base + 4 * at) }
    };
    const { assert!(MODE <= mode::BF16) };
    let (exact, half, bf16) = (MODE == mode::EXACT, MODE >= mode::F16, MODE == mode::BF16);
    // The half modes' packed fragments of a pair of k8 steps.
    let (mut half_a, mut half_b) = ([[0u32; 4]; MT], [[0u32; 2]; NT]);
    unroll4!(S => {
        let s = S as u32;
        // Fragment k `t` of step `s` is chunk `2s` of the row, k `t + 4` chunk `2s + 1`; the
        // rows a lane reads all have `row & 7 == g`.
        let (x0, x1) = (4 * swizzle_k(g, 2 * s) + t, 4 * swizzle_k(g, 2 * s + 1) + t);
        let mut bf = [([0u32; 2], [0u32; 2]); NT];
        unroll4!(J => {
            if J < NT {
                let (v0, v1) = if KB {
                    let row = (wn0 + 8 * J as u32 + g) * BK;
                    (ld(b_s, row + x0), ld(b_s, row + x1))
                } else {
                    let at = (8 * s + t) * bn + b_col(J);
                    (ld(b_s, at), ld(b_s, at + 4 * bn))
                };
                let ((b0, b0s), (b1, b1s)) =
                    (operand::<MODE>(f32::from_bits(v0)), operand::<MODE>(f32::from_bits(v1)));
                bf[J] = ([b0, b1], [b0s, b1s]);
            }
        });
        let mut af = [([0u32; 4], [0u32; 4]); MT];
        unroll4!(I => {
            if I < MT {
                let (r0, r1) = (a_row(I), a_row(I) + 8 * BK);
                let v = [ld(a_s, r0 + x0), ld(a_s, r1 + x0), ld(a_s, r0 + x1), ld(a_s, r1 + x1)];
                let (a0, a0s) = operand::<MODE>(f32::from_bits(v[0]));
                let (a1, a1s) = operand::<MODE>(f32::from_bits(v[1]));
                let (a2, a2s) = operand::<MODE>(f32::from_bits(v[2]));
                let (a3, a3s) = operand::<MODE>(f32::from_bits(v[3]));
                af[I] = ([a0, a1, a2, a3], [a0s, a1s, a2s, a3s]);
            }
        });
        // The half modes: the even step's halves packed, then at the odd step its halves and one
        // m16n8k16 product per tile.
        if half {
            let pack = |lo: u32, hi: u32| {
                let (lo, hi) = (f32::from_bits(lo), f32::from_bits(hi));
                if bf16 { cvt_rn_half2::<true>(lo, hi) } else { cvt_rn_half2::<false>(lo, hi) }
            };
            let h = S % 2;
            unroll4!(J => {
                if J < NT {
                    half_b[J][h] = pack(bf[J].0[0], bf[J].0[1]);
                }
            });
            unroll4!(I => {
                if I < MT {
                    half_a[I][2 * h] = pack(af[I].0[0], af[I].0[2]);
                    half_a[I][2 * h + 1] = pack(af[I].0[1], af[I].0[3]);
                }
            });
            if h == 1 {
                unroll4!(I => {
                    if I < MT {
                        unroll4!(J => {
                            if J < NT {
                                // (A's registers in the fragment order: rows g, g + 8 of the
                                // first k pair, then of the second.)
                                let a = [half_a[I][0], half_a[I][1], half_a[I][2], half_a[I][3]];
                                acc[I][J] = if bf16 {
                                    mma_m16n8k16_half_f32::<true>(a, half_b[J], acc[I][J])
                                } else {
                                    mma_m16n8k16_half_f32::<false>(a, half_b[J], acc[I][J])
                                };
                            }
                        });
                    }
                });
            }
        }
        // The three products of every tile in turn (small terms first, as `gemm_tc`; only the
        // last in TF32): the `MT * NT` accumulators are independent, so consecutive mma do not
        // wait on each other.
        unroll4!(I => {
            if exact && I < MT {
                unroll4!(J => {
                    if J < NT {
                        acc[I][J] = mma_m16n8k8_tf32_f32(af[I].1, bf[J].0, acc[I][J]);
                    }
                });
            }
        });
        unroll4!(I => {
            if exact && I < MT {
                unroll4!(J => {
                    if J < NT {
                        acc[I][J] = mma_m16n8k8_tf32_f32(af[I].0, bf[J].1, acc[I][J]);
                    }
                });
            }
        });
        unroll4!(I => {
            if !half && I < MT {
                unroll4!(J => {
                    if J < NT {
                        acc[I][J] = mma_m16n8k8_tf32_f32(af[I].0, bf[J].0, acc[I][J]);
                    }
                });
            }
        });
    });
}

macro_rules! tile_entries {
    ($($(#[$doc:meta])* $name:ident: $wm:literal x $wn:literal warps, $mt:literal x $nt:literal, $kb:literal, $mode:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// As `gemm_program_f32`, with the operand requirements of the module doc. A plain GEMM
        /// passes the identity program (one input, no instructions; `x1..x3` null). With
        /// `p.splits > 1` (`p.k_chunk` a multiple of 32) the block at grid z `batch * splits +
        /// split` sums k chunk `split` into matrix z of `y`, the workspace of raw partials
        /// (`[batch][split][m][n]`, as `gemm_f32` writes them; the planner passes alpha 1, no C,
        /// no activation, the identity program and `y_bs = m n`), which `gemm_reduce_f32` /
        /// `gemm_reduce_program_f32` sum and finish.
        ///
        /// # Parameters
        /// See [`GemmParams`] and [`EwProgramParams`].
        ///
        /// # Thread mapping
        /// Grid (ceil(n / BN), ceil(m / BM), batch * splits), block `32 * warps` threads,
        /// [`crate::abi::GemmTile::shared_bytes`] of dynamic shared memory; warp `w` computes
        /// rows `(w / WN) * 16 MT ..` and columns `(w % WN) * 8 NT ..` of the block's tile.
        #[unsafe(no_mangle)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "ptx-kernel" fn $name(
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
            unsafe { gemm_tile::<$wm, $wn, $mt, $nt, $kb, { mode::$mode }>(&p, a, b, c, y, program(&e, x1, x2, x3)) }
        }
    )*};
}

tile_entries! {
    /// Tensor-core f32 GEMM (3xTF32), 128 x 128 block tiles, B n-contiguous.
    gemm_tc128_n_f32: 2 x 4 warps, 4 x 4, false, EXACT;
    /// Tensor-core f32 GEMM (3xTF32), 128 x 128 block tiles, B k-contiguous.
    gemm_tc128_k_f32: 2 x 4 warps, 4 x 4, true, EXACT;
    /// Tensor-core f32 GEMM (3xTF32), 64 x 64 block tiles, B n-contiguous.
    gemm_tc64_n_f32: 2 x 2 warps, 2 x 4, false, EXACT;
    /// Tensor-core f32 GEMM (3xTF32), 64 x 64 block tiles, B k-contiguous.
    gemm_tc64_k_f32: 2 x 2 warps, 2 x 4, true, EXACT;
    /// `gemm_tc128_n_f32` in TF32: operands rounded to TF32, one product per tile.
    gemm_tc128_n_tf32: 2 x 4 warps, 4 x 4, false, TF32;
    /// `gemm_tc128_k_f32` in TF32.
    gemm_tc128_k_tf32: 2 x 4 warps, 4 x 4, true, TF32;
    /// `gemm_tc64_n_f32` in TF32.
    gemm_tc64_n_tf32: 2 x 2 warps, 2 x 4, false, TF32;
    /// `gemm_tc64_k_f32` in TF32.
    gemm_tc64_k_tf32: 2 x 2 warps, 2 x 4, true, TF32;
    /// `gemm_tc128_n_f32` in f16: operands rounded to f16, one `m16n8k16` product per pair of k8
    /// steps, f32 accumulation.
    gemm_tc128_n_f16: 2 x 4 warps, 4 x 4, false, F16;
    /// `gemm_tc128_k_f32` in f16.
    gemm_tc128_k_f16: 2 x 4 warps, 4 x 4, true, F16;
    /// `gemm_tc64_n_f32` in f16.
    gemm_tc64_n_f16: 2 x 2 warps, 2 x 4, false, F16;
    /// `gemm_tc64_k_f32` in f16.
    gemm_tc64_k_f16: 2 x 2 warps, 2 x 4, true, F16;
    /// `gemm_tc128_n_f32` in bf16: operands rounded to bf16, as the f16 entries.
    gemm_tc128_n_bf16: 2 x 4 warps, 4 x 4, false, BF16;
    /// `gemm_tc128_k_f32` in bf16.
    gemm_tc128_k_bf16: 2 x 4 warps, 4 x 4, true, BF16;
    /// `gemm_tc64_n_f32` in bf16.
    gemm_tc64_n_bf16: 2 x 2 warps, 2 x 4, false, BF16;
    /// `gemm_tc64_k_f32` in bf16.
    gemm_tc64_k_bf16: 2 x 2 warps, 2 x 4, true, BF16;
}
