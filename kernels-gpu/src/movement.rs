//! f32 data-movement kernels: Transpose (any permutation up to rank [`MAX_RANK`]) and Gather (one
//! axis, i64 indices). Both map one thread to one output element at a time over a grid-stride loop,
//! so writes are coalesced; they copy bits and never round.
//!
//! Index arithmetic runs in u32 when every index and offset fits (the per-dimension divisions are
//! several times cheaper than in u64), else in u64. Loops over the dims have constant trip counts
//! with an early exit, so the parameter arrays stay indexed by constants (no local-memory copy).

use crate::abi::{GatherParams, MAX_RANK, TransposeParams};
use crate::intrinsics::{global_thread_x, grid_threads_x};

/// The integer arithmetic the index math needs, for u32 and u64.
trait Index:
    Copy
    + Default
    + PartialOrd
    + TryFrom<u64>
    + Into<u64>
    + core::ops::Rem<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Add<Output = Self>
{
    /// `v` in `Self` (0 when it does not fit; callers only pass values that fit).
    #[inline(always)]
    fn cast(v: u64) -> Self {
        Self::try_from(v).unwrap_or_default()
    }
}

impl Index for u32 {}
impl Index for u64 {}

/// Input element offset of output index `i` (see [`TransposeParams`]).
#[inline(always)]
fn transpose_offset<I: Index>(p: &TransposeParams, i: I) -> I {
    let first = MAX_RANK - p.rank as usize;
    let (mut rem, mut off) = (i, I::default());
    let mut d = MAX_RANK;
    while d > 0 {
        d -= 1;
        if d < first {
            break;
        }
        let dim = I::cast(p.out_shape[d]);
        off = off + (rem % dim) * I::cast(p.in_strides[d]);
        rem = rem / dim;
    }
    off
}

/// Largest input offset [`transpose_offset`] can produce (saturating).
#[inline(always)]
fn transpose_max_offset(p: &TransposeParams) -> u64 {
    let first = MAX_RANK - p.rank as usize;
    let mut m = 0u64;
    for d in 0..MAX_RANK {
        if d >= first {
            let last = p.out_shape[d].saturating_sub(1);
            m = m.saturating_add(last.saturating_mul(p.in_strides[d]));
        }
    }
    m
}

/// # Safety
/// The [`transpose_f32`] contract.
#[inline(always)]
unsafe fn transpose<I: Index>(p: &TransposeParams, x: *const f32, y: *mut f32) {
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let off: u64 = transpose_offset(p, I::cast(i)).into();
        // SAFETY: i < elems; `off <= transpose_max_offset(p)`, inside `x` by the contract.
        unsafe { *y.add(i as usize) = *x.add(off as usize) };
        i += stride;
    }
}

/// ONNX Transpose of f32: `y[i] = x[offset(i)]` with the offset built from the output shape and the
/// permuted input strides in `p` ([`TransposeParams`]).
///
/// # Safety
/// `y` holds `p.elems` f32 and does not overlap `x`; `1 <= p.rank <= MAX_RANK` or `p.rank == 0`
/// with `p.elems <= 1`; every offset the shape and strides produce (at most
/// `sum_d (out_shape[d] - 1) * in_strides[d]`) is inside `x`. The host builds them from the input's
/// shape and the permutation, which guarantees this.
///
/// # Parameters
/// `p`: shape and strides; `x`: the input; `y`: the output (contiguous, row-major).
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn transpose_f32(p: TransposeParams, x: *const f32, y: *mut f32) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    // SAFETY: forwarded from the contract.
    unsafe {
        if p.elems <= u32::MAX as u64 && transpose_max_offset(&p) <= u32::MAX as u64 {
            transpose::<u32>(&p, x, y)
        } else {
            transpose::<u64>(&p, x, y)
        }
    }
}

/// # Safety
/// The [`gather_f32`] contract.
#[inline(always)]
unsafe fn gather<I: Index>(p: &GatherParams, x: *const f32, idx: *const i64, y: *mut f32) {
    let elems = p.outer * p.n_idx * p.inner;
    let (inner, n_idx, axis_len) = (I::cast(p.inner), I::cast(p.n_idx), I::cast(p.axis_len));
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < elems {
        let t = I::cast(i);
        let (k, rest) = (t % inner, t / inner);
        let (j, o) = (rest % n_idx, rest / n_idx);
        let j: u64 = j.into();
        // SAFETY: j < n_idx.
        let raw = unsafe { *idx.add(j as usize) };
        let a = if raw < 0 { raw.wrapping_add(p.axis_len as i64) } else { raw };
        let v = if a >= 0 && (a as u64) < p.axis_len {
            let off: u64 = ((o * axis_len + I::cast(a as u64)) * inner + k).into();
            // SAFETY: o < outer, a < axis_len, k < inner: inside the `outer * axis_len * inner`
            // elements of `x`.
            unsafe { *x.add(off as usize) }
        } else {
            f32::NAN
        };
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = v };
        i += stride;
    }
}

/// ONNX Gather of f32 data with i64 indices along one axis: data viewed as
/// `[outer, axis_len, inner]`, the indices flattened to `n_idx`, the output `[outer, n_idx, inner]`
/// ([`GatherParams`]). A negative index `a` reads `a + axis_len`.
///
/// An index outside `[-axis_len, axis_len)` is never dereferenced: its output elements are NaN.
/// (ONNX leaves this undefined; the CPU reference reports an error instead, so such inputs only
/// match the reference when it would fail.)
///
/// # Safety
/// `x` holds `outer * axis_len * inner` f32, `idx` holds `n_idx` i64, `y` holds
/// `outer * n_idx * inner` f32 and does not overlap `x` or `idx`. The products fit in u64 (the
/// host's element counts).
///
/// # Parameters
/// `p`: the view; `x`: data; `idx`: indices; `y`: the output (contiguous, row-major).
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements; neighbouring
/// threads read neighbouring data elements along `inner` (and the same index).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gather_f32(p: GatherParams, x: *const f32, idx: *const i64, y: *mut f32) {
    let elems = p.outer.saturating_mul(p.n_idx).saturating_mul(p.inner);
    let data = p.outer.saturating_mul(p.axis_len).saturating_mul(p.inner);
    // SAFETY: forwarded from the contract.
    unsafe {
        if elems <= u32::MAX as u64 && data <= u32::MAX as u64 && p.n_idx <= u32::MAX as u64 {
            gather::<u32>(&p, x, idx, y)
        } else {
            gather::<u64>(&p, x, idx, y)
        }
    }
}
