//! Fused attention (`attention_f32`): `Y = softmax(program(Q Kᵀ)) V` in one launch, with Q, K, V,
//! Y and the score program's extra inputs all read or written through strided views, so split,
//! reshaped and transposed operands are used in place and the scores never touch memory.
//!
//! Flash style on CUDA cores: a block takes [`ATTN_WARPS`] query rows of one (batch, head), one
//! per warp, and walks the keys in chunks of [`attention_chunk`] rows. The whole block copies a
//! chunk's K and V rows into shared memory (coalesced along the head dimension, several loads in
//! flight per thread), then each warp computes its row's scores 32 keys at a time (lane `l`: key
//! `l` of the 32, its K row read from shared memory), runs the score program on them, updates its
//! online softmax (running maximum and sum, the output rescaled when the maximum grows) and
//! accumulates `P V` with lanes over the value columns (the probability of key `t` broadcast from
//! lane `t` by a shuffle). Accumulation is f32 throughout; the per-lane output accumulators are a
//! constant-size array indexed only by macro-unrolled constants (no local memory).

use crate::abi::{ATTN_MAX_DV, ATTN_THREADS, ATTN_WARPS, AttentionParams, AttnView, attention_chunk};
use crate::intrinsics::{
    block_dim_x, block_idx_x, dynamic_shared_ptr, fma_rn, lane_id, shfl_idx_u32, shfl_xor_f32, sync_threads,
    sync_warp, thread_idx_x, vote_any, warp_sum_f32,
};
use crate::math;
use crate::program::EwState;

/// Output columns per lane (`ATTN_MAX_DV / 32`); the unrolled lists below name `0..DV_REGS`.
const DV_REGS: usize = 8;
const _: () = assert!(DV_REGS == (ATTN_MAX_DV / 32) as usize);

