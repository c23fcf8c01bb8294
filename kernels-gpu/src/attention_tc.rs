//! Fused attention on the tensor cores (`attention_tc_f32`): the operation of `attention_f32`
//! ([`AttentionParams`]: `Y = softmax(program(Q Kᵀ)) V` over strided views, optional causal mask,
//! the same NaN rules) with both products as `mma.sync` m16n8k8 in 3xTF32 (f32 accuracy, as
//! `gemm_tc_f32`).
//!
//! A block takes [`ATTN_TC_ROWS`] (16) query rows of one (batch, head), one m16 tile; its
//! [`ATTN_TC_WARPS`] warps split the keys in groups of 32 (group `g` to warp `g % ATTN_TC_WARPS`).
//! For a group a warp forms the 16 x 32 score tile `Q Kᵀ` with the tensor-core GEMM's operand
//! loads and multiplies (`gemm_tc`: Q is its A, K's rows its n-major B, the head size its k),
//! runs the score program on the accumulator fragments, updates each row's online softmax (the
//! four lanes of a row reduce with two shuffles), and accumulates `P V`: the score fragment of
//! n tile `j` is, with keys `8j + 2t` and `8j + 2t + 1` as the step's two k indices of lane `t`,
//! exactly the A fragment of k step `j`, so the probabilities never leave the registers. A
//! group's first program input is loaded with its K rows, before the scores need them; its V
//! values are loaded after the score multiplies, before the program and the softmax run. At the
//! end the warps' partial results meet in shared memory and every thread merges some outputs over
//! the warps in warp order (deterministic).
//!
//! The per-group steps after the scores ([`Group`]'s extra inputs, V fragments and score
//! program, [`online_softmax`], [`accumulate`]) are shared with `small::attention_small_f32`, the
//! same kernel for heads up to 16 that forms its scores from the head's own k steps.

use crate::abi::{
    ATTN_NAN_ROWS_ZERO, ATTN_TC_ROWS, ATTN_TC_THREADS, ATTN_TC_WARPS, AttentionParams, AttnView, GEMM_TC_KC,
    attention_small_fits, attention_tc_fits,
};
use crate::attention::{at, block_rows, causal_masked, key_end};
use crate::gemm_tc::{NT, Norm, Operands, load, multiply, split};
use crate::intrinsics::{
    block_dim_x, dynamic_shared_ptr, ex2_approx_ftz, fma_rn, lane_id, mma_m16n8k8_tf32_f32, shfl_xor_f32,
    sync_threads, thread_idx_x,
};
use crate::math;
use crate::program::EwState;

/// n8 tiles of the output (`ATTN_TC_MAX_DV / 8`).
const DT: usize = 8;
const _: () = assert!(DT == (crate::abi::ATTN_TC_MAX_DV / 8) as usize && NT == 4);

/// `$body` once per value of `$i` in the listed constants: the fragment arrays are then indexed
/// by constants only and stay in registers (a loop LLVM leaves rolled, or one with an early
/// exit, would index them at run time and move them to local memory).
macro_rules! unroll {
    ($i:ident in [$($v:literal),*] $body:block) => {{
        $({
            const $i: usize = $v;
            $body
        })*
    }};
}

mod flash;
mod small;

/// Whether a view's rows of `(b, h)` can be read as 16-byte vectors from `ptr`: unit column
/// stride, row 0 16-byte aligned, rows a multiple of four elements apart.
#[inline(always)]
fn vector_rows(ptr: *const f32, v: &AttnView, b: u64, h: u64) -> bool {
    v.strides[3] == 1 && v.strides[2] % 4 == 0 && (ptr as usize + 4 * at(v, b, h, 0, 0) as usize) % 16 == 0
}

/// Maximum of `x` over the four lanes of a quad (a fragment row), NaN ignored.
#[inline(always)]
fn quad_max(x: f32) -> f32 {
    let mut m = x;
    for mask in [1, 2] {
        let o = shfl_xor_f32(m, mask);
        if o > m {
            m = o;
        }
    }
    m
}

