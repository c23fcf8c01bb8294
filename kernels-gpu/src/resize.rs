//! ONNX Resize ([`ResizeParams`]): nearest for any element size, linear and cubic for f32.
//!
//! One thread per output element over a grid-stride loop. The axes copied unchanged contribute a
//! plain offset (`copy_strides`); each of the [`RESIZE_MAX_AXES`] interpolated slots maps its output
//! coordinate to input taps with the CPU reference's formulas in f64 (so nearest picks the same
//! input index and weights agree to rounding), then the element is the sum over the product of
//! the slots' taps, in the reference's order. Every array is indexed by constants (the tap loops
//! have constant trip counts and unroll; the rank loop goes through `at`), so nothing is copied to
//! local memory.

use crate::abi::{MAX_RANK, RESIZE_MAX_AXES, ResizeAxis, ResizeParams, resize_ctm, resize_nearest};
use crate::intrinsics::{floor_f64, global_thread_x, grid_threads_x};
use crate::movement::at;

/// Input coordinate of output coordinate `x` on axis `a`, or `None` when `tf_crop_and_resize`
/// lands outside the input (the reference's `source_coord`, term for term).
#[inline(always)]
fn source_coord(ctm: u32, x: u64, a: &ResizeAxis) -> Option<f64> {
    let (len_in, len_out, scale) = (a.in_len, a.out_len, a.scale);
    let (x, li) = (x as f64, len_in as f64);
    let lo = scale * li;
    Some(match ctm {
        resize_ctm::HALF_PIXEL => (x + 0.5) / scale - 0.5,
        resize_ctm::HALF_PIXEL_SYMMETRIC => {
            let adjustment = len_out as f64 / lo;
            li / 2.0 * (1.0 - adjustment) + (x + 0.5) / scale - 0.5
        }
        resize_ctm::PYTORCH_HALF_PIXEL if len_out > 1 => (x + 0.5) / scale - 0.5,
        resize_ctm::PYTORCH_HALF_PIXEL => 0.0,
        resize_ctm::ALIGN_CORNERS if len_out > 1 && lo != 1.0 => x * (li - 1.0) / (lo - 1.0),
        resize_ctm::ALIGN_CORNERS => 0.0,
        resize_ctm::ASYMMETRIC => x / scale,
        _ => {
            let (start, end) = (a.roi_start, a.roi_end);
            let c = if len_out > 1 && lo != 1.0 {
                start * (li - 1.0) + x * (end - start) * (li - 1.0) / (lo - 1.0)
            } else {
                0.5 * (start + end) * (li - 1.0)
            };
            if c < 0.0 || c > li - 1.0 {
                return None;
            }
            c
        }
    })
}

/// Output coordinate of element `i` on slot `a`.
#[inline(always)]
fn out_coord(i: u64, a: &ResizeAxis) -> u64 {
    (i / a.out_stride) % a.out_len
}

/// Clamps input index `i` into `[0, len)` and scales it by the stride.
#[inline(always)]
fn clamped(i: i64, a: &ResizeAxis) -> u64 {
    i.clamp(0, a.in_len as i64 - 1) as u64 * a.in_stride
}

/// Input offset (times the stride) that nearest mode picks on slot `a` for element `i`.
#[inline(always)]
fn nearest_tap(p: &ResizeParams, i: u64, a: &ResizeAxis) -> Option<u64> {
    let x = source_coord(p.ctm, out_coord(i, a), a)?;
    let x0 = floor_f64(x);
    let r = x - x0;
    let up = if r == 0.0 {
        false
    } else {
        match p.nearest_mode {
            resize_nearest::ROUND_PREFER_FLOOR => r > 0.5,
            resize_nearest::ROUND_PREFER_CEIL => r >= 0.5,
            resize_nearest::FLOOR => false,
            _ => true,
        }
    };
    Some(clamped(x0 as i64 + up as i64, a))
}

/// Keys' cubic convolution kernel with coefficient `a` (the reference's `cubic`).
#[inline(always)]
fn cubic(t: f64, a: f64) -> f64 {
    let t = if t < 0.0 { -t } else { t };
    if t <= 1.0 {
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    } else if t < 2.0 {
        ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    } else {
        0.0
    }
}

/// Taps of one axis: input offsets (times the stride) and normalized weights; linear uses the
/// first two.
type Taps = ([u64; 4], [f64; 4]);

/// `a[t]` through a match on `t` (constant indices, like `movement::at`).
#[inline(always)]
fn tap<X: Copy>(a: &[X; 4], t: usize) -> X {
    match t {
        0 => a[0],
        1 => a[1],
        2 => a[2],
        _ => a[3],
    }
}

/// `a[t] = v` through a match on `t`.
#[inline(always)]
fn set_tap<X: Copy>(a: &mut [X; 4], t: usize, v: X) {
    match t {
        0 => a[0] = v,
        1 => a[1] = v,
        2 => a[2] = v,
        _ => a[3] = v,
    }
}

/// The `T` taps (2: linear, 4: cubic) of slot `a` for element `i`, or `None` when the element
/// extrapolates (the reference's `taps` with scale factor 1, zero weights kept).
#[inline(always)]
fn filter_taps<const T: usize>(p: &ResizeParams, i: u64, a: &ResizeAxis) -> Option<Taps> {
    let x = source_coord(p.ctm, out_coord(i, a), a)?;
    let x0 = floor_f64(x);
    let r = x - x0;
    let start = 1 - T as i64 / 2;
    let last = a.in_len as i64 - 1;
    let (mut idx, mut w) = ([0u64; 4], [0f64; 4]);
    let mut total = 0.0;
    for t in 0..T {
        let j = start + t as i64;
        let d = j as f64 - r;
        let mut wt = if T == 4 {
            cubic(d, p.cubic_coeff_a)
        } else {
            let m = 1.0 - if d < 0.0 { -d } else { d };
            if m > 0.0 { m } else { 0.0 }
        };
        let s = x0 as i64 + j;
        if p.exclude_outside != 0 && (s < 0 || s > last) {
            wt = 0.0;
        }
        total += wt;
        set_tap(&mut idx, t, clamped(s, a));
        set_tap(&mut w, t, wt);
    }
    for wt in &mut w {
        *wt /= total;
    }
    Some((idx, w))
}

