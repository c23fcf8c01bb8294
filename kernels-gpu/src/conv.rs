//! f32 convolution and pooling over NC[D]HW tensors, 1-D to 3-D ([`ConvParams`] and
//! [`PoolParams`] always carry three spatial dims; the host pads lower ranks with size-1 dims):
//! - [`conv_gemm_f32`]: Conv as an implicit GEMM per group, `W_g (M/G x K) · im2col(X) (K x N·O)`
//!   with `K = C/G · taps`, the im2col columns gathered on the fly into shared memory (64 x 64
//!   output tiles, as `gemm::gemm_f32`); for convolutions with many output channels per group;
//! - [`conv_direct_f32`]: Conv with a thread per output element (depthwise and other convolutions
//!   with few output channels per group, where a 64-row tile would idle);
//! - [`conv_transpose_f32`]: ConvTranspose, a thread per output element gathering the input
//!   positions that scatter into it;
//! - [`pool_f32`]: MaxPool and AveragePool, a thread per output element, and
//!   [`max_pool_indices_f32`]: MaxPool's Indices output.
//!
//! FP32 FMA, no TF32. Every load is behind a range check of its coordinates against the sizes in
//! the parameters; element offsets are u64.

use crate::abi::{Activation, CONV_SHARED_BYTES, CONV_THREADS, CONV_TILE, ConvParams, PoolOp, PoolParams};
use crate::intrinsics::{
    block_idx_x, block_idx_y, block_idx_z, dynamic_shared_ptr, global_thread_x, grid_threads_x, sync_threads,
    thread_idx_x, thread_idx_y,
};
use crate::math;

/// Output tile of [`conv_gemm_f32`] (channels x positions), its k step, and per-thread micro-tile.
const BM: u32 = CONV_TILE;
const BN: u32 = CONV_TILE;
const BK: u32 = 16;
const TM: usize = (CONV_TILE / CONV_THREADS) as usize;
const TN: usize = (CONV_TILE / CONV_THREADS) as usize;
const BLOCK_THREADS: u32 = CONV_THREADS * CONV_THREADS;
// The weight tile `[BK][BM]` and the input tile `[BK][BN]` fill the shared memory the host gives;
// each thread loads BK * BN / BLOCK_THREADS elements of each, and owns one input-tile column.
const _: () = assert!((BK * BM + BK * BN) * 4 <= CONV_SHARED_BYTES);
const LOADS: u32 = BK * BN / BLOCK_THREADS;
const _: () = assert!(BK * BM == BK * BN && BLOCK_THREADS % BN == 0 && LOADS * BLOCK_THREADS == BK * BN);

/// Sizes derived from [`ConvParams`].
#[derive(Clone, Copy)]
struct Dims {
    /// Input channels per group.
    cg: u32,
    /// Output channels per group.
    mg: u32,
    /// Kernel taps (product of the kernel dims).
    taps: u32,
    /// GEMM depth `cg * taps`.
    k: u32,
    /// Elements of one input plane.
    in_plane: u64,
    /// Elements of one output plane.
    out_plane: u64,
}

#[inline(always)]
fn dims(p: &ConvParams) -> Dims {
    let groups = p.groups.max(1);
    let taps = p.kernel[0] * p.kernel[1] * p.kernel[2];
    let plane = |s: &[u32; 3]| s[0] as u64 * s[1] as u64 * s[2] as u64;
    Dims {
        cg: p.in_channels / groups,
        mg: p.out_channels / groups,
        taps,
        k: p.in_channels / groups * taps,
        in_plane: plane(&p.in_size),
        out_plane: plane(&p.out_size),
    }
}

/// Unravels a flat position `i` over `size` (row-major `[d, h, w]`).
#[inline(always)]
fn unravel(i: u64, size: &[u32; 3]) -> [u32; 3] {
    let (h, w) = (size[1].max(1) as u64, size[2].max(1) as u64);
    [(i / (h * w)) as u32, ((i / w) % h) as u32, (i % w) as u32]
}

