//! Reductions: the ONNX `Reduce*` family of f32 ([`reduce_f32`]) and f64 ([`reduce_f64`]) and
//! ArgMax / ArgMin of f32 ([`arg_reduce_f32`]), over any set of axes of a contiguous input
//! ([`ReduceParams`]: kept and reduced dims, collapsed by the host).
//!
//! A group (`group::each_item`) of 1, 32 or `blockDim.x` threads owns one output at a time: a
//! thread per output when the innermost input dim is kept (neighbouring threads read neighbouring
//! elements), a warp or a block when it is reduced (lanes stride the reduced elements). Each thread
//! folds its share in f32, then the group combines by butterfly shuffles and shared memory.
//!
//! Every load is at `offset(o, kept) + offset(j, reduced)` with `o < outputs` and `j < len`, which
//! the host's strides keep inside the input. Index math is u64; a single reduced dim (the common
//! case: one axis, or adjacent axes merged) needs no division per element.

use core::ops::{Add, Div, Mul, Neg, Sub};

use crate::abi::{MAX_RANK, ReduceOp, ReduceParams};
use crate::group::{Group, Lane, each_item};
use crate::math::{self, Nan, max, min};
use crate::movement::unravel;

/// An element type the `Reduce*` kernel folds in (f32 with the kernels' own math, f64 with
/// `libm`'s correctly rounded or sub-ulp functions).
trait Real:
    Lane
    + Nan
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const INF: Self;
    fn from_len(n: u64) -> Self;
    fn is_finite(self) -> bool;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    /// `self * b + c` with one rounding.
    fn fma(self, b: Self, c: Self) -> Self;
}

/// `impl Real` for a float type with the functions that compute its operations.
macro_rules! real {
    ($t:ident, abs: $abs:path, sqrt: $sqrt:path, exp: $exp:path, ln: $ln:path, fma: $fma:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const INF: Self = $t::INFINITY;
            #[inline(always)]
            fn from_len(n: u64) -> Self {
                n as $t
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $abs(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                $sqrt(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                $ln(self)
            }
            #[inline(always)]
            fn fma(self, b: Self, c: Self) -> Self {
                $fma(self, b, c)
            }
        }
    };
}

real!(f32, abs: math::abs, sqrt: math::sqrt, exp: math::exp, ln: math::log, fma: math::fma);
real!(f64, abs: math::abs_f64, sqrt: math::sqrt_f64, exp: math::exp_f64, ln: math::log_f64, fma: libm::fma);

/// Offset of index `i` unravelled over the `rank` right-aligned dims of `shape` with `strides`.
/// The loop has a constant trip count with an early exit, so the arrays stay constant-indexed.
#[inline(always)]
fn offset(i: u64, rank: u32, shape: &[u64; MAX_RANK], strides: &[u64; MAX_RANK]) -> u64 {
    let mut off = 0;
    // Dims are >= 1 (the host drops empty dims when it launches over them).
    unravel(i, rank, |d| shape[d].max(1), |d, c| off += c * strides[d]);
    off
}

/// Reads the reduced elements of one output: `at(j)` is the input element `j` of the output whose
/// kept offset is `base`.
#[derive(Clone, Copy)]
struct Row<'a, T> {
    p: &'a ReduceParams,
    x: *const T,
    base: u64,
}

impl<T: Copy> Row<'_, T> {
    /// The reduced element `j < len`.
    #[inline(always)]
    fn at(&self, j: u64) -> T {
        let p = self.p;
        let off = if p.red_rank == 1 {
            j * p.red_strides[MAX_RANK - 1]
        } else {
            offset(j, p.red_rank, &p.red_shape, &p.red_strides)
        };
        // SAFETY: j < len and the output's kept offset: inside `x` (the launch contract).
        unsafe { *self.x.add((self.base + off) as usize) }
    }

    /// `add` folded over this thread's share (`j = g.t, g.t + g.size, ...`) from `init`.
    #[inline(always)]
    fn fold(&self, g: Group, init: T, add: impl Fn(T, T) -> T) -> T {
        let mut acc = init;
        let mut j = g.t;
        while j < self.p.len {
            acc = add(acc, self.at(j));
            j += g.size;
        }
        acc
    }
}

