//! f32 row kernels: softmax, log-softmax, Hardmax, LpNormalization, LayerNormalization and
//! RMSNormalization.
//!
//! The tensor is viewed as `[outer, len, inner]` ([`RowParams`]); each kernel reduces along `len`.
//! A group of `threads_per_row` threads owns one row at a time and grid-strides over the rows:
//! - 1: a thread per row. The host picks it for `inner > 1` (softmax over a non-last axis): adjacent
//!   threads own adjacent rows, so every pass over the rows reads and writes coalesced.
//! - [`ROW_WARP`](crate::abi::ROW_WARP): a warp per row (`len <= 1024`): lanes stride the row,
//!   butterfly shuffles reduce.
//! - the block size: a block per row (long rows): warp shuffles, then one partial per warp through
//!   [`ROW_SHARED_BYTES`](crate::abi::ROW_SHARED_BYTES) of dynamic shared memory.
//!
//! Rows are re-read from global memory for each pass rather than held in registers (no
//! runtime-indexed local arrays); the second and third reads of a row usually hit L1/L2.
//! Statistics are f32; the layer-norm variance is the two-pass sum of squared deviations from the
//! mean. Every access is `base + j * inner` with `j < len` and `base` a row start, so inside the
//! `outer * len * inner` elements of `x` and `y`. The groups and their reductions live in `group`.

use crate::abi::{ROW_WARP, RowParams};
use crate::group::{Group, each_item};
use crate::intrinsics::{load_v4, store_v4};
use crate::math;

/// Calls `f(group, base)` for every row this thread's group owns, `base` being the row's first
/// element. The loop condition is uniform over a group, so `f` may use group-collective reductions.
#[inline(always)]
fn each_row(p: &RowParams, mut f: impl FnMut(Group, u64)) {
    if p.inner == 0 || p.len == 0 {
        return;
    }
    each_item(p.outer * p.inner, p.threads_per_row, |g, r| {
        // Contiguous rows (LayerNormalization, RMSNormalization, softmax over the last axis)
        // without a 64-bit division a row. (One call of `f`: two would outline it.)
        let base = if p.inner == 1 { r * p.len } else { (r / p.inner) * p.len * p.inner + r % p.inner };
        f(g, base)
    });
}

/// Index into a broadcast operand of `n` elements for row position `j` (`n` divides the row).
#[inline(always)]
fn wrap(j: u64, n: u64, len: u64) -> usize {
    (if n == len { j } else { j.checked_rem(n).unwrap_or(0) }) as usize
}

/// Softmax (`log == false`) or log-softmax over each row, with one online pass for the maximum and
/// the rescaled sum of exponentials, then one pass writing the outputs.
///
/// # Safety
/// The row launch contract (see [`softmax_f32`]).
#[inline(always)]
unsafe fn softmax_rows(p: &RowParams, x: *const f32, y: *mut f32, log: bool) {
    each_row(p, |g, base| {
        let at = |j: u64| (base + j * p.inner) as usize;
        let (mut m, mut s) = (f32::NEG_INFINITY, 0.0f32);
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row.
            let v = unsafe { *x.add(at(j)) };
            if v > m {
                s = s * math::exp(m - v) + 1.0;
                m = v;
            } else if v != f32::NEG_INFINITY {
                // (-inf adds nothing; while m is still -inf too, exp(v - m) would be NaN. A NaN
                // element lands here and makes the row NaN, as in the reference.)
                s += math::exp(v - m);
            }
            j += g.size;
        }
        let gm = g.max(m);
        // A thread that saw no element (or only -inf) contributes nothing (and no NaN).
        let s = if s == 0.0 { 0.0 } else { s * math::exp(m - gm) };
        let total = g.sum(s);
        let lse = if log { math::log(total) } else { 0.0 };
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row, in `x` and `y`.
            unsafe {
                let d = *x.add(at(j)) - gm;
                *y.add(at(j)) = if log { d - lse } else { math::exp(d) / total };
            }
            j += g.size;
        }
    });
}

/// No element seen yet (an index no row reaches: rows are shorter than `u32::MAX`).
const NO_INDEX: u32 = u32::MAX;

