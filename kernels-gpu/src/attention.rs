//! Fused attention (`attention_f32`): `Y = softmax(program(Q Kᵀ)) V` in one launch, with Q, K, V,
//! Y and the score program's extra inputs all read or written through strided views, so split,
//! reshaped and transposed operands are used in place and the scores never touch memory.
//!
//! Flash-decoding style on CUDA cores: a block takes [`ATTN_ROWS`] query rows of one (batch,
//! head) and its [`ATTN_WARPS`] warps split the keys in groups of 32 (group `g` to warp
//! `g % ATTN_WARPS`), so a short sequence is spread over several warps instead of walked by one,
//! and every K and V value a warp loads serves all the block's rows. For a group, lane `l` scores
//! key `l` against each row (its K row read straight from global memory, 16-byte vectors when
//! unit-stride and aligned, against the query rows in shared memory), runs the score program, and
//! the warp updates each row's online softmax (running maximum and sum, the outputs rescaled when
//! the maximum grows) and accumulates `P V` with lanes over the value columns (the probability of
//! key `t` broadcast from lane `t` by a shuffle, two keys' V loads in flight). At the end each
//! warp leaves its maxima, sums and outputs in shared memory and warp `r` merges row `r`'s in warp
//! order (deterministic). Accumulation is f32 throughout; the per-lane accumulators are
//! constant-size arrays indexed only by constants (no local memory). The key loop is instantiated
//! by the columns a lane holds (two for heads of at most 64) and, for those heads, by the score
//! program: a short one (a scale, then an additive mask) runs inline, any other through the
//! interpreter in an instantiation of its own (whose registers the inline one does not pay for).

use crate::abi::{
    ATTN_CAUSAL_MASK, ATTN_CAUSAL_SKIP, ATTN_MAX_DV, ATTN_NAN_ROWS_ZERO, ATTN_ROWS, ATTN_THREADS, ATTN_WARPS,
    AttentionParams, AttnView, attention_fits,
};
use crate::intrinsics::{
    F32x4, block_dim_x, block_idx_x, dynamic_shared_ptr, fma_rn, grid_dependency_wait,
    grid_dependents_launch, lane_id, shfl_idx_u32, shfl_xor_f32, sync_threads, thread_idx_x, vote_any,
    warp_sum_f32,
};
use crate::math;
use crate::program::{EwState, ShortProgram};

mod dots;
use dots::{dots, dots_regs, dots_vec};

/// Output columns per lane (`ATTN_MAX_DV / 32`); the unrolled lists below name `0..DV_REGS`.
const DV_REGS: usize = 8;
const _: () = assert!(DV_REGS == (ATTN_MAX_DV / 32) as usize);

/// Element offset of `(b, h, r, c)` in view `v`.
#[inline(always)]
pub(crate) fn at(v: &AttnView, b: u64, h: u64, r: u64, c: u64) -> u64 {
    v.offset + b * v.strides[0] + h * v.strides[1] + r * v.strides[2] + c * v.strides[3]
}

/// The (batch, head, key/value head) and first query row of this block, for blocks of `rows`
/// query rows of one (batch, head) each (the attention kernels' grid); `None` for a block past
/// them.
#[inline(always)]
pub(crate) fn block_rows(p: &AttentionParams, rows: u32) -> Option<(u64, u64, u64, u32)> {
    let q_blocks = p.q_len.div_ceil(rows);
    let bh = block_idx_x() / q_blocks;
    if bh as u64 >= p.batch as u64 * p.heads as u64 {
        return None;
    }
    let (b, h) = ((bh / p.heads) as u64, (bh % p.heads) as u64);
    Some((b, h, h / p.kv_group as u64, (block_idx_x() % q_blocks) * rows))
}

/// The end of the keys a block whose last query row is `last_row` reads: `kv_len`, or with
/// [`ATTN_CAUSAL_SKIP`] the keys up to that row's diagonal (the later ones are hidden from every
/// row of the block). The kernels walk whole 32-key groups below it.
#[inline(always)]
pub(crate) fn key_end(p: &AttentionParams, last_row: u32) -> u32 {
    if p.causal & ATTN_CAUSAL_SKIP != 0 {
        (last_row as u64 + p.causal_offset as u64 + 1).min(p.kv_len as u64) as u32
    } else {
        p.kv_len
    }
}

