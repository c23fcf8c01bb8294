//! Data-movement kernels: Transpose (f32, any permutation up to rank [`MAX_RANK`]), Gather (`gather.rs`: one
//! axis, i64 indices; 1-, 4- and 8-byte elements), strided copies (Slice, Split, Concat, Expand,
//! Tile), Pad and GatherND. Both map one thread to one output element at a time over a grid-stride loop,
//! so writes are coalesced; they copy bits and never round.
//!
//! Index arithmetic runs in u32 when every index and offset fits (the per-dimension divisions are
//! several times cheaper than in u64), else in u64. Loops over the dims have constant trip counts
//! with an early exit, so the parameter arrays stay indexed by constants (no local-memory copy).

use crate::abi::{
    GatherNdParams, MAX_RANK, PadParams, ReverseSequenceParams, StridedCopyParams, TransposeParams, pad_mode,
};
use crate::intrinsics::{global_thread_x, grid_threads_x};

mod gather;

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
    let mut off = I::default();
    unravel(i, p.rank, |d| I::cast(p.out_shape[d]), |d, c| off = off + c * I::cast(p.in_strides[d]));
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

/// Offsets into `x` and `y` of copy index `i` ([`StridedCopyParams`]); `I` is the unravelling
/// arithmetic (u32 when `elems` fits).
#[inline(always)]
fn copy_offsets<I: Index>(p: &StridedCopyParams, i: I) -> (i64, i64) {
    let (mut xo, mut yo) = (p.x_offset, p.y_offset);
    unravel(
        i,
        p.rank,
        |d| I::cast(p.shape[d]),
        |d, c| {
            let k: u64 = c.into();
            xo += k as i64 * p.x_strides[d];
            yo += k as i64 * p.y_strides[d];
        },
    );
    (xo, yo)
}

/// An element the copy kernels move: by value, or (16-byte aligned vectors) as one vector load
/// and one vector store.
trait Element: Copy {
    /// `*src`.
    ///
    /// # Safety
    /// `src` points at a valid element of global memory.
    #[inline(always)]
    unsafe fn load(src: *const Self) -> Self {
        // SAFETY: the caller's contract.
        unsafe { *src }
    }

    /// `*dst = v`.
    ///
    /// # Safety
    /// `dst` points at a valid element of global memory.
    #[inline(always)]
    unsafe fn store(dst: *mut Self, v: Self) {
        // SAFETY: the caller's contract.
        unsafe { *dst = v }
    }
}

impl Element for u8 {}
impl Element for u16 {}
impl Element for u32 {}
impl Element for u64 {}
impl Element for [u32; 4] {}
impl Element for Vec16 {
    #[inline(always)]
    unsafe fn load(src: *const Self) -> Self {
        // SAFETY: a `Vec16` is 16-byte aligned; the caller's contract.
        Vec16(unsafe { crate::intrinsics::load_v4(src.cast()) })
    }

    #[inline(always)]
    unsafe fn store(dst: *mut Self, v: Self) {
        // SAFETY: as above.
        unsafe { crate::intrinsics::store_v4(dst.cast(), v.0) }
    }
}

/// # Safety
/// The `strided_copy_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn strided_copy<I: Index, T: Element>(p: &StridedCopyParams, x: *const T, y: *mut T) {
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let (xo, yo) = copy_offsets(p, I::cast(i));
        // SAFETY: every offset the shape and strides produce is inside its buffer (the contract).
        unsafe { T::store(y.offset(yo as isize), T::load(x.offset(xo as isize))) };
        i += stride;
    }
}

macro_rules! strided_copy_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("Strided copy of ", $bytes, "-byte elements ([`StridedCopyParams`]): Slice, Split,")]
        /// Concat, Expand and Tile.
        ///
        /// # Safety
        /// Every offset `offset + sum_d idx[d] * strides[d]` over the used shape is inside `x`
        /// (source) and `y` (destination); distinct indices write distinct `y` elements; `x` and
        /// `y` do not overlap. The host derives the offsets and strides from the operands' shapes.
        ///
        /// # Parameters
        /// `p`: shape, offsets, strides; `x`: the source; `y`: the destination.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the copied elements; the
        /// innermost dim is the fastest, so contiguous runs are read and written coalesced.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: StridedCopyParams, x: *const $t, y: *mut $t) {
            if p.rank as usize > MAX_RANK {
                return;
            }
            // SAFETY: forwarded from the contract.
            unsafe {
                if p.elems <= u32::MAX as u64 {
                    strided_copy::<u32, $t>(&p, x, y)
                } else {
                    strided_copy::<u64, $t>(&p, x, y)
                }
            }
        }
    };
}

strided_copy_kernel!(strided_copy_b1, u8, "1");
strided_copy_kernel!(strided_copy_b2, u16, "2");
strided_copy_kernel!(strided_copy_b4, u32, "4");
strided_copy_kernel!(strided_copy_b8, u64, "8");

