//! ONNX Resize ([`ResizeParams`]): nearest for any element size, linear and cubic for f32.
//!
//! One thread per output element over a grid-stride loop. The axes copied unchanged contribute a
//! plain offset (`copy_strides`); each of the [`RESIZE_MAX_AXES`] interpolated slots maps its output
//! coordinate to input taps with the CPU reference's formulas in f64 (so nearest picks the same
//! input index and weights agree to rounding), then the element is the sum over the product of
//! the slots' taps, in the reference's order. Linear and cubic filters are widened by
//! `1 / filter_scale` (antialias), so the tap counts are run-time values: tap weights are
//! recomputed where they are used rather than stored, and the parameter arrays are read with
//! constant indices (`at`), so nothing lives in local memory.

use crate::abi::{MAX_RANK, ResizeAxis, ResizeParams, resize_ctm, resize_nearest};
use crate::intrinsics::{floor_f64, global_thread_x, grid_threads_x};
use crate::movement::{at, unravel};

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
pub(crate) fn cubic(t: f64, a: f64) -> f64 {
    let t = if t < 0.0 { -t } else { t };
    if t <= 1.0 {
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0
    } else if t < 2.0 {
        ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a
    } else {
        0.0
    }
}

/// The filter of one axis for one output coordinate (the reference's `taps`): taps
/// `x0 + j` for `j` in `start..=1 - start`, tap `j` weighing `filter(s · (j − r)) / total`.
/// Weights are recomputed where they are used, so no per-tap array exists.
#[derive(Clone, Copy)]
struct Filter {
    x0: i64,
    r: f64,
    /// `min(scale, 1)` under antialias, else 1.
    s: f64,
    start: i64,
    total: f64,
}

impl Filter {
    /// The filter of slot `a` for element `i`, or `None` when the element extrapolates.
    #[inline(always)]
    fn new<const CUBIC: bool>(p: &ResizeParams, i: u64, a: &ResizeAxis) -> Option<Self> {
        let x = source_coord(p.ctm, out_coord(i, a), a)?;
        let x0 = floor_f64(x);
        let support = if CUBIC { 2.0 } else { 1.0 };
        let s = a.filter_scale;
        let mut f =
            Filter { x0: x0 as i64, r: x - x0, s, start: floor_f64(-support / s) as i64 + 1, total: 1.0 };
        let mut total = 0.0;
        let mut j = f.start;
        while j <= 1 - f.start {
            total += f.raw::<CUBIC>(p, a, j);
            j += 1;
        }
        f.total = total;
        Some(f)
    }

    /// Unnormalized weight of tap `j` (zero outside the input under `exclude_outside`).
    #[inline(always)]
    fn raw<const CUBIC: bool>(&self, p: &ResizeParams, a: &ResizeAxis, j: i64) -> f64 {
        let t = self.s * (j as f64 - self.r);
        let i = self.x0 + j;
        if p.exclude_outside != 0 && (i < 0 || i > a.in_len as i64 - 1) {
            return 0.0;
        }
        if CUBIC {
            cubic(t, p.cubic_coeff_a)
        } else {
            let m = 1.0 - if t < 0.0 { -t } else { t };
            if m > 0.0 { m } else { 0.0 }
        }
    }

    /// Normalized weight of tap `j`.
    #[inline(always)]
    fn weight<const CUBIC: bool>(&self, p: &ResizeParams, a: &ResizeAxis, j: i64) -> f64 {
        self.raw::<CUBIC>(p, a, j) / self.total
    }

    /// Input offset (times the stride) of tap `j`, clamped into the axis.
    #[inline(always)]
    fn offset(&self, a: &ResizeAxis, j: i64) -> u64 {
        clamped(self.x0 + j, a)
    }
}

/// Input offset of the copied axes of element `i`.
#[inline(always)]
fn copy_base(p: &ResizeParams, i: u64) -> u64 {
    let mut off = 0u64;
    unravel(i, p.rank, |d| at(&p.out_shape, d), |d, c| off += c * at(&p.copy_strides, d));
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
/// The `resize_linear_f32` / `resize_cubic_f32` contract.
#[inline(always)]
unsafe fn filtered<const CUBIC: bool>(p: &ResizeParams, x: *const f32, y: *mut f32) {
    let [a0, a1, a2] = &p.axes;
    let value = f32::from_bits(p.value_bits as u32);
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < p.elems {
        let filters =
            (Filter::new::<CUBIC>(p, i, a0), Filter::new::<CUBIC>(p, i, a1), Filter::new::<CUBIC>(p, i, a2));
        let v = match filters {
            (Some(f0), Some(f1), Some(f2)) => {
                let base = copy_base(p, i);
                let mut acc = 0.0f64;
                // The reference's order: lexicographic over the axes' taps, zero weights skipped,
                // the weight a product in axis order.
                let mut j0 = f0.start;
                while j0 <= 1 - f0.start {
                    let w0 = f0.weight::<CUBIC>(p, a0, j0);
                    if w0 != 0.0 {
                        let off0 = base + f0.offset(a0, j0);
                        let mut j1 = f1.start;
                        while j1 <= 1 - f1.start {
                            let w1 = f1.weight::<CUBIC>(p, a1, j1);
                            if w1 != 0.0 {
                                let (w01, off1) = (w0 * w1, off0 + f1.offset(a1, j1));
                                let mut j2 = f2.start;
                                while j2 <= 1 - f2.start {
                                    let w2 = f2.weight::<CUBIC>(p, a2, j2);
                                    if w2 != 0.0 {
                                        // SAFETY: every tap is clamped inside its axis.
                                        let xv = unsafe { *x.add((off1 + f2.offset(a2, j2)) as usize) };
                                        acc += w01 * w2 * xv as f64;
                                    }
                                    j2 += 1;
                                }
                            }
                            j1 += 1;
                        }
                    }
                    j0 += 1;
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
    unsafe { filtered::<false>(&p, x, y) }
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
    unsafe { filtered::<true>(&p, x, y) }
}
