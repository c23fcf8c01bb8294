//! Data-dependent selection: NonZero.

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
