//! Element-indexed kernels: GatherElements (1-, 4- and 8-byte elements), ScatterElements (f32,
//! every reduction) and Trilu (1-, 4- and 8-byte elements).
//!
//! Each maps one thread to one element of the indices (or of the Trilu input) at a time over a
//! grid-stride loop, so the index reads and the contiguous writes are coalesced; the data side of
//! GatherElements / ScatterElements is as scattered as the indices are. Indices are bounds-checked
//! before any dereference (see [`ElementsParams`]). Loops over the dims have constant trip counts
//! and read the parameter arrays through `movement::at`, so nothing is copied to local memory.

use crate::abi::{CumSumParams, ElementsParams, MAX_RANK, ScatterNdParams, TriluParams, scatter_reduction};
use crate::intrinsics::{F32x4, atomic_cas_u32, global_thread_x, grid_threads_x, red_add_f32, red_add_f32x4};
use crate::math;
use crate::movement::{at, unravel};

/// Index `i` of an i32 (`bytes == 4`) or i64 index tensor, widened.
///
/// # Safety
/// `idx` holds more than `i` indices of that width.
#[inline(always)]
pub(crate) unsafe fn load_index(idx: *const u8, bytes: u32, i: u64) -> i64 {
    // SAFETY: the caller's contract.
    unsafe {
        if bytes == 4 {
            *idx.cast::<i32>().add(i as usize) as i64
        } else {
            *idx.cast::<i64>().add(i as usize)
        }
    }
}

/// The data offset indices element `i` addresses, or `None` when its index is out of range.
///
/// # Safety
/// `idx` holds `p.elems` indices of `p.index_bytes` bytes and `i < p.elems`.
#[inline(always)]
unsafe fn element_offset(p: &ElementsParams, idx: *const u8, i: u64) -> Option<u64> {
    // SAFETY: i < elems (the caller's contract).
    let raw = unsafe { load_index(idx, p.index_bytes, i) };
    let a = if raw < 0 { raw.wrapping_add(p.axis_len as i64) } else { raw };
    if a < 0 || a as u64 >= p.axis_len {
        return None;
    }
    let mut off = 0u64;
    unravel(
        i,
        p.rank,
        |d| at(&p.shape, d),
        |d, c| {
            let k = if d == p.axis as usize { a as u64 } else { c };
            off += k * at(&p.data_strides, d);
        },
    );
    Some(off)
}

/// `*dst (reduction)= u` ([`scatter_reduction`]): add is `red.add.f32`; mul, max and min are
/// compare-and-swap loops; none stores.
///
/// # Safety
/// `dst` points at an f32 that other threads change only through this function.
#[inline(always)]
unsafe fn scatter_update(reduction: u32, dst: *mut f32, u: f32) {
    // SAFETY: the caller's contract.
    unsafe {
        match reduction {
            scatter_reduction::ADD => red_add_f32(dst, u),
            scatter_reduction::MUL => atomic_update(dst, |v| v * u),
            scatter_reduction::MAX => atomic_update(dst, |v| math::max(v, u)),
            scatter_reduction::MIN => atomic_update(dst, |v| math::min(v, u)),
            _ => *dst = u,
        }
    }
}

