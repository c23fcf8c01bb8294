//! The score dot products of `attention_f32`: the block's `R` staged query rows against one K
//! row, read strided, as 16-byte vectors, or from registers loaded up front.

use super::R;
use crate::intrinsics::{F32x4, fma_rn};

/// The dot products of the `R` staged query rows (`q`, `qs` apart) with the K row at
/// `k[base + c * stride]`, `c < n`.
///
/// # Safety
/// `q` has `R` rows of `n` readable f32; `k` every element the strides address.
#[inline(always)]
pub(super) unsafe fn dots(q: *const f32, qs: u32, k: *const f32, base: u64, stride: u64, n: u32) -> [f32; R] {
    let mut a = [0.0f32; R];
    for c in 0..n {
        // SAFETY: c < n: inside both (the contract).
        unsafe {
            let kv = *k.add((base + c as u64 * stride) as usize);
            for (r, acc) in a.iter_mut().enumerate() {
                *acc = fma_rn(*q.add(r * qs as usize + c as usize), kv, *acc);
            }
        }
    }
    a
}

/// [`dots`] of a K row already in registers (`kr[c]` holds columns `4c..4c + 4`, `c < n / 4`),
/// `n % 4 == 0`, `n <= 64`.
///
/// # Safety
/// `q` has `R` rows of `n` readable f32 `qs` apart, 16-byte aligned (`qs % 4 == 0`).
#[inline(always)]
pub(super) unsafe fn dots_regs(q: *const f32, qs: u32, kr: &[F32x4; 16], n: u32) -> [f32; R] {
    let mut a = [[0.0f32; 4]; R];
    // Columns by literal (the registers stay registers).
    macro_rules! columns {
        ($($c:literal)*) => {$(
            if $c < n / 4 {
                for (r, acc) in a.iter_mut().enumerate() {
                    // SAFETY: 4c < n: inside row r (the contract).
                    let qv = unsafe { *(q.add(r * qs as usize + 4 * $c) as *const F32x4) };
                    for u in 0..4 {
                        acc[u] = fma_rn(qv.0[u], kr[$c].0[u], acc[u]);
                    }
                }
            }
        )*};
    }
    columns!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    a.map(|x| (x[0] + x[1]) + (x[2] + x[3]))
}

/// [`dots`] of a unit-stride, 16-byte aligned K row with `n % 4 == 0`: 16-byte loads of K (four
/// in flight) and of the query rows (16-byte aligned in shared memory, `qs % 4 == 0`).
///
/// # Safety
/// `q` has `R` rows of `n` readable f32 `qs` apart and `k` has `n`, both 16-byte aligned;
/// `n % 4 == 0`.
#[inline(always)]
pub(super) unsafe fn dots_vec(q: *const f32, qs: u32, k: *const f32, n: u32) -> [f32; R] {
    let k4 = k as *const F32x4;
    let mut a = [[0.0f32; 4]; R];
    let n4 = n / 4;
    let mut c = 0u32;
    // SAFETY (every load): c + u < n4: inside both (the contract).
    let fold = |a: &mut [[f32; 4]; R], kv: F32x4, c: u32| {
        for (r, acc) in a.iter_mut().enumerate() {
            let qv = unsafe { *(q.add(r * qs as usize + 4 * c as usize) as *const F32x4) };
            for u in 0..4 {
                acc[u] = fma_rn(qv.0[u], kv.0[u], acc[u]);
            }
        }
    };
    while c + 4 <= n4 {
        let (k0, k1, k2, k3) = unsafe {
            (*k4.add(c as usize), *k4.add(c as usize + 1), *k4.add(c as usize + 2), *k4.add(c as usize + 3))
        };
        fold(&mut a, k0, c);
        fold(&mut a, k1, c + 1);
        fold(&mut a, k2, c + 2);
        fold(&mut a, k3, c + 3);
        c += 4;
    }
    while c < n4 {
        let kv = unsafe { *k4.add(c as usize) };
        fold(&mut a, kv, c);
        c += 1;
    }
    a.map(|x| (x[0] + x[1]) + (x[2] + x[3]))
}
