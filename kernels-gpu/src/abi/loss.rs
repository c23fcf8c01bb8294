//! The loss kernel: NegativeLogLikelihoodLoss (SoftmaxCrossEntropyLoss is log-softmax, then it).

use super::Params;

/// `LossParams::reduction`: ONNX's loss reductions.
pub mod loss_reduction {
    /// One loss per position, shaped like the target.
    pub const NONE: u32 = 0;
    /// The sum of the losses.
    pub const SUM: u32 = 1;
    /// The sum of the losses over the sum of the weights applied.
    pub const MEAN: u32 = 2;
}

/// Parameters of `loss::nll_loss_f32` (ONNX NegativeLogLikelihoodLoss): log-probabilities `x`
/// `[n, classes, inner]` (row-major), target `[n, inner]` (i32 or i64), optional weight
/// `[classes]`. Position `(b, d)` with target `t` contributes `-w[t] * x[b, t, d]` and weight
/// `w[t]` (1 without weights), or 0 and 0 when `t` is the ignore index. A target outside
/// `[0, classes)` that is not ignored is never dereferenced: it makes the position's loss (and so a
/// reduced result) NaN, where the CPU reference reports an error.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossParams {
    /// Batch size (dim 0).
    pub n: u64,
    /// Classes (dim 1).
    pub classes: u64,
    /// Product of the dims after the class dim.
    pub inner: u64,
    /// The ignored target value (when `has_ignore != 0`).
    pub ignore_index: i64,
    /// 1 when `ignore_index` applies.
    pub has_ignore: u32,
    /// One of [`loss_reduction`].
    pub reduction: u32,
    /// Bytes per target: 4 (i32) or 8 (i64).
    pub index_bytes: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Dynamic shared memory of `loss::nll_loss_f32` with a reduction (one f64 partial per warp).
pub const LOSS_SHARED_BYTES: u32 = 32 * 8;

// SAFETY: #[repr(C)], three u64, an i64, four u32 (`_pad` explicit): no padding.
unsafe impl Params for LossParams {}
