//! f32 elementwise kernels: binary ops with NumPy broadcasting and unary ops, grid-stride loops,
//! 16-byte vector accesses when every pointer is 16-byte aligned; a few f64 unary ops.
//!
//! Every kernel reads and writes only indices `< elems` (and, for broadcast operands, offsets built
//! from the host-checked shape and strides). The scalar function each kernel applies lives in
//! [`crate::math`], which the host tests against f64.

use crate::abi::{BinaryParams, MAX_RANK, UnaryParams};
use crate::intrinsics::{
    F32x4, block_dim_x, block_idx_x, global_thread_x, grid_dim_x, grid_threads_x, thread_idx_x,
};
use crate::math;

/// Vectors of four f32 each thread keeps in flight per loop trip: enough independent loads to cover
/// HBM latency at a modest grid.
const UNROLL: u64 = 4;

#[inline(always)]
fn map4(v: F32x4, f: &impl Fn(f32) -> f32) -> F32x4 {
    let [a, b, c, d] = v.0;
    F32x4([f(a), f(b), f(c), f(d)])
}

#[inline(always)]
fn zip4(x: F32x4, y: F32x4, f: &impl Fn(f32, f32) -> f32) -> F32x4 {
    let ([a, b, c, d], [p, q, r, t]) = (x.0, y.0);
    F32x4([f(a, p), f(b, q), f(c, r), f(d, t)])
}

#[inline(always)]
fn aligned16(p: usize) -> bool {
    p & 15 == 0
}

/// `y[i] = f(a[i], b[i])` for contiguous same-shape operands.
///
/// # Safety
/// `a`, `b` and `y` hold `elems` f32 each; `y` does not partially overlap `a` or `b` (it may equal one).
#[inline(always)]
unsafe fn binary_contiguous(
    elems: u64,
    a: *const f32,
    b: *const f32,
    y: *mut f32,
    f: impl Fn(f32, f32) -> f32,
) {
    let tid = global_thread_x();
    let stride = grid_threads_x();
    let mut scalar_from = 0;
    if aligned16(a as usize | b as usize | y as usize) {
        let (a4, b4, y4) = (a as *const F32x4, b as *const F32x4, y as *mut F32x4);
        let n4 = elems / 4;
        let mut i = tid;
        while i + (UNROLL - 1) * stride < n4 {
            // Four independent vector loads per operand before any use. Written out rather than
            // looped over an array: when `f` is large LLVM does not unroll such a loop, and the
            // array then lives in local memory.
            let at = |k: u64| (i + k * stride) as usize;
            // SAFETY: i + 3 * stride < n4, so every vector lies inside `elems`.
            let (a0, a1, a2, a3) =
                unsafe { (*a4.add(at(0)), *a4.add(at(1)), *a4.add(at(2)), *a4.add(at(3))) };
            // SAFETY: as above.
            let (b0, b1, b2, b3) =
                unsafe { (*b4.add(at(0)), *b4.add(at(1)), *b4.add(at(2)), *b4.add(at(3))) };
            // SAFETY: as above.
            unsafe {
                *y4.add(at(0)) = zip4(a0, b0, &f);
                *y4.add(at(1)) = zip4(a1, b1, &f);
                *y4.add(at(2)) = zip4(a2, b2, &f);
                *y4.add(at(3)) = zip4(a3, b3, &f);
            }
            i += UNROLL * stride;
        }
        while i < n4 {
            // SAFETY: i < n4.
            unsafe { *y4.add(i as usize) = zip4(*a4.add(i as usize), *b4.add(i as usize), &f) };
            i += stride;
        }
        scalar_from = n4 * 4;
    }
    let mut i = scalar_from + tid;
    while i < elems {
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = f(*a.add(i as usize), *b.add(i as usize)) };
        i += stride;
    }
}