/// Sum of `x` over the four lanes of a quad.
#[inline(always)]
fn quad_sum(x: f32) -> f32 {
    let x = x + shfl_xor_f32(x, 1);
    x + shfl_xor_f32(x, 2)
}

/// Fused attention on the tensor cores: the operation of `attention_f32` (see
/// [`AttentionParams`]) for value heads of at most `ATTN_TC_MAX_DV` and score programs of
/// arithmetic ops only (`ew_arith_only`: the program runs inline; an out-of-line call would make
/// ptxas spill the fragments held across it).
///
/// # Safety
/// As `attention_f32`, with `attention_tc_shared_bytes(p.dv)` bytes of dynamic shared memory;
/// another op in the score program computes as a division.
///
/// # Parameters
/// As `attention_f32`: `p`: extents, views, causal mask and the score program; `q`, `k`, `v`: the
/// operands; `x1`..`x3`: the score program's inputs 1..3; `y`: the output.
///
/// # Thread mapping
/// 1-D blocks of `ATTN_TC_THREADS` threads (other block sizes return at once), a 1-D grid of
/// `batch * heads * ceil(q_len / ATTN_TC_ROWS)` blocks: block `x` takes `(b, h) = (x / q_blocks)
/// / heads, % heads` and query rows `(x % q_blocks) * ATTN_TC_ROWS + r`, `r < 16`. Warp `w` takes
/// the 32-key groups `w, w + ATTN_TC_WARPS, ...` (those starting below `key_end`); lane `l`
/// (`g = l / 4`, `t = l % 4`) holds rows `g` and `g + 8` of the fragments: scores of keys
/// `8j + 2t + {0, 1}` (`j < 4`), outputs of columns `8n + 2t + {0, 1}`. Two block barriers
/// (before the merge) and a second after each row's weights over the warps (thread `r < 16`
/// for row `r`), both reached by every warp; thread `x` then merges outputs `x, x +
/// ATTN_TC_THREADS, ...` of the block's `16 x dv`.
///
/// Shared memory (f32): per warp and row, `dv + 3` (maximum, sum, NaN flag, outputs).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn attention_tc_f32(
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
    unsafe { attention_tc::<DT, false>(&p, q, k, v, x1, x2, x3, y) }
}