/// Whether [`ATTN_CAUSAL_MASK`] hides key `j` from query row `i`.
#[inline(always)]
pub(crate) fn causal_masked(p: &AttentionParams, i: u64, j: u64) -> bool {
    p.causal & ATTN_CAUSAL_MASK != 0 && j > i + p.causal_offset as u64
}

/// Maximum of `x` over the warp, NaN ignored (as `f64::max` in the reference softmax): every lane
/// gets the same result. Warp-collective.
#[inline(always)]
fn warp_max_ignoring_nan(x: f32) -> f32 {
    let mut m = if x > f32::NEG_INFINITY { x } else { f32::NEG_INFINITY };
    let mut mask = 16;
    while mask > 0 {
        let t = shfl_xor_f32(m, mask);
        if t > m {
            m = t;
        }
        mask >>= 1;
    }
    m
}

/// Query rows per block, for the per-row arrays.
const R: usize = ATTN_ROWS as usize;
const _: () = assert!(R == 2);

/// `body` once per row with `$r` a constant (`0..R`): the per-row arrays are then indexed by
/// constants only and stay in registers (a loop that LLVM leaves rolled would index them at run
/// time and move them to local memory).
macro_rules! for_rows {
    (|$r:ident| $body:block) => {{
        {
            const $r: usize = 0;
            $body
        }
        {
            const $r: usize = 1;
            $body
        }
    }};
}

/// Fused attention ([`AttentionParams`]): `Y[b, h, i, :] = softmax_j(program(Q[b, h, i, :] ·
/// K[b, h / kv_group, j, :])) V[b, h / kv_group, :, :]`, with the optional causal mask. A row
/// whose scores hold a NaN or `+inf`, or are all `-inf`, is NaN (as the unfused `Softmax`).
///
/// # Safety
/// Every view of `p` addresses, for all indices below its extents (`batch`, `heads` or
/// `heads / kv_group`, `q_len` or `kv_len`, `dk` or `dv`; the program inputs over `(batch, heads,
/// q_len, kv_len)`), an element inside its pointer's allocation; `x1..x3` are read only when
/// `p.n_inputs` exceeds their index (unused ones may be null). `y` overlaps no input. The launch
/// has `attention_shared_bytes(p.dk, p.dv)` bytes of dynamic shared memory; `p.n_instr <=
/// EW_MAX_INSTRS`.
///
/// # Parameters
/// `p`: extents, views, causal mask and the score program; `q`, `k`, `v`: the operands; `x1`..
/// `x3`: the score program's inputs 1..3; `y`: the output.
///
/// # Thread mapping
/// 1-D blocks of `ATTN_THREADS` threads (other block sizes return at once), a 1-D grid of
/// `batch * heads * ceil(q_len / ATTN_ROWS)` blocks: block `x` takes `(b, h) = (x / q_blocks) /
/// heads, % heads` and query rows `(x % q_blocks) * ATTN_ROWS + r`, `r < ATTN_ROWS`; warp `w`
/// takes the 32-key groups `w, w + ATTN_WARPS, ...` starting below [`key_end`] (lane `l`: key
/// `l` of the group's scores, value columns `l, l + 32, ...` of the outputs) for every row, then
/// merges row `w`. Two block barriers (after the query rows are staged, before the merge),
/// reached by every warp.
///
/// Shared memory (f32): `ATTN_ROWS` query rows of `ceil4(dk)`, then per row and warp `dv + 3`
/// (maximum, sum, NaN flag, outputs).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn attention_f32(
    p: AttentionParams,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // Uniform over the block: whole blocks leave, before any barrier (after waiting for the
    // previous kernel: a grid whose blocks all left without waiting would let the next kernel's
    // wait return before that kernel finished).
    if p.q_len == 0
        || !attention_fits(p.dk, p.dv)
        || p.kv_group == 0
        || p.heads == 0
        || block_dim_x() != ATTN_THREADS
    {
        grid_dependency_wait();
        return;
    }
    // Heads of at most 64 hold two output columns a lane; with a short score program (a scale,
    // then an additive mask) the loop runs it inline, without the interpreter and its registers.
    let short = ShortProgram::of(&p.instrs, p.n_instr, p.out_reg).filter(|_| p.n_inputs <= 2);
    // SAFETY: forwarded (the kernel's contract).
    unsafe {
        match (p.dv <= 64, short) {
            (true, Some(short)) => attend::<2, true>(&p, [q, k, v], [x1, x2, x3], y, short),
            (true, None) => attend::<2, false>(&p, [q, k, v], [x1, x2, x3], y, ShortProgram::default()),
            (false, _) => attend::<DV_REGS, false>(&p, [q, k, v], [x1, x2, x3], y, ShortProgram::default()),
        }
    }
}