/// Element offsets of output index `i` into `a` and `b`. `I` is u32 when every index fits, which
/// makes the per-dimension division several times cheaper than u64.
#[inline(always)]
pub(crate) fn broadcast_offsets<I>(p: &BinaryParams, i: I) -> (I, I)
where
    I: Copy + TryFrom<u64> + core::ops::Rem<Output = I> + core::ops::Div<Output = I>,
    I: core::ops::Mul<Output = I> + core::ops::Add<Output = I> + Default,
{
    let (mut oa, mut ob) = (I::default(), I::default());
    let cast = |v: u64| I::try_from(v).unwrap_or_default();
    crate::movement::unravel(
        i,
        p.rank,
        |d| cast(p.out_shape[d]),
        |d, idx| {
            oa = oa + idx * cast(p.a_strides[d]);
            ob = ob + idx * cast(p.b_strides[d]);
        },
    );
    (oa, ob)
}

/// Innermost dimension from which the broadcast path walks rows (one block per row, threads along
/// it) instead of flat indices: the division by the shape then happens once per row, and the
/// accesses along the row are coalesced. Only when there are rows for every block of the grid: a
/// scalar broadcast collapses to one row of every element, which one block would walk alone
/// (measured on the H200: 140 us instead of a few for the 524k-element `q * scale` of a GPT-2
/// export's attention at batch 16).
const ROW_MODE_MIN_INNER: u64 = 128;

/// `y[i] = f(a[ia], b[ib])` with broadcast offsets.
///
/// # Safety
/// `y` holds `p.elems` f32; every offset the shape and strides produce is inside `a` and `b` (the
/// host builds them from the operands' shapes).
#[inline(always)]
unsafe fn binary_broadcast(
    p: &BinaryParams,
    a: *const f32,
    b: *const f32,
    y: *mut f32,
    f: impl Fn(f32, f32) -> f32,
) {
    let small = p.elems <= u32::MAX as u64 && max_offset(p) <= u32::MAX as u64;
    let offsets = |i: u64| {
        if small {
            let (oa, ob) = broadcast_offsets::<u32>(p, i as u32);
            (oa as u64, ob as u64)
        } else {
            broadcast_offsets::<u64>(p, i)
        }
    };
    let inner = p.out_shape[MAX_RANK - 1];
    if inner >= ROW_MODE_MIN_INNER && p.elems / inner >= grid_dim_x() as u64 {
        let (sa, sb) = (p.a_strides[MAX_RANK - 1], p.b_strides[MAX_RANK - 1]);
        let rows = p.elems / inner;
        let (t, threads) = (thread_idx_x() as u64, block_dim_x() as u64);
        let mut row = block_idx_x() as u64;
        while row < rows {
            let start = row * inner;
            let (ra, rb) = offsets(start);
            let mut j = t;
            while j + (UNROLL - 1) * threads < inner {
                let mut v = [0f32; UNROLL as usize];
                for (k, slot) in v.iter_mut().enumerate() {
                    let jk = j + k as u64 * threads;
                    // SAFETY: jk < inner: offsets of row elements are inside the operands.
                    *slot = unsafe { f(*a.add((ra + jk * sa) as usize), *b.add((rb + jk * sb) as usize)) };
                }
                for (k, r) in v.iter().enumerate() {
                    // SAFETY: start + jk < elems.
                    unsafe { *y.add((start + j + k as u64 * threads) as usize) = *r };
                }
                j += UNROLL * threads;
            }
            while j < inner {
                // SAFETY: j < inner, as above.
                unsafe {
                    *y.add((start + j) as usize) =
                        f(*a.add((ra + j * sa) as usize), *b.add((rb + j * sb) as usize))
                };
                j += threads;
            }
            row += grid_dim_x() as u64;
        }
        return;
    }
    let mut i = global_thread_x();
    let stride = grid_threads_x();
    while i < p.elems {
        let (oa, ob) = offsets(i);
        // SAFETY: offsets are inside the operands (contract above); i < elems.
        unsafe { *y.add(i as usize) = f(*a.add(oa as usize), *b.add(ob as usize)) };
        i += stride;
    }
}