/// The maximum of the non-NaN values (`b` when `a` is NaN and vice versa).
#[inline(always)]
fn max_number<T: Real>(a: T, b: T) -> T {
    if b > a || a.is_nan() { b } else { a }
}

/// One output of [`reduce_f32`] / [`reduce_f64`]: the group's reduction of the row.
/// Group-collective.
#[inline(always)]
fn reduce_row<T: Real>(op: ReduceOp, g: Group, r: Row<'_, T>) -> T {
    let sum = |a: T, b: T| a + b;
    let total = |v: T| g.reduce(v, sum);
    let (zero, ninf) = (T::ZERO, -T::INF);
    match op {
        ReduceOp::Sum => total(r.fold(g, zero, sum)),
        ReduceOp::Mean => total(r.fold(g, zero, sum)) / T::from_len(r.p.len),
        ReduceOp::Max => g.reduce(r.fold(g, ninf, max), max),
        ReduceOp::Min => g.reduce(r.fold(g, T::INF, min), min),
        ReduceOp::MaxNumber => g.reduce(r.fold(g, ninf, max_number), max_number),
        ReduceOp::Prod => g.reduce(r.fold(g, T::ONE, |a, v| a * v), |a, b| a * b),
        ReduceOp::L1 => total(r.fold(g, zero, |a, v| a + v.abs())),
        ReduceOp::L2 => total(r.fold(g, zero, |a, v| v.fma(v, a))).sqrt(),
        ReduceOp::SumSquare => total(r.fold(g, zero, |a, v| v.fma(v, a))),
        ReduceOp::LogSum => total(r.fold(g, zero, sum)).ln(),
        ReduceOp::LogSumExp => {
            // `m` has the same bits on every thread of the group, so the branch is uniform.
            let m = g.reduce(r.fold(g, ninf, max), max);
            if m.is_finite() {
                m + total(r.fold(g, zero, |a, v| a + (v - m).exp())).ln()
            } else {
                // NaN, +inf, or every element -inf (or none): ln Σ e^x is m itself.
                m
            }
        }
    }
}

/// # Safety
/// The [`reduce_f32`] contract, with `T` the element type.
#[inline(always)]
unsafe fn reduce<T: Real>(p: &ReduceParams, x: *const T, y: *mut T) {
    if p.kept_rank as usize > MAX_RANK || p.red_rank as usize > MAX_RANK {
        return;
    }
    let op = ReduceOp::from_code(p.op);
    each_item(p.outputs, p.threads_per_row, |g, o| {
        let base = offset(o, p.kept_rank, &p.kept_shape, &p.kept_strides);
        let r = Row { p, x, base };
        let v = reduce_row(op, g, r);
        if g.t == 0 {
            // SAFETY: o < outputs.
            unsafe { *y.add(o as usize) = v };
        }
    });
}

// Reduction launch contract, shared by the two kernels below.
//
// # Safety
// `x` holds every element the parameters address: for `o < outputs`, `j < len`,
// `offset(o, kept) + offset(j, reduced)` (the host builds them from a contiguous input);
// `kept_rank, red_rank <= MAX_RANK`; `y` holds `outputs` elements and does not overlap `x`.
// `threads_per_row` is 1, `REDUCE_WARP` (block size a multiple of 32) or the block size (a multiple
// of 32, at most 1024, with `REDUCE_SHARED_BYTES` of dynamic shared memory).
//
// # Parameters
// [`ReduceParams`]: the kept and reduced dims and their input strides.
//
// # Thread mapping
// 1-D grid of 1-D blocks. Groups of `threads_per_row` threads (a thread, a warp, or the block)
// grid-stride over the outputs; inside a group, thread `t` takes reduced elements
// `t, t + size, ...`; the group's thread 0 writes the output.