/// ONNX ScatterND of f32 ([`ScatterNdParams`]), the update pass: every update element goes to
/// its tuple's slice of `y` (`reduction` as in [`scatter_elements_f32`], with the same caveats on
/// duplicates); a tuple with an out-of-range index drops its slice. `y` holds `data` before the
/// launch: the host copies it there first, or `y` is `data`'s own buffer (updated in place).
///
/// # Safety
/// `idx` holds `p.elems / p.slice` tuples of `p.k` indices of `p.index_bytes` bytes, `upd`
/// `p.elems` f32; `y` holds every element `p.dims` and `p.strides` address for in-range tuples
/// (plus `p.slice`) and overlaps neither; `1 <= p.k <= MAX_RANK`, `p.slice >= 1`.
///
/// # Parameters
/// `p`; `idx`: the index tuples; `upd`: the updates; `y`: the output, already holding `data`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the update elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn scatter_nd_f32(
    p: ScatterNdParams,
    idx: *const u8,
    upd: *const f32,
    y: *mut f32,
) {
    if p.k == 0 || p.k as usize > MAX_RANK || p.slice == 0 {
        return;
    }
    // Additions of slices of whole 16-byte lanes (a GNN's `index_add` of message rows) go four
    // elements at a time: one index lookup, one 16-byte load and one vector reduction per lane
    // (`red.global.v4.f32.add` on Hopper, four scalar reductions elsewhere) instead of four.
    let lanes = p.reduction == scatter_reduction::ADD
        && p.slice % 4 == 0
        && (upd as usize | y as usize) % 16 == 0
        && (0..MAX_RANK).all(|d| d >= p.k as usize || at(&p.strides, d) % 4 == 0);
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    if lanes {
        let (elems, slice) = (p.elems / 4, p.slice / 4);
        while i < elems {
            let (t, e) = split_index(i, slice, elems);
            // SAFETY: tuple t < elems / slice exists (the contract).
            if let Some(off) = unsafe { tuple_offset(&p, idx, t) } {
                // SAFETY: the tuple's slice is inside `y`, 16-byte aligned (slice, strides and
                // both bases checked above); lane i of the updates exists (the contract).
                unsafe {
                    let u = *upd.cast::<F32x4>().add(i as usize);
                    red_add_f32x4(y.add((off + e * 4) as usize), u.0);
                }
            }
            i += stride;
        }
        return;
    }
    while i < p.elems {
        let (t, e) = split_index(i, p.slice, p.elems);
        // SAFETY: tuple t exists (the contract).
        if let Some(off) = unsafe { tuple_offset(&p, idx, t) } {
            // SAFETY: an in-range tuple's element is inside `y` and i < elems updates (the
            // contract).
            unsafe { scatter_update(p.reduction, y.add((off + e) as usize), *upd.add(i as usize)) };
        }
        i += stride;
    }
}

/// `(i / slice, i % slice)`, in u32 arithmetic where `elems` fits (two u64 divisions per
/// element cost more than the atomic itself).
#[inline(always)]
fn split_index(i: u64, slice: u64, elems: u64) -> (u64, u64) {
    if elems <= u32::MAX as u64 {
        let (ii, s) = (i as u32, slice as u32);
        ((ii / s) as u64, (ii % s) as u64)
    } else {
        (i / slice, i % slice)
    }
}

/// The offset in `y` of ScatterND tuple `t`'s slice, or `None` when one of its indices is out
/// of range (negative indices count from the end).
///
/// # Safety
/// `idx` holds more than `t` tuples of `p.k` indices of `p.index_bytes` bytes.
#[inline(always)]
unsafe fn tuple_offset(p: &ScatterNdParams, idx: *const u8, t: u64) -> Option<u64> {
    let mut off = Some(0u64);
    for d in 0..MAX_RANK {
        if d < p.k as usize {
            // SAFETY: tuple t holds k indices (the contract).
            let raw = unsafe { load_index(idx, p.index_bytes, t * p.k as u64 + d as u64) };
            let n = at(&p.dims, d);
            let a = if raw < 0 { raw.wrapping_add(n as i64) } else { raw };
            off = off.filter(|_| a >= 0 && (a as u64) < n).map(|o| o + a as u64 * at(&p.strides, d));
        }
    }
    off
}

/// # Safety
/// The `gather_elements_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn gather_elements<T: Copy + Default>(p: &ElementsParams, x: *const T, idx: *const u8, y: *mut T) {
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        // SAFETY: i < elems; an in-range offset is inside `x` (the contract).
        unsafe {
            *y.add(i as usize) = match element_offset(p, idx, i) {
                Some(off) => *x.add(off as usize),
                None => T::default(),
            };
        }
        i += stride;
    }
}

macro_rules! gather_elements_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX GatherElements of ", $bytes, "-byte elements ([`ElementsParams`]):")]
        /// `y[idx] = x[idx with idx[axis] = indices[idx]]`. An out-of-range index is never
        /// dereferenced: its output element is 0 (the CPU reference reports an error instead).
        ///
        /// # Safety
        /// `x` holds every element `data_strides` address for in-range indices (the data tensor
        /// the strides were built from, whose dims are at least the indices' dims off the axis);
        /// `idx` holds `p.elems` indices of `p.index_bytes` bytes; `y` holds `p.elems` elements
        /// and overlaps neither. `1 <= p.rank <= MAX_RANK`.
        ///
        /// # Parameters
        /// `p`: shapes and strides; `x`: data; `idx`: indices; `y`: the output (indices' shape).
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: ElementsParams, x: *const $t, idx: *const u8, y: *mut $t) {
            if p.rank == 0 || p.rank as usize > MAX_RANK {
                return;
            }
            // SAFETY: forwarded from the contract.
            unsafe { gather_elements(&p, x, idx, y) }
        }
    };
}

