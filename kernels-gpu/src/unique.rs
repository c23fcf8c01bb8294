//! ONNX Unique in two launches, which the session runs between the stages of a graph (the number
//! of distinct slices depends on the data): `unique_count` (one block) sorts the slices, groups
//! equal ones and writes the distinct count, the kept slices' first indices, their counts and every
//! slice's group to a scratch buffer; the session reads the count back, places the outputs, and
//! `unique_write_b*` fills them.

use crate::abi::{UNIQUE_MAX_LEN, UNIQUE_THREADS, UniqueParams, scalar};
use crate::intrinsics::{
    block_dim_x, dynamic_shared_ptr, global_thread_x, grid_threads_x, sync_threads, thread_idx_x, trap,
};
use crate::select::{bitonic_sort_by, ordered_f32};

/// Element `e` of `x` as a key whose unsigned order is the reference's: floats with -0.0 equal to
/// 0.0 and every NaN equal and above +inf; integers signed.
///
/// # Safety
/// `x` holds element `e` of the parameters' type.
#[inline(always)]
unsafe fn key(p: &UniqueParams, x: *const u8, e: u64) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        match p.dtype {
            scalar::I64 => (*x.cast::<u64>().add(e as usize)) ^ (1 << 63),
            scalar::I32 => ((*x.cast::<u32>().add(e as usize)) ^ 0x8000_0000) as u64,
            _ => ordered_f32(*x.cast::<u32>().add(e as usize)) as u64,
        }
    }
}

/// Slices `a` and `b` compared lexicographically (row-major over their elements): -1, 0 or 1.
///
/// # Safety
/// `a`, `b` < `p.len`; `x` holds the input.
#[inline(always)]
unsafe fn compare(p: &UniqueParams, x: *const u8, a: u64, b: u64) -> i32 {
    for o in 0..p.outer {
        for i in 0..p.inner {
            // SAFETY: inside the input (the contract).
            let (ka, kb) = unsafe {
                (key(p, x, (o * p.len + a) * p.inner + i), key(p, x, (o * p.len + b) * p.inner + i))
            };
            if ka != kb {
                return if ka < kb { -1 } else { 1 };
            }
        }
    }
    0
}

/// The distinct slices of `x` ([`UniqueParams`]): to `scratch` (i64, `unique_scratch_words`
/// words) the distinct count `u` at 0, then from 1 on lists of `len`: the kept slices' first
/// indices and their counts (in output order), every slice's output position (the inverse
/// indices), then the working lists (group of each slice, first index and count of each group,
/// output position of each group).
///
/// # Safety
/// `x` holds `outer * len * inner` elements of `p.dtype`; `scratch` holds
/// `unique_scratch_words(len)` i64; `p.len <= p.padded <= UNIQUE_MAX_LEN`, `p.padded` a power of
/// two; `4 * p.padded` bytes of dynamic shared memory.
///
/// # Parameters
/// `p`; the input `x` (as bytes); the `scratch`.
///
/// # Thread mapping
/// One block of `UNIQUE_THREADS` threads: they sort the slice indices bitonically in shared memory
/// (by value, then index: stable), then thread 0 walks the sorted order to group equal slices and
/// lays out the lists.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn unique_count(p: UniqueParams, x: *const u8, scratch: *mut i64) {
    let padded = p.padded as u64;
    if block_dim_x() != UNIQUE_THREADS
        || !padded.is_power_of_two()
        || padded > UNIQUE_MAX_LEN
        || p.len > padded
    {
        trap();
    }
    let order = dynamic_shared_ptr().cast::<u32>();
    let t = thread_idx_x() as u64;
    let mut j = t;
    while j < padded {
        // SAFETY: j < padded: inside the shared order.
        unsafe { *order.add(j as usize) = if j < p.len { j as u32 } else { u32::MAX } };
        j += UNIQUE_THREADS as u64;
    }
    sync_threads();
    let greater = |a: u32, b: u32| {
        if a == u32::MAX || b == u32::MAX {
            return a > b;
        }
        // SAFETY: a, b < len (padding handled above).
        match unsafe { compare(&p, x, a as u64, b as u64) } {
            0 => a > b,
            c => c > 0,
        }
    };
    // SAFETY: `padded` indices in shared memory, a power of two.
    unsafe { bitonic_sort_by(order, padded, UNIQUE_THREADS as u64, greater) };
    if t != 0 {
        return;
    }
    let len = p.len as usize;
    // SAFETY (every list access below): indices below len, inside the scratch's lists.
    unsafe {
        let list = |k: usize| scratch.add(1 + k * len);
        let (picks, counts_out, inverse, group_of, firsts, counts, position) =
            (list(0), list(1), list(2), list(3), list(4), list(5), list(6));
        let mut groups = 0usize;
        for r in 0..len {
            let k = *order.add(r) as u64;
            if r == 0 || compare(&p, x, *order.add(r - 1) as u64, k) != 0 {
                *firsts.add(groups) = k as i64;
                *counts.add(groups) = 0;
                groups += 1;
            }
            *counts.add(groups - 1) += 1;
            *group_of.add(k as usize) = (groups - 1) as i64;
        }
        if p.sorted != 0 {
            for g in 0..groups {
                *position.add(g) = g as i64;
            }
        } else {
            // By first occurrence: walk the slices in index order.
            for g in 0..groups {
                *position.add(g) = -1;
            }
            let mut next = 0i64;
            for k in 0..len {
                let g = *group_of.add(k) as usize;
                if *position.add(g) < 0 {
                    *position.add(g) = next;
                    next += 1;
                }
            }
        }
        for g in 0..groups {
            let at = *position.add(g) as usize;
            *picks.add(at) = *firsts.add(g);
            *counts_out.add(at) = *counts.add(g);
        }
        for k in 0..len {
            *inverse.add(k) = *position.add(*group_of.add(k) as usize);
        }
        *scratch = groups as i64;
    }
}

