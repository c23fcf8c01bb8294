//! f32 channel normalizations of NC... tensors:
//! - [`batch_norm_f32`]: BatchNormalization (inference), a thread per element with the channel's
//!   statistics folded into one multiply-add;
//! - [`group_norm_f32`]: GroupNormalization and InstanceNormalization, a row kernel: each
//!   `(n, group)` is one contiguous row normalised by its mean and biased variance (two passes in
//!   f32, as `rows::layer_norm_f32`), a thread, a warp or a block per row (`group::each_item`);
//! - [`lrn_f32`]: LRN, a thread per element summing its channel window.
//!
//! Every access is below the element counts in the parameters.

use crate::abi::{BatchNormParams, GroupNormParams, LrnParams};
use crate::group::each_item;
use crate::intrinsics::{global_thread_x, grid_threads_x};
use crate::math;

/// ONNX BatchNormalization of f32, inference form:
/// `y = (x − mean[c]) · (scale[c] / sqrt(var[c] + epsilon)) + bias[c]`.
///
/// # Safety
/// `x` and `y` hold `p.elems` f32 (`y` may equal `x`); `scale`, `bias`, `mean`, `var` hold
/// `p.channels` f32 each; `p.elems` is a multiple of `p.plane · p.channels`.
///
/// # Parameters
/// [`BatchNormParams`]; operands in ONNX input order, then the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn batch_norm_f32(
    p: BatchNormParams,
    x: *const f32,
    scale: *const f32,
    bias: *const f32,
    mean: *const f32,
    var: *const f32,
    y: *mut f32,
) {
    let (plane, channels) = (p.plane.max(1), p.channels.max(1));
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < p.elems {
        let c = ((e / plane) % channels) as usize;
        // SAFETY: c < channels; e < elems.
        unsafe {
            let k = *scale.add(c) / math::sqrt(*var.add(c) + p.epsilon);
            *y.add(e as usize) = math::fma(*x.add(e as usize) - *mean.add(c), k, *bias.add(c));
        }
        e += step;
    }
}

/// ONNX GroupNormalization (opset 21, and the opset-18 per-group affine form) and
/// InstanceNormalization of f32: each row (`(n, group)`, [`GroupNormParams`]) becomes
/// `(x − mean) / sqrt(var + epsilon) · scale[c] + bias[c]`.
///
/// # Safety
/// `x` and `y` hold `p.rows · p.len` f32 (`y` may equal `x`, not partially overlap it); `scale`
/// and `bias` hold `p.groups · p.channels_per_group` f32 (`p.groups` with `per_group_affine`);
/// `p.len == p.channels_per_group · p.plane`. `p.threads_per_row` is 1, 32 (block size a multiple
/// of 32) or the block size (a multiple of 32, at most 1024, with `ROW_SHARED_BYTES` of dynamic
/// shared memory).
///
/// # Parameters
/// [`GroupNormParams`]; input `x`, `scale`, `bias`, output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks. Groups of `threads_per_row` threads grid-stride over the rows; thread
/// `t` of a group takes row elements `t, t + size, ...` for the statistics, then, channel by
/// channel, plane elements `t, t + size, ...` for the output.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn group_norm_f32(
    p: GroupNormParams,
    x: *const f32,
    scale: *const f32,
    bias: *const f32,
    y: *mut f32,
) {
    if p.len == 0 || p.plane == 0 || p.groups == 0 {
        return;
    }
    let inv_len = 1.0 / p.len as f32;
    each_item(p.rows, p.threads_per_row, |g, r| {
        let base = r * p.len;
        let mut s = 0.0f32;
        let mut j = g.t;
        while j < p.len {
            // SAFETY: r < rows, j < len: inside `x`.
            s += unsafe { *x.add((base + j) as usize) };
            j += g.size;
        }
        let mean = g.sum(s) * inv_len;
        let mut q = 0.0f32;
        let mut j = g.t;
        while j < p.len {
            // SAFETY: as above.
            let d = unsafe { *x.add((base + j) as usize) } - mean;
            q = math::fma(d, d, q);
            j += g.size;
        }
        let rstd = 1.0 / math::sqrt(g.sum(q) * inv_len + p.epsilon);
        let group = r % p.groups;
        for k in 0..p.channels_per_group {
            let c = if p.per_group_affine != 0 { group } else { group * p.channels_per_group + k };
            // SAFETY: c < groups * channels_per_group (or < groups): inside `scale` and `bias`.
            let (sc, b) = unsafe { (*scale.add(c as usize), *bias.add(c as usize)) };
            let plane = base + k * p.plane;
            let mut i = g.t;
            while i < p.plane {
                // SAFETY: k < channels_per_group and i < plane: inside the row.
                unsafe {
                    let at = (plane + i) as usize;
                    *y.add(at) = math::fma((*x.add(at) - mean) * rstd, sc, b);
                }
                i += g.size;
            }
        }
    });
}

/// ONNX LRN ([`LrnParams`]): each element over `(bias + alpha / size * Σ x²)^beta`, the squares
/// summed over its channel window in f64.
///
/// # Safety
/// `x` and `y` hold `n * c * inner` f32 (no overlap: a thread reads its neighbours' channels).
///
/// # Parameters
/// `p`; input `x`; output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn lrn_f32(p: LrnParams, x: *const f32, y: *mut f32) {
    if p.size == 0 || p.inner == 0 || p.c == 0 {
        return;
    }
    let total = p.n * p.c * p.inner;
    let (before, after) = ((p.size as u64 - 1) / 2, p.size as u64 / 2);
    let scale = p.alpha as f64 / p.size as f64;
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (i, ch, b) = (e % p.inner, (e / p.inner) % p.c, e / (p.inner * p.c));
        let (lo, hi) = (ch.saturating_sub(before), (ch + after).min(p.c - 1));
        let mut sq = 0.0f64;
        for k in lo..=hi {
            // SAFETY: k < c: inside x.
            let v = unsafe { *x.add(((b * p.c + k) * p.inner + i) as usize) } as f64;
            sq += v * v;
        }
        // SAFETY: e < total: inside x and y.
        unsafe {
            let v = *x.add(e as usize) as f64;
            *y.add(e as usize) = (v / libm::pow(p.bias as f64 + scale * sq, p.beta as f64)) as f32;
        }
        e += step;
    }
}