/// The body of the tensor-core attention entries, `TILES` n8 tiles of the output per lane (value
/// heads up to `8 TILES`); `SMALL`: heads up to 16, whose scores take the head's k8 steps from Q
/// fragments loaded once and K's a group ahead (`small::keys`, `small::scores`) instead of `gemm_tc`'s 32-wide rounds.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn attention_tc<const TILES: usize, const SMALL: bool>(
    p: &AttentionParams,
    q: *const f32,
    k: *const f32,
    v: *const f32,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    // Uniform over the block: whole blocks leave, before the barrier.
    if p.q_len == 0
        || !attention_tc_fits(p.dk, p.dv)
        || (SMALL && !attention_small_fits(p.dk, p.dv))
        || p.kv_group == 0
        || p.heads == 0
        || block_dim_x() != ATTN_TC_THREADS
    {
        return;
    }
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, lane_id());
    let (g, t) = (lane / 4, lane % 4);
    let Some((b, h, hk, row0)) = block_rows(p, ATTN_TC_ROWS) else { return };
    let (dk, dv) = (p.dk, p.dv);
    // The lane's query rows g and g + 8; rows past q_len read the last row (valid addresses) and
    // are never stored.
    let row = |hh: u32| (row0 + g + 8 * hh).min(p.q_len - 1) as u64;
    let last_key = p.kv_len.saturating_sub(1);
    // Q is the A operand of gemm_tc's loads, K's rows its n-major B (k along the head).
    let mut ops = Operands {
        a: q,
        b: k,
        k: dk,
        a_base: [at(&p.q, b, h, row(0), 0), at(&p.q, b, h, row(1), 0)],
        a_stride: p.q.strides[3],
        a_vec: vector_rows(q, &p.q, b, h),
        b_base: [0; NT],
        b_stride: p.k.strides[3],
        b_vec: vector_rows(k, &p.k, b, hk),
        lane_k: 8 * t,
    };
    let rounds = dk.div_ceil(GEMM_TC_KC);
    // SAFETY: the rows (clamped below q_len) and columns below dk are inside Q's view.
    let small_q = if SMALL {
        unsafe { small::q_fragments(p, q, b, h, [row(0), row(1)], t) }
    } else {
        Default::default()
    };

    let mut m = [f32::NEG_INFINITY; 2];
    let mut l = [0.0f32; 2];
    let mut bad = [false; 2];
    let mut o = [[0.0f32; 4]; TILES];
    let kv_end = key_end(p, row0.saturating_add(ATTN_TC_ROWS - 1).min(p.q_len - 1));
    let mut k0 = warp * 32;
    // The small kernel's K fragments, a group ahead: the next group's loads fly while this one
    // multiplies.
    let mut next_keys = small::KeyFragments::default();
    if SMALL && k0 < kv_end {
        let grp = Group { b, h, hk, g, t, rows: [row(0), row(1)], k0 };
        // SAFETY: keys clamped below kv_len, columns below dk: inside K's view.
        next_keys = unsafe { small::keys(p, k, &grp, k0) };
    }
    while k0 < kv_end {
        let grp = Group { b, h, hk, g, t, rows: [row(0), row(1)], k0 };
        let keys = next_keys;
        if SMALL && k0 + ATTN_TC_WARPS * 32 < kv_end {
            // SAFETY: as above.
            next_keys = unsafe { small::keys(p, k, &grp, k0 + ATTN_TC_WARPS * 32) };
        }
        for (j, base) in ops.b_base.iter_mut().enumerate() {
            *base = at(&p.k, b, hk, (k0 + 8 * j as u32 + g).min(last_key) as u64, 0);
        }
        // SAFETY: the kernel's contract (input 1 read only when the program has it).
        let x1s = unsafe { grp.first_extra(p, x1) };
        // The 16 x 32 scores Q Kᵀ.
        let mut s = [[0.0f32; 4]; NT];
        if SMALL {
            s = small::scores(p, &keys, &small_q);
        } else {
            let mut r = 0;
            // SAFETY: Q's rows and K's rows (keys clamped below kv_len) hold dk elements.
            let mut cur = unsafe { load::<false, false>(&ops, 0, &Norm::NONE) };
            while r < rounds {
                // SAFETY: as above.
                let next = if r + 1 < rounds {
                    unsafe { load::<false, false>(&ops, (r + 1) * GEMM_TC_KC, &Norm::NONE) }
                } else {
                    cur
                };
                multiply::<false>(&mut s, &cur);
                cur = next;
                r += 1;
            }
        }
        // V after the score multiplies (fewer registers live across them); the program and the
        // softmax run while the loads are in flight.
        // SAFETY: the kernel's contract.
        let vv = unsafe { grp.values::<TILES>(p, v) };
        // SAFETY: the kernel's contract.
        let bad_rows = unsafe { grp.program(p, &mut s, &x1s, x2, x3) };
        bad[0] |= bad_rows[0];
        bad[1] |= bad_rows[1];
        let alpha = online_softmax(&mut s, &mut m, &mut l);
        accumulate::<TILES>(&mut o, &s, &vv, alpha, dv);
        k0 += ATTN_TC_WARPS * 32;
    }

    // Each warp's partial rows into shared memory, then the merge over warps in warp order.
    let stride = dv + 3;
    let sh = dynamic_shared_ptr().cast::<f32>();
    // SAFETY: attention_tc_shared_bytes(dv) holds ATTN_TC_WARPS * 16 slots of dv + 3 f32.
    let slot = |w: u32, r: u32| unsafe { sh.add(((w * ATTN_TC_ROWS + r) * stride) as usize) };
    unroll!(H in [0, 1] {
        let mine = slot(warp, g + 8 * H as u32);
        let any_bad = quad_sum(if bad[H] { 1.0 } else { 0.0 }) != 0.0;
        // SAFETY: inside the row's slot (columns below dv).
        unsafe {
            if t == 0 {
                *mine = m[H];
                *mine.add(1) = l[H];
                *mine.add(2) = if any_bad { 1.0 } else { 0.0 };
            }
            unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
                unroll!(E in [0, 1] {
                    let c = 8 * N as u32 + 2 * t + E as u32;
                    if N < TILES && c < dv {
                        *mine.add(3 + c as usize) = o[N][2 * H + E];
                    }
                });
            });
        }
    });
    sync_threads();
    // Each row's weights over the warps once (a thread per row), not once per output: warp w's
    // factor `exp(m_w - max)` replaces its maximum (-1: the warp saw no finite score), the row's
    // sum its sum, and the NaN decision its flag.
    if tid < ATTN_TC_ROWS {
        let r = tid;
        let (mut big, mut nan_seen) = (f32::NEG_INFINITY, false);
        for w in 0..ATTN_TC_WARPS {
            // SAFETY: written before the barrier.
            let (mw, flag) = unsafe { (*slot(w, r), *slot(w, r).add(2)) };
            if mw > big {
                big = mw;
            }
            nan_seen |= flag != 0.0;
        }
        let mut sum = 0.0f32;
        for w in 0..ATTN_TC_WARPS {
            let s = slot(w, r);
            // SAFETY: written before the barrier; this thread alone rewrites row r's slots.
            unsafe {
                let (mw, lw) = (*s, *s.add(1));
                let f = if mw == f32::NEG_INFINITY { -1.0 } else { math::exp(mw - big) };
                if f >= 0.0 {
                    sum = fma_rn(lw, f, sum);
                }
                *s = f;
            }
        }
        // No keys: an empty sum, as the reference gives.
        let nan = p.kv_len > 0 && (nan_seen || big == f32::NEG_INFINITY);
        // SAFETY: as above.
        unsafe {
            *slot(0, r).add(1) = sum;
            *slot(0, r).add(2) = if nan { 1.0 } else { 0.0 };
        }
    }
    sync_threads();
    let mut idx = tid;
    while idx < ATTN_TC_ROWS * dv {
        let (r, c) = (idx / dv, idx % dv);
        let i = row0 + r;
        if i < p.q_len {
            let mut acc = 0.0f32;
            for w in 0..ATTN_TC_WARPS {
                let s = slot(w, r);
                // SAFETY: written before the barriers (c < dv).
                let (f, ow) = unsafe { (*s, *s.add(3 + c as usize)) };
                if f >= 0.0 {
                    acc = fma_rn(ow, f, acc);
                }
            }
            // SAFETY: written before the last barrier.
            let (sum, nan) = unsafe { (*slot(0, r).add(1), *slot(0, r).add(2) != 0.0) };
            let out = if nan {
                if p.causal & ATTN_NAN_ROWS_ZERO != 0 { 0.0 } else { f32::NAN }
            } else if p.kv_len == 0 {
                0.0
            } else {
                acc / sum
            };
            // SAFETY: i < q_len, c < dv: inside Y.
            unsafe { *y.add(at(&p.y, b, h, i as u64, c as u64) as usize) = out };
        }
        idx += ATTN_TC_THREADS;
    }
}