/// Element offset of `(b, h, r, c)` in view `v`.
#[inline(always)]
fn at(v: &AttnView, b: u64, h: u64, r: u64, c: u64) -> u64 {
    v.offset + b * v.strides[0] + h * v.strides[1] + r * v.strides[2] + c * v.strides[3]
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

/// Elements of a chunk copy issued back to back per thread, per operand (loads in flight before
/// the stores): a 64-key chunk of head size 64 is one batch of K and V.
const LOAD_BATCH: u32 = 16;

/// One operand of a key chunk copy: `rows × d` elements of a strided source, row `r` of the chunk
/// read at source row `min(k0 + r, last)` (so every address is inside the operand), written to
/// `dst[r * ds + c]`. Thread `t` copies elements `t, t + ATTN_THREADS, ...` of the chunk
/// flattened along its unit-stride axis (the columns, or the rows when only those have unit
/// stride, as a K given transposed), so consecutive threads read consecutive addresses; each
/// element's `(slow, fast)` index is tracked incrementally (no division in the loop).
#[derive(Clone, Copy)]
struct Tile {
    src: *const f32,
    /// Source offset of (row 0, column 0) of the operand's (b, head).
    base: u64,
    row_stride: u64,
    col_stride: u64,
    /// The flattening runs along the rows (`fast` is then `rows`, else the columns `d`).
    rows_fast: bool,
    /// Extent of the fast axis (at least 1).
    fast: u32,
    dst: *mut f32,
    ds: u32,
    /// Elements of the chunk (`rows * d`).
    total: u32,
    /// `ATTN_THREADS / fast` and `ATTN_THREADS % fast`: the cursor's step.
    ds_slow: u32,
    ds_fast: u32,
}

impl Tile {
    #[inline(always)]
    fn new(src: *const f32, base: u64, view: &AttnView, d: u32, dst: *mut f32, ds: u32, rows: u32) -> Self {
        let rows_fast = view.strides[3] != 1 && view.strides[2] == 1;
        let fast = if rows_fast { rows } else { d }.max(1);
        Tile {
            src,
            base,
            row_stride: view.strides[2],
            col_stride: view.strides[3],
            rows_fast,
            fast,
            dst,
            ds,
            total: rows * d,
            ds_slow: ATTN_THREADS / fast,
            ds_fast: ATTN_THREADS % fast,
        }
    }

    /// Cursor `(slow, fast)` of flattened element `e`.
    #[inline(always)]
    fn start(&self, e: u32) -> (u32, u32) {
        (e / self.fast, e % self.fast)
    }

    /// Moves cursor `sf` on by `ATTN_THREADS` flattened elements.
    #[inline(always)]
    fn step(&self, sf: (u32, u32)) -> (u32, u32) {
        let (mut s, mut f) = (sf.0 + self.ds_slow, sf.1 + self.ds_fast);
        if f >= self.fast {
            f -= self.fast;
            s += 1;
        }
        (s, f)
    }

    /// Chunk row of cursor `sf`.
    #[inline(always)]
    fn row(&self, sf: (u32, u32)) -> u32 {
        if self.rows_fast { sf.1 } else { sf.0 }
    }

    /// Column of cursor `sf`.
    #[inline(always)]
    fn col(&self, sf: (u32, u32)) -> u32 {
        if self.rows_fast { sf.0 } else { sf.1 }
    }

    /// Reads elements `e + u * ATTN_THREADS` (`u < LOAD_BATCH`, those below `total`), the first at
    /// `rc`.
    ///
    /// # Safety
    /// `last` is a row of the operand and `(b, head, last, c)` inside it for `c < d` (the
    /// kernel's contract).
    #[inline(always)]
    unsafe fn gather(&self, e: u32, rc: (u32, u32), k0: u32, last: u32) -> [f32; LOAD_BATCH as usize] {
        let mut out = [0.0f32; LOAD_BATCH as usize];
        let mut rc = rc;
        macro_rules! one {
            ($($u:literal)*) => {$(
                if e + $u * ATTN_THREADS < self.total {
                    let row = (k0 + self.row(rc)).min(last) as u64;
                    let off = self.base + row * self.row_stride + self.col(rc) as u64 * self.col_stride;
                    // SAFETY: row <= last and the column below d: inside the operand (the contract).
                    out[$u] = unsafe { *self.src.add(off as usize) };
                }
                rc = self.step(rc);
            )*};
        }
        one!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
        out
    }

    /// Writes what [`Tile::gather`] read at the same `e` and `rc` to shared memory.
    ///
    /// # Safety
    /// `dst` has `rows * ds` f32 (with `ds >= d`).
    #[inline(always)]
    unsafe fn scatter(&self, e: u32, rc: (u32, u32), vals: [f32; LOAD_BATCH as usize]) {
        let mut rc = rc;
        macro_rules! one {
            ($($u:literal)*) => {$(
                if e + $u * ATTN_THREADS < self.total {
                    // SAFETY: below `total`: the row below rows, the column below d <= ds: inside `dst`.
                    unsafe { *self.dst.add((self.row(rc) * self.ds + self.col(rc)) as usize) = vals[$u] };
                }
                rc = self.step(rc);
            )*};
        }
        one!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    }

    /// Cursor `LOAD_BATCH` steps on from `rc`.
    #[inline(always)]
    fn skip_batch(&self, rc: (u32, u32)) -> (u32, u32) {
        let mut rc = rc;
        macro_rules! one {
            ($($u:literal)*) => {$( let _ = $u; rc = self.step(rc); )*};
        }
        one!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
        rc
    }
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
/// `batch * heads * ceil(q_len / ATTN_WARPS)` blocks: block `x` takes `(b, h) = (x / q_blocks) /
/// heads, % heads` and query rows `(x % q_blocks) * ATTN_WARPS + warp`, one per warp. Per key
/// chunk of `kc = attention_chunk(dk, dv)` rows, all threads copy K and V rows into shared memory
/// (`sync_threads` after the copy and before the next one: every warp, those past `q_len` too,
/// runs every chunk). Lane `l` then computes the scores of keys `k0 + s + l` for `s = 0, 32, ..`
/// below `kc`, and accumulates value columns `l, l + 32, ...`.
///
/// Shared memory (f32): `ATTN_WARPS` query rows of `ceil4(dk)`, then `kc` K rows of `dk | 1`,
/// then `kc` V rows of `dv`.
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
    let kc = attention_chunk(p.dk, p.dv);
    // Uniform over the block: whole blocks leave, before any barrier.
    if p.q_len == 0
        || p.dv > ATTN_MAX_DV
        || p.kv_group == 0
        || p.heads == 0
        || kc == 0
        || block_dim_x() != ATTN_THREADS
    {
        return;
    }
    let tid = thread_idx_x();
    let warp = tid / 32;
    let lane = lane_id();
    let q_blocks = p.q_len.div_ceil(ATTN_WARPS);
    let bh = block_idx_x() / q_blocks;
    if bh as u64 >= p.batch as u64 * p.heads as u64 {
        return;
    }
    let row = (block_idx_x() % q_blocks) * ATTN_WARPS + warp;
    // Uniform over the warp: warps past the last row still copy chunks and meet the barriers.
    let active = row < p.q_len;
    let (b, h) = ((bh / p.heads) as u64, (bh % p.heads) as u64);
    let hk = h / p.kv_group as u64;
    let i = row as u64;
    let (dk, dv) = (p.dk, p.dv);
    let q_stride = dk.div_ceil(4) * 4;
    let k_stride = dk | 1;
    // SAFETY: the launch has attention_shared_bytes(dk, dv) bytes: ATTN_WARPS * q_stride +
    // kc * k_stride + kc * dv f32 (see `attention_chunk`).
    let (q_sh, k_sh, v_sh) = unsafe {
        let sh = dynamic_shared_ptr().cast::<f32>();
        let k_sh = sh.add((ATTN_WARPS * q_stride) as usize);
        (sh.add((warp * q_stride) as usize), k_sh, k_sh.add((kc * k_stride) as usize))
    };
    if active {
        let mut c = lane;
        while c < dk {
            // SAFETY: c < dk: inside Q's row and this warp's query slot.
            unsafe { *q_sh.add(c as usize) = *q.add(at(&p.q, b, h, i, c as u64) as usize) };
            c += 32;
        }
        sync_warp();
    }
    let kt = Tile::new(k, at(&p.k, b, hk, 0, 0), &p.k, dk, k_sh, k_stride, kc);
    let vt = Tile::new(v, at(&p.v, b, hk, 0, 0), &p.v, dv, v_sh, dv, kc);
    let (k_rc0, v_rc0) = (kt.start(tid), vt.start(tid));
    let batch_elems = LOAD_BATCH * ATTN_THREADS;
    let copied = kt.total.max(vt.total);
    let last = p.kv_len.saturating_sub(1);
    // The score program's extra inputs at (b, h, i, 0) and their column strides.
    let ex = |e: &AttnView| (at(e, b, h, i, 0), e.strides[3]);
    let (e1, e2, e3) = (ex(&p.extra[0]), ex(&p.extra[1]), ex(&p.extra[2]));
    let n_in = p.n_inputs;
    let diag = i + p.causal_offset as u64;

    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
    let mut bad = false;
    let mut o = [0.0f32; DV_REGS];
    let mut k0 = 0u32;
    while k0 < p.kv_len {
        // Copy the chunk: rows k0..k0 + kc of K and V (rows past kv_len repeat the last one).
        let (mut e, mut krc, mut vrc) = (tid, k_rc0, v_rc0);
        while e < copied {
            // SAFETY: `last` is a key row; each Tile writes only below its rows * ds (the layout).
            unsafe {
                let kv = kt.gather(e, krc, k0, last);
                let vv = vt.gather(e, vrc, k0, last);
                kt.scatter(e, krc, kv);
                vt.scatter(e, vrc, vv);
            }
            krc = kt.skip_batch(krc);
            vrc = vt.skip_batch(vrc);
            e += batch_elems;
        }
        sync_threads();
        if active {
            let avail = (p.kv_len - k0).min(kc);
            let mut sb = 0u32;
            while sb < avail {
                let jl = sb + lane;
                let valid = jl < avail;
                // Rows below kc are all copied (invalid lanes read a repeated row, then ignore it).
                // SAFETY: min(jl, kc - 1) < kc: a K row of the chunk.
                let kr = unsafe { k_sh.add((jl.min(kc - 1) * k_stride) as usize) };
                let qk = unsafe { dot(q_sh, kr, dk) };
                let mut s = f32::NEG_INFINITY;
                if valid {
                    let j = (k0 + jl) as u64;
                    let mut st = EwState::default();
                    st.x0 = qk;
                    // SAFETY: (b, h, i, j) inside the extents: inside each used input (the contract).
                    unsafe {
                        if n_in > 1 {
                            st.x1 = *x1.add((e1.0 + j * e1.1) as usize);
                        }
                        if n_in > 2 {
                            st.x2 = *x2.add((e2.0 + j * e2.1) as usize);
                        }
                        if n_in > 3 {
                            st.x3 = *x3.add((e3.0 + j * e3.1) as usize);
                        }
                    }
                    s = st.run(&p.instrs, p.n_instr, p.out_reg);
                    if p.causal != 0 && j > diag {
                        s += f32::NEG_INFINITY;
                    }
                    bad |= s.is_nan() || s == f32::INFINITY;
                }
                let m_new = {
                    let bm = warp_max_ignoring_nan(s);
                    if bm > m { bm } else { m }
                };
                // Until a finite maximum is seen every score was -inf: nothing to add or rescale.
                let live = m_new > f32::NEG_INFINITY;
                let pj = if valid && live && !s.is_nan() { math::exp(s - m_new) } else { 0.0 };
                let alpha = if live { math::exp(m - m_new) } else { 1.0 };
                l = l * alpha + warp_sum_f32(pj);
                m = m_new;
                macro_rules! rescale {
                    ($($r:literal)*) => {$( o[$r] *= alpha; )*};
                }
                rescale!(0 1 2 3 4 5 6 7);
                let n = (avail - sb).min(32);
                // SAFETY: sb < avail <= kc: V rows sb.. of the chunk.
                let vr = unsafe { v_sh.add((sb * dv + lane) as usize) };
                // P V over keys t < n, value columns lane + 32 r below dv; one loop per bound on
                // the column groups (no per-key test of the groups past dv).
                macro_rules! pv {
                    ($($r:literal)*) => {{
                        let mut t = 0u32;
                        while t < n {
                            let pt = f32::from_bits(shfl_idx_u32(pj.to_bits(), t));
                            $(
                                if lane + 32 * $r < dv {
                                    // SAFETY: t < n: a V row of the chunk; column below dv.
                                    let x = unsafe { *vr.add((t * dv + 32 * $r) as usize) };
                                    o[$r] = fma_rn(pt, x, o[$r]);
                                }
                            )*
                            t += 1;
                        }
                    }};
                }
                if dv <= 64 {
                    pv!(0 1);
                } else if dv <= 128 {
                    pv!(0 1 2 3);
                } else {
                    pv!(0 1 2 3 4 5 6 7);
                }
                sb += 32;
            }
        }
        // Every warp is done with the chunk before the next copy overwrites it.
        sync_threads();
        if p.kv_len - k0 <= kc {
            break;
        }
        k0 += kc;
    }
    if !active {
        return;
    }
    // No keys: an empty sum, as the reference gives.
    let nan = p.kv_len > 0 && (vote_any(bad) || m == f32::NEG_INFINITY);
    macro_rules! store {
        ($($r:literal)*) => {$(
            let c = lane + 32 * $r;
            if c < dv {
                let out = if nan {
                    f32::NAN
                } else if p.kv_len == 0 {
                    0.0
                } else {
                    o[$r] / l
                };
                // SAFETY: c < dv, (b, h, i) inside the extents: inside Y.
                unsafe { *y.add(at(&p.y, b, h, i, c as u64) as usize) = out };
            }
        )*};
    }
    store!(0 1 2 3 4 5 6 7);
}

/// `sum_c q[c] k[c]` over `c < n`, in four interleaved partial sums (independent FMA chains).
///
/// # Safety
/// `q` and `k` have `n` readable f32.
#[inline(always)]
unsafe fn dot(q: *const f32, k: *const f32, n: u32) -> f32 {
    let (mut a0, mut a1, mut a2, mut a3) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
    let n4 = n & !3;
    let mut c = 0usize;
    // SAFETY: c + 3 < n4 <= n, then c < n: inside both (the contract).
    unsafe {
        while c < n4 as usize {
            a0 = fma_rn(*q.add(c), *k.add(c), a0);
            a1 = fma_rn(*q.add(c + 1), *k.add(c + 1), a1);
            a2 = fma_rn(*q.add(c + 2), *k.add(c + 2), a2);
            a3 = fma_rn(*q.add(c + 3), *k.add(c + 3), a3);
            c += 4;
        }
        while c < n as usize {
            a0 = fma_rn(*q.add(c), *k.add(c), a0);
            c += 1;
        }
    }
    (a0 + a1) + (a2 + a3)
}
