//! Fused attention (`attention_f32`): `Y = softmax(program(Q Kᵀ)) V` in one launch, with Q, K, V,
//! Y and the score program's extra inputs all read or written through strided views, so split,
//! reshaped and transposed operands are used in place and the scores never touch memory.
//!
//! Flash-decoding style on CUDA cores: a block takes [`ATTN_ROWS`] query rows of one (batch,
//! head) and gives each row [`ATTN_SPLIT`] warps, which split its keys in groups of 32 (group `g`
//! to warp `g % ATTN_SPLIT`), so a short sequence's row is spread over several warps instead of
//! walked by one. For a group, lane `l` computes the score of key `l` (its K row read straight
//! from global memory, 16-byte vectors when unit-stride and aligned, against the query row in
//! shared memory), runs the score program on it, and the warp updates its online softmax (running
//! maximum and sum, the output rescaled when the maximum grows) and accumulates `P V` with lanes
//! over the value columns (the probability of key `t` broadcast from lane `t` by a shuffle, four
//! keys' V loads in flight). At the end each warp leaves its maximum, sum and outputs in shared
//! memory and the row's first warp merges them in warp order (deterministic). Accumulation is f32
//! throughout; the per-lane output accumulators are a constant-size array indexed only by
//! macro-unrolled constants (no local memory).

