//! Fused attention on the tensor cores for small heads (`attention_small_f32`: query, key and
//! value heads of at most [`ATTN_SMALL_MAX_D`] = 16, as in the TICL-style encoders of particle
//! physics, `d_model` 32 to 64 over four heads, at sequences in the thousands).
//!
//! The kernel of `attention_tc_f32` (the same blocks, key split over warps, merge, accuracy and
//! NaN rules) with two output tiles per lane instead of eight and its scores formed for the
//! head's one or two k8 steps: the lane's Q fragments are loaded and split into TF32 parts once
//! ([`q_fragments`]), and per 32-key group only K's fragments of those steps are loaded, a group ahead
//! ([`scores`]); `gemm_tc`'s 32-wide rounds would multiply three quarters zeros at a head of 8,
//! and the eight-tile entry spilled at 255 registers, two blocks per multiprocessor.

use super::Group;
use crate::abi::{ATTN_SMALL_MAX_D, AttentionParams};
use crate::attention::at;
use crate::gemm_tc::{NT, split};
use crate::intrinsics::mma_m16n8k8_tf32_f32;

/// k8 steps of the scores (`dk <= 16`).
const KS: usize = (ATTN_SMALL_MAX_D / 8) as usize;
/// n8 tiles of the output (`dv <= 16`).
const DT: usize = (ATTN_SMALL_MAX_D / 8) as usize;
const _: () = assert!(KS == 2 && DT == 2 && NT == 4);

/// The lane's Q fragments of the head's k8 steps, split into TF32 (big, small) parts: step `s`
/// holds columns `8s + t` (`a0`, `a1`: rows `g`, `g + 8`) and `8s + t + 4` (`a2`, `a3`); zero
/// past dk.
pub(crate) type QFragments = ([[u32; 4]; KS], [[u32; 4]; KS]);

/// The lane's [`QFragments`] for its query rows `rows` (`g` and `g + 8`, clamped below q_len).
///
/// # Safety
/// The rows are below q_len: inside Q's view with the columns below dk.
#[inline(always)]
pub(crate) unsafe fn q_fragments(
    p: &AttentionParams,
    q: *const f32,
    b: u64,
    h: u64,
    rows: [u64; 2],
    t: u32,
) -> QFragments {
    let (mut big, mut small) = ([[0u32; 4]; KS], [[0u32; 4]; KS]);
    for s in 0..KS {
        for e in 0..4 {
            let col = 8 * s as u32 + t + 4 * (e as u32 / 2);
            let x = if col < p.dk {
                // SAFETY: the caller's contract.
                unsafe { *q.add(at(&p.q, b, h, rows[e % 2], col as u64) as usize) }
            } else {
                0.0
            };
            (big[s][e], small[s][e]) = split(x);
        }
    }
    (big, small)
}

/// The lane's K values of one 32-key group, `[j][step][half]`: key `k0 + 8j + g` (clamped below
/// kv_len: those keys score -inf later) at head columns `8 step + t + 4 half` (zero past dk) — the
/// B fragments of the scores' n tile `j`, k step `step`.
pub(crate) type KeyFragments = [[[f32; 2]; KS]; NT];

/// The lane's [`KeyFragments`] of the group starting at key `k0`, every load issued before any is
/// used (the caller loads the next group's while it multiplies this one's).
///
/// # Safety
/// The attention launch contract for `k` (kv_len > 0).
#[inline(always)]
pub(crate) unsafe fn keys(p: &AttentionParams, k: *const f32, grp: &Group, k0: u32) -> KeyFragments {
    let last_key = p.kv_len.saturating_sub(1);
    let (head, s2, s3) = (at(&p.k, grp.b, grp.hk, 0, 0), p.k.strides[2], p.k.strides[3]);
    let mut kf = [[[0.0f32; 2]; KS]; NT];
    unroll!(J in [0, 1, 2, 3] {
        let row = head + (k0 + 8 * J as u32 + grp.g).min(last_key) as u64 * s2;
        unroll!(S in [0, 1] {
            unroll!(E in [0, 1] {
                let c = 8 * S as u32 + grp.t + 4 * E as u32;
                if c < p.dk {
                    // SAFETY: the key is below kv_len, the column below dk: inside K's view.
                    kf[J][S][E] = unsafe { *k.add((row + c as u64 * s3) as usize) };
                }
            });
        });
    });
    kf
}

/// The 16 x 32 scores `Q Kᵀ` of a key group (3xTF32) from its [`KeyFragments`], unrolled (a rolled
/// loop over the tiles kept them in local memory, each tile's loads waited for in turn); the
/// second k step only where the head has one (`dk > 8`, uniform).
#[inline(always)]
pub(crate) fn scores(p: &AttentionParams, kf: &KeyFragments, (qa, qs): &QFragments) -> [[f32; 4]; NT] {
    let two_steps = p.dk > 8;
    let mut s = [[0.0f32; 4]; NT];
    unroll!(J in [0, 1, 2, 3] {
        unroll!(S in [0, 1] {
            if S == 0 || two_steps {
                let (b0, b0s) = split(kf[J][S][0]);
                let (b1, b1s) = split(kf[J][S][1]);
                let d = mma_m16n8k8_tf32_f32(qs[S], [b0, b1], s[J]);
                let d = mma_m16n8k8_tf32_f32(qa[S], [b0s, b1s], d);
                s[J] = mma_m16n8k8_tf32_f32(qa[S], [b0, b1], d);
            }
        });
    });
    s
}

/// Fused attention on the tensor cores for heads up to 16: the operation of `attention_f32` (see
/// [`AttentionParams`]) with `dk, dv <= ATTN_SMALL_MAX_D` and a score program of arithmetic ops
/// only.
///
/// # Safety
/// As `attention_tc_f32`, with `dk, dv <= ATTN_SMALL_MAX_D` (other launches return at once).
///
/// # Parameters
/// As `attention_tc_f32`.
///
/// # Thread mapping
/// As `attention_tc_f32` (16 query rows a block, its warps splitting the keys); lane `l` holds
/// outputs of columns `8n + 2t + {0, 1}` for `n < 2` only.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn attention_small_f32(
    p: AttentionParams,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // SAFETY: forwarded (the kernel's contract).
    unsafe { super::attention_tc::<DT, true>(&p, q, k, v, x1, x2, x3, y) }
}