/// The better of two (value, index) candidates for Hardmax: a larger value, then a lower index;
/// [`NO_INDEX`] loses to anything. A total order, so the group reduction gives the same bits on
/// every lane.
#[inline(always)]
fn first_max(a: (f32, u32), b: (f32, u32)) -> (f32, u32) {
    let b_wins = b.1 != NO_INDEX && (a.1 == NO_INDEX || b.0 > a.0 || (b.0 == a.0 && b.1 < a.1));
    if b_wins { b } else { a }
}

/// Hardmax over each row: 1 at the first maximum, 0 elsewhere, with the reference's NaN rule
/// (a scan keeping the first element unless a later one is greater: a NaN never wins, and a NaN
/// first element wins outright).
///
/// # Safety
/// The row launch contract (see [`hardmax_f32`]).
#[inline(always)]
unsafe fn hardmax_rows(p: &RowParams, x: *const f32, y: *mut f32) {
    each_row(p, |g, base| {
        let at = |j: u64| (base + j * p.inner) as usize;
        // This thread's first maximum among its non-NaN elements (it sees them in index order).
        let mut best = (f32::NEG_INFINITY, NO_INDEX);
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row.
            let v = unsafe { *x.add(at(j)) };
            if v > best.0 || (v == best.0 && best.1 == NO_INDEX) {
                best = (v, j as u32);
            }
            j += g.size;
        }
        let (_, winner) = g.reduce(best, first_max);
        // SAFETY: len > 0 (`each_row` skips empty rows): element 0 is inside the row.
        let first = unsafe { *x.add(at(0)) };
        let winner = if first.is_nan() || winner == NO_INDEX { 0 } else { winner as u64 };
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row of `y`.
            unsafe { *y.add(at(j)) = if j == winner { 1.0 } else { 0.0 } };
            j += g.size;
        }
    });
}

/// LpNormalization over each row: `y = x / ||x||_p` (`l1`: the sum of magnitudes, else the
/// Euclidean norm), 0 where the norm is 0.
///
/// # Safety
/// The row launch contract (see [`lp_norm2_f32`]).
#[inline(always)]
unsafe fn lp_norm_rows(p: &RowParams, x: *const f32, y: *mut f32, l1: bool) {
    each_row(p, |g, base| {
        let at = |j: u64| (base + j * p.inner) as usize;
        let mut s = 0.0f32;
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row.
            let v = unsafe { *x.add(at(j)) };
            s += if l1 { math::abs(v) } else { v * v };
            j += g.size;
        }
        let total = g.sum(s);
        let norm = if l1 { total } else { math::sqrt(total) };
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row, in `x` and `y`.
            unsafe { *y.add(at(j)) = if norm == 0.0 { 0.0 } else { *x.add(at(j)) / norm } };
            j += g.size;
        }
    });
}

// Row launch contract, shared by the kernels below.
//
// # Safety
// `x` and `y` hold `p.outer * p.len * p.inner` f32 each (`y` may equal `x`, not partially overlap
// it); `scale` holds `p.scale_len` and `bias` `p.bias_len` f32 (`bias` may be null when
// `bias_len == 0`). `p.threads_per_row` is 1, `ROW_WARP` (block size a multiple of 32) or the block
// size (a multiple of 32, at most 1024, with `ROW_SHARED_BYTES` of dynamic shared memory).
//
// # Parameters
// [`RowParams`]: rows are `len` elements `inner` apart; `outer * inner` rows.
//
// # Thread mapping
// Groups of `threads_per_row` threads (a thread, a warp, or the block) grid-stride over the rows;
// inside a group, thread `t` takes row elements `t, t + size, ...`.

/// `y = softmax(x)` along the `len` axis: `e^(x - max) / sum e^(x - max)`.
///
/// # Safety
/// The row launch contract above.
///
/// # Parameters
/// `p` ([`RowParams`], `scale_len`, `bias_len`, `epsilon` unused), input `x`, output `y`.
///
/// # Thread mapping
/// See the row launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn softmax_f32(p: RowParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract.
    unsafe { softmax_rows(&p, x, y, false) }
}

/// `y = x - max - ln(sum e^(x - max))` along the `len` axis.
///
/// # Safety
/// The row launch contract above.
///
/// # Parameters
/// As [`softmax_f32`].
///
/// # Thread mapping
/// See the row launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn log_softmax_f32(p: RowParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract.
    unsafe { softmax_rows(&p, x, y, true) }
}

