//! Fused attention on the tensor cores with each warp over whole query rows (`attention_flash_f32`):
//! the operation of `attention_f32` ([`AttentionParams`]: `Y = softmax(program(Q Kᵀ)) V` over
//! strided views, causal mask, the same NaN rules) in 3xTF32 `mma.sync` m16n8k8 products, laid out
//! as FlashAttention-2 lays out its forward pass, for query and value heads up to
//! [`ATTN_FLASH_MAX_D`] (64).
//!
//! A block of `W` warps (1, 2 or 4: [`ATTN_FLASH_MAX_WARPS`]) takes `16 W` query rows of one
//! (batch, head); warp `w` owns rows `16 w ..` of them, all their keys and their whole output, so
//! no partial results meet at the end. The block walks the keys in tiles of 32: its threads copy
//! the tile's K and V rows into shared memory (16-byte loads where a view's rows allow), and every
//! warp forms its 16 x 32 scores from there against its Q fragments (loaded and split into TF32
//! parts once, before the loop), runs the score program and the online softmax, and adds `P V`
//! with V's fragments read from shared memory. The score tile's layout, the program, the softmax
//! and the product's operand order are `attention_tc_f32`'s ([`Group`], [`online_softmax`]), so
//! both kernels compute each score the same way.
//!
//! `attention_tc_f32` gives each 16-row block four warps that split the keys and merge at the
//! end, every warp loading its keys' K and V values from global memory with a four-stride offset
//! each (integer-issue bound: 49 µs a launch for BERT's 16 x 4 heads of 64 at sequence 128 on the
//! H100, where the products take a few).
//!
//! **Off by default** (`PlanOptions::flash_attention`): measured on the H100 (session 37, same
//! call, graph replays) it is slower than the kernels it would replace on every shape tried:
//! 91 µs a launch against `attention_tc_f32`'s 59 for BERT and GPT-2 at batch 16 (4 heads of 64,
//! sequence 128, blocks of two warps), two to three times `attention_f32` at batch 1 (one-warp
//! blocks), and the TICL encoders at sequence 2048 take 1.9 times as long end to end. Each
//! 32-key tile is latency-bound (about 18 cycles an instruction): with a warp over all of its
//! rows' keys there are a quarter of `attention_tc_f32`'s warps in flight and each runs four
//! times the dependent chain. What a redesign needs: K and V split into their TF32 parts once
//! per tile as they are copied (every warp splits every value again here), loads through shared
//! addresses (the tile pointers are generic: `LD`, not `LDS`), head sizes as constants rather
//! than run-time guards around each unrolled step (725 branches in the SASS), the usual
//! scale-then-mask score program unrolled instead of staged through local memory, and more warps
//! per 16 rows (keys split over warps, as `attention_tc_f32` does, with the merge).
//!
//! Shared memory (f32): the K tile, 32 rows of `ceil8(dk) + 4`, then the V tile, 32 rows of
//! `ceil8(dv) + 4` ([`attention_flash_shared_bytes`]). Row strides of 4 modulo 8 words put the
//! eight rows a fragment load touches (K: rows `g`, columns `t`; V: rows `2t`, columns `g`) on
//! distinct banks.

use super::{Group, online_softmax, quad_sum, vector_rows};
use crate::abi::{
    ATTN_FLASH_KEYS, ATTN_FLASH_MAX_D, ATTN_FLASH_MAX_WARPS, ATTN_NAN_ROWS_ZERO, AttentionParams, AttnView,
    attention_flash_fits, attention_flash_tile_stride,
};
use crate::attention::{at, block_rows, key_end};
use crate::gemm_tc::{NT, split};
use crate::intrinsics::{
    F32x4, block_dim_x, dynamic_shared_ptr, lane_id, mma_m16n8k8_tf32_f32, sync_threads, thread_idx_x,
};

/// k8 steps of the largest query head.
const KS: usize = (ATTN_FLASH_MAX_D / 8) as usize;
/// n8 tiles of the largest value head.
const DT: usize = (ATTN_FLASH_MAX_D / 8) as usize;
const _: () = assert!(KS == 8 && DT == 8 && NT == 4 && ATTN_FLASH_KEYS == 32);

