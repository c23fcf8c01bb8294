//! Fused attention (`attention_f32`): `Y = softmax(program(Q Kᵀ)) V` in one launch, with Q, K, V,
//! Y and the score program's extra inputs all read or written through strided views, so split,
//! reshaped and transposed operands are used in place and the scores never touch memory.
//!
//! A warp owns one query row: lanes take 32 keys at a time (one key each) for the scores, then 32
//! value columns each for `P V`. The softmax is online (flash style): a running maximum and sum,
//! with the output accumulators rescaled when the maximum grows, so any key length works with
//! registers of a fixed size. Accumulation is f32 throughout; the per-lane output accumulators are
//! a constant-size array indexed only by unrolled constants (no local memory).

use crate::abi::{ATTN_MAX_DV, ATTN_WARPS, AttentionParams, AttnView};
use crate::intrinsics::{
    block_idx_x, dynamic_shared_ptr, fma_rn, lane_id, shfl_xor_f32, sync_warp, thread_idx_x, vote_any,
    warp_sum_f32,
};
use crate::math;
use crate::program::EwState;

/// Output columns per lane (`ATTN_MAX_DV / 32`).
const DV_REGS: usize = (ATTN_MAX_DV / 32) as usize;

/// Element offset of `(b, h, r, c)` in view `v`.
#[inline(always)]
fn at(v: &AttnView, b: u64, h: u64, r: u64, c: u64) -> usize {
    (v.offset + b * v.strides[0] + h * v.strides[1] + r * v.strides[2] + c * v.strides[3]) as usize
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

/// Fused attention ([`AttentionParams`]): `Y[b, h, i, :] = softmax_j(program(Q[b, h, i, :] ·
/// K[b, h / kv_group, j, :])) V[b, h / kv_group, :, :]`, with the optional causal mask. A row
/// whose scores hold a NaN or `+inf`, or are all `-inf`, is NaN (as the unfused `Softmax`).
///
/// # Safety
/// Every view of `p` addresses, for all indices below its extents (`batch`, `heads` or
/// `heads / kv_group`, `q_len` or `kv_len`, `dk` or `dv`; the program inputs over `(batch, heads,
/// q_len, kv_len)`), an element inside its pointer's allocation; `x1..x3` are read only when
/// `p.n_inputs` exceeds their index (unused ones may be null). `y` overlaps no input. The launch
/// has `attention_shared_bytes(p.dk)` bytes of dynamic shared memory; `p.n_instr <=
/// EW_MAX_INSTRS`.
///
/// # Parameters
/// `p`: extents, views, causal mask and the score program; `q`, `k`, `v`: the operands; `x1`..
/// `x3`: the score program's inputs 1..3; `y`: the output.
///
/// # Thread mapping
/// 1-D blocks of `ATTN_WARPS * 32` threads, a 1-D grid of `batch * heads * ceil(q_len /
/// ATTN_WARPS)` blocks: block `x` takes `(b, h) = (x / q_blocks) / heads, % heads` and query rows
/// `(x % q_blocks) * ATTN_WARPS + warp`, one per warp. Lane `l` computes the scores of keys `k0 +
/// l` and accumulates value columns `l, l + 32, ...`. Only warp-level synchronisation is used:
/// each warp has its own shared-memory region (its query row, then its 32 probabilities).
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
    if p.q_len == 0 || p.dv > ATTN_MAX_DV || p.kv_group == 0 || p.heads == 0 {
        return;
    }
    let warp = thread_idx_x() / 32;
    let lane = lane_id();
    let q_blocks = p.q_len.div_ceil(ATTN_WARPS);
    let bh = block_idx_x() / q_blocks;
    let row = (block_idx_x() % q_blocks) * ATTN_WARPS + warp;
    // Uniform over the warp: whole warps leave, so the shuffles below see all 32 lanes.
    if warp >= ATTN_WARPS || row >= p.q_len || bh as u64 >= p.batch as u64 * p.heads as u64 {
        return;
    }
    let (b, h) = ((bh / p.heads) as u64, (bh % p.heads) as u64);
    let hk = h / p.kv_group as u64;
    let i = row as u64;
    let dk = p.dk as usize;
    // SAFETY: the launch has ATTN_WARPS * (dk + 32) f32 of shared memory; this warp owns its part.
    let (q_sh, p_sh) = unsafe {
        let q_sh = dynamic_shared_ptr().cast::<f32>().add(warp as usize * (dk + 32));
        (q_sh, q_sh.add(dk))
    };
    let mut c = lane as usize;
    while c < dk {
        // SAFETY: c < dk: inside Q's row and this warp's query slot.
        unsafe { *q_sh.add(c) = *q.add(at(&p.q, b, h, i, c as u64)) };
        c += 32;
    }
    sync_warp();

    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
    let mut bad = false;
    let mut o = [0.0f32; DV_REGS];
    let mut k0 = 0u32;
    while k0 < p.kv_len {
        let j = k0 + lane;
        let valid = j < p.kv_len;
        let mut s = f32::NEG_INFINITY;
        if valid {
            let kr = at(&p.k, b, hk, j as u64, 0);
            let mut dot = 0.0f32;
            for c in 0..dk {
                // SAFETY: j < kv_len, c < dk: inside K; c inside the query slot.
                dot =
                    fma_rn(unsafe { *q_sh.add(c) }, unsafe { *k.add(kr + c * p.k.strides[3] as usize) }, dot);
            }
            let mut st = EwState::default();
            st.x0 = dot;
            let (jj, n) = (j as u64, p.n_inputs);
            // SAFETY: (b, h, i, j) inside the extents: inside each used input (the contract).
            unsafe {
                if n > 1 {
                    st.x1 = *x1.add(at(&p.extra[0], b, h, i, jj));
                }
                if n > 2 {
                    st.x2 = *x2.add(at(&p.extra[1], b, h, i, jj));
                }
                if n > 3 {
                    st.x3 = *x3.add(at(&p.extra[2], b, h, i, jj));
                }
            }
            s = st.run(&p.instrs, p.n_instr, p.out_reg);
            if p.causal != 0 && jj > i + p.causal_offset as u64 {
                s += f32::NEG_INFINITY;
            }
            bad |= s.is_nan() || s == f32::INFINITY;
        }
        let m_new = {
            let bm = warp_max_ignoring_nan(s);
            if bm > m { bm } else { m }
        };
        // Until a finite maximum is seen every score was -inf: nothing to add or rescale yet.
        let live = m_new > f32::NEG_INFINITY;
        let pj = if valid && live && !s.is_nan() { math::exp(s - m_new) } else { 0.0 };
        let alpha = if live { math::exp(m - m_new) } else { 1.0 };
        l = l * alpha + warp_sum_f32(pj);
        m = m_new;
        // SAFETY: lane < 32: this warp's probability slots.
        unsafe { *p_sh.add(lane as usize) = pj };
        sync_warp();
        for r in o.iter_mut() {
            *r *= alpha;
        }
        let n = (p.kv_len - k0).min(32);
        let mut t = 0;
        while t < n {
            // SAFETY: t < 32: this warp's slots; k0 + t < kv_len and each column below dv: in V.
            unsafe {
                let pt = *p_sh.add(t as usize);
                let vr = at(&p.v, b, hk, (k0 + t) as u64, 0);
                for (r, acc) in o.iter_mut().enumerate() {
                    let c = lane as usize + 32 * r;
                    if c < p.dv as usize {
                        *acc = fma_rn(pt, *v.add(vr + c * p.v.strides[3] as usize), *acc);
                    }
                }
            }
            t += 1;
        }
        // The slots are rewritten by the next block.
        sync_warp();
        k0 += 32;
    }
    // No keys: an empty sum, as the reference gives.
    let nan = p.kv_len > 0 && (vote_any(bad) || m == f32::NEG_INFINITY);
    for (r, acc) in o.iter().enumerate() {
        let c = lane as usize + 32 * r;
        if c < p.dv as usize {
            let out = if nan {
                f32::NAN
            } else if p.kv_len == 0 {
                0.0
            } else {
                *acc / l
            };
            // SAFETY: c < dv, (b, h, i) inside the extents: inside Y.
            unsafe { *y.add(at(&p.y, b, h, i, c as u64)) = out };
        }
    }
}