/// Sixteen bytes moved as one 16-byte aligned unit, by one `ld.global.v4` / `st.global.v4`
/// ([`crate::intrinsics::load_v4`], [`crate::intrinsics::store_v4`]; rustc would emit two 8-byte
/// accesses).
#[repr(C, align(16))]
#[derive(Clone, Copy, Default)]
pub struct Vec16([u32; 4]);

/// Strided copy of 16-byte vectors ([`StridedCopyParams`] in vectors): the copies of narrower
/// elements whose innermost run is contiguous on both sides and whose offsets, strides and inner
/// extent are whole vectors (the planner's choice). Where `x` or `y` is not 16-byte aligned (a
/// caller's buffer at an offset) the vectors move as four 4-byte words.
///
/// # Safety
/// The `strided_copy_b*` contract with 16-byte elements; `x` and `y` are 4-byte aligned.
///
/// # Parameters
/// `p`: shape, offsets, strides in vectors; `x`: the source; `y`: the destination.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the copied vectors.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn strided_copy_b16(p: StridedCopyParams, x: *const Vec16, y: *mut Vec16) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    let aligned = (x as usize | y as usize) % 16 == 0;
    // SAFETY: forwarded from the contract; `[u32; 4]` has the layout of `Vec16` at 4-byte alignment.
    unsafe {
        match (aligned, p.elems <= u32::MAX as u64) {
            (true, true) => strided_copy::<u32, Vec16>(&p, x, y),
            (true, false) => strided_copy::<u64, Vec16>(&p, x, y),
            (false, true) => strided_copy::<u32, [u32; 4]>(&p, x.cast(), y.cast()),
            (false, false) => strided_copy::<u64, [u32; 4]>(&p, x.cast(), y.cast()),
        }
    }
}

/// Unravels index `i` over the `rank` right-aligned dims of a shape (`dim(d)` the extent of dim
/// `d`, row-major): `f(d, c)` gets each dim `d` from the last to the first with the coordinate `c`
/// of `i` along it. The loop has a constant trip count with an early exit, so parameter arrays
/// indexed by `d` stay indexed by constants (no copy of a parameter struct to local memory).
#[inline(always)]
pub(crate) fn unravel<I>(i: I, rank: u32, dim: impl Fn(usize) -> I, mut f: impl FnMut(usize, I))
where
    I: Copy + core::ops::Rem<Output = I> + core::ops::Div<Output = I>,
{
    let first = MAX_RANK - rank as usize;
    let mut rem = i;
    let mut d = MAX_RANK;
    while d > 0 {
        d -= 1;
        if d < first {
            break;
        }
        let n = dim(d);
        f(d, rem % n);
        rem = rem / n;
    }
}

/// `a[d]` through a match on `d`: every array access has a constant index, so a parameter array is
/// never copied to local memory even where the loop over `d` is not unrolled.
#[inline(always)]
pub(crate) fn at<T: Copy>(a: &[T; MAX_RANK], d: usize) -> T {
    match d {
        0 => a[0],
        1 => a[1],
        2 => a[2],
        3 => a[3],
        4 => a[4],
        5 => a[5],
        6 => a[6],
        _ => a[7],
    }
}

/// Input coordinate that input-space coordinate `c` reads along a dim whose kept (uncropped)
/// range is `[lo, hi)`, or `None` for the constant. Negative pads crop first; the modes then act
/// on the cropped range, as ONNX (NumPy) does.
#[inline(always)]
fn pad_source(mode: u32, c: i64, lo: i64, hi: i64) -> Option<i64> {
    if (lo..hi).contains(&c) {
        return Some(c);
    }
    let n = hi - lo;
    if n <= 0 {
        return None;
    }
    let r = c - lo;
    let k = match mode {
        pad_mode::EDGE => r.clamp(0, n - 1),
        pad_mode::WRAP => r.rem_euclid(n),
        pad_mode::REFLECT if n == 1 => 0,
        pad_mode::REFLECT => {
            let period = 2 * (n - 1);
            let m = r.rem_euclid(period);
            if m < n { m } else { period - m }
        }
        _ => return None,
    };
    Some(lo + k)
}