/// ONNX `Reduce*` of f32: output `o` is the [`ReduceOp`] `p.op` over its `p.len` elements.
///
/// # Safety
/// The reduction launch contract above.
///
/// # Parameters
/// `p` ([`ReduceParams`], `select_last` unused), input `x`, output `y` (`p.outputs` f32).
///
/// # Thread mapping
/// See the reduction launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reduce_f32(p: ReduceParams, x: *const f32, y: *mut f32) {
    // SAFETY: forwarded from the contract.
    unsafe { reduce(&p, x, y) }
}

/// ONNX `Reduce*` of f64, folded in f64: as [`reduce_f32`] with f64 input and output (the
/// logarithm and exponential from `libm`).
///
/// # Safety
/// The reduction launch contract above, with f64 elements.
///
/// # Parameters
/// `p` ([`ReduceParams`], `select_last` unused), input `x`, output `y` (`p.outputs` f64).
///
/// # Thread mapping
/// See the reduction launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn reduce_f64(p: ReduceParams, x: *const f64, y: *mut f64) {
    // SAFETY: forwarded from the contract.
    unsafe { reduce(&p, x, y) }
}

/// A candidate extreme: its value and its index along the axis (`u32::MAX`: no element yet).
type Candidate = (f32, u32);

/// The better of two candidates: NaN beats numbers (as in numpy), then the larger (`max`) or
/// smaller value, then the lower index (the higher with `last`). Commutative and associative, so
/// every lane of a butterfly ends with the same candidate.
#[inline(always)]
fn better(a: Candidate, b: Candidate, max: bool, last: bool) -> Candidate {
    if a.1 == u32::MAX {
        return b;
    }
    if b.1 == u32::MAX {
        return a;
    }
    let (an, bn) = (a.0.is_nan(), b.0.is_nan());
    let tie = if last { b.1 > a.1 } else { b.1 < a.1 };
    let b_wins = if an != bn {
        bn
    } else if an || a.0 == b.0 {
        tie
    } else if max {
        b.0 > a.0
    } else {
        b.0 < a.0
    };
    if b_wins { b } else { a }
}

/// # Safety
/// The [`arg_reduce_f32`] contract.
#[inline(always)]
unsafe fn arg_reduce(p: &ReduceParams, x: *const f32, y: *mut i64) {
    let (max, last) = (p.op == 0, p.select_last != 0);
    each_item(p.outputs, p.threads_per_row, |g, o| {
        let base = offset(o, p.kept_rank, &p.kept_shape, &p.kept_strides);
        let r = Row { p, x, base };
        let mut acc: Candidate = (0.0, u32::MAX);
        let mut j = g.t;
        while j < p.len {
            acc = better(acc, (r.at(j), j as u32), max, last);
            j += g.size;
        }
        let best = g.reduce(acc, |a, b| better(a, b, max, last));
        if g.t == 0 {
            // An empty axis (which the host refuses) would leave no candidate: index 0.
            let idx = if best.1 == u32::MAX { 0 } else { best.1 as i64 };
            // SAFETY: o < outputs.
            unsafe { *y.add(o as usize) = idx };
        }
    });
}

/// ONNX ArgMax (`p.op == 0`) / ArgMin (`p.op == 1`) of f32 along one axis, i64 indices: the first
/// extreme element (the last with `p.select_last`); NaN counts as the extreme.
///
/// # Safety
/// The reduction launch contract above; additionally `p.len < u32::MAX`.
///
/// # Parameters
/// `p` ([`ReduceParams`]: kept `[outer, inner]`, reduced `[len]`), input `x`, output `y`
/// (`p.outputs` i64).
///
/// # Thread mapping
/// See the reduction launch contract above.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn arg_reduce_f32(p: ReduceParams, x: *const f32, y: *mut i64) {
    if p.kept_rank as usize > MAX_RANK || p.red_rank as usize > MAX_RANK || p.len >= u32::MAX as u64 {
        return;
    }
    // SAFETY: forwarded from the contract.
    unsafe { arg_reduce(&p, x, y) }
}