/// One warp's 32-key group of the tensor-core attention kernels: the lane's query rows and the
/// group's first key, with what addresses them.
pub(crate) struct Group {
    pub b: u64,
    pub h: u64,
    /// The key / value head.
    pub hk: u64,
    /// The lane's fragment row (`lane / 4`) and column pair (`lane % 4`).
    pub g: u32,
    pub t: u32,
    /// The lane's query rows `g` and `g + 8` of the warp's 16 (rows past q_len read the last
    /// one: valid addresses, never stored).
    pub rows: [u64; 2],
    /// The group's first key.
    pub k0: u32,
}

impl Group {
    /// The lane's key of score tile `j`, half `e`: `k0 + 8j + 2t + e`.
    #[inline(always)]
    fn key(&self, j: usize, e: usize) -> u32 {
        self.k0 + 8 * j as u32 + 2 * self.t + e as u32
    }

    /// The score program's first extra input at each of the lane's 16 scores (zeros without
    /// one).
    ///
    /// # Safety
    /// The attention launch contract for `x1` (read only when `n_inputs > 1`).
    #[inline(always)]
    pub(crate) unsafe fn first_extra(&self, p: &AttentionParams, x1: *const f32) -> [[f32; 4]; NT] {
        let last_key = p.kv_len.saturating_sub(1);
        let mut x1s = [[0.0f32; 4]; NT];
        if p.n_inputs > 1 {
            let e = &p.extra[0];
            // Each row's offset once (a full four-stride offset per score was most of the
            // kernel's integer work).
            let at_rows = [at(e, self.b, self.h, self.rows[0], 0), at(e, self.b, self.h, self.rows[1], 0)];
            unroll!(J in [0, 1, 2, 3] {
                unroll!(C in [0, 1, 2, 3] {
                    let kk = self.key(J, C % 2).min(last_key) as u64;
                    // SAFETY: (b, h, row, key) inside the extents: inside input 1 (the contract).
                    x1s[J][C] = unsafe { *x1.add((at_rows[C / 2] + kk * e.strides[3]) as usize) };
                });
            });
        }
        x1s
    }