/// Flat offset of `[z, y, x]` in a plane of `size`.
#[inline(always)]
fn flat(at: [u32; 3], size: &[u32; 3]) -> u64 {
    (at[0] as u64 * size[1] as u64 + at[1] as u64) * size[2] as u64 + at[2] as u64
}

/// Input coordinate `o·s + k·d − pad` of output coordinate `o` and tap `k`, when inside `[0, n)`.
#[inline(always)]
fn source(o: u32, k: u32, s: u32, d: u32, pad: i32, n: u32) -> Option<u32> {
    let q = o as i64 * s as i64 + k as i64 * d as i64 - pad as i64;
    if q >= 0 && q < n as i64 { Some(q as u32) } else { None }
}

/// The input element read by output position `out` and tap `tap` (`[kz, ky, kx]`), as an offset
/// in the plane, or `None` in the padding.
#[inline(always)]
fn conv_source(p: &ConvParams, out: [u32; 3], tap: [u32; 3]) -> Option<u64> {
    let z = source(out[0], tap[0], p.strides[0], p.dilations[0], p.pad_begin[0], p.in_size[0])?;
    let y = source(out[1], tap[1], p.strides[1], p.dilations[1], p.pad_begin[1], p.in_size[1])?;
    let x = source(out[2], tap[2], p.strides[2], p.dilations[2], p.pad_begin[2], p.in_size[2])?;
    Some(flat([z, y, x], &p.in_size))
}

/// Bias and activation of output channel `m`.
///
/// # Safety
/// `b` holds `p.out_channels` f32 when `p.has_bias != 0`; `m < p.out_channels`.
#[inline(always)]
unsafe fn finish(p: &ConvParams, b: *const f32, m: u32, acc: f32) -> f32 {
    // SAFETY: the caller's contract.
    let v = if p.has_bias != 0 { acc + unsafe { *b.add(m as usize) } } else { acc };
    activate(p.act, p.act_alpha, v)
}

/// The activation `act` (an [`Activation`] code) of `v`. Kept out of line, with scalar arguments:
/// inlined, the activation's math made the 4 x 4 epilogue loop of [`conv_gemm_f32`] too large to
/// unroll, and its accumulators then went to local memory.
#[inline(never)]
pub(crate) fn activate(act: u32, alpha: f32, v: f32) -> f32 {
    math::activate(Activation::from_code(act), v, alpha)
}

// Conv launch contract, shared by the three convolution kernels below.
//
// # Safety
// `x`, `w`, `y` hold the contiguous tensors [`ConvParams`] describes (`b` the `out_channels` bias
// when `has_bias != 0`, else it may be null); `groups >= 1` divides `in_channels` and
// `out_channels`; strides and dilations are >= 1; `y` overlaps no operand.
//
// # Parameters
// [`ConvParams`]; `x` the input, `w` the weights, `b` the bias, `y` the output.

