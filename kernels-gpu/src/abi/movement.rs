//! Data-movement kernels: transpose, gather, strided copies (Slice, Split, Concat, Expand, Tile),
//! Pad and GatherND.

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
    /// Output shape, right-aligned like [`super::BinaryParams::out_shape`].
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
    /// Bytes of an index: 8 (int64) or 4 (int32).
    pub index_bytes: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Parameters of the `movement::strided_copy_b*` kernels (any element of 1, 2, 4 or 8 bytes):
/// for every index `idx` of `shape[MAX_RANK - rank..]` (row-major, `elems` elements),
/// `y[y_offset + sum_d idx[d] * y_strides[d]] = x[x_offset + sum_d idx[d] * x_strides[d]]`.
/// Strides are in elements and may be 0 (broadcast: Expand, Tile) or negative (a Slice with a
/// negative step). Slice, Split, Concat, Expand and Tile are all this copy; the host collapses
/// dims that are contiguous in both operands, so most launches have rank 1 or 2.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedCopyParams {
    /// Number of elements copied (the product of the used `shape` entries).
    pub elems: u64,
    /// Number of used dimensions (0: a single element).
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Element offset of index 0 in `x`.
    pub x_offset: i64,
    /// Element offset of index 0 in `y`.
    pub y_offset: i64,
    /// Extents, right-aligned like [`super::BinaryParams::out_shape`](super::BinaryParams).
    pub shape: [u64; MAX_RANK],
    /// Element strides of `x`, right-aligned.
    pub x_strides: [i64; MAX_RANK],
    /// Element strides of `y`, right-aligned.
    pub y_strides: [i64; MAX_RANK],
}

/// `PadParams::mode`: ONNX Pad's modes.
pub mod pad_mode {
    /// Fill with `value_bits`.
    pub const CONSTANT: u32 = 0;
    /// Mirror without repeating the edge element.
    pub const REFLECT: u32 = 1;
    /// Repeat the edge element.
    pub const EDGE: u32 = 2;
    /// Wrap around.
    pub const WRAP: u32 = 3;
}

/// Parameters of the `movement::pad_b*` kernels (ONNX Pad): output element `o` (row-major over
/// `out_shape[MAX_RANK - rank..]`) reads input coordinate `o[d] - begin[d]` on each dim; a
/// coordinate outside `[0, in_shape[d])` takes `value_bits` (mode constant) or is mapped back inside
/// (reflect, edge, wrap). Negative pads crop first and the modes act on the cropped range (the
/// end pad of a dim is `out_shape - in_shape - begin`). The input is contiguous over `in_shape`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PadParams {
    /// Output elements.
    pub elems: u64,
    /// Number of used dimensions.
    pub rank: u32,
    /// One of [`pad_mode`].
    pub mode: u32,
    /// The constant, as the low bytes of this word (little-endian element bits).
    pub value_bits: u64,
    /// Output shape, right-aligned.
    pub out_shape: [u64; MAX_RANK],
    /// Input shape, right-aligned (every used entry at least 1 unless the output is empty or the
    /// mode is constant).
    pub in_shape: [u64; MAX_RANK],
    /// Padding before each dim (negative crops), right-aligned.
    pub begin: [i64; MAX_RANK],
}

/// Parameters of the `movement::gather_nd_b*` kernels (ONNX GatherND): indices viewed as
/// `[batch, n, k]`, data as `[batch, ...]` with `batch_stride` elements per batch entry; output
/// `[batch, n, slice]` with `y[b, j, s] = x[b * batch_stride + sum_t idx[b, j, t] * strides[t] + s]`
/// where a negative index adds `dims[t]`. An index outside `[-dims[t], dims[t])` is never read:
/// its output slice is zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherNdParams {
    /// Product of the batch dims.
    pub batch: u64,
    /// Index tuples per batch entry.
    pub n: u64,
    /// Elements per gathered slice.
    pub slice: u64,
    /// Data elements per batch entry.
    pub batch_stride: u64,
    /// Components per index tuple (`1..=MAX_RANK`).
    pub k: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Extent of each indexed data dim (first `k` used).
    pub dims: [u64; MAX_RANK],
    /// Element stride of each indexed data dim (first `k` used).
    pub strides: [u64; MAX_RANK],
}

// SAFETY: #[repr(C)], u64, two u32 (the second an explicit `_pad`), then two u64 arrays.
unsafe impl Params for TransposeParams {}
// SAFETY: #[repr(C)], four u64, then two u32 (`_pad` explicit).
unsafe impl Params for GatherParams {}
// SAFETY: #[repr(C)], u64, two u32 (`_pad` explicit), two i64, three 8-byte arrays.
unsafe impl Params for StridedCopyParams {}
// SAFETY: #[repr(C)], u64, two u32, u64, three 8-byte arrays.
unsafe impl Params for PadParams {}
// SAFETY: #[repr(C)], four u64, two u32 (`_pad` explicit), two u64 arrays.
unsafe impl Params for GatherNdParams {}

/// Parameters of the `movement::reverse_sequence_b*` kernels (ONNX ReverseSequence): X
/// `(d0, d1, inner)` with the batch on axis `batch_axis` and time on the other of the first two;
/// `y[t, b] = x[lens[b] - 1 - t, b]` for `t < lens[b]`, `x[t, b]` after. A length outside
/// `[0, time]` (an error in the CPU reference) fills its batch entry with NaN bits for 4-byte
/// elements and zero otherwise.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReverseSequenceParams {
    /// Extent of axis 0.
    pub d0: u64,
    /// Extent of axis 1.
    pub d1: u64,
    /// Elements per (axis 0, axis 1) entry.
    pub inner: u64,
    /// The batch axis (0 or 1); time is the other.
    pub batch_axis: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], three u64, two u32: no padding.
unsafe impl Params for ReverseSequenceParams {}