/// Largest element offset any operand is read at (so the u32 path is only taken when it is exact).
#[inline(always)]
fn max_offset(p: &BinaryParams) -> u64 {
    let first = MAX_RANK - p.rank as usize;
    let mut m = 0u64;
    for d in 0..MAX_RANK {
        // Constant bounds, so the parameter arrays stay indexed by constants.
        if d >= first {
            let last = p.out_shape[d].saturating_sub(1);
            m = m.saturating_add(last.saturating_mul(p.a_strides[d].max(p.b_strides[d])));
        }
    }
    m
}

#[inline(always)]
unsafe fn binary(p: &BinaryParams, a: *const f32, b: *const f32, y: *mut f32, f: impl Fn(f32, f32) -> f32) {
    // SAFETY: forwarded from the entry point's contract.
    unsafe {
        if p.rank == 0 { binary_contiguous(p.elems, a, b, y, f) } else { binary_broadcast(p, a, b, y, f) }
    }
}

/// `y[i] = f(x[i])` over contiguous operands.
///
/// # Safety
/// `x` and `y` hold `elems` f32; `y` equals `x` or does not overlap it.
#[inline(always)]
unsafe fn unary(elems: u64, x: *const f32, y: *mut f32, f: impl Fn(f32) -> f32) {
    let tid = global_thread_x();
    let stride = grid_threads_x();
    let mut scalar_from = 0;
    if aligned16(x as usize | y as usize) {
        let (x4, y4) = (x as *const F32x4, y as *mut F32x4);
        let n4 = elems / 4;
        let mut i = tid;
        while i + (UNROLL - 1) * stride < n4 {
            // Loads first, written out (see `binary_contiguous`).
            let at = |k: u64| (i + k * stride) as usize;
            // SAFETY: i + 3 * stride < n4.
            let (v0, v1, v2, v3) =
                unsafe { (*x4.add(at(0)), *x4.add(at(1)), *x4.add(at(2)), *x4.add(at(3))) };
            // SAFETY: as above.
            unsafe {
                *y4.add(at(0)) = map4(v0, &f);
                *y4.add(at(1)) = map4(v1, &f);
                *y4.add(at(2)) = map4(v2, &f);
                *y4.add(at(3)) = map4(v3, &f);
            }
            i += UNROLL * stride;
        }
        while i < n4 {
            // SAFETY: i < n4.
            unsafe { *y4.add(i as usize) = map4(*x4.add(i as usize), &f) };
            i += stride;
        }
        scalar_from = n4 * 4;
    }
    let mut i = scalar_from + tid;
    while i < elems {
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = f(*x.add(i as usize)) };
        i += stride;
    }
}

// Entry points. Binary kernels share one contract:
//
// # Safety
// `a`, `b` and `y` are device pointers valid for the elements [`BinaryParams`] describes; `y` does
// not partially overlap an operand.
//
// # Parameters
// `p`: layout (contiguous when `rank == 0`, else right-aligned shape and broadcast strides);
// `a`, `b`: f32 operands; `y`: f32 output, row-major contiguous, `p.elems` elements.
//
// # Thread mapping
// 1-D grid-stride loop over output elements (over 4-element vectors on the contiguous aligned
// path); broadcasts whose innermost dimension is at least 128 instead stride blocks over rows and
// threads along each row. Any grid and block size is correct; the host sizes the grid to fill the
// device.

/// `y = a + b` (f32, broadcasting). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn add_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::add) }
}

/// `y = a - b` (f32, broadcasting). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sub_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::sub) }
}

/// `y = a * b` (f32, broadcasting). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn mul_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::mul) }
}

/// `y = a / b` (f32, broadcasting). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn div_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::div) }
}

/// `y = a ^ b` (f32, broadcasting). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn pow_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::pow) }
}

/// `y = max(a, b)` (f32, broadcasting, NaN-propagating). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn max_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::max) }
}

/// `y = min(a, b)` (f32, broadcasting, NaN-propagating). See the binary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn min_f32(p: BinaryParams, a: *const f32, b: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { binary(&p, a, b, y, math::min) }
}