/// ONNX Conv of f32 as an implicit GEMM per group.
///
/// # Safety
/// The conv launch contract above; the grid is at most `(ceil(N·O / 64), ceil(M/G / 64), G)` (the
/// kernel skips blocks past the problem) with [`CONV_SHARED_BYTES`] of dynamic shared memory.
///
/// # Parameters
/// See the conv launch contract above.
///
/// # Thread mapping
/// Block (16, 16): a 64 x 64 tile of (output channel of group `blockIdx.z`, output column
/// `n·O + o`), each thread a 4 x 4 micro-tile strided by 16 (channels `ty + 16 r`, columns
/// `tx + 16 s`). Per k step of 16, the block stages 64 x 16 weights and the gathered 16 x 64 input
/// columns in shared memory; thread `t` gathers column `t mod 64` (decoded once) at rows
/// `t / 64 + 4 i`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn conv_gemm_f32(
    p: ConvParams,
    x: *const f32,
    w: *const f32,
    b: *const f32,
    y: *mut f32,
) {
    let d = dims(&p);
    let cols = p.batch as u64 * d.out_plane;
    let (g, row0, col0) = (block_idx_z(), block_idx_y() * BM, block_idx_x() as u64 * BN as u64);
    // Uniform over the block: every thread leaves or none does.
    if g >= p.groups || row0 >= d.mg || col0 >= cols || d.k == 0 {
        return;
    }
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let tid = ty * CONV_THREADS + tx;
    let smem = dynamic_shared_ptr() as *mut f32;
    // SAFETY: the two tiles lie inside the CONV_SHARED_BYTES the launch provides.
    let (w_tile, x_tile) = (smem, unsafe { smem.add((BK * BM) as usize) });
    // This thread's input-tile column, decoded once.
    let bj = tid % BN;
    let col = col0 + bj as u64;
    let col_ok = col < cols;
    let c = col.min(cols - 1);
    let (n, out) = (c / d.out_plane, unravel(c % d.out_plane, &p.out_size));
    let x_base = (n * p.in_channels as u64 + (g * d.cg) as u64) * d.in_plane;
    let w_base = (g * d.mg) as u64 * d.k as u64;
    let mut acc = [[0f32; TN]; TM];
    let mut k0 = 0;
    while k0 < d.k {
        for r in 0..LOADS {
            let e = tid + r * BLOCK_THREADS;
            let (wi, wk) = (e / BK, e % BK);
            let (gm, gk) = (row0 + wi, k0 + wk);
            let wv = if gm < d.mg && gk < d.k {
                // SAFETY: gm < M/G and gk < K: inside group g's weights.
                unsafe { *w.add((w_base + gm as u64 * d.k as u64 + gk as u64) as usize) }
            } else {
                0.0
            };
            let bk = e / BN;
            let kk = k0 + bk;
            let xv = if col_ok && kk < d.k {
                let (ch, t) = (kk / d.taps, kk % d.taps);
                let tap = [t / (p.kernel[1] * p.kernel[2]), (t / p.kernel[2]) % p.kernel[1], t % p.kernel[2]];
                match conv_source(&p, out, tap) {
                    // SAFETY: n < N, ch < C/G, the offset is inside the plane: inside X.
                    Some(off) => unsafe { *x.add((x_base + ch as u64 * d.in_plane + off) as usize) },
                    None => 0.0,
                }
            } else {
                0.0
            };
            // SAFETY: wk < BK, wi < BM; bk < BK, bj < BN: inside the tiles.
            unsafe {
                *w_tile.add((wk * BM + wi) as usize) = wv;
                *x_tile.add((bk * BN + bj) as usize) = xv;
            }
        }
        sync_threads();
        for kk in 0..BK {
            let mut fw = [0f32; TM];
            let mut fx = [0f32; TN];
            for (r, v) in fw.iter_mut().enumerate() {
                // SAFETY: kk < BK, ty + 16 r < BM.
                *v = unsafe { *w_tile.add((kk * BM + ty + CONV_THREADS * r as u32) as usize) };
            }
            for (s, v) in fx.iter_mut().enumerate() {
                // SAFETY: kk < BK, tx + 16 s < BN.
                *v = unsafe { *x_tile.add((kk * BN + tx + CONV_THREADS * s as u32) as usize) };
            }
            for r in 0..TM {
                for s in 0..TN {
                    acc[r][s] = math::fma(fw[r], fx[s], acc[r][s]);
                }
            }
        }
        sync_threads();
        k0 += BK;
    }
    // Output offsets of this thread's columns without the channel term (u64::MAX past the end),
    // so that the 4 x 4 stores below stay small enough to unroll (`acc` stays in registers).
    let col_off: [u64; TN] = core::array::from_fn(|s| {
        let j = col0 + (tx + CONV_THREADS * s as u32) as u64;
        if j < cols {
            (j / d.out_plane) * p.out_channels as u64 * d.out_plane + j % d.out_plane
        } else {
            u64::MAX
        }
    });
    for (r, acc_row) in acc.iter().enumerate() {
        let m = row0 + ty + CONV_THREADS * r as u32;
        if m >= d.mg {
            continue;
        }
        let mm = g * d.mg + m;
        // SAFETY: mm < M.
        let bias = if p.has_bias != 0 { unsafe { *b.add(mm as usize) } } else { 0.0 };
        for (&off, &sum) in col_off.iter().zip(acc_row) {
            if off != u64::MAX {
                let v = activate(p.act, p.act_alpha, sum + bias);
                // SAFETY: mm < M and the column's (n, o) are inside Y.
                unsafe { *y.add((off + mm as u64 * d.out_plane) as usize) = v };
            }
        }
    }
}