gather_elements_kernel!(gather_elements_b1, u8, "1");
gather_elements_kernel!(gather_elements_b4, u32, "4");
gather_elements_kernel!(gather_elements_b8, u64, "8");

/// `*addr = f(*addr)` atomically, through a compare-and-swap loop on the bits.
///
/// # Safety
/// `addr` is a valid, aligned f32 that concurrent threads update only through atomics.
#[inline(always)]
unsafe fn atomic_update(addr: *mut f32, f: impl Fn(f32) -> f32) {
    let bits = addr.cast::<u32>();
    // SAFETY: the caller's contract; a racy first read only costs another trip round the loop.
    let mut old = unsafe { core::ptr::read_volatile(bits) };
    loop {
        let new = f(f32::from_bits(old)).to_bits();
        // SAFETY: the caller's contract.
        let seen = unsafe { atomic_cas_u32(bits, old, new) };
        if seen == old {
            break;
        }
        old = seen;
    }
}

/// ONNX ScatterElements of f32 ([`ElementsParams`]), the update pass: for every element of
/// `updates`, `y[idx with idx[axis] = indices[idx]] (reduction)= updates[idx]`. The host copies
/// `data` into `y` first. Add is `atom.add.f32`; mul, max and min are compare-and-swap loops (max
/// and min propagate NaN, as the reference does). With reduction none and duplicate indices one
/// update wins, unspecified which (ONNX leaves it undefined; the reference takes the last).
/// Combining in f32 in arrival order, duplicates under add / mul may differ from the reference (f64,
/// row-major order) in the last bits. An out-of-range index drops its update.
///
/// # Safety
/// `y` holds every element `data_strides` address for in-range indices and overlaps neither
/// `idx` (`p.elems` indices of `p.index_bytes` bytes) nor `upd` (`p.elems` f32).
/// `1 <= p.rank <= MAX_RANK`.
///
/// # Parameters
/// `p`: shapes, strides, reduction; `idx`: indices; `upd`: updates; `y`: the output, already
/// holding `data`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the updates.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn scatter_elements_f32(
    p: ElementsParams,
    idx: *const u8,
    upd: *const f32,
    y: *mut f32,
) {
    if p.rank == 0 || p.rank as usize > MAX_RANK {
        return;
    }
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        // SAFETY: i < elems; an in-range offset is inside `y` (the contract); `y` is only
        // updated atomically when the reduction is not none.
        unsafe {
            if let Some(off) = element_offset(&p, idx, i) {
                scatter_update(p.reduction, y.add(off as usize), *upd.add(i as usize));
            }
        }
        i += stride;
    }
}

/// # Safety
/// The `trilu_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn trilu<T: Copy + Default>(p: &TriluParams, x: *const T, k: *const i64, y: *mut T) {
    // SAFETY: a non-null `k` points at one i64 (the contract).
    let k = if k.is_null() { 0 } else { unsafe { *k } };
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let c = (i % p.cols) as i64;
        let r = ((i / p.cols) % p.rows) as i64;
        // c - r cannot overflow (both below 2^63); `k` is compared as given.
        let keep = if p.upper != 0 { c - r >= k } else { c - r <= k };
        // SAFETY: i < elems, the length of `x` and `y`.
        unsafe { *y.add(i as usize) = if keep { *x.add(i as usize) } else { T::default() } };
        i += stride;
    }
}

macro_rules! trilu_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX Trilu of ", $bytes, "-byte elements ([`TriluParams`]): the upper or")]
        /// lower triangle (offset by `k` diagonals) of every matrix, zeros elsewhere.
        ///
        /// # Safety
        /// `x` and `y` hold `p.elems` elements (`y` may equal `x`: each element is read before it
        /// is written), `p.rows` and `p.cols` are non-zero when `p.elems` is, and `k` is null or
        /// points at one i64.
        ///
        /// # Parameters
        /// `p`: sizes and which triangle; `x`: the input; `k`: the diagonal offset (or null);
        /// `y`: the output.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the elements.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: TriluParams, x: *const $t, k: *const i64, y: *mut $t) {
            if p.rows == 0 || p.cols == 0 {
                return;
            }
            // SAFETY: forwarded from the contract.
            unsafe { trilu(&p, x, k, y) }
        }
    };
}

trilu_kernel!(trilu_b1, u8, "1");
trilu_kernel!(trilu_b4, u32, "4");
trilu_kernel!(trilu_b8, u64, "8");