/// # Safety
/// The `pad_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn pad<T: Copy>(p: &PadParams, x: *const T, y: *mut T, value: T) {
    // (The loop is written out, not `unravel`: through its closure LLVM kept the pads in local
    // memory.)
    let first = MAX_RANK - p.rank as usize;
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let (mut rem, mut off, mut in_stride, mut inside) = (i, 0i64, 1i64, true);
        let mut d = MAX_RANK;
        while d > 0 {
            d -= 1;
            if d < first {
                break;
            }
            let dim = at(&p.out_shape, d);
            let begin = at(&p.begin, d);
            let c = (rem % dim) as i64 - begin;
            rem /= dim;
            let n = at(&p.in_shape, d) as i64;
            // Cropped (negative-pad) ends: the kept input range is [lo, hi).
            let end = dim as i64 - n - begin;
            let (lo, hi) = (0i64.max(-begin), n - 0i64.max(-end));
            match pad_source(p.mode, c, lo, hi) {
                Some(s) => off += s * in_stride,
                None => inside = false,
            }
            in_stride *= n;
        }
        // SAFETY: i < elems; `off` is a coordinate inside `in_shape` on every dim when `inside`.
        unsafe { *y.add(i as usize) = if inside { *x.add(off as usize) } else { value } };
        i += stride;
    }
}

macro_rules! pad_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX Pad of ", $bytes, "-byte elements ([`PadParams`]).")]
        ///
        /// # Safety
        /// `x` holds the contiguous input of `in_shape` (every used extent at least 1 when the
        /// mode is not constant), `y` the `p.elems` output elements, not overlapping `x`;
        /// `value` is null or holds one element.
        ///
        /// # Parameters
        /// `p`: shapes, pads, mode and constant; `x`: the input; `value`: the constant when it is
        /// known only at run time (null: `p.value_bits`); `y`: the output.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: PadParams, x: *const $t, value: *const $t, y: *mut $t) {
            if p.rank as usize > MAX_RANK {
                return;
            }
            // SAFETY: one element when not null (the contract).
            let v = if value.is_null() { p.value_bits as $t } else { unsafe { *value } };
            // SAFETY: forwarded from the contract.
            unsafe { pad(&p, x, y, v) }
        }
    };
}

pad_kernel!(pad_b4, u32, "4");
pad_kernel!(pad_b8, u64, "8");

/// # Safety
/// The `gather_nd_b*` contract for elements of type `T`; `I` is the index arithmetic (u32 when
/// the output's element count fits: the three divisions per element were u64 ones, which made
/// the kernel six times slower than its bandwidth).
#[inline(always)]
unsafe fn gather_nd<I: Index, T: Element + Default>(
    p: &GatherNdParams,
    x: *const T,
    idx: *const i64,
    y: *mut T,
) {
    let elems = p.batch * p.n * p.slice;
    let k = p.k as usize;
    let (slice, n) = (I::cast(p.slice), I::cast(p.n));
    // The data offset of output element `e`, `None` for an index out of range (a zero).
    let source = |e: u64| -> Option<u64> {
        let ii = I::cast(e);
        let (s, bj) = (ii % slice, ii / slice);
        let b: u64 = (bj / n).into();
        let bj: u64 = bj.into();
        let mut off = b * p.batch_stride + Into::<u64>::into(s);
        let mut ok = true;
        for t in 0..MAX_RANK {
            if t >= k {
                break;
            }
            // SAFETY: bj < batch * n and t < k: inside the `batch * n * k` indices.
            let raw = unsafe { *idx.add(bj as usize * k + t) };
            let n = at(&p.dims, t) as i64;
            let a = if raw < 0 { raw.wrapping_add(n) } else { raw };
            if a < 0 || a >= n {
                ok = false;
            } else {
                off += a as u64 * at(&p.strides, t);
            }
        }
        ok.then_some(off)
    };
    // Four elements a grid stride apart per round: their index and data loads all issue before
    // the first store. (Measured on the GNN's 410 MB gather: 1528 -> 1485 us, so the kernel is
    // not bound by those load latencies; what bounds it is not known yet.)
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < elems {
        macro_rules! round {
            ($($u:literal)*) => {{
                let e = [$(i + $u * stride),*];
                let src = [$(if e[$u] < elems { source(e[$u]) } else { None }),*];
                // SAFETY: with every index in range, `off` is inside its batch entry of `x`.
                let v = [$(match src[$u] { Some(off) => unsafe { T::load(x.add(off as usize)) }, None => T::default() }),*];
                $(
                    if e[$u] < elems {
                        // SAFETY: e < elems: an element of `y`.
                        unsafe { T::store(y.add(e[$u] as usize), v[$u]) };
                    }
                )*
            }};
        }
        round!(0 1 2 3);
        i += 4 * stride;
    }
}

/// [`gather_nd`] with its index arithmetic in u32 where the output's element count fits.
///
/// # Safety
/// As [`gather_nd`].
#[inline(always)]
unsafe fn gather_nd_any<T: Element + Default>(p: &GatherNdParams, x: *const T, idx: *const i64, y: *mut T) {
    // SAFETY: forwarded.
    unsafe {
        if p.batch * p.n * p.slice <= u32::MAX as u64 {
            gather_nd::<u32, T>(p, x, idx, y)
        } else {
            gather_nd::<u64, T>(p, x, idx, y)
        }
    }
}