/// ONNX Conv of f32, a thread per output element.
///
/// # Safety
/// The conv launch contract above.
///
/// # Parameters
/// See the conv launch contract above.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements `(n, m, o)`
/// row-major, so neighbouring threads write neighbouring positions of one channel (and read the
/// same weights).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn conv_direct_f32(
    p: ConvParams,
    x: *const f32,
    w: *const f32,
    b: *const f32,
    y: *mut f32,
) {
    let d = dims(&p);
    let total = p.batch as u64 * p.out_channels as u64 * d.out_plane;
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (nm, o) = (e / d.out_plane, e % d.out_plane);
        let (n, m) = (nm / p.out_channels as u64, (nm % p.out_channels as u64) as u32);
        let g = m / d.mg.max(1);
        let out = unravel(o, &p.out_size);
        let x_base = (n * p.in_channels as u64 + (g * d.cg) as u64) * d.in_plane;
        let w_base = m as u64 * d.k as u64;
        let mut acc = 0.0f32;
        let mut t = 0u32;
        for kz in 0..p.kernel[0] {
            for ky in 0..p.kernel[1] {
                for kx in 0..p.kernel[2] {
                    if let Some(off) = conv_source(&p, out, [kz, ky, kx]) {
                        for ch in 0..d.cg {
                            // SAFETY: ch < C/G, the offset is inside the plane; m < M, t < taps.
                            unsafe {
                                let xv = *x.add((x_base + ch as u64 * d.in_plane + off) as usize);
                                let wv = *w.add((w_base + (ch * d.taps + t) as u64) as usize);
                                acc = math::fma(xv, wv, acc);
                            }
                        }
                    }
                    t += 1;
                }
            }
        }
        // SAFETY: m < M (`finish`); e < total: inside Y.
        unsafe { *y.add(e as usize) = finish(&p, b, m, acc) };
        e += step;
    }
}

/// Input coordinate `i` with `i·s + k·d − pad = o`, when there is one inside `[0, n)`.
#[inline(always)]
fn transposed_source(o: u32, k: u32, s: u32, d: u32, pad: i32, n: u32) -> Option<u32> {
    let q = o as i64 + pad as i64 - k as i64 * d as i64;
    let s = s.max(1) as i64;
    if q < 0 || q % s != 0 || q / s >= n as i64 { None } else { Some((q / s) as u32) }
}