    /// V at the lane's keys `8j + 2t + e` (zero past kv_len: those keys weigh 0) and columns
    /// `8n + g` of the first `TILES` n8 tiles (zero past dv): the B fragments of `P V`.
    ///
    /// # Safety
    /// The attention launch contract for `v`.
    #[inline(always)]
    pub(crate) unsafe fn values<const TILES: usize>(
        &self,
        p: &AttentionParams,
        v: *const f32,
    ) -> [[[f32; 2]; TILES]; NT] {
        let mut vv = [[[0.0f32; 2]; TILES]; NT];
        if TILES > 2 {
            // The full offset per value: the eight-tile kernel has no registers to hold the keys'
            // row offsets across their loads (ptxas spills).
            unroll!(J in [0, 1, 2, 3] {
                unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
                    unroll!(E in [0, 1] {
                        let (key, col) = (self.key(J, E), 8 * N as u32 + self.g);
                        if N < TILES && col < p.dv && key < p.kv_len {
                            let at = at(&p.v, self.b, self.hk, key as u64, col as u64) as usize;
                            // SAFETY: key below kv_len, column below dv: inside V's view.
                            vv[J][N][E] = unsafe { *v.add(at) };
                        }
                    });
                });
            });
            return vv;
        }
        let (head, s2, s3) = (at(&p.v, self.b, self.hk, 0, 0), p.v.strides[2], p.v.strides[3]);
        unroll!(J in [0, 1, 2, 3] {
            unroll!(E in [0, 1] {
                let key = self.key(J, E);
                // The key's row offset once, then a column stride per value.
                let row = head + key as u64 * s2;
                unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
                    let col = 8 * N as u32 + self.g;
                    if N < TILES && col < p.dv && key < p.kv_len {
                        // SAFETY: key below kv_len, column below dv: inside V's view.
                        vv[J][N][E] = unsafe { *v.add((row + col as u64 * s3) as usize) };
                    }
                });
            });
        });
        vv
    }

    /// The lane's 16 scores through the score program (a scale, `x0 · imm` as the usual `1 / √d`,
    /// or none: unrolled in place; any other program through one copy of the interpreter, in a
    /// rolled loop, staged through a flat array), the causal mask applied; keys past kv_len score
    /// -inf. Returns whether each of the lane's rows met a NaN or +inf score.
    ///
    /// # Safety
    /// The attention launch contract for the program's inputs 2 and 3.
    #[inline(always)]
    pub(crate) unsafe fn program(
        &self,
        p: &AttentionParams,
        s: &mut [[f32; 4]; NT],
        x1s: &[[f32; 4]; NT],
        x2: *const f32,
        x3: *const f32,
    ) -> [bool; 2] {
        if let Some(scale) = scale_of(p) {
            // Every score in place, no staging array
            // (a rolled loop over one would live in local memory); the rows' flags as two scalars
            // (an array shared with the interpreter's path below went to local memory).
            let (mut bad0, mut bad1) = (false, false);
            unroll!(J in [0, 1, 2, 3] {
                unroll!(C in [0, 1, 2, 3] {
                    let (hh, kk) = (C / 2, self.key(J, C % 2));
                    let mut sc = f32::NEG_INFINITY;
                    if kk < p.kv_len {
                        sc = s[J][C] * scale;
                        if causal_masked(p, self.rows[hh], kk as u64) {
                            sc += f32::NEG_INFINITY;
                        }
                        let bad = sc.is_nan() || sc == f32::INFINITY;
                        if hh == 0 {
                            bad0 |= bad;
                        } else {
                            bad1 |= bad;
                        }
                    }
                    s[J][C] = sc;
                });
            });
            return [bad0, bad1];
        }
        let (mut sf, mut xf) = ([0.0f32; 16], [0.0f32; 16]);
        unroll!(J in [0, 1, 2, 3] {
            unroll!(C in [0, 1, 2, 3] {
                (sf[4 * J + C], xf[4 * J + C]) = (s[J][C], x1s[J][C]);
            });
        });
        let mut bad_rows = [false; 2];
        let mut idx = 0u32;
        while idx < 16 {
            let (j, c) = (idx / 4, idx % 4);
            let (hh, kk) = (c / 2, self.k0 + 8 * j + 2 * self.t + c % 2);
            let mut sc = f32::NEG_INFINITY;
            if kk < p.kv_len {
                let i = self.rows[hh as usize];
                let mut st = EwState::default();
                (st.x0, st.x1) = (sf[idx as usize], xf[idx as usize]);
                let ex = |e: &AttnView| (at(e, self.b, self.h, i, 0) + kk as u64 * e.strides[3]) as usize;
                // SAFETY: (b, h, row, key) inside the extents: inside each used input.
                unsafe {
                    if p.n_inputs > 2 {
                        st.x2 = *x2.add(ex(&p.extra[1]));
                    }
                    if p.n_inputs > 3 {
                        st.x3 = *x3.add(ex(&p.extra[2]));
                    }
                }
                sc = st.run_arith(&p.instrs, p.n_instr, p.out_reg);
                if causal_masked(p, i, kk as u64) {
                    sc += f32::NEG_INFINITY;
                }
                if sc.is_nan() || sc == f32::INFINITY {
                    bad_rows[hh as usize] = true;
                }
            }
            sf[idx as usize] = sc;
            idx += 1;
        }
        unroll!(J in [0, 1, 2, 3] {
            unroll!(C in [0, 1, 2, 3] {
                s[J][C] = sf[4 * J + C];
            });
        });
        bad_rows
    }
}