/// Copies rows `k0 .. k0 + 32` of the (batch `b`, head `hk`) matrix of `view` over `src`, columns
/// below `ceil8(d)`, into the shared tile at `dst` (row stride [`attention_flash_tile_stride`]`(d)`): zeros past
/// `kv_len` and past `d`. Thread `tid` of `threads` copies entries `tid, tid + threads, ...`: four
/// at a time where the view's rows are contiguous, 16-byte aligned and `d` a multiple of four.
///
/// # Safety
/// `src` holds every element the view addresses for keys below `kv_len` and columns below `d`;
/// `dst` holds the tile.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn load_tile(
    dst: *mut f32,
    src: *const f32,
    view: &AttnView,
    (b, hk): (u64, u64),
    k0: u32,
    d: u32,
    kv_len: u32,
    (tid, threads): (u32, u32),
) {
    let (stride, width) = (attention_flash_tile_stride(d), d.div_ceil(8) * 8);
    let (base, rs, cs) = (at(view, b, hk, 0, 0), view.strides[2], view.strides[3]);
    if d.is_multiple_of(4) && vector_rows(src, view, b, hk) {
        let quads = width / 4;
        let mut i = tid;
        while i < ATTN_FLASH_KEYS * quads {
            let (r, c) = (i / quads, 4 * (i % quads));
            let key = k0 + r;
            let val = if key < kv_len && c < d {
                // SAFETY: key below kv_len, columns c..c + 4 below d: inside the view; 16-byte
                // aligned (`vector_rows`, c a multiple of 4).
                unsafe { *(src.add((base + key as u64 * rs + c as u64) as usize) as *const F32x4) }
            } else {
                F32x4([0.0; 4])
            };
            // SAFETY: row r < 32, columns c..c + 4 <= width < stride: inside the tile; 16-byte
            // aligned (the stride is a multiple of four, the tile's base 16-byte aligned).
            unsafe { *(dst.add((r * stride + c) as usize) as *mut F32x4) = val };
            i += threads;
        }
    } else {
        let mut i = tid;
        while i < ATTN_FLASH_KEYS * width {
            let (r, c) = (i / width, i % width);
            let key = k0 + r;
            let val = if key < kv_len && c < d {
                // SAFETY: key below kv_len, column below d: inside the view.
                unsafe { *src.add((base + key as u64 * rs + c as u64 * cs) as usize) }
            } else {
                0.0
            };
            // SAFETY: inside the tile.
            unsafe { *dst.add((r * stride + c) as usize) = val };
            i += threads;
        }
    }
}

