//! Selection: NonZero (data-dependent length) and TopK.

use super::{MAX_RANK, Params};

/// Threads per block of the `select::non_zero_*` kernels.
pub const NON_ZERO_THREADS: u32 = 256;
/// Dynamic shared memory of the `select::non_zero_*` kernels (one u64 per warp).
pub const NON_ZERO_SHARED_BYTES: u32 = 32 * 8;

/// Parameters of `select::non_zero_count` and `select::non_zero_write` (ONNX NonZero).
///
/// The input has `elems` elements of `elem_bytes` bytes, row-major over the `rank` right-aligned
/// dims of `shape`. Element `i` is non-zero when its bits and `mask` share a bit (`mask` leaves out
/// a float's sign bit, so -0.0 is zero and NaN is not). Block `b` owns elements `[b * chunk, min((b + 1) * chunk, elems))`:
/// the count kernel writes how many of them are non-zero to `partials[b]`; the write kernel, over
/// the same blocks and chunks, writes the coordinates of each non-zero element in element order to
/// the `[rank, count]` i64 output, `count` being the sum of the partials.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NonZeroParams {
    /// Elements of the input.
    pub elems: u64,
    /// Elements per block.
    pub chunk: u64,
    /// Non-zero elements in all: the output's row length (write kernel).
    pub count: u64,
    /// Bits that make an element non-zero.
    pub mask: u64,
    /// Bytes per element: 1, 2, 4 or 8.
    pub elem_bytes: u32,
    /// Dims of the input (at most `MAX_RANK`).
    pub rank: u32,
    /// The input's dims, right-aligned (`shape[MAX_RANK - rank..]`).
    pub shape: [u64; MAX_RANK],
}

// SAFETY: #[repr(C)], four u64, two u32, a u64 array: no padding.
unsafe impl Params for NonZeroParams {}

/// Threads per block of `select::top_k`.
pub const TOP_K_THREADS: u32 = 256;
/// Longest axis `select::top_k` sorts (its keys fill `8 * TOP_K_MAX_LEN` bytes of shared memory).
pub const TOP_K_MAX_LEN: u64 = 4096;
/// Longest axis `select::top_k_i64` sorts (its 16-byte keys fill `16 * TOP_K_I64_MAX_LEN` bytes of
/// shared memory).
pub const TOP_K_I64_MAX_LEN: u64 = 2048;

/// Parameters of `select::top_k` (ONNX TopK): the input is `[outer, len, inner]` (the axis in the
/// middle), of element type `dtype` (`scalar::F32` or `scalar::I32`); each of the `outer * inner`
/// rows is sorted whole, as 64-bit keys (the value's order, then the index) padded to `padded`
/// (a power of two, `len <= padded <= TOP_K_MAX_LEN`), and its first `k` elements are written to
/// the `[outer, k, inner]` outputs: the values, and their positions along the axis as i64. Ties go
/// to the lower index; NaN is above every number and -0.0 equals 0.0, as in the CPU reference.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopKParams {
    /// Rows before the axis.
    pub outer: u64,
    /// Extent of the axis.
    pub len: u64,
    /// Elements after the axis.
    pub inner: u64,
    /// Elements kept per row.
    pub k: u64,
    /// `len` rounded up to a power of two.
    pub padded: u32,
    /// 1: the largest first; 0: the smallest first.
    pub largest: u32,
    /// Element type (`scalar::F32` or `scalar::I32`).
    pub dtype: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], four u64, four u32: no padding.
unsafe impl Params for TopKParams {}

/// Threads of an `nms::nms_select` block.
pub const NMS_THREADS: u32 = 256;
/// Most boxes per batch entry `nms::nms_select` takes (its sort keys and kept list fill
/// `12 * NMS_MAX_BOXES` bytes of shared memory).
pub const NMS_MAX_BOXES: u64 = 2048;

/// Parameters of the `nms::*` kernels (ONNX NonMaxSuppression): boxes `(batch, n, 4)`, scores
/// `(batch, classes, n)`; per (batch, class) the kept boxes' indices go to a slot list of `n`
/// entries and their count to `counts`; the write pass lays out `(batch, class, box)` rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NmsParams {
    /// Batch entries.
    pub batch: u64,
    /// Classes.
    pub classes: u64,
    /// Boxes per batch entry.
    pub n: u64,
    /// `n` rounded up to a power of two (the sort's length).
    pub padded: u32,
    /// 1: boxes are `(x_center, y_center, width, height)`; 0: two corners in any order.
    pub center_point_box: u32,
}

// SAFETY: #[repr(C)], three u64, two u32: no padding.
unsafe impl Params for NmsParams {}

/// Threads of the `unique::unique_count` block.
pub const UNIQUE_THREADS: u32 = 256;
/// Most slices `unique::unique_count` takes along the axis (a single block sorts them in shared
/// memory, 4 bytes each).
pub const UNIQUE_MAX_LEN: u64 = 4096;

/// Parameters of the `unique::*` kernels (ONNX Unique): the input as `[outer, len, inner]` around
/// the axis (flattened: `[1, elems, 1]`), its `len` slices compared lexicographically.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UniqueParams {
    /// Rows before the axis.
    pub outer: u64,
    /// Slices along the axis.
    pub len: u64,
    /// Elements after the axis.
    pub inner: u64,
    /// Distinct slices (the write pass; 0 for the count pass).
    pub count: u64,
    /// `len` rounded up to a power of two.
    pub padded: u32,
    /// Element type (`scalar::F32`, `scalar::I32` or `scalar::I64`).
    pub dtype: u32,
    /// 1: the distinct slices in ascending order; 0: in order of first occurrence.
    pub sorted: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], four u64, four u32: no padding.
unsafe impl Params for UniqueParams {}

/// i64 words of the `unique::unique_count` scratch for `len` slices: the distinct count, then
/// seven lists of `len`.
pub const fn unique_scratch_words(len: u64) -> u64 {
    1 + 7 * len
}