/// The factor of a score program that only scales the score (`x0 · imm`, the usual `1 / √d`;
/// the identity program is a factor of 1), computed as the interpreter does (the same bits);
/// `None` for any other program.
#[inline(always)]
fn scale_of(p: &AttentionParams) -> Option<f32> {
    use crate::abi::ew_src::{IMM, INPUT0};
    let i0 = &p.instrs[0];
    if p.n_inputs != 1 {
        None
    } else if p.n_instr == 0 && p.out_reg == INPUT0 {
        Some(1.0)
    } else if p.n_instr == 1 && i0.op == 2 && i0.a == INPUT0 && i0.b == IMM && i0.dst == p.out_reg {
        Some(i0.imm)
    } else {
        None
    }
}

/// `e^x` for the online softmax's weights and rescales (`x <= 0` or -inf: a score less its row's
/// running maximum): `2^(x log2 e)` on the special-function unit, two instructions where
/// `math::exp` takes about twenty. Error: 2 ulp (the instruction), plus the rounding of
/// `x log2 e`, which moves a weight `e^x` by at most `|x| e^x 2^-24` (below 2.5e-8 for every x);
/// so no weight is off by more than about 3e-7 of the row's largest (1).
#[inline(always)]
fn weight(x: f32) -> f32 {
    ex2_approx_ftz(x * core::f32::consts::LOG2_E)
}