/// Elements of a CumSum line loaded together before any of them is summed and stored: the loads
/// of a chunk overlap (a line summed one element at a time waits a whole load latency per
/// element, since the store may alias the next load: 19 us for 64 elements).
const CUMSUM_CHUNK: u64 = 16;

/// The `cumsum_*` contract for elements of type `T` summed in `A` (`widen`, `add` and `narrow`
/// convert and add).
///
/// # Safety
/// `x` and `y` hold `p.lines * p.len` elements (`y` may equal `x`: each chunk of a line is read
/// before it is written, and no other line touches it).
#[inline(always)]
unsafe fn cumsum<T: Copy, A: Copy>(
    p: &CumSumParams,
    x: *const T,
    y: *mut T,
    zero: A,
    add: impl Fn(A, T) -> A,
    narrow: impl Fn(A) -> T,
) {
    let (mut line, stride) = (global_thread_x(), grid_threads_x());
    while line < p.lines {
        let base = (line / p.inner) * p.len * p.inner + line % p.inner;
        let at = |s: u64| {
            let k = if p.reverse != 0 { p.len - 1 - s } else { s };
            (base + k * p.inner) as usize
        };
        let mut acc = zero;
        let mut s0 = 0;
        // Whole chunks: every load issued before the first sum (literal indices: registers).
        macro_rules! chunk {
            ($($c:literal)*) => {{
                // SAFETY: elements of this line, inside both buffers (the contract).
                let v = [$(unsafe { *x.add(at(s0 + $c)) }),*];
                $({
                    let next = add(acc, v[$c]);
                    // SAFETY: as above.
                    unsafe { *y.add(at(s0 + $c)) = narrow(if p.exclusive != 0 { acc } else { next }) };
                    acc = next;
                })*
            }};
        }
        while s0 + CUMSUM_CHUNK <= p.len {
            chunk!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
            s0 += CUMSUM_CHUNK;
        }
        // The rest one by one.
        while s0 < p.len {
            // SAFETY: as above.
            let next = add(acc, unsafe { *x.add(at(s0)) });
            // SAFETY: as above.
            unsafe { *y.add(at(s0)) = narrow(if p.exclusive != 0 { acc } else { next }) };
            acc = next;
            s0 += 1;
        }
        line += stride;
    }
}

macro_rules! cumsum_kernel {
    ($name:ident, $t:ty, $what:literal, ($zero:expr, $one:expr), ($add:expr, $mul:expr), $narrow:expr) => {
        #[doc = concat!("ONNX CumSum and CumProd of ", $what, " ([`CumSumParams`]): the running sum")]
        /// (or product) of every line along the summed axis, one thread per line.
        ///
        /// # Safety
        /// `x` and `y` hold `p.lines * p.len` elements (`y` may equal `x`); `p.inner` is non-zero
        /// when `p.lines` is.
        ///
        /// # Parameters
        /// `p`: the `[outer, len, inner]` view and the flags; `x`: the input; `y`: the output.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the lines, each summed in
        /// order by one thread, [`CUMSUM_CHUNK`] elements loaded at a time.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: CumSumParams, x: *const $t, y: *mut $t) {
            if p.inner == 0 {
                return;
            }
            // Products for CumProd (`p.product` is uniform across the launch: no divergence).
            let product = p.product != 0;
            let (add, mul) = ($add, $mul);
            let step = |a, v| if product { mul(a, v) } else { add(a, v) };
            // SAFETY: forwarded from the contract.
            unsafe { cumsum(&p, x, y, if product { $one } else { $zero }, step, $narrow) }
        }
    };
}

cumsum_kernel!(
    cumsum_f32,
    f32,
    "f32 (an f64 running sum or product, as the reference)",
    (0f64, 1f64),
    (|a: f64, v: f32| a + v as f64, |a: f64, v: f32| a * v as f64),
    |a: f64| a as f32
);
cumsum_kernel!(
    cumsum_f64,
    f64,
    "f64",
    (0f64, 1f64),
    (|a: f64, v: f64| a + v, |a: f64, v: f64| a * v),
    |a: f64| a
);
cumsum_kernel!(
    cumsum_i32,
    i32,
    "i32 (wrapping)",
    (0i32, 1i32),
    (|a: i32, v: i32| a.wrapping_add(v), |a: i32, v: i32| a.wrapping_mul(v)),
    |a: i32| a
);
cumsum_kernel!(
    cumsum_i64,
    i64,
    "i64 (wrapping)",
    (0i64, 1i64),
    (|a: i64, v: i64| a.wrapping_add(v), |a: i64, v: i64| a.wrapping_mul(v)),
    |a: i64| a
);