/// The body of [`attention_f32`] for heads of at most `32 C` output columns, the score program
/// run as `short` (`SHORT`) or by the interpreter.
///
/// # Safety
/// As [`attention_f32`], whose checks passed; `dv <= 32 C`; with `SHORT`, `short` is the program.
#[inline(always)]
unsafe fn attend<const C: usize, const SHORT: bool>(
    p: &AttentionParams,
    [q, k, v]: [*const f32; 3],
    [x1, x2, x3]: [*const f32; 3],
    y: *mut f32,
    short: ShortProgram,
) {
    let p = *p;
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, lane_id());
    let Some((b, h, hk, row0)) = block_rows(&p, ATTN_ROWS) else {
        grid_dependency_wait();
        return;
    };
    // The block's rows (the last block may have fewer); rows past them score row `q_len - 1`
    // (valid addresses) and are never stored.
    let rows = (p.q_len - row0).min(ATTN_ROWS);
    let (dk, dv) = (p.dk, p.dv);
    let q_stride = dk.div_ceil(4) * 4;
    // SAFETY: the launch has attention_shared_bytes(dk, dv) bytes: ATTN_ROWS * q_stride +
    // ATTN_WARPS * ATTN_ROWS * (dv + 3) f32.
    let (q_sh, merge) = unsafe {
        let sh = dynamic_shared_ptr().cast::<f32>();
        (sh, sh.add((ATTN_ROWS * q_stride) as usize))
    };
    let last = p.kv_len.saturating_sub(1) as u64;
    // K rows as 16-byte vectors when unit-stride and aligned (the same answer for every key).
    let k_vec = p.k.strides[3] == 1
        && dk % 4 == 0
        && p.k.strides[2] % 4 == 0
        && (k as usize + 4 * at(&p.k, b, hk, 0, 0) as usize) % 16 == 0;
    let n_in = p.n_inputs;
    let row_of = |r: u32| (row0 + r).min(p.q_len - 1) as u64;
    // V at (b, hk, key 0, column lane), its row stride and the stride of 32 columns.
    let (v_lane, v_rs, v_grp) = (at(&p.v, b, hk, 0, lane as u64), p.v.strides[2], 32 * p.v.strides[3]);
    // (Never with more columns a lane: the loads and products up front compile away.)
    let small = C == 2 && k_vec && dk <= 64 && dv <= 64;
    // Group `k0`'s keys below kv_len, whether the lane's key is one of them, the lane's key
    // (invalid lanes score the last key: valid memory, then ignored), V at (b, hk, k0, lane), the
    // key's row of K, and whether the group is whole: 32 keys with heads of exactly 64 (GPT-2's,
    // BERT's), where every load of the small path is taken, so it runs without a guard or a zero
    // fill.
    let group = |k0: u32| {
        let avail = (p.kv_len - k0).min(32);
        let j = ((k0 + lane) as u64).min(last);
        // SAFETY (every V read through it): key k0 + t with t < avail is below kv_len, the
        // column (lane + 32 c) below dv; (b, hk, k0, lane) addresses V's view.
        let v_key0 = unsafe { v.add(v_lane as usize).add((k0 as u64 * v_rs) as usize) };
        let whole = small && avail == 32 && dk == 64 && dv == 64;
        (avail, lane < avail, j, v_key0, at(&p.k, b, hk, j, 0), whole)
    };
    // Everything above computes from the parameters: it runs while the previous kernel finishes
    // (programmatic dependent launch); Q, K, V are its outputs.
    grid_dependency_wait();
    // The loads of group `k0`: K's row and V values (the small path) and the program's inputs.
    let load_group = |k0: u32| {
        let (avail, valid, j, v_key0, k_row, whole) = group(k0);
        // Heads of at most 64 with a vector-readable K: the group's K row and its 32 keys' V
        // values are all loaded up front (their latencies overlap, one wait instead of one per
        // key), then used from registers.
        let mut kr = [F32x4([0.0; 4]); 16];
        let mut vr = [[0.0f32; 2]; 32];
        if whole {
            // SAFETY: dk == 64: K's row j holds 16 aligned vectors (k_vec); the 32 keys
            // k0 + t are below kv_len and columns lane, lane + 32 below dv.
            // Unrolled by hand, as the guarded loads below.
            unsafe {
                let k4 = k.add(k_row as usize) as *const F32x4;
                macro_rules! k_all {
                    ($($c:literal)*) => {$( kr[$c] = *k4.add($c); )*};
                }
                k_all!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
                macro_rules! v_all {
                    ($($t:literal)*) => {$(
                        let row = v_key0.add(($t as u64 * v_rs) as usize);
                        vr[$t] = [*row, *row.add(v_grp as usize)];
                    )*};
                }
                v_all!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
                16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
            }
        } else if small {
            // SAFETY: c < dk / 4: inside K's row j (16-byte aligned: k_vec).
            let k4 = unsafe { k.add(k_row as usize) } as *const F32x4;
            macro_rules! k_loads {
                ($($c:literal)*) => {$(
                    if $c < dk / 4 {
                        kr[$c] = unsafe { *k4.add($c) };
                    }
                )*};
            }
            k_loads!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
            macro_rules! v_loads {
                ($($t:literal)*) => {$(
                    if $t < avail {
                        // SAFETY: key k0 + t below kv_len; the columns below dv.
                        unsafe {
                            let row = v_key0.add(($t as u64 * v_rs) as usize);
                            if lane < dv {
                                vr[$t][0] = *row;
                            }
                            if lane + 32 < dv {
                                vr[$t][1] = *row.add(v_grp as usize);
                            }
                        }
                    }
                )*};
            }
            v_loads!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
                16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
        }
        // The score program's extra inputs at (b, h, i, j) for every row, loaded before the
        // scores need them.
        let mut xs = [[0.0f32; R]; 3];
        if valid {
            for_rows!(|RW| {
                let i = row_of(RW as u32);
                let ex = |e: &AttnView| (at(e, b, h, i, 0) + j * e.strides[3]) as usize;
                // SAFETY: (b, h, i, j) inside the extents: inside each used input (the contract).
                unsafe {
                    if n_in > 1 {
                        xs[0][RW] = *x1.add(ex(&p.extra[0]));
                    }
                    if n_in > 2 {
                        xs[1][RW] = *x2.add(ex(&p.extra[1]));
                    }
                    if n_in > 3 {
                        xs[2][RW] = *x3.add(ex(&p.extra[2]));
                    }
                }
            });
        }
        (kr, vr, xs)
    };
    let kv_end = key_end(&p, row0 + rows - 1);
    let mut k0 = warp * 32;
    let (mut kr, mut vr, mut xs) = ([F32x4([0.0; 4]); 16], [[0.0f32; 2]; 32], [[0.0f32; R]; 3]);
    let mut m = [f32::NEG_INFINITY; R];
    let mut l = [0.0f32; R];
    let mut bad = [false; R];
    let mut o = [[0.0f32; C]; R];
    let mut staged = false;
    loop {
        // A group's loads go out first: on the first pass before the query rows are staged, so
        // that their latency overlaps the staging's and the barrier's (a warp stalls at the first
        // use of a loaded value: loads after the staging's stores would leave only once Q had
        // arrived). One call site, so that the loads inline into registers.
        if k0 < kv_end {
            (kr, vr, xs) = load_group(k0);
        }
        if !staged {
            staged = true;
            // Stage the query rows (zero past dk and past the block's rows).
            let mut e = tid;
            while e < ATTN_ROWS * q_stride {
                let (r, c) = (e / q_stride, e % q_stride);
                let x = if r < rows && c < dk {
                    // SAFETY: row0 + r < q_len, c < dk: inside Q.
                    unsafe { *q.add(at(&p.q, b, h, (row0 + r) as u64, c as u64) as usize) }
                } else {
                    0.0
                };
                // SAFETY: e < ATTN_ROWS * q_stride: inside the staged rows.
                unsafe { *q_sh.add(e as usize) = x };
                e += ATTN_THREADS;
            }
            sync_threads();
        }
        if k0 >= kv_end {
            break;
        }
        let (avail, valid, j, v_key0, k_row, whole) = group(k0);
        // SAFETY: j < kv_len: a key row of K; q_sh holds ATTN_ROWS rows of q_stride (>= dk).
        let qk = unsafe {
            if whole {
                // Constant extents (q_stride is 64 too): the column guards and offsets fold.
                dots_regs(q_sh, 64, &kr, 64)
            } else if small {
                dots_regs(q_sh, q_stride, &kr, dk)
            } else if k_vec {
                dots_vec(q_sh, q_stride, k.add(k_row as usize), dk)
            } else {
                dots(q_sh, q_stride, k, k_row, p.k.strides[3], dk)
            }
        };
        let mut pj = [0.0f32; R];
        let mut alpha = [1.0f32; R];
        for_rows!(|RW| {
            let r = RW;
            let i = row_of(r as u32);
            let mut s = f32::NEG_INFINITY;
            if valid {
                s = if SHORT {
                    short.eval(qk[r], xs[0][r])
                } else {
                    let mut st = EwState::default();
                    (st.x0, st.x1, st.x2, st.x3) = (qk[r], xs[0][r], xs[1][r], xs[2][r]);
                    st.run(&p.instrs, p.n_instr, p.out_reg)
                };
                if causal_masked(&p, i, j) {
                    s += f32::NEG_INFINITY;
                }
                bad[r] |= s.is_nan() || s == f32::INFINITY;
            }
            let m_new = {
                let bm = warp_max_ignoring_nan(s);
                if bm > m[r] { bm } else { m[r] }
            };
            // Until a finite maximum is seen every score was -inf: nothing to add or rescale.
            let live = m_new > f32::NEG_INFINITY;
            pj[r] = if valid && live && !s.is_nan() { math::exp(s - m_new) } else { 0.0 };
            alpha[r] = if live { math::exp(m[r] - m_new) } else { 1.0 };
            l[r] = l[r] * alpha[r] + warp_sum_f32(pj[r]);
            m[r] = m_new;
            for c in 0..C {
                o[r][c] *= alpha[r];
            }
        });
        // P V over keys t < avail (two keys' loads issued before their multiplies), value
        // columns lane + 32 c below dv; one loop per bound on the column groups.
        macro_rules! pv {
            ($($c:literal)*) => {{
                let mut t = 0u32;
                while t < avail {
                    let t1 = (t + 1).min(avail - 1);
                    let (r0, r1) = unsafe {
                        (v_key0.add((t as u64 * v_rs) as usize), v_key0.add((t1 as u64 * v_rs) as usize))
                    };
                    let mut x0 = [0.0f32; DV_REGS];
                    let mut x1 = [0.0f32; DV_REGS];
                    $(
                        if lane + 32 * $c < dv {
                            unsafe {
                                x0[$c] = *r0.add(($c * v_grp) as usize);
                                x1[$c] = *r1.add(($c * v_grp) as usize);
                            }
                        }
                    )*
                    for_rows!(|RW| {
                        let r = RW;
                        let p0 = f32::from_bits(shfl_idx_u32(pj[r].to_bits(), t));
                        // The second key past avail weighs 0 (its loads repeat the last key).
                        let p1 = f32::from_bits(shfl_idx_u32(pj[r].to_bits(), t1));
                        let p1 = if t + 1 < avail { p1 } else { 0.0 };
                        $(
                            o[r][$c] = fma_rn(p0, x0[$c], o[r][$c]);
                            o[r][$c] = fma_rn(p1, x1[$c], o[r][$c]);
                        )*
                    });
                    t += 2;
                }
            }};
        }
        // From the registers loaded up front: keys past avail have zero values and weights.
        macro_rules! pv_regs {
            ($($t:literal)*) => {$(
                if $t < avail {
                    for_rows!(|RW| {
                        let pt = f32::from_bits(shfl_idx_u32(pj[RW].to_bits(), $t));
                        o[RW][0] = fma_rn(pt, vr[$t][0], o[RW][0]);
                        o[RW][1] = fma_rn(pt, vr[$t][1], o[RW][1]);
                    });
                }
            )*};
        }
        if whole {
            macro_rules! pv_all {
                ($($t:literal)*) => {$(
                    for_rows!(|RW| {
                        let pt = f32::from_bits(shfl_idx_u32(pj[RW].to_bits(), $t));
                        o[RW][0] = fma_rn(pt, vr[$t][0], o[RW][0]);
                        o[RW][1] = fma_rn(pt, vr[$t][1], o[RW][1]);
                    });
                )*};
            }
            pv_all!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
        } else if small {
            pv_regs!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
        } else if C == 2 {
            pv!(0 1);
        } else if dv <= 128 {
            pv!(0 1 2 3);
        } else {
            pv!(0 1 2 3 4 5 6 7);
        }
        k0 += ATTN_WARPS * 32;
    }
    // Each warp's partial result per row, then warp r merges row r in warp order.
    let parts = Partials { m, l, bad, o };
    // SAFETY: forwarded (the kernel's contract); merge holds ATTN_ROWS * ATTN_WARPS slots of dv + 3.
    unsafe { merge_rows::<C>(&p, &parts, merge, (b, h, row0, rows), y) };
}

