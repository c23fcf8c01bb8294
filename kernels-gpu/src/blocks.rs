//! Two small operators of their own: TensorScatter (a KV cache written at per-batch offsets) and
//! Det (the determinant of small matrices).

use crate::abi::{DET_MAX_M, DetParams, TensorScatterParams};
use crate::intrinsics::{global_thread_x, grid_threads_x};

/// # Safety
/// The `tensor_scatter_b*` contract for elements of type `T`.
#[inline(always)]
unsafe fn tensor_scatter<T: Copy>(
    p: &TensorScatterParams,
    cache: *const T,
    update: *const T,
    offsets: *const i64,
    y: *mut T,
) {
    let total = p.outer * p.len * p.inner;
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (i, pos, o) = (e % p.inner, (e / p.inner) % p.len, e / (p.inner * p.len));
        let start = if p.has_offsets != 0 {
            // SAFETY: o / per_batch is a batch entry: one offset each (the contract).
            unsafe { *offsets.add((o / p.per_batch.max(1)) as usize) }
        } else {
            0
        };
        // The update row this position takes, if any: position `start + j` (wrapped when
        // circular) for `j < ulen`.
        let mut j = pos as i64 - start;
        if p.circular != 0 && p.len > 0 {
            j = j.rem_euclid(p.len as i64);
        }
        let v = if j >= 0 && (j as u64) < p.ulen {
            // SAFETY: o < outer, j < ulen, i < inner: inside the update.
            unsafe { *update.add(((o * p.ulen + j as u64) * p.inner + i) as usize) }
        } else {
            // SAFETY: e < total: inside the cache.
            unsafe { *cache.add(e as usize) }
        };
        // SAFETY: e < total: inside y.
        unsafe { *y.add(e as usize) = v };
        e += step;
    }
}

macro_rules! tensor_scatter_kernel {
    ($name:ident, $t:ty, $bytes:literal) => {
        #[doc = concat!("ONNX TensorScatter of ", $bytes, "-byte elements ([`TensorScatterParams`]): the")]
        /// cache with each batch entry's update rows written from its offset on. Positions an
        /// update would write outside the cache (an ONNX error without `circular`) are not
        /// written.
        ///
        /// # Safety
        /// `cache` and `y` hold `outer * len * inner` elements (no overlap), `update` holds
        /// `outer * ulen * inner`; with `has_offsets`, `offsets` holds one i64 per batch entry.
        ///
        /// # Parameters
        /// `p`; the cache, the update, the write offsets (or null) and the output `y`.
        ///
        /// # Thread mapping
        /// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output elements, each
        /// read from the update or the cache (no write races).
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            p: TensorScatterParams,
            cache: *const $t,
            update: *const $t,
            offsets: *const i64,
            y: *mut $t,
        ) {
            // SAFETY: forwarded from the contract.
            unsafe { tensor_scatter(&p, cache, update, offsets, y) }
        }
    };
}

tensor_scatter_kernel!(tensor_scatter_b4, u32, "4");
tensor_scatter_kernel!(tensor_scatter_b8, u64, "8");

/// ONNX Det ([`DetParams`]): the determinant of each `m x m` matrix, by Gaussian elimination with
/// partial pivoting (the largest magnitude in the column), as the reference
/// computes it, in f32. An all-zero pivot column gives 0.
///
/// # Safety
/// `x` holds `batch * m * m` f32, `y` holds `batch`; `m <= DET_MAX_M` (larger returns at once).
///
/// # Parameters
/// `p`; the matrices `x`; the determinants `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the matrices, a thread per matrix
/// (held in local memory).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn det_f32(p: DetParams, x: *const f32, y: *mut f32) {
    const N: usize = (DET_MAX_M * DET_MAX_M) as usize;
    if p.m > DET_MAX_M {
        return;
    }
    let m = p.m as usize;
    let (mut b, step) = (global_thread_x(), grid_threads_x());
    while b < p.batch {
        let mut a = [0f32; N];
        for (k, slot) in a.iter_mut().enumerate().take(m * m) {
            // SAFETY: k < m * m: inside matrix b.
            *slot = unsafe { *x.add(b as usize * m * m + k) };
        }
        let mut det = 1.0f32;
        for col in 0..m {
            let mut pivot = col;
            for r in col + 1..m {
                if a[r * m + col].abs() > a[pivot * m + col].abs() {
                    pivot = r;
                }
            }
            let pv = a[pivot * m + col];
            if pv == 0.0 {
                det = 0.0;
                break;
            }
            if pivot != col {
                for k in 0..m {
                    a.swap(pivot * m + k, col * m + k);
                }
                det = -det;
            }
            det *= pv;
            for r in col + 1..m {
                let f = a[r * m + col] / pv;
                for k in col..m {
                    a[r * m + k] -= f * a[col * m + k];
                }
            }
        }
        // SAFETY: b < batch: inside y.
        unsafe { *y.add(b as usize) = det };
        b += step;
    }
}
