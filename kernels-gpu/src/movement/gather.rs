//! Gather along one axis with i64 or i32 indices (1-, 4- and 8-byte elements), and the f32 gather
//! whose elements go through an elementwise program before they are stored (`gather_program_f32`).

use super::Index;
use crate::abi::{EwProgramParams, GatherParams, MAX_RANK};
use crate::intrinsics::{global_thread_x, grid_threads_x, trap};
use crate::program::{ew_element_at, ew_offsets};

/// A grid-stride loop over the output elements, the index arithmetic in `I`.
///
/// # Safety
/// The [`gather_f32`] contract for elements of type `T` (`oob` for an index out of range).
#[inline(always)]
unsafe fn gather<I: Index, T: Copy>(p: &GatherParams, x: *const T, idx: *const i64, y: *mut T, oob: T) {
    let elems = p.outer * p.n_idx * p.inner;
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < elems {
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = gather_one::<I, T>(p, x, idx, i, oob) };
        i += stride;
    }
}

/// The gathered value of output element `i` (`oob` for an index out of range), the index
/// arithmetic in `I`.
///
/// # Safety
/// The [`gather_f32`] contract; `i` is below the output's element count, which fits `I`.
#[inline(always)]
unsafe fn gather_one<I: Index, T: Copy>(p: &GatherParams, x: *const T, idx: *const i64, i: u64, oob: T) -> T {
    let (inner, n_idx, axis_len) = (I::cast(p.inner), I::cast(p.n_idx), I::cast(p.axis_len));
    let t = I::cast(i);
    let (k, rest) = (t % inner, t / inner);
    let (j, o) = (rest % n_idx, rest / n_idx);
    let j: u64 = j.into();
    // SAFETY: j < n_idx indices of `index_bytes` bytes.
    let raw = unsafe { crate::indexing::load_index(idx.cast(), p.index_bytes, j) };
    let a = if raw < 0 { raw.wrapping_add(p.axis_len as i64) } else { raw };
    if a >= 0 && (a as u64) < p.axis_len {
        let off: u64 = ((o * axis_len + I::cast(a as u64)) * inner + k).into();
        // SAFETY: o < outer, a < axis_len, k < inner: inside the `outer * axis_len * inner`
        // elements of `x`.
        unsafe { *x.add(off as usize) }
    } else {
        oob
    }
}

/// Whether the gather's element counts fit u32 index arithmetic.
#[inline(always)]
fn fits_u32(p: &GatherParams) -> bool {
    let elems = p.outer.saturating_mul(p.n_idx).saturating_mul(p.inner);
    let data = p.outer.saturating_mul(p.axis_len).saturating_mul(p.inner);
    elems <= u32::MAX as u64 && data <= u32::MAX as u64 && p.n_idx <= u32::MAX as u64
}

/// ONNX Gather of f32 data with i64 (or, `p.index_bytes` 4, i32) indices along one axis: data
/// viewed as
/// `[outer, axis_len, inner]`, the indices flattened to `n_idx`, the output `[outer, n_idx, inner]`
/// ([`GatherParams`]). A negative index `a` reads `a + axis_len`.
///
/// An index outside `[-axis_len, axis_len)` is never dereferenced: its output elements are NaN.
/// (ONNX leaves this undefined; the CPU reference reports an error instead, so such inputs only
/// match the reference when it would fail.)
///
/// # Safety
/// `x` holds `outer * axis_len * inner` f32, `idx` holds `n_idx` indices of `index_bytes` (4 or
/// 8) bytes (declared `*const i64` whatever their width), `y` holds
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
    // SAFETY: forwarded from the contract.
    unsafe { gather_then(&p, x, idx, y, f32::NAN) }
}

/// The gather of every entry (elements of type `T`, `oob` for an index out of range): the index
/// arithmetic in u32 where the sizes allow it.
///
/// # Safety
/// The [`gather_f32`] contract for elements of type `T`.
#[inline(always)]
unsafe fn gather_then<T: Copy>(p: &GatherParams, x: *const T, idx: *const i64, y: *mut T, oob: T) {
    // SAFETY: forwarded from the contract.
    unsafe {
        if fits_u32(p) { gather::<u32, T>(p, x, idx, y, oob) } else { gather::<u64, T>(p, x, idx, y, oob) }
    }
}

/// [`gather_f32`] whose gathered element is input 0 of an elementwise program, whose result is
/// stored (an embedding lookup and the position embedding added to it, in one pass): the program's
/// inputs 1..3 are read at output element `i`'s offsets ([`EwProgramParams`] over the output).
///
/// # Safety
/// As [`gather_f32`]; the program's inputs hold every element their strides address for the
/// output, and `y` may equal one of them of the output's shape read without broadcast (each
/// element is read by the thread that writes it, right before) but overlaps neither `x` nor `idx`.
///
/// # Parameters
/// `p`: the gather; `e`: the program; `x`: data; `idx`: indices; `x1`..`x3`: the program's inputs
/// 1..3 (unused ones may be null); `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks covering the output's element count: one output element a thread,
/// straight-line, as `ew_program_f32` (in a grid-stride loop the compiler hoisted the program's
/// parameters into registers: 190 a thread, about a thousand instructions an element for BERT's
/// embedding sum). Below 2^31 elements the program's offsets are 32-bit, through the host's
/// divisors ([`EwProgramParams::with_fast_division`]).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn gather_program_f32(
    p: GatherParams,
    e: EwProgramParams,
    x: *const f32,
    idx: *const i64,
    x1: *const f32,
    x2: *const f32,
    x3: *const f32,
    y: *mut f32,
) {
    if e.rank as usize > MAX_RANK {
        trap();
    }
    let i = global_thread_x();
    // (The program is over the output: both counts are the output's.)
    if i >= p.outer.saturating_mul(p.n_idx).saturating_mul(p.inner) || i >= e.elems {
        return;
    }
    // SAFETY: i is an output element (the contract for x and idx).
    let v = unsafe {
        if fits_u32(&p) {
            gather_one::<u32, f32>(&p, x, idx, i, f32::NAN)
        } else {
            gather_one::<u64, f32>(&p, x, idx, i, f32::NAN)
        }
    };
    let o = if e.fast_div != 0 { e.fast_offsets(i as u32).map(u64::from) } else { ew_offsets(&e, i) };
    // SAFETY: the program's inputs cover every output element (the contract); `o` are element
    // i's offsets; i is an element of y.
    unsafe { *y.add(i as usize) = ew_element_at(&e, o, Some(v), [core::ptr::null(), x1, x2, x3]) };
}

/// [`gather_f32`] for 8-byte elements (i64, f64); an out-of-range index gives 0.
///
/// # Safety
/// The [`gather_f32`] contract with 8-byte elements.
///
/// # Parameters
/// As [`gather_f32`].
///
/// # Thread mapping
/// As [`gather_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gather_b8(p: GatherParams, x: *const u64, idx: *const i64, y: *mut u64) {
    // SAFETY: forwarded from the contract.
    unsafe { gather_then(&p, x, idx, y, 0) }
}

/// [`gather_f32`] for 1-byte elements (bool, i8, u8); an out-of-range index gives 0.
///
/// # Safety
/// The [`gather_f32`] contract with 1-byte elements.
///
/// # Parameters
/// As [`gather_f32`].
///
/// # Thread mapping
/// As [`gather_f32`].
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gather_b1(p: GatherParams, x: *const u8, idx: *const i64, y: *mut u8) {
    // SAFETY: forwarded from the contract.
    unsafe { gather_then(&p, x, idx, y, 0) }
}