/// A warp's online-softmax state per query row: running maximum, sum, whether a NaN or `+inf`
/// score was seen, and the unnormalized outputs (lane `l`: columns `l + 32 c`).
struct Partials<const C: usize> {
    m: [f32; R],
    l: [f32; R],
    bad: [bool; R],
    o: [[f32; C]; R],
}

/// The end of `attention_f32`: every warp leaves its [`Partials`] in its shared-memory slots
/// (`merge`: per row and warp, maximum, sum, NaN flag and `dv` outputs), then warp `r` merges row
/// `r` (of `rows`, starting at `row0`, of batch `b` and head `h`) in warp order and stores it. `C`:
/// the output columns a lane holds (`32 C >= dv`). Block-collective (one barrier).
///
/// # Safety
/// As `attention_f32`; `merge` holds `ATTN_ROWS * ATTN_WARPS * (dv + 3)` f32.
#[inline(always)]
unsafe fn merge_rows<const C: usize>(
    p: &AttentionParams,
    parts: &Partials<C>,
    merge: *mut f32,
    (b, h, row0, rows): (u64, u64, u32, u32),
    y: *mut f32,
) {
    let (warp, lane) = (thread_idx_x() / 32, lane_id());
    let (dv, merge_stride) = (p.dv, p.dv + 3);
    for_rows!(|RW| {
        let r = RW;
        let any_bad = vote_any(parts.bad[r]);
        // SAFETY: (r, warp) < (ATTN_ROWS, ATTN_WARPS): its merge slot of dv + 3 f32.
        let mine = unsafe { merge.add(((r as u32 * ATTN_WARPS + warp) * merge_stride) as usize) };
        // SAFETY: inside the slot (columns below dv).
        unsafe {
            if lane == 0 {
                *mine = parts.m[r];
                *mine.add(1) = parts.l[r];
                *mine.add(2) = if any_bad { 1.0 } else { 0.0 };
            }
            for c in 0..C as u32 {
                if lane + 32 * c < dv {
                    *mine.add((3 + lane + 32 * c) as usize) = parts.o[r][c as usize];
                }
            }
        }
    });
    sync_threads();
    // Only the rows' merge is left: the next kernel may launch (its blocks wait for this grid).
    grid_dependents_launch();
    let r = warp;
    if r >= rows {
        return;
    }
    // SAFETY (the merge reads): row r's ATTN_WARPS slots, written before the barrier.
    let slot_of = |w: u32| unsafe { merge.add(((r * ATTN_WARPS + w) * merge_stride) as usize) };
    let (mut big, mut nan_seen) = (f32::NEG_INFINITY, false);
    for w in 0..ATTN_WARPS {
        let s = slot_of(w);
        // SAFETY: see above.
        let (mw, flag) = unsafe { (*s, *s.add(2)) };
        if mw > big {
            big = mw;
        }
        nan_seen |= flag != 0.0;
    }
    let mut sum = 0.0f32;
    let mut acc = [0.0f32; C];
    for w in 0..ATTN_WARPS {
        let s = slot_of(w);
        // SAFETY: see above.
        let mw = unsafe { *s };
        if mw == f32::NEG_INFINITY {
            continue;
        }
        let f = math::exp(mw - big);
        // SAFETY: see above.
        sum = fma_rn(unsafe { *s.add(1) }, f, sum);
        for c in 0..C as u32 {
            if lane + 32 * c < dv {
                // SAFETY: column below dv: inside the slot.
                acc[c as usize] = fma_rn(unsafe { *s.add((3 + lane + 32 * c) as usize) }, f, acc[c as usize]);
            }
        }
    }
    // No keys: an empty sum, as the reference gives.
    let nan = p.kv_len > 0 && (nan_seen || big == f32::NEG_INFINITY);
    let i = (row0 + r) as u64;
    for c in 0..C as u32 {
        let col = lane + 32 * c;
        if col < dv {
            let out = if nan {
                if p.causal & ATTN_NAN_ROWS_ZERO != 0 { 0.0 } else { f32::NAN }
            } else if p.kv_len == 0 {
                0.0
            } else {
                acc[c as usize] / sum
            };
            // SAFETY: col < dv, (b, h, i) inside the extents: inside Y.
            unsafe { *y.add(at(&p.y, b, h, i, col as u64) as usize) = out };
        }
    }
}