/// ONNX Hardmax along the `len` axis: `y = 1` at the first maximum of each row, 0 elsewhere
/// (NaN never wins, unless it is the row's first element).
///
/// # Safety
/// The row launch contract above, with `len < u32::MAX` and, for a block per row,
/// `HARDMAX_SHARED_BYTES` of dynamic shared memory (a value and an index per warp).
///
/// # Parameters
/// As [`softmax_f32`].
///
/// # Thread mapping
/// See the row launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn hardmax_f32(p: RowParams, x: *const f32, y: *mut f32) {
    if p.len >= NO_INDEX as u64 {
        return;
    }
    // SAFETY: the launch contract.
    unsafe { hardmax_rows(&p, x, y) }
}

/// ONNX LpNormalization with `p = 1` along the `len` axis: `y = x / sum |x|` (0 for a zero row).
///
/// # Safety
/// The row launch contract above.
///
/// # Parameters
/// As [`softmax_f32`].
///
/// # Thread mapping
/// See the row launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lp_norm1_f32(p: RowParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract.
    unsafe { lp_norm_rows(&p, x, y, true) }
}

/// ONNX LpNormalization with `p = 2` along the `len` axis: `y = x / sqrt(sum x^2)` (0 for a zero
/// row).
///
/// # Safety
/// The row launch contract above.
///
/// # Parameters
/// As [`softmax_f32`].
///
/// # Thread mapping
/// See the row launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lp_norm2_f32(p: RowParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract.
    unsafe { lp_norm_rows(&p, x, y, false) }
}

/// 16-byte vectors of a row a lane holds in [`norm_vec_rows`]: rows of up to `128 NORM_VEC`.
const NORM_VEC: usize = 8;

/// Whether a normalization launch takes [`norm_vec_rows`] (uniform over the grid): contiguous
/// rows (`inner == 1`) of a multiple of 128 elements and at most `128 NORM_VEC`, a warp each, a
/// scale (and a bias, if any) of the row's length, and every operand 16-byte aligned (then
/// every row is, `len` being a multiple of four).
#[inline(always)]
fn norm_vec_fits(p: &RowParams, x: *const f32, scale: *const f32, bias: *const f32, y: *mut f32) -> bool {
    let aligned = [x as usize, scale as usize, bias as usize, y as usize].iter().all(|a| a % 16 == 0);
    p.inner == 1
        && p.threads_per_row == ROW_WARP
        && p.len % 128 == 0
        && p.len <= 128 * NORM_VEC as u64
        && p.scale_len == p.len
        && (p.bias_len == 0 || p.bias_len == p.len)
        && aligned
}

/// The four f32 at `at` (16-byte aligned, in global memory).
///
/// # Safety
/// `at` is valid for 16 bytes and 16-byte aligned.
#[inline(always)]
unsafe fn load4(at: *const f32) -> [f32; 4] {
    // SAFETY: the caller's contract.
    unsafe { load_v4(at as *const [u32; 4]) }.map(f32::from_bits)
}