/// ONNX ConvTranspose of f32, a thread per output element gathering its contributions.
///
/// # Safety
/// The conv launch contract above, with W `(in_channels, out_channels / groups, kernel)`.
///
/// # Parameters
/// See the conv launch contract above and [`ConvParams`].
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements `(n, m, o)`
/// row-major.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn conv_transpose_f32(
    p: ConvParams,
    x: *const f32,
    w: *const f32,
    b: *const f32,
    y: *mut f32,
) {
    let d = dims(&p);
    let total = p.batch as u64 * p.out_channels as u64 * d.out_plane;
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (nm, o) = (e / d.out_plane, e % d.out_plane);
        let (n, m) = (nm / p.out_channels as u64, (nm % p.out_channels as u64) as u32);
        let mg = d.mg.max(1);
        let (g, ml) = (m / mg, m % mg);
        let out = unravel(o, &p.out_size);
        let mut acc = 0.0f32;
        let mut t = 0u32;
        for kz in 0..p.kernel[0] {
            for ky in 0..p.kernel[1] {
                for kx in 0..p.kernel[2] {
                    let src = |a: usize, k: u32| {
                        transposed_source(
                            out[a],
                            k,
                            p.strides[a],
                            p.dilations[a],
                            p.pad_begin[a],
                            p.in_size[a],
                        )
                    };
                    if let (Some(iz), Some(iy), Some(ix)) = (src(0, kz), src(1, ky), src(2, kx)) {
                        let off = flat([iz, iy, ix], &p.in_size);
                        for ch in 0..d.cg {
                            let c = (g * d.cg + ch) as u64;
                            // SAFETY: c < C, the offset is inside the plane; ml < M/G, t < taps.
                            unsafe {
                                let xv = *x.add(((n * p.in_channels as u64 + c) * d.in_plane + off) as usize);
                                let wv = *w
                                    .add(((c * d.mg as u64 + ml as u64) * d.taps as u64 + t as u64) as usize);
                                acc = math::fma(xv, wv, acc);
                            }
                        }
                    }
                    t += 1;
                }
            }
        }
        // SAFETY: m < M (`finish`); e < total: inside Y.
        unsafe { *y.add(e as usize) = finish(&p, b, m, acc) };
        e += step;
    }
}

/// Where a pooling tap falls on one axis (see [`PoolParams`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tap {
    /// Input element at this coordinate.
    In(u32),
    /// In the padding.
    Pad,
    /// Past the padded input (a `ceil_mode` window overhang).
    Out,
}

#[inline(always)]
fn pool_tap(p: &PoolParams, a: usize, o: u32, k: u32) -> Tap {
    let q = o as u64 * p.strides[a] as u64 + k as u64 * p.dilations[a] as u64;
    let (n, pb) = (p.in_size[a] as u64, p.pad_begin[a] as u64);
    if q >= n + pb + p.pad_end[a] as u64 {
        Tap::Out
    } else if q < pb || q >= n + pb {
        Tap::Pad
    } else {
        Tap::In((q - pb) as u32)
    }
}

/// Taps of one axis that are not outside the padded input, and those that are input elements.
#[inline(always)]
fn pool_counts(p: &PoolParams, a: usize, o: u32) -> (u32, u32) {
    let (mut inside, mut input) = (0, 0);
    for k in 0..p.kernel[a] {
        match pool_tap(p, a, o, k) {
            Tap::In(_) => (inside, input) = (inside + 1, input + 1),
            Tap::Pad => inside += 1,
            Tap::Out => {}
        }
    }
    (inside, input)
}

/// What one pooling window holds: the first maximum of its input elements and where it is (in
/// row-major kernel order; `None` when the window has no input element), and their sum.
struct WindowScan {
    best: f32,
    at: Option<[u32; 3]>,
    /// The sum of the elements, or of `|x|^lp` for LpPool.
    sum: f32,
}

/// `|v|^lp` (1 and 2 exactly).
#[inline(always)]
fn lp_term(v: f32, lp: u32) -> f32 {
    match lp {
        1 => math::abs(v),
        2 => v * v,
        _ => math::pow(math::abs(v), lp as f32),
    }
}

/// Scans the window of output position `out` over the input plane starting at `base`.
///
/// # Safety
/// `x` holds the plane: `base + flat(coordinate, in_size)` is inside it for coordinates below
/// `in_size`.
#[inline(always)]
unsafe fn scan(p: &PoolParams, x: *const f32, base: u64, out: [u32; 3]) -> WindowScan {
    let mut w = WindowScan { best: f32::NEG_INFINITY, at: None, sum: 0.0 };
    for kz in 0..p.kernel[0] {
        let Tap::In(iz) = pool_tap(p, 0, out[0], kz) else { continue };
        for ky in 0..p.kernel[1] {
            let Tap::In(iy) = pool_tap(p, 1, out[1], ky) else { continue };
            for kx in 0..p.kernel[2] {
                let Tap::In(ix) = pool_tap(p, 2, out[2], kx) else { continue };
                // SAFETY: each coordinate is below its input size: inside the plane.
                let v = unsafe { *x.add((base + flat([iz, iy, ix], &p.in_size)) as usize) };
                if w.at.is_none() || v > w.best {
                    (w.best, w.at) = (v, Some([iz, iy, ix]));
                }
                w.sum += if p.op == PoolOp::Lp as u32 { lp_term(v, p.lp) } else { v };
            }
        }
    }
    w
}