/// Fused attention on the tensor cores, a warp per 16 query rows over all their keys (see the
/// module doc), for query and value heads up to [`ATTN_FLASH_MAX_D`] and score programs of
/// arithmetic ops only (as `attention_tc_f32`'s).
///
/// # Safety
/// As `attention_f32`, with [`attention_flash_shared_bytes`]`(dk, dv)` bytes of dynamic shared
/// memory (16-byte aligned); another op in the score program computes as a division.
///
/// # Parameters
/// As `attention_f32`.
///
/// # Thread mapping
/// 1-D blocks of `32 W` threads, `W` in 1..=[`ATTN_FLASH_MAX_WARPS`] (other block sizes return at
/// once), a 1-D grid of `batch * heads * ceil(q_len / 16 W)` blocks: block `x` takes `(b, h) = (x
/// / q_blocks) / heads, % heads` and query rows `(x % q_blocks) * 16 W + r`; warp `w` rows `16 w
/// + r`, `r < 16`; lane `l` (`g = l / 4`, `t = l % 4`) holds rows `g` and `g + 8` of the
/// fragments: scores of keys `8j + 2t + {0, 1}` (`j < 4`) of each 32-key tile, outputs of columns
/// `8n + 2t + {0, 1}`. Two block barriers per key tile (before its copies and after them), reached
/// by every warp, also those whose rows are all past q_len.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn attention_flash_f32(
    p: AttentionParams,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    let threads = block_dim_x();
    // Uniform over the block: whole blocks leave, before the barriers.
    if p.q_len == 0
        || !attention_flash_fits(p.dk, p.dv)
        || p.kv_group == 0
        || p.heads == 0
        || threads == 0
        || !threads.is_multiple_of(32)
        || threads > 32 * ATTN_FLASH_MAX_WARPS
    {
        return;
    }
    let block_rows_n = 16 * (threads / 32);
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, lane_id());
    let (g, t) = (lane / 4, lane % 4);
    let Some((b, h, hk, first_row)) = block_rows(&p, block_rows_n) else { return };
    let row0 = first_row + 16 * warp;
    let (dk, dv) = (p.dk, p.dv);
    let ks = dk.div_ceil(8);
    let (k_stride, v_stride) = (attention_flash_tile_stride(dk), attention_flash_tile_stride(dv));
    let k_tile = dynamic_shared_ptr().cast::<f32>();
    // SAFETY: the V tile follows the K tile's 32 rows (the shared size's layout).
    let v_tile = unsafe { k_tile.add((ATTN_FLASH_KEYS * k_stride) as usize) };
    // The lane's query rows g and g + 8; rows past q_len read the last row (valid addresses) and
    // are never stored.
    let row = |hh: u32| (row0 + g + 8 * hh).min(p.q_len - 1) as u64;
    let rows = [row(0), row(1)];

    // The lane's Q fragments, split into TF32 (big, small) parts once: step `s` holds columns
    // `8s + t` (a0, a1: rows g, g + 8) and `8s + t + 4` (a2, a3); zero past dk.
    let (mut qb, mut qs) = ([[0u32; 4]; KS], [[0u32; 4]; KS]);
    let q_rows = [at(&p.q, b, h, rows[0], 0), at(&p.q, b, h, rows[1], 0)];
    let q_cs = p.q.strides[3];
    let ld_q = |r: usize, c: u32| {
        if c < dk {
            // SAFETY: row below q_len, column below dk: inside Q's view.
            unsafe { *q.add((q_rows[r] + c as u64 * q_cs) as usize) }
        } else {
            0.0
        }
    };
    unroll!(S in [0, 1, 2, 3, 4, 5, 6, 7] {
        if (S as u32) < ks {
            let (c0, c1) = (8 * S as u32 + t, 8 * S as u32 + t + 4);
            let vals = [ld_q(0, c0), ld_q(1, c0), ld_q(0, c1), ld_q(1, c1)];
            unroll!(E in [0, 1, 2, 3] {
                (qb[S][E], qs[S][E]) = split(vals[E]);
            });
        }
    });

    let mut m = [f32::NEG_INFINITY; 2];
    let mut l = [0.0f32; 2];
    let mut bad = [false; 2];
    let mut o = [[0.0f32; 4]; DT];
    let last_row = (first_row + block_rows_n - 1).min(p.q_len - 1);
    let kv_end = key_end(&p, last_row);
    let mut k0 = 0;
    while k0 < kv_end {
        // Every warp has left the previous tile before it is overwritten.
        sync_threads();
        // SAFETY: the kernel's contract (K and V over keys below kv_len, the head sizes); the
        // tiles fit the launch's shared memory.
        unsafe {
            load_tile(k_tile, k, &p.k, (b, hk), k0, dk, p.kv_len, (tid, threads));
            load_tile(v_tile, v, &p.v, (b, hk), k0, dv, p.kv_len, (tid, threads));
        }
        sync_threads();
        let grp = Group { b, h, hk, g, t, rows, k0 };
        // SAFETY: the kernel's contract (input 1 read only when the program has it).
        let x1s = unsafe { grp.first_extra(&p, x1) };
        // The 16 x 32 scores Q Kᵀ: B of n tile j, k step s is K's row 8j + g, columns 8s + t
        // (b0) and 8s + t + 4 (b1).
        let mut s = [[0.0f32; 4]; NT];
        unroll!(J in [0, 1, 2, 3] {
            // SAFETY: row 8j + g < 32 of the K tile.
            let kr = unsafe { k_tile.add(((8 * J as u32 + g) * k_stride) as usize) };
            unroll!(S in [0, 1, 2, 3, 4, 5, 6, 7] {
                if (S as u32) < ks {
                    // SAFETY: columns below ceil8(dk) < k_stride, written before the barrier.
                    let (v0, v1) = unsafe { (*kr.add(8 * S + t as usize), *kr.add(8 * S + t as usize + 4)) };
                    let ((b0, b0s), (b1, b1s)) = (split(v0), split(v1));
                    s[J] = mma_m16n8k8_tf32_f32(qs[S], [b0, b1], s[J]);
                    s[J] = mma_m16n8k8_tf32_f32(qb[S], [b0s, b1s], s[J]);
                    s[J] = mma_m16n8k8_tf32_f32(qb[S], [b0, b1], s[J]);
                }
            });
        });
        // SAFETY: the kernel's contract.
        let bad_rows = unsafe { grp.program(&p, &mut s, &x1s, x2, x3) };
        bad[0] |= bad_rows[0];
        bad[1] |= bad_rows[1];
        let alpha = online_softmax(&mut s, &mut m, &mut l);
        // o = alpha o + P V: the probability fragment of score tile j is the A fragment of k
        // step j (keys 8j + 2t and 8j + 2t + 1 as its k indices t and t + 4), V's B fragment
        // rows 8j + 2t and 8j + 2t + 1 of the tile, column 8n + g.
        unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
            o[N][0] *= alpha[0];
            o[N][1] *= alpha[0];
            o[N][2] *= alpha[1];
            o[N][3] *= alpha[1];
        });
        unroll!(J in [0, 1, 2, 3] {
            let (a0, a0s) = split(s[J][0]);
            let (a1, a1s) = split(s[J][2]);
            let (a2, a2s) = split(s[J][1]);
            let (a3, a3s) = split(s[J][3]);
            let (ab, asm) = ([a0, a1, a2, a3], [a0s, a1s, a2s, a3s]);
            // SAFETY: rows 8j + 2t, 8j + 2t + 1 < 32 of the V tile.
            let vr = unsafe { v_tile.add(((8 * J as u32 + 2 * t) * v_stride) as usize) };
            unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
                if 8 * (N as u32) < dv {
                    let c = 8 * N + g as usize;
                    // SAFETY: column below ceil8(dv) < v_stride, written before the barrier.
                    let (v0, v1) = unsafe { (*vr.add(c), *vr.add(v_stride as usize + c)) };
                    let ((b0, b0s), (b1, b1s)) = (split(v0), split(v1));
                    o[N] = mma_m16n8k8_tf32_f32(asm, [b0, b1], o[N]);
                    o[N] = mma_m16n8k8_tf32_f32(ab, [b0s, b1s], o[N]);
                    o[N] = mma_m16n8k8_tf32_f32(ab, [b0, b1], o[N]);
                }
            });
        });
        k0 += ATTN_FLASH_KEYS;
    }

    // The lane's outputs: row g (H 0) and g + 8 (H 1), columns 8n + 2t + {0, 1}. A row is NaN
    // (or, with ATTN_NAN_ROWS_ZERO, zero) when a lane of its quad met a NaN or +inf score or no
    // key had a finite one; with no keys it is an empty sum, 0.
    unroll!(H in [0, 1] {
        let any_bad = quad_sum(if bad[H] { 1.0 } else { 0.0 }) != 0.0;
        let nan = p.kv_len > 0 && (any_bad || m[H] == f32::NEG_INFINITY);
        let i = row0 + g + 8 * H as u32;
        if i < p.q_len {
            unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
                unroll!(E in [0, 1] {
                    let c = 8 * N as u32 + 2 * t + E as u32;
                    if c < dv {
                        let out = if nan {
                            if p.causal & ATTN_NAN_ROWS_ZERO != 0 { 0.0 } else { f32::NAN }
                        } else if p.kv_len == 0 {
                            0.0
                        } else {
                            o[N][2 * H + E] / l[H]
                        };
                        // SAFETY: i < q_len, c < dv: inside Y.
                        unsafe { *y.add(at(&p.y, b, h, i as u64, c as u64) as usize) = out };
                    }
                });
            });
        }
    });
}