/// LayerNormalization (`RMS` false) or RMSNormalization (`RMS`) over rows that
/// [`norm_vec_fits`], the row in registers: lane `l` loads the row's 16-byte vectors `l, l + 32,
/// ...` at once (one round trip a row), reduces them with the warp, and stores its outputs as
/// vectors: a few instructions an element where the strided loop spends tens (wrapped scale
/// indices, 64-bit offsets, one load in flight at a time). The statistics are those of the
/// strided path (f32 sums, the two-pass variance for LayerNormalization), summed in another
/// order. `stats(t, base, mean, rstd)` receives each row's statistics.
///
/// # Safety
/// The row launch contract and [`norm_vec_fits`].
#[inline(always)]
unsafe fn norm_vec_rows<const RMS: bool>(
    p: &RowParams,
    x: *const f32,
    scale: *const f32,
    bias: *const f32,
    y: *mut f32,
    stats: impl Fn(u64, u64, f32, f32),
) {
    let inv_len = 1.0 / p.len as f32;
    let vectors = (p.len / 128) as usize;
    each_row(p, |g, base| {
        let row = base as usize;
        let lane = g.t as usize;
        let mut v = [[0.0f32; 4]; NORM_VEC];
        macro_rules! each {
            ($($u:literal)*) => {$(
                if $u < vectors {
                    // SAFETY: vector `lane + 32 u` of the row: inside it (len = 128 vectors),
                    // 16-byte aligned (`norm_vec_fits`).
                    v[$u] = unsafe { load4(x.add(row + 4 * (lane + 32 * $u))) };
                }
            )*};
        }
        each!(0 1 2 3 4 5 6 7);
        let mean = if RMS {
            0.0
        } else {
            let mut s = 0.0f32;
            macro_rules! sum {
                ($($u:literal)*) => {$( if $u < vectors { s += v[$u][0]; s += v[$u][1]; s += v[$u][2]; s += v[$u][3]; } )*};
            }
            sum!(0 1 2 3 4 5 6 7);
            g.sum(s) * inv_len
        };
        let mut q = 0.0f32;
        macro_rules! squares {
            ($($u:literal)*) => {$(
                if $u < vectors {
                    let [a, b, c, d] = v[$u];
                    let (a, b, c, d) = (a - mean, b - mean, c - mean, d - mean);
                    q = math::fma(a, a, q);
                    q = math::fma(b, b, q);
                    q = math::fma(c, c, q);
                    q = math::fma(d, d, q);
                }
            )*};
        }
        squares!(0 1 2 3 4 5 6 7);
        let rstd = 1.0 / math::sqrt(g.sum(q) * inv_len + p.epsilon);
        stats(g.t, base, mean, rstd);
        macro_rules! out {
            ($($u:literal)*) => {$(
                if $u < vectors {
                    let at = 4 * (lane + 32 * $u);
                    // SAFETY: as the loads; scale and bias hold `len` elements (`norm_vec_fits`).
                    unsafe {
                        let sc = load4(scale.add(at));
                        let b = if RMS || p.bias_len == 0 { [0.0; 4] } else { load4(bias.add(at)) };
                        let e = v[$u];
                        let f = |c: usize| {
                            let r = if RMS { e[c] * rstd * sc[c] } else { math::fma((e[c] - mean) * rstd, sc[c], b[c]) };
                            r.to_bits()
                        };
                        store_v4(y.add(row + at) as *mut [u32; 4], [f(0), f(1), f(2), f(3)]);
                    }
                }
            )*};
        }
        out!(0 1 2 3 4 5 6 7);
    });
}