/// # Safety
/// The `unique_write_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn unique_write<T: Copy>(
    p: &UniqueParams,
    x: *const T,
    scratch: *const i64,
    outs: (*mut T, *mut i64, *mut i64, *mut i64),
) {
    let (y, indices, inverse, counts) = outs;
    let (u, len) = (p.count, p.len as usize);
    let work = (p.outer * u * p.inner).max(p.len);
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    // SAFETY (every access below): inside the lists, the input and the outputs (the contract).
    unsafe {
        let (picks, counts_in, inverse_in) = (scratch.add(1), scratch.add(1 + len), scratch.add(1 + 2 * len));
        while e < work {
            if e < p.outer * u * p.inner {
                let (i, k, o) = (e % p.inner, (e / p.inner) % u, e / (p.inner * u));
                let src = *picks.add(k as usize) as u64;
                *y.add(e as usize) = *x.add(((o * p.len + src) * p.inner + i) as usize);
            }
            if e < u {
                if !indices.is_null() {
                    *indices.add(e as usize) = *picks.add(e as usize);
                }
                if !counts.is_null() {
                    *counts.add(e as usize) = *counts_in.add(e as usize);
                }
            }
            if e < p.len && !inverse.is_null() {
                *inverse.add(e as usize) = *inverse_in.add(e as usize);
            }
            e += step;
        }
    }
}

macro_rules! unique_write_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX Unique's outputs for ", $bytes, "-byte elements ([`UniqueParams`], `count` the")]
        /// distinct count): `y` the kept slices (`[outer, count, inner]`), and when not null the
        /// first `indices`, the `inverse` indices (`len`) and the `counts` (i64).
        ///
        /// # Safety
        /// `x` holds the input; `scratch` what `unique_count` wrote for it; `y` holds `outer *
        /// count * inner` elements; `indices` and `counts` (when not null) `count` i64, `inverse`
        /// (when not null) `len` i64.
        ///
        /// # Parameters
        /// `p`; the input, the scratch; the outputs `y`, `indices`, `inverse`, `counts`.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the largest output.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: UniqueParams,
            x: *const $t,
            scratch: *const i64,
            y: *mut $t,
            indices: *mut i64,
            inverse: *mut i64,
            counts: *mut i64,
        ) {
            if scratch.is_null() || p.count > p.len {
                trap();
            }
            // SAFETY: forwarded from the contract.
            unsafe { unique_write(&p, x, scratch, (y, indices, inverse, counts)) }
        }
    };
}

unique_write_kernel!(unique_write_b4, u32, "4");
unique_write_kernel!(unique_write_b8, u64, "8");