macro_rules! gather_nd_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX GatherND of ", $bytes, "-byte elements ([`GatherNdParams`]).")]
        ///
        /// # Safety
        /// `x` holds `batch * batch_stride` elements laid out so that every in-range index tuple
        /// plus `slice` stays inside its batch entry; `idx` holds `batch * n * k` i64; `y` holds
        /// `batch * n * slice` elements and overlaps neither.
        ///
        /// # Parameters
        /// `p`: the view; `x`: data; `idx`: index tuples; `y`: the output.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements
        /// (neighbouring threads copy neighbouring elements of one slice).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: GatherNdParams,
            x: *const $t,
            idx: *const i64,
            y: *mut $t,
        ) {
            if p.k == 0 || p.k as usize > MAX_RANK || p.slice == 0 || p.n == 0 {
                return;
            }
            // SAFETY: forwarded from the contract.
            unsafe { gather_nd_any(&p, x, idx, y) }
        }
    };
}

gather_nd_kernel!(gather_nd_b1, u8, "1");
gather_nd_kernel!(gather_nd_b4, u32, "4");
gather_nd_kernel!(gather_nd_b8, u64, "8");

/// ONNX GatherND of slices that are whole 16-byte vectors ([`GatherNdParams`] in vectors: slice,
/// batch stride and index strides counted in 16 bytes; the planner's choice for rows of four or
/// more f32, as a GNN's `x[edge_index]` gathers). Where `x` or `y` is not 16-byte aligned the
/// vectors move as four 4-byte words.
///
/// # Safety
/// The `gather_nd_b*` contract with 16-byte elements; `x` and `y` are 4-byte aligned.
///
/// # Parameters
/// `p`: the view in vectors; `x`: data; `idx`: index tuples; `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output vectors.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gather_nd_b16(
    p: GatherNdParams,
    x: *const Vec16,
    idx: *const i64,
    y: *mut Vec16,
) {
    if p.k == 0 || p.k as usize > MAX_RANK || p.slice == 0 || p.n == 0 {
        return;
    }
    // SAFETY: forwarded from the contract; `[u32; 4]` has the layout of `Vec16` at 4-byte alignment.
    unsafe {
        if (x as usize | y as usize) % 16 == 0 {
            gather_nd_any::<Vec16>(&p, x, idx, y)
        } else {
            gather_nd_any::<[u32; 4]>(&p, x.cast(), idx, y.cast())
        }
    }
}

/// # Safety
/// The `reverse_sequence_b*` contract for elements of type `T`, `bad` the fill of an entry whose
/// length is out of range.
#[inline(always)]
unsafe fn reverse_sequence<T: Copy>(
    p: &ReverseSequenceParams,
    x: *const T,
    lens: *const i64,
    y: *mut T,
    bad: T,
) {
    let total = p.d0 * p.d1 * p.inner;
    let time = if p.batch_axis == 0 { p.d1 } else { p.d0 };
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (i, i1, i0) = (e % p.inner, (e / p.inner) % p.d1, e / (p.inner * p.d1));
        let (b, t) = if p.batch_axis == 0 { (i0, i1) } else { (i1, i0) };
        // SAFETY: b is below the batch extent: one length per batch entry (the contract).
        let len = unsafe { *lens.add(b as usize) };
        let v = if len < 0 || len as u64 > time {
            bad
        } else {
            let src_t = if t < len as u64 { len as u64 - 1 - t } else { t };
            let (s0, s1) = if p.batch_axis == 0 { (b, src_t) } else { (src_t, b) };
            // SAFETY: src_t < time: inside x.
            unsafe { *x.add(((s0 * p.d1 + s1) * p.inner + i) as usize) }
        };
        // SAFETY: e < total: inside y.
        unsafe { *y.add(e as usize) = v };
        e += step;
    }
}

macro_rules! reverse_sequence_kernel {
    ($name:ident, $t:ty, $bad:expr, $bytes:literal) => {
        #[doc = concat!("ONNX ReverseSequence of ", $bytes, "-byte elements ([`ReverseSequenceParams`]).")]
        ///
        /// # Safety
        /// `x` and `y` hold `d0 * d1 * inner` elements (no overlap: elements move between time
        /// steps); `lens` holds one i64 per batch entry.
        ///
        /// # Parameters
        /// `p`; input `x`; the sequence lengths `lens`; output `y`.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the elements.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: ReverseSequenceParams,
            x: *const $t,
            lens: *const i64,
            y: *mut $t,
        ) {
            // SAFETY: forwarded from the contract.
            unsafe { reverse_sequence(&p, x, lens, y, $bad) }
        }
    };
}

reverse_sequence_kernel!(reverse_sequence_b4, u32, 0x7fc0_0000, "4");
reverse_sequence_kernel!(reverse_sequence_b8, u64, 0, "8");