// Unary kernels share one contract:
//
// # Safety
// `x` and `y` are device pointers to `p.elems` f32 each; `y` equals `x` or does not overlap it.
//
// # Parameters
// `p.elems`: element count; `p.alpha`: LeakyRelu's slope (ignored by the others).
//
// # Thread mapping
// 1-D grid-stride loop, 4-element vectors when both pointers are 16-byte aligned.

/// `y = relu(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn relu_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::relu) }
}

/// `y = leaky_relu(x, p.alpha)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn leaky_relu_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    let alpha = p.alpha;
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, |v| math::leaky_relu(v, alpha)) }
}

/// `y = sigmoid(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sigmoid_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::sigmoid) }
}

/// `y = tanh(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn tanh_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::tanh) }
}

/// `y = e^x`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn exp_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::exp) }
}

/// `y = ln(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn log_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::log) }
}

/// `y = sqrt(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sqrt_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::sqrt) }
}

/// `y = |x|`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn abs_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::abs) }
}

/// `y = -x`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn neg_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::neg) }
}

/// `y = erf(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn erf_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::erf) }
}

/// `y = gelu(x)` (erf form). See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gelu_erf_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::gelu_erf) }
}

/// `y = gelu(x)` (tanh approximation). See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn gelu_tanh_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::gelu_tanh) }
}

/// `y = x * sigmoid(x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn silu_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::silu) }
}

/// `y = ln(1 + e^x)`. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn softplus_f32(p: UnaryParams, x: *const f32, y: *mut f32) {
    // SAFETY: the launch contract above.
    unsafe { unary(p.elems, x, y, math::softplus) }
}

/// `y[i] = f(x[i])` over contiguous f64 operands, one element per thread per trip.
///
/// # Safety
/// `x` and `y` hold `elems` f64; `y` equals `x` or does not overlap it.
#[inline(always)]
unsafe fn unary_f64(elems: u64, x: *const f64, y: *mut f64, f: impl Fn(f64) -> f64) {
    let stride = grid_threads_x();
    let mut i = global_thread_x();
    while i < elems {
        // SAFETY: i < elems.
        unsafe { *y.add(i as usize) = f(*x.add(i as usize)) };
        i += stride;
    }
}

// The f64 unary kernels share the unary contract above, with f64 operands and a scalar
// grid-stride loop (no vector path).

/// `y = relu(x)` of f64 (NaN passes through). See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn relu_f64(p: UnaryParams, x: *const f64, y: *mut f64) {
    // SAFETY: the launch contract above.
    unsafe { unary_f64(p.elems, x, y, |v| if v < 0.0 { 0.0 } else { v }) }
}

/// `y = e^x` of f64. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn exp_f64(p: UnaryParams, x: *const f64, y: *mut f64) {
    // SAFETY: the launch contract above.
    unsafe { unary_f64(p.elems, x, y, math::exp_f64) }
}

/// `y = ln(x)` of f64. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn log_f64(p: UnaryParams, x: *const f64, y: *mut f64) {
    // SAFETY: the launch contract above.
    unsafe { unary_f64(p.elems, x, y, math::log_f64) }
}

/// `y = sqrt(x)` of f64, correctly rounded. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sqrt_f64(p: UnaryParams, x: *const f64, y: *mut f64) {
    // SAFETY: the launch contract above.
    unsafe { unary_f64(p.elems, x, y, math::sqrt_f64) }
}

/// `y = |x|` of f64. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn abs_f64(p: UnaryParams, x: *const f64, y: *mut f64) {
    // SAFETY: the launch contract above.
    unsafe { unary_f64(p.elems, x, y, math::abs_f64) }
}

/// `y = -x` of f64. See the unary contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn neg_f64(p: UnaryParams, x: *const f64, y: *mut f64) {
    // SAFETY: the launch contract above.
    unsafe { unary_f64(p.elems, x, y, |v| -v) }
}
