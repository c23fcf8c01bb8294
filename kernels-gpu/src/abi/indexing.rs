//! Element-indexed kernels: GatherElements, ScatterElements, ScatterND, Trilu.

use super::{MAX_RANK, Params};

/// `ElementsParams::reduction`: how ScatterElements combines an update with the element it hits.
pub mod scatter_reduction {
    /// Replace (duplicate indices: one of the updates wins, unspecified which, as ONNX allows).
    pub const NONE: u32 = 0;
    /// Add (atomic).
    pub const ADD: u32 = 1;
    /// Multiply (atomic compare-and-swap loop).
    pub const MUL: u32 = 2;
    /// Maximum (atomic compare-and-swap loop).
    pub const MAX: u32 = 3;
    /// Minimum (atomic compare-and-swap loop).
    pub const MIN: u32 = 4;
}

/// Parameters of the `indexing::gather_elements_b*` and `indexing::scatter_elements_*` kernels
/// (ONNX GatherElements / ScatterElements along one axis).
///
/// The indices tensor (and the output of GatherElements, the updates of ScatterElements) has shape
/// `shape[MAX_RANK - rank..]` (row-major, `elems` elements); its element at multi-index `idx`
/// addresses the data element (GatherElements' input, ScatterElements' output) at
/// `sum_d idx[d] * data_strides[d]` with `idx[axis]` replaced by the index read (a negative one
/// plus `axis_len`). An index outside `[-axis_len, axis_len)` is never dereferenced: GatherElements
/// writes 0 (NaN for f32) there and ScatterElements drops the update.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElementsParams {
    /// Elements of the indices tensor.
    pub elems: u64,
    /// Data extent along the axis.
    pub axis_len: u64,
    /// Used dims.
    pub rank: u32,
    /// The axis, as a right-aligned dim position (`MAX_RANK - rank + axis`).
    pub axis: u32,
    /// Bytes per index: 4 (i32) or 8 (i64).
    pub index_bytes: u32,
    /// One of [`scatter_reduction`] (ScatterElements only).
    pub reduction: u32,
    /// Indices shape, right-aligned.
    pub shape: [u64; MAX_RANK],
    /// Element strides of the data tensor, right-aligned (the axis' stride included).
    pub data_strides: [u64; MAX_RANK],
}

/// Parameters of the `indexing::trilu_b*` kernels (ONNX Trilu): the input is a stack of
/// `rows x cols` matrices (row-major, `elems` elements in all); element `(r, c)` is kept when
/// `c - r >= k` (`upper != 0`) or `c - r <= k` (lower), else it is zero. `k` is read from the
/// kernel's `k` pointer (one i64), or is 0 when that is null.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TriluParams {
    /// Elements of the input (and output).
    pub elems: u64,
    /// Rows of each matrix (the second-to-last dim).
    pub rows: u64,
    /// Columns of each matrix (the last dim).
    pub cols: u64,
    /// 1: keep the upper triangle; 0: the lower.
    pub upper: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Parameters of `indexing::cumsum_*` (ONNX CumSum): the input viewed as `[outer, len, inner]`
/// around the summed axis; each of the `lines = outer * inner` lines of `len` elements (`inner`
/// apart) is summed in order (from its end when `reverse`), each output leaving its own element
/// out when `exclusive`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CumSumParams {
    /// Lines summed (`outer * inner`).
    pub lines: u64,
    /// Elements of a line (the summed axis' size).
    pub len: u64,
    /// Elements after the summed axis (the stride between a line's elements).
    pub inner: u64,
    /// 1: each output is the sum of the elements before it (not counting itself).
    pub exclusive: u32,
    /// 1: sum from the end of the line.
    pub reverse: u32,
    /// 1: running products (CumProd; an exclusive product starts at 1), not sums.
    pub product: u32,
    /// Padding (zero).
    pub _pad: u32,
}

// SAFETY: #[repr(C)], three u64 then four u32: no padding.
unsafe impl Params for CumSumParams {}

// SAFETY: #[repr(C)], two u64, four u32, two u64 arrays: no padding.
unsafe impl Params for ElementsParams {}
// SAFETY: #[repr(C)], three u64, two u32 (`_pad` explicit).
unsafe impl Params for TriluParams {}

/// Parameters of `indexing::scatter_nd_f32` (ONNX ScatterND), the update pass: the updates are
/// `tuples` slices of `slice` f32; tuple `t` (`k` indices of `index_bytes` bytes, a negative one
/// plus `dims[d]`) addresses the slice at `sum_d index[d] * strides[d]` of the output (strides in
/// elements over its first `k` dims). A tuple with an index outside `[-dims[d], dims[d])` drops
/// its slice. The host copies `data` into the output first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScatterNdParams {
    /// Update elements (`tuples * slice`).
    pub elems: u64,
    /// Elements per slice.
    pub slice: u64,
    /// Indices per tuple (`1..=MAX_RANK`).
    pub k: u32,
    /// Bytes per index: 4 (i32) or 8 (i64).
    pub index_bytes: u32,
    /// One of [`scatter_reduction`].
    pub reduction: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// The output's first `k` dims.
    pub dims: [u64; MAX_RANK],
    /// Their element strides.
    pub strides: [u64; MAX_RANK],
}

// SAFETY: #[repr(C)], two u64, four u32, two u64 arrays: no padding.
unsafe impl Params for ScatterNdParams {}

/// Parameters of the `blocks::tensor_scatter_b*` kernels (ONNX TensorScatter): the cache as
/// `[outer, len, inner]` around its sequence axis and the update as `[outer, ulen, inner]`;
/// row `o` of the outer dims belongs to batch entry `o / per_batch`, whose update starts at its
/// write offset (0 without offsets), wrapping around `len` when `circular`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TensorScatterParams {
    /// Rows before the sequence axis (batch included).
    pub outer: u64,
    /// The cache's sequence extent.
    pub len: u64,
    /// The update's sequence extent (at most `len`).
    pub ulen: u64,
    /// Elements after the sequence axis.
    pub inner: u64,
    /// Rows per batch entry (`outer / batch`, at least 1).
    pub per_batch: u64,
    /// Non-zero: offsets wrap around the sequence axis.
    pub circular: u32,
    /// Non-zero: the launch passes one write offset (i64) per batch entry.
    pub has_offsets: u32,
}

// SAFETY: #[repr(C)], five u64, two u32: no padding.
unsafe impl Params for TensorScatterParams {}

/// Largest matrix `blocks::det_f32` takes (`m <= DET_MAX_M`; a thread holds one in local memory).
pub const DET_MAX_M: u32 = 16;

/// Parameters of `blocks::det_f32` (ONNX Det): `batch` matrices of `m x m`, contiguous.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DetParams {
    /// Matrices.
    pub batch: u64,
    /// Their size (at most [`DET_MAX_M`]).
    pub m: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], one u64, two u32: no padding.
unsafe impl Params for DetParams {}
