//! The loss kernel: ONNX NegativeLogLikelihoodLoss over log-probabilities (SoftmaxCrossEntropyLoss
//! is the `rows` log-softmax along the class axis, then this). With reduction none each thread
//! writes the losses of its positions; with sum or mean one block accumulates in f64 and reduces
//! through shared memory, so the result does not depend on scheduling.

use crate::abi::{LossParams, loss_reduction};
use crate::group::Group;
use crate::intrinsics::{block_dim_x, block_idx_x, global_thread_x, grid_threads_x, thread_idx_x};

/// The (loss, weight) of position `i` (`b * inner + d`).
///
/// # Safety
/// The [`nll_loss_f32`] contract and `i < n * inner`.
#[inline(always)]
unsafe fn position(
    p: &LossParams,
    x: *const f32,
    target: *const u8,
    weight: *const f32,
    i: u64,
) -> (f32, f32) {
    // SAFETY: i < n * inner, the target's length.
    let t = unsafe {
        if p.index_bytes == 4 {
            *target.cast::<i32>().add(i as usize) as i64
        } else {
            *target.cast::<i64>().add(i as usize)
        }
    };
    if p.has_ignore != 0 && t == p.ignore_index {
        return (0.0, 0.0);
    }
    if t < 0 || t as u64 >= p.classes {
        return (f32::NAN, f32::NAN);
    }
    let (b, d) = (i / p.inner, i % p.inner);
    // SAFETY: t < classes: inside the `classes` weights.
    let w = if weight.is_null() { 1.0 } else { unsafe { *weight.add(t as usize) } };
    // SAFETY: b < n, t < classes, d < inner: inside `x`.
    let v = unsafe { *x.add(((b * p.classes + t as u64) * p.inner + d) as usize) };
    (-w * v, w)
}

/// ONNX NegativeLogLikelihoodLoss of f32 log-probabilities ([`LossParams`]).
///
/// # Safety
/// `x` holds `n * classes * inner` f32, `target` `n * inner` indices of `p.index_bytes` bytes,
/// `weight` `classes` f32 or is null, and `y` holds `n * inner` f32 (reduction none) or one;
/// `y` overlaps none of them. With a reduction the launch is one block whose size is a multiple of
/// 32 (at most 1024) with `LOSS_SHARED_BYTES` of dynamic shared memory.
///
/// # Parameters
/// `p`: sizes, reduction, ignore index; `x`: log-probabilities; `target`: classes; `weight`:
/// per-class weights (or null); `y`: the losses or their reduction.
///
/// # Thread mapping
/// Reduction none: 1-D grid of 1-D blocks, any size, a grid-stride loop over the positions.
/// Sum / mean: one block; thread `t` takes positions `t, t + blockDim.x, ...` (coalesced target
/// reads), then the block reduces.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn nll_loss_f32(
    p: LossParams,
    x: *const f32,
    target: *const u8,
    weight: *const f32,
    y: *mut f32,
) {
    let positions = p.n * p.inner;
    if p.reduction == loss_reduction::NONE {
        let (mut i, stride) = (global_thread_x(), grid_threads_x());
        while i < positions {
            // SAFETY: i < positions (the contract covers the buffers).
            unsafe { *y.add(i as usize) = position(&p, x, target, weight, i).0 };
            i += stride;
        }
        return;
    }
    if block_idx_x() != 0 {
        return;
    }
    let g = Group { t: thread_idx_x() as u64, size: block_dim_x() as u64 };
    let (mut loss, mut wsum) = (0.0f64, 0.0f64);
    let mut i = g.t;
    while i < positions {
        // SAFETY: i < positions.
        let (l, w) = unsafe { position(&p, x, target, weight, i) };
        loss += l as f64;
        wsum += w as f64;
        i += g.size;
    }
    let loss = g.reduce(loss, |a, b| a + b);
    let wsum = g.reduce(wsum, |a, b| a + b);
    if g.t == 0 {
        let r = if p.reduction == loss_reduction::MEAN { loss / wsum } else { loss };
        // SAFETY: a reduction writes the one element of `y`.
        unsafe { *y = r as f32 };
    }
}
