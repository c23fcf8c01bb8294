//! Row kernels: softmax, log-softmax, layer and RMS normalisation.

use super::Params;

/// Parameters of the row kernels in `rows` (softmax, log-softmax, layer and RMS normalisation).
///
/// The tensor is viewed as `[outer, len, inner]` (row-major, contiguous); a *row* is the `len`
/// elements `base + j * inner`, `j < len`, for `base = o * len * inner + i`, `o < outer`,
/// `i < inner`, so there are `outer * inner` rows. The normalisations always have `inner == 1`.
/// `scale[j % scale_len]` and `bias[j % bias_len]` are read (a scale that broadcasts over leading
/// normalised dims has `scale_len < len`, dividing it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowParams {
    /// Dims before the reduced axis (product).
    pub outer: u64,
    /// Elements of one row (the reduced extent).
    pub len: u64,
    /// Dims after the reduced axis (product); the stride between a row's elements.
    pub inner: u64,
    /// Elements of `scale` (normalisations only; divides `len`).
    pub scale_len: u64,
    /// Elements of `bias`, 0 when there is none (LayerNormalization only; divides `len`).
    pub bias_len: u64,
    /// Added to the variance (mean square) before the square root (normalisations only).
    pub epsilon: f32,
    /// Threads that cooperate on one row: 1 (a thread per row), [`ROW_WARP`] (a warp per row) or
    /// the block size (a block per row, reductions through [`ROW_SHARED_BYTES`] of shared memory).
    pub threads_per_row: u32,
}

/// `RowParams::threads_per_row` for a warp per row.
pub const ROW_WARP: u32 = 32;
/// Dynamic shared memory of a row kernel launched with a block per row (one partial per warp).
pub const ROW_SHARED_BYTES: u32 = 32 * 4;
/// Dynamic shared memory of `rows::hardmax_f32` launched with a block per row (a value and an
/// index per warp).
pub const HARDMAX_SHARED_BYTES: u32 = 32 * 8;

// SAFETY: #[repr(C)], five u64 then two 4-byte fields: 48 bytes, no padding.
unsafe impl Params for RowParams {}