/// The online softmax of one 16 x 32 score tile per row (`s` becomes the probabilities
/// `exp(s - m)`; the row's four lanes agree on the maximum and sum): updates each row's running
/// maximum `m` and sum `l`, and returns the factor the row's earlier outputs are rescaled by.
#[inline(always)]
pub(crate) fn online_softmax(s: &mut [[f32; 4]; NT], m: &mut [f32; 2], l: &mut [f32; 2]) -> [f32; 2] {
    let mut alpha = [1.0f32; 2];
    unroll!(H in [0, 1] {
        let mut mx = f32::NEG_INFINITY;
        unroll!(J in [0, 1, 2, 3] {
            unroll!(E in [0, 1] {
                if s[J][2 * H + E] > mx {
                    mx = s[J][2 * H + E];
                }
            });
        });
        let mx = quad_max(mx);
        let m_new = if mx > m[H] { mx } else { m[H] };
        // Until a finite maximum is seen every score was -inf: nothing to add or rescale.
        let live = m_new > f32::NEG_INFINITY;
        let mut sum = 0.0f32;
        unroll!(J in [0, 1, 2, 3] {
            unroll!(E in [0, 1] {
                let x = s[J][2 * H + E];
                let pr = if live && !x.is_nan() { weight(x - m_new) } else { 0.0 };
                s[J][2 * H + E] = pr;
                sum += pr;
            });
        });
        alpha[H] = if live { weight(m[H] - m_new) } else { 1.0 };
        l[H] = l[H] * alpha[H] + quad_sum(sum);
        m[H] = m_new;
    });
    alpha
}

/// `o = alpha o + P V` for the first `TILES` n8 output tiles (those below `dv`), 3xTF32: the
/// probability fragment of score tile `j` is the A fragment of k step `j` (keys `8j + 2t` and
/// `8j + 2t + 1` as the step's two k indices of lane `t`), so the probabilities never leave the
/// registers.
#[inline(always)]
pub(crate) fn accumulate<const TILES: usize>(
    o: &mut [[f32; 4]; TILES],
    s: &[[f32; 4]; NT],
    vv: &[[[f32; 2]; TILES]; NT],
    alpha: [f32; 2],
    dv: u32,
) {
    unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
        if N < TILES {
            o[N][0] *= alpha[0];
            o[N][1] *= alpha[0];
            o[N][2] *= alpha[1];
            o[N][3] *= alpha[1];
        }
    });
    unroll!(J in [0, 1, 2, 3] {
        let (a0, a0s) = split(s[J][0]);
        let (a1, a1s) = split(s[J][2]);
        let (a2, a2s) = split(s[J][1]);
        let (a3, a3s) = split(s[J][3]);
        let (ab, asm) = ([a0, a1, a2, a3], [a0s, a1s, a2s, a3s]);
        unroll!(N in [0, 1, 2, 3, 4, 5, 6, 7] {
            if N < TILES && (8 * N as u32) < dv {
                let (b0, b0s) = split(vv[J][N][0]);
                let (b1, b1s) = split(vv[J][N][1]);
                let d = mma_m16n8k8_tf32_f32(asm, [b0, b1], o[N]);
                let d = mma_m16n8k8_tf32_f32(ab, [b0s, b1s], d);
                o[N] = mma_m16n8k8_tf32_f32(ab, [b0, b1], d);
            }
        });
    });
}