/// ONNX LayerNormalization: `y = (x - mean) / sqrt(var + epsilon) * scale + bias` over
/// rows of `len` contiguous elements (`inner == 1`), mean first, then the variance as the mean of
/// squared deviations (two passes), then the output.
///
/// # Safety
/// The row launch contract above.
///
/// # Parameters
/// `p` ([`RowParams`] with `inner == 1`), input `x`, `scale` (`scale_len`), `bias` (`bias_len`, or
/// null when 0), the optional per-row outputs `mean_out` and `rstd_out` (`1 / sqrt(var + epsilon)`;
/// null when not wanted, else `outer` f32 each), output `y`.
///
/// # Thread mapping
/// See the row launch contract above (a warp or a block per row).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn layer_norm_f32(
    p: RowParams,
    x: *const f32,
    scale: *const f32,
    bias: *const f32,
    mean_out: *mut f32,
    rstd_out: *mut f32,
    y: *mut f32,
) {
    let inv_len = 1.0 / p.len as f32;
    // The row's statistics (LayerNormalization's optional Mean and InvStdDev outputs), by the
    // row's first thread: rows are `len` apart (`inner == 1`).
    let statistics = |t: u64, base: u64, mean: f32, rstd: f32| {
        if t == 0 {
            let row = (base / p.len.max(1)) as usize;
            // SAFETY: row < the row count, the length of both statistics outputs when non-null.
            unsafe {
                if !mean_out.is_null() {
                    *mean_out.add(row) = mean;
                }
                if !rstd_out.is_null() {
                    *rstd_out.add(row) = rstd;
                }
            }
        }
    };
    if norm_vec_fits(&p, x, scale, bias, y) {
        // SAFETY: the launch contract; the rows fit.
        return unsafe { norm_vec_rows::<false>(&p, x, scale, bias, y, statistics) };
    }
    each_row(&p, |g, base| {
        let at = |j: u64| (base + j * p.inner) as usize;
        // Rows of at most LN_REGS elements per thread are read once into registers: one memory
        // round trip instead of three; the same sums in the same order, so the same bits.
        if p.len <= g.size * LN_REGS {
            let mut v = [0.0f32; LN_REGS as usize];
            macro_rules! each {
                ($($u:literal)*) => {$(
                    let j = g.t + $u * g.size;
                    if j < p.len {
                        // SAFETY: j < len: inside the row.
                        v[$u] = unsafe { *x.add(at(j)) };
                    }
                )*};
            }
            each!(0 1 2 3 4 5 6 7);
            let mut s = 0.0f32;
            macro_rules! sum {
                ($($u:literal)*) => {$( if g.t + $u * g.size < p.len { s += v[$u]; } )*};
            }
            sum!(0 1 2 3 4 5 6 7);
            let mean = g.sum(s) * inv_len;
            let mut q = 0.0f32;
            macro_rules! squares {
                ($($u:literal)*) => {$(
                    if g.t + $u * g.size < p.len {
                        let d = v[$u] - mean;
                        q = math::fma(d, d, q);
                    }
                )*};
            }
            squares!(0 1 2 3 4 5 6 7);
            let rstd = 1.0 / math::sqrt(g.sum(q) * inv_len + p.epsilon);
            statistics(g.t, base, mean, rstd);
            macro_rules! out {
                ($($u:literal)*) => {$(
                    let j = g.t + $u * g.size;
                    if j < p.len {
                        // SAFETY: j < len; scale and bias indices are below their lengths (`wrap`).
                        unsafe {
                            let sc = *scale.add(wrap(j, p.scale_len, p.len));
                            let b = if p.bias_len == 0 { 0.0 } else { *bias.add(wrap(j, p.bias_len, p.len)) };
                            *y.add(at(j)) = math::fma((v[$u] - mean) * rstd, sc, b);
                        }
                    }
                )*};
            }
            out!(0 1 2 3 4 5 6 7);
            return;
        }
        let mut s = 0.0f32;
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row.
            s += unsafe { *x.add(at(j)) };
            j += g.size;
        }
        let mean = g.sum(s) * inv_len;
        let mut q = 0.0f32;
        let mut j = g.t;
        while j < p.len {
            // SAFETY: as above.
            let d = unsafe { *x.add(at(j)) } - mean;
            q = math::fma(d, d, q);
            j += g.size;
        }
        let rstd = 1.0 / math::sqrt(g.sum(q) * inv_len + p.epsilon);
        statistics(g.t, base, mean, rstd);
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len; scale and bias indices are below their lengths (`wrap`).
            unsafe {
                let sc = *scale.add(wrap(j, p.scale_len, p.len));
                let b = if p.bias_len == 0 { 0.0 } else { *bias.add(wrap(j, p.bias_len, p.len)) };
                *y.add(at(j)) = math::fma((*x.add(at(j)) - mean) * rstd, sc, b);
            }
            j += g.size;
        }
    });
}

/// Elements per thread that `layer_norm_f32` keeps in registers.
const LN_REGS: u64 = 8;

/// ONNX RMSNormalization: `y = x / sqrt(mean(x^2) + epsilon) * scale` over rows of `len`
/// contiguous elements (`inner == 1`).
///
/// # Safety
/// The row launch contract above.
///
/// # Parameters
/// `p` ([`RowParams`] with `inner == 1`, `bias_len` unused), input `x`, `scale` (`scale_len`),
/// output `y`.
///
/// # Thread mapping
/// See the row launch contract above (a warp or a block per row).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn rms_norm_f32(p: RowParams, x: *const f32, scale: *const f32, y: *mut f32) {
    if norm_vec_fits(&p, x, scale, core::ptr::null(), y) {
        // SAFETY: the launch contract; the rows fit.
        return unsafe { norm_vec_rows::<true>(&p, x, scale, core::ptr::null(), y, |_, _, _, _| {}) };
    }
    let inv_len = 1.0 / p.len as f32;
    each_row(&p, |g, base| {
        let at = |j: u64| (base + j * p.inner) as usize;
        let mut q = 0.0f32;
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len: inside the row.
            let v = unsafe { *x.add(at(j)) };
            q = math::fma(v, v, q);
            j += g.size;
        }
        let rstd = 1.0 / math::sqrt(g.sum(q) * inv_len + p.epsilon);
        let mut j = g.t;
        while j < p.len {
            // SAFETY: j < len; the scale index is below `scale_len` (`wrap`).
            unsafe {
                let sc = *scale.add(wrap(j, p.scale_len, p.len));
                *y.add(at(j)) = *x.add(at(j)) * rstd * sc;
            }
            j += g.size;
        }
    });
}