/// Input offset of the copied axes of element `i`.
#[inline(always)]
fn copy_base(p: &ResizeParams, i: u64) -> u64 {
    let first = MAX_RANK - p.rank as usize;
    let (mut rem, mut off) = (i, 0u64);
    let mut d = MAX_RANK;
    while d > 0 {
        d -= 1;
        if d < first {
            break;
        }
        let dim = at(&p.out_shape, d);
        off += (rem % dim) * at(&p.copy_strides, d);
        rem /= dim;
    }
    off
}

/// # Safety
/// The `resize_nearest_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn nearest<T: Copy>(p: &ResizeParams, x: *const T, y: *mut T, value: T) {
    let [a0, a1, a2] = &p.axes;
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let taps = (nearest_tap(p, i, a0), nearest_tap(p, i, a1), nearest_tap(p, i, a2));
        let v = match taps {
            (Some(o0), Some(o1), Some(o2)) => {
                // SAFETY: every tap is clamped inside its axis, so the offset is inside `x`.
                unsafe { *x.add((copy_base(p, i) + o0 + o1 + o2) as usize) }
            }
            _ => value,
        };
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = v };
        i += stride;
    }
}

macro_rules! nearest_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX Resize, nearest mode, ", $bytes, "-byte elements ([`ResizeParams`]).")]
        ///
        /// # Safety
        /// `x` holds the contiguous input (every interpolated `in_len` at least 1, strides and
        /// `copy_strides` those of the input), `y` the `p.elems` output elements, not overlapping
        /// `x`.
        ///
        /// # Parameters
        /// `p`: shapes, per-axis scales and modes; `x`: the input; `y`: the output.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: ResizeParams, x: *const $t, y: *mut $t) {
            if p.rank as usize > MAX_RANK {
                return;
            }
            // SAFETY: forwarded from the contract.
            unsafe { nearest(&p, x, y, p.value_bits as $t) }
        }
    };
}

nearest_kernel!(resize_nearest_b1, u8, "1");
nearest_kernel!(resize_nearest_b2, u16, "2");
nearest_kernel!(resize_nearest_b4, u32, "4");
nearest_kernel!(resize_nearest_b8, u64, "8");

/// # Safety
/// The `resize_linear_f32` / `resize_cubic_f32` contract, `T` taps per axis.
#[inline(always)]
unsafe fn filtered<const T: usize>(p: &ResizeParams, x: *const f32, y: *mut f32) {
    let [a0, a1, a2] = &p.axes;
    let value = f32::from_bits(p.value_bits as u32);
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let taps = (filter_taps::<T>(p, i, a0), filter_taps::<T>(p, i, a1), filter_taps::<T>(p, i, a2));
        let v = match taps {
            (Some((i0, w0)), Some((i1, w1)), Some((i2, w2))) => {
                let base = copy_base(p, i);
                let mut acc = 0.0f64;
                // The reference's order: lexicographic over the axes' taps, zero weights skipped,
                // the weight a product in axis order.
                for a in 0..T {
                    let wa = tap(&w0, a);
                    if wa == 0.0 {
                        continue;
                    }
                    for b in 0..T {
                        let wb = tap(&w1, b);
                        if wb == 0.0 {
                            continue;
                        }
                        let wab = wa * wb;
                        let off = base + tap(&i0, a) + tap(&i1, b);
                        for c in 0..T {
                            let wc = tap(&w2, c);
                            if wc == 0.0 {
                                continue;
                            }
                            // SAFETY: every tap is clamped inside its axis.
                            let xv = unsafe { *x.add((off + tap(&i2, c)) as usize) };
                            acc += wab * wc * xv as f64;
                        }
                    }
                }
                acc as f32
            }
            _ => value,
        };
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = v };
        i += stride;
    }
}

/// ONNX Resize, linear mode (n-linear over up to [`RESIZE_MAX_AXES`] axes), f32
/// ([`ResizeParams`]).
///
/// # Safety
/// `x` holds the contiguous input (every interpolated `in_len` at least 1), `y` the `p.elems`
/// output elements, not overlapping `x`.
///
/// # Parameters
/// `p`: shapes, per-axis scales and modes; `x`: the input; `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn resize_linear_f32(p: ResizeParams, x: *const f32, y: *mut f32) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    // SAFETY: forwarded from the contract.
    unsafe { filtered::<2>(&p, x, y) }
}

/// ONNX Resize, cubic mode (`cubic_coeff_a`, `exclude_outside`; up to [`RESIZE_MAX_AXES`] axes),
/// f32 ([`ResizeParams`]).
///
/// # Safety
/// `x` holds the contiguous input (every interpolated `in_len` at least 1), `y` the `p.elems`
/// output elements, not overlapping `x`.
///
/// # Parameters
/// `p`: shapes, per-axis scales and modes; `x`: the input; `y`: the output.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn resize_cubic_f32(p: ResizeParams, x: *const f32, y: *mut f32) {
    if p.rank as usize > MAX_RANK {
        return;
    }
    // SAFETY: forwarded from the contract.
    unsafe { filtered::<4>(&p, x, y) }
}