/// ONNX MaxPool (`p.op == Max`), AveragePool and LpPool of f32: the first maximum of each window's
/// input elements (taps in row-major kernel order, `-inf` when there is none), their sum over the
/// count of input taps (all taps inside the padded input with `count_include_pad`), or the
/// `lp`-norm of the input taps.
///
/// # Safety
/// `x` holds `planes · in` f32 and `y` `planes · out` f32 (contiguous, no overlap); strides and
/// dilations are >= 1.
///
/// # Parameters
/// [`PoolParams`]; `x` the input, `y` the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn pool_f32(p: PoolParams, x: *const f32, y: *mut f32) {
    let plane = |s: &[u32; 3]| s[0] as u64 * s[1] as u64 * s[2] as u64;
    let (in_plane, out_plane) = (plane(&p.in_size), plane(&p.out_size));
    let total = p.planes * out_plane;
    let max = p.op == PoolOp::Max as u32;
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (pl, o) = (e / out_plane, e % out_plane);
        let out = unravel(o, &p.out_size);
        // SAFETY: pl < planes: the plane is inside X.
        let w = unsafe { scan(&p, x, pl * in_plane, out) };
        let v = if max {
            w.best
        } else if p.op == PoolOp::Lp as u32 {
            match p.lp {
                1 => w.sum,
                2 => math::sqrt(w.sum),
                lp => math::pow(w.sum, 1.0 / lp as f32),
            }
        } else {
            let counts = [0, 1, 2].map(|a| pool_counts(&p, a, out[a]));
            let pick = |c: (u32, u32)| if p.count_include_pad != 0 { c.0 } else { c.1 };
            let divisor = pick(counts[0]) as u64 * pick(counts[1]) as u64 * pick(counts[2]) as u64;
            w.sum / divisor as f32
        };
        // SAFETY: e < total: inside Y.
        unsafe { *y.add(e as usize) = v };
        e += step;
    }
}

/// ONNX MaxPool's Indices output: the flat index into X of each window's first maximum (the
/// window's plane offset plus the spatial offset, row-major, or column-major with
/// `p.storage_order`); a window without input elements gets its plane's first index.
///
/// # Safety
/// As [`pool_f32`], with `y` holding `planes · out` i64.
///
/// # Parameters
/// [`PoolParams`] (`op` unused); `x` the input, `y` the indices.
///
/// # Thread mapping
/// As [`pool_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn max_pool_indices_f32(p: PoolParams, x: *const f32, y: *mut i64) {
    let plane = |s: &[u32; 3]| s[0] as u64 * s[1] as u64 * s[2] as u64;
    let (in_plane, out_plane) = (plane(&p.in_size), plane(&p.out_size));
    let total = p.planes * out_plane;
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (pl, o) = (e / out_plane, e % out_plane);
        // SAFETY: pl < planes: the plane is inside X.
        let w = unsafe { scan(&p, x, pl * in_plane, unravel(o, &p.out_size)) };
        let [iz, iy, ix] = w.at.unwrap_or([0, 0, 0]);
        let [d, h, _] = p.in_size;
        let spatial = if p.storage_order != 0 {
            iz as u64 + d as u64 * (iy as u64 + h as u64 * ix as u64)
        } else {
            flat([iz, iy, ix], &p.in_size)
        };
        // SAFETY: e < total: inside Y.
        unsafe { *y.add(e as usize) = (pl * in_plane + spatial) as i64 };
        e += step;
    }
}