use crate::abi::{
    ATTN_MAX_DV, ATTN_ROWS, ATTN_SPLIT, ATTN_THREADS, AttentionParams, AttnView, attention_fits,
};
use crate::intrinsics::{
    block_dim_x, block_idx_x, dynamic_shared_ptr, fma_rn, lane_id, shfl_idx_u32, shfl_xor_f32, sync_threads,
    thread_idx_x, vote_any, warp_sum_f32,
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

/// Sixteen bytes, for vector loads.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F4([f32; 4]);

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
/// heads, % heads` and query rows `(x % q_blocks) * ATTN_ROWS + warp / ATTN_SPLIT`; warp `w`
/// takes the 32-key groups `w % ATTN_SPLIT, + ATTN_SPLIT, ...` of its row (lane `l`: key `l` of
/// the group's scores, value columns `l, l + 32, ...` of its outputs). Two block barriers (after
/// the query rows are staged, before the merge), reached by every warp.
///
/// Shared memory (f32): `ATTN_ROWS` query rows of `ceil4(dk)`, then per warp `dv + 3` (maximum,
/// sum, NaN flag, outputs).
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
    // Uniform over the block: whole blocks leave, before any barrier.
    if p.q_len == 0
        || !attention_fits(p.dk, p.dv)
        || p.kv_group == 0
        || p.heads == 0
        || block_dim_x() != ATTN_THREADS
    {
        return;
    }
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, lane_id());
    let (slot, part) = (warp / ATTN_SPLIT, warp % ATTN_SPLIT);
    let q_blocks = p.q_len.div_ceil(ATTN_ROWS);
    let bh = block_idx_x() / q_blocks;
    if bh as u64 >= p.batch as u64 * p.heads as u64 {
        return;
    }
    let row = (block_idx_x() % q_blocks) * ATTN_ROWS + slot;
    // Uniform over the warp: warps past the last row still meet the barriers.
    let active = row < p.q_len;
    let (b, h) = ((bh / p.heads) as u64, (bh % p.heads) as u64);
    let hk = h / p.kv_group as u64;
    let i = row as u64;
    let (dk, dv) = (p.dk, p.dv);
    let q_stride = dk.div_ceil(4) * 4;
    let merge_stride = dv + 3;
    // SAFETY: the launch has attention_shared_bytes(dk, dv) bytes: ATTN_ROWS * q_stride +
    // ATTN_WARPS * (dv + 3) f32.
    let (q_sh, merge) = unsafe {
        let sh = dynamic_shared_ptr().cast::<f32>();
        (sh.add((slot * q_stride) as usize), sh.add((ATTN_ROWS * q_stride) as usize))
    };
    if active {
        // The row's warps stage its query (zero past dk, up to the padded stride).
        let mut c = part * 32 + lane;
        while c < q_stride {
            // SAFETY: c < dk: inside Q's row; c < q_stride: inside this row's slot.
            unsafe {
                *q_sh.add(c as usize) =
                    if c < dk { *q.add(at(&p.q, b, h, i, c as u64) as usize) } else { 0.0 }
            };
            c += ATTN_SPLIT * 32;
        }
    }
    sync_threads();
    let last = p.kv_len.saturating_sub(1) as u64;
    // K rows as 16-byte vectors when unit-stride and aligned (the same answer for every key).
    let k_vec = p.k.strides[3] == 1
        && dk % 4 == 0
        && p.k.strides[2] % 4 == 0
        && (k as usize + 4 * at(&p.k, b, hk, 0, 0) as usize) % 16 == 0;
    // The score program's extra inputs at (b, h, i, 0) and their column strides.
    let ex = |e: &AttnView| (at(e, b, h, i, 0), e.strides[3]);
    let (e1, e2, e3) = (ex(&p.extra[0]), ex(&p.extra[1]), ex(&p.extra[2]));
    let n_in = p.n_inputs;
    let diag = i + p.causal_offset as u64;

    // V at (b, hk, key 0, column lane), its row stride and the stride of 32 columns.
    let (v_lane, v_rs, v_grp) = (at(&p.v, b, hk, 0, lane as u64), p.v.strides[2], 32 * p.v.strides[3]);
    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
    let mut bad = false;
    let mut o = [0.0f32; DV_REGS];
    let mut k0 = part * 32;
    while active && k0 < p.kv_len {
        let avail = (p.kv_len - k0).min(32);
        let jl = k0 + lane;
        let valid = lane < avail;
        // Invalid lanes score the last key (valid memory), then ignore it.
        let j = (jl as u64).min(last);
        // SAFETY: j < kv_len: a key row of K; q_sh holds q_stride (>= dk) staged values.
        let qk = unsafe {
            let base = at(&p.k, b, hk, j, 0);
            if k_vec {
                dot_vec(q_sh, k.add(base as usize), dk)
            } else {
                dot(q_sh, k, base, p.k.strides[3], dk)
            }
        };
        let mut s = f32::NEG_INFINITY;
        if valid {
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
        // SAFETY (every V read below): key k0 + t with t < avail is below kv_len; column below dv.
        // SAFETY: (b, hk, k0, lane) addresses V's view (unread where the column is past dv).
        let v_key0 = unsafe { v.add(v_lane as usize).add((k0 as u64 * v_rs) as usize) };
        // P V over keys t < avail, value columns lane + 32 r below dv, four keys' loads issued
        // before their multiplies; one loop per bound on the column groups.
        macro_rules! pv {
            ($($r:literal)*) => {{
                let mut t = 0u32;
                while t < avail {
                    let mut x = [[0.0f32; 4]; DV_REGS];
                    let mut pt = [0.0f32; 4];
                    for u in 0..4u32 {
                        let tu = (t + u).min(avail - 1);
                        let row = unsafe { v_key0.add((tu as u64 * v_rs) as usize) };
                        $(
                            if lane + 32 * $r < dv {
                                x[$r][u as usize] = unsafe { *row.add(($r * v_grp) as usize) };
                            }
                        )*
                        // Keys past avail weigh 0 (their loads repeat the last key).
                        let w = f32::from_bits(shfl_idx_u32(pj.to_bits(), tu));
                        pt[u as usize] = if t + u < avail { w } else { 0.0 };
                    }
                    for u in 0..4usize {
                        $( o[$r] = fma_rn(pt[u], x[$r][u], o[$r]); )*
                    }
                    t += 4;
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
        k0 += ATTN_SPLIT * 32;
    }
    // Each warp's partial result, then the row's first warp merges them in warp order.
    // SAFETY: warp < ATTN_WARPS: its merge slot of dv + 3 f32.
    let mine = unsafe { merge.add((warp * merge_stride) as usize) };
    let any_bad = vote_any(bad);
    if active {
        // SAFETY: inside this warp's slot (columns below dv).
        unsafe {
            if lane == 0 {
                *mine = m;
                *mine.add(1) = l;
                *mine.add(2) = if any_bad { 1.0 } else { 0.0 };
            }
            macro_rules! keep {
                ($($r:literal)*) => {$(
                    if lane + 32 * $r < dv {
                        *mine.add((3 + lane + 32 * $r) as usize) = o[$r];
                    }
                )*};
            }
            keep!(0 1 2 3 4 5 6 7);
        }
    }
    sync_threads();
    if !active || part != 0 {
        return;
    }
    // SAFETY (the merge reads): the row's ATTN_SPLIT slots, written before the barrier.
    let slot_of = |w: u32| unsafe { merge.add(((slot * ATTN_SPLIT + w) * merge_stride) as usize) };
    let (mut big, mut nan_seen) = (f32::NEG_INFINITY, false);
    for w in 0..ATTN_SPLIT {
        let s = slot_of(w);
        // SAFETY: see above.
        let (mw, flag) = unsafe { (*s, *s.add(2)) };
        if mw > big {
            big = mw;
        }
        nan_seen |= flag != 0.0;
    }
    let mut sum = 0.0f32;
    let mut acc = [0.0f32; DV_REGS];
    for w in 0..ATTN_SPLIT {
        let s = slot_of(w);
        // SAFETY: see above.
        let mw = unsafe { *s };
        if mw == f32::NEG_INFINITY {
            continue;
        }
        let f = math::exp(mw - big);
        // SAFETY: see above.
        sum = fma_rn(unsafe { *s.add(1) }, f, sum);
        macro_rules! add {
            ($($r:literal)*) => {$(
                if lane + 32 * $r < dv {
                    // SAFETY: column below dv: inside the slot.
                    acc[$r] = fma_rn(unsafe { *s.add((3 + lane + 32 * $r) as usize) }, f, acc[$r]);
                }
            )*};
        }
        add!(0 1 2 3 4 5 6 7);
    }
    // No keys: an empty sum, as the reference gives.
    let nan = p.kv_len > 0 && (nan_seen || big == f32::NEG_INFINITY);
    macro_rules! store {
        ($($r:literal)*) => {$(
            let c = lane + 32 * $r;
            if c < dv {
                let out = if nan {
                    f32::NAN
                } else if p.kv_len == 0 {
                    0.0
                } else {
                    acc[$r] / sum
                };
                // SAFETY: c < dv, (b, h, i) inside the extents: inside Y.
                unsafe { *y.add(at(&p.y, b, h, i, c as u64) as usize) = out };
            }
        )*};
    }
    store!(0 1 2 3 4 5 6 7);
}

/// `sum_c q[c] k[base + c * stride]` over `c < n`, in four interleaved partial sums.
///
/// # Safety
/// `q` has `n` readable f32 and `k` every element the strides address.
#[inline(always)]
unsafe fn dot(q: *const f32, k: *const f32, base: u64, stride: u64, n: u32) -> f32 {
    let mut a = [0.0f32; 4];
    let mut c = 0u32;
    // SAFETY: c < n: inside both (the contract).
    unsafe {
        while c + 4 <= n {
            for u in 0..4u32 {
                let kv = *k.add((base + (c + u) as u64 * stride) as usize);
                a[u as usize] = fma_rn(*q.add((c + u) as usize), kv, a[u as usize]);
            }
            c += 4;
        }
        while c < n {
            a[0] = fma_rn(*q.add(c as usize), *k.add((base + c as u64 * stride) as usize), a[0]);
            c += 1;
        }
    }
    (a[0] + a[1]) + (a[2] + a[3])
}

/// [`dot`] of a unit-stride, 16-byte aligned K row with `n % 4 == 0`: 16-byte loads of both (the
/// query row in shared memory is 16-byte aligned), eight in flight.
///
/// # Safety
/// `q` and `k` have `n` readable f32, both 16-byte aligned; `n % 4 == 0`.
#[inline(always)]
unsafe fn dot_vec(q: *const f32, k: *const f32, n: u32) -> f32 {
    let (q4, k4) = (q as *const F4, k as *const F4);
    let mut a = [0.0f32; 4];
    let mut c = 0usize;
    let n4 = (n / 4) as usize;
    // SAFETY: c < n4: inside both (the contract).
    unsafe {
        while c + 2 <= n4 {
            let (k0, k1) = (*k4.add(c), *k4.add(c + 1));
            let (q0, q1) = (*q4.add(c), *q4.add(c + 1));
            for u in 0..4 {
                a[u] = fma_rn(q0.0[u], k0.0[u], a[u]);
            }
            for u in 0..4 {
                a[u] = fma_rn(q1.0[u], k1.0[u], a[u]);
            }
            c += 2;
        }
        if c < n4 {
            let (k0, q0) = (*k4.add(c), *q4.add(c));
            for u in 0..4 {
                a[u] = fma_rn(q0.0[u], k0.0[u], a[u]);
            }
        }
    }
    (a[0] + a[1]) + (a[2] + a[3])
}
