//! Channel normalizations of NC... tensors: BatchNormalization (inference), GroupNormalization
//! and InstanceNormalization.

use super::Params;

/// Parameters of `norm::batch_norm_f32` (inference): X and Y `(batch, channels, plane)`
/// contiguous, `Y = (X − mean[c]) / sqrt(var[c] + epsilon) · scale[c] + bias[c]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchNormParams {
    /// Elements of X.
    pub elems: u64,
    /// Elements of one `(n, c)` plane (product of the spatial dims).
    pub plane: u64,
    /// C.
    pub channels: u64,
    /// Added to the variance.
    pub epsilon: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Parameters of `norm::group_norm_f32` (GroupNormalization; InstanceNormalization is the case
/// `groups == C`): X and Y `(batch, C, plane)` contiguous, viewed as `rows = batch · groups` rows of
/// `len = C/groups · plane` contiguous elements, each normalised by its own mean and (biased)
/// variance: `Y = (X − mean) / sqrt(var + epsilon) · scale[c] + bias[c]`, with `c` the element's
/// channel, or its group when `per_group_affine != 0` (the opset-18 form).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupNormParams {
    /// `batch · groups`.
    pub rows: u64,
    /// Elements of one row: `channels_per_group · plane`.
    pub len: u64,
    /// Elements of one `(n, c)` plane (product of the spatial dims; at least 1).
    pub plane: u64,
    /// Groups per image.
    pub groups: u64,
    /// `C / groups`.
    pub channels_per_group: u64,
    /// Added to the variance.
    pub epsilon: f32,
    /// Threads that cooperate on one row: 1, 32 (a warp) or the block size (a multiple of 32, with
    /// [`super::ROW_SHARED_BYTES`] of dynamic shared memory).
    pub threads_per_row: u32,
    /// 1 when `scale` and `bias` hold one value per group instead of per channel.
    pub per_group_affine: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], three u64 and two four-byte fields (the last an explicit `_pad`): 32 bytes.
unsafe impl Params for BatchNormParams {}
// SAFETY: #[repr(C)], five u64 and four four-byte fields (the last an explicit `_pad`): 56 bytes.
unsafe impl Params for GroupNormParams {}

/// Parameters of `norm::lrn_f32` (ONNX LRN): X `(n, c, inner)`; `y = x / (bias + alpha / size *
/// Σ x²)^beta`, the sum over channels `c - (size - 1) / 2 ..= c + size / 2` inside `[0, c)`,
/// computed in f64 as the CPU reference.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LrnParams {
    /// Batch.
    pub n: u64,
    /// Channels.
    pub c: u64,
    /// Elements per channel.
    pub inner: u64,
    /// Channels summed.
    pub size: u32,
    /// Scale.
    pub alpha: f32,
    /// Exponent.
    pub beta: f32,
    /// Offset.
    pub bias: f32,
}

// SAFETY: #[repr(C)], three u64, a u32 and three f32: no padding.
unsafe impl Params for LrnParams {}
