//! Reduction kernels: the ONNX `Reduce*` family, ArgMax / ArgMin.

use super::{MAX_RANK, Params};

/// Which reduction `reduce::reduce_f32` applies (`ReduceParams::op`). Each output is
/// `finish(fold(add, init, xs))`; the codes are the `#[repr(u32)]` discriminants.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `Σx` (empty: 0).
    #[default]
    Sum = 0,
    /// `Σx / len` (empty: NaN).
    Mean = 1,
    /// Maximum; NaN propagates (empty: -inf).
    Max = 2,
    /// Minimum; NaN propagates (empty: +inf).
    Min = 3,
    /// `Πx` (empty: 1).
    Prod = 4,
    /// `Σ|x|`.
    L1 = 5,
    /// `sqrt(Σx²)`.
    L2 = 6,
    /// `ln(Σx)` (empty: -inf).
    LogSum = 7,
    /// `ln(Σ e^x)`, with the maximum factored out (two passes; empty: -inf).
    LogSumExp = 8,
    /// `Σx²`.
    SumSquare = 9,
    /// Maximum of the non-NaN elements (IEEE maxNum; all NaN or empty: -inf): GlobalMaxPool.
    MaxNumber = 10,
}

impl ReduceOp {
    /// The op for a code read from parameters (unknown codes are `Sum`; the host only writes valid
    /// ones).
    pub const fn from_code(code: u32) -> ReduceOp {
        match code {
            1 => ReduceOp::Mean,
            2 => ReduceOp::Max,
            3 => ReduceOp::Min,
            4 => ReduceOp::Prod,
            5 => ReduceOp::L1,
            6 => ReduceOp::L2,
            7 => ReduceOp::LogSum,
            8 => ReduceOp::LogSumExp,
            9 => ReduceOp::SumSquare,
            10 => ReduceOp::MaxNumber,
            _ => ReduceOp::Sum,
        }
    }
}

/// Parameters of `reduce::reduce_f32` and `reduce::arg_reduce_f32`.
///
/// The input (contiguous, row-major) is split into *kept* and *reduced* dims; the host drops
/// size-1 dims and merges adjacent dims of the same kind, so both lists are short. Output element
/// `o < outputs` (row-major over the kept dims, which is the output's layout with or without
/// `keepdims`) reduces the `len` input elements at
/// `offset(o, kept_shape, kept_strides) + offset(j, red_shape, red_strides)`, `j < len`, where
/// `offset(i, shape, strides)` unravels `i` over the right-aligned `shape[MAX_RANK - rank..]`
/// (row-major) and sums `index[d] * strides[d]`. A rank of 0 means the single offset 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReduceParams {
    /// Output elements (product of the kept dims).
    pub outputs: u64,
    /// Elements reduced into each output (product of the reduced dims; may be 0).
    pub len: u64,
    /// Kept dims, right-aligned.
    pub kept_shape: [u64; MAX_RANK],
    /// Input element stride of each kept dim, right-aligned.
    pub kept_strides: [u64; MAX_RANK],
    /// Reduced dims, right-aligned.
    pub red_shape: [u64; MAX_RANK],
    /// Input element stride of each reduced dim, right-aligned.
    pub red_strides: [u64; MAX_RANK],
    /// Used kept dims.
    pub kept_rank: u32,
    /// Used reduced dims.
    pub red_rank: u32,
    /// [`ReduceOp`] code (`reduce_f32`), or 0 for ArgMax and 1 for ArgMin (`arg_reduce_f32`).
    pub op: u32,
    /// `arg_reduce_f32` only: 1 picks the last of equal extremes, 0 the first.
    pub select_last: u32,
    /// Threads that cooperate on one output: 1, [`REDUCE_WARP`], or the block size (a multiple of
    /// 32, with [`REDUCE_SHARED_BYTES`] of dynamic shared memory).
    pub threads_per_row: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// `ReduceParams::threads_per_row` for a warp per output.
pub const REDUCE_WARP: u32 = 32;
/// Dynamic shared memory of a reduction launched with a block per output: one partial per warp, a
/// value and an index each.
pub const REDUCE_SHARED_BYTES: u32 = 32 * 8;

// SAFETY: #[repr(C)], two u64, four u64 arrays, six u32 (the last an explicit `_pad`): 296 bytes,
// no padding.
unsafe impl Params for ReduceParams {}
