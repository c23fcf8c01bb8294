//! Data-movement kernels: transpose, gather.

use super::{MAX_RANK, Params};

/// Parameters of `movement::transpose_f32`: `y[i] = x[sum_d idx[d] * in_strides[d]]`, where `idx`
/// is output index `i` unravelled over `out_shape[MAX_RANK - rank..]` (row-major). The host
/// collapses the permutation first (drops size-1 dims, merges output dims that stay adjacent in the
/// input), so `rank <= MAX_RANK` for any ONNX perm of rank <= 8 and rank 0 means a single element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransposeParams {
    /// Number of output (and input) elements.
    pub elems: u64,
    /// Number of used dimensions.
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Output shape, right-aligned like [`BinaryParams::out_shape`].
    pub out_shape: [u64; MAX_RANK],
    /// Input element stride of each output dimension (the input stride of axis `perm[d]`),
    /// right-aligned.
    pub in_strides: [u64; MAX_RANK],
}

/// Parameters of `movement::gather_f32` (ONNX Gather): data is viewed as `[outer, axis_len, inner]`,
/// the `n_idx` i64 indices are flattened, and `y[o, j, k] = x[o, idx[j] (+ axis_len if < 0), k]`
/// for the output `[outer, n_idx, inner]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherParams {
    /// Product of the data dims before the axis.
    pub outer: u64,
    /// Extent of the gathered axis.
    pub axis_len: u64,
    /// Product of the data dims after the axis.
    pub inner: u64,
    /// Number of indices (product of the indices' dims).
    pub n_idx: u64,
}

// SAFETY: #[repr(C)], u64, two u32 (the second an explicit `_pad`), then two u64 arrays.
unsafe impl Params for TransposeParams {}
// SAFETY: #[repr(C)], four u64.
unsafe impl Params for GatherParams {}
