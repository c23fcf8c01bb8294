//! The LayerNorm statistics of the rows a `NORM` tensor-core GEMM block normalizes as it loads
//! them: rows of one 8-value chunk per lane from two warp sums, longer rows from moments merged
//! pairwise.

use super::{Operands, eight};
use crate::abi::{GEMM_TC_M, GemmParams};
use crate::intrinsics::{block_dim_x, lane_id, shfl_xor_f32, thread_idx_x, warp_sum_f32};
use crate::math;

/// Count, mean and sum of squared deviations from the mean of some values; merged pairwise (Chan,
/// Golub and LeVeque), which keeps the variance accurate without a second pass over memory.
#[derive(Clone, Copy)]
struct Moments {
    n: f32,
    mean: f32,
    m2: f32,
}

impl Moments {
    const NONE: Moments = Moments { n: 0.0, mean: 0.0, m2: 0.0 };

    /// The moments of `v[..count]` (`v` is zero past `count`), two passes over the registers.
    #[inline(always)]
    fn of(v: &[f32; 8], count: u32) -> Moments {
        if count == 0 {
            return Moments::NONE;
        }
        let sum = v.iter().fold(0.0f32, |s, &x| s + x);
        let mean = sum / count as f32;
        let mut m2 = 0.0f32;
        for (q, &x) in v.iter().enumerate() {
            let d = if (q as u32) < count { x - mean } else { 0.0 };
            m2 = math::fma(d, d, m2);
        }
        Moments { n: count as f32, mean, m2 }
    }

    #[inline(always)]
    fn merge(self, o: Moments) -> Moments {
        let n = self.n + o.n;
        if n == 0.0 {
            return self;
        }
        let (d, f) = (o.mean - self.mean, o.n / n);
        Moments { n, mean: math::fma(d, f, self.mean), m2: self.m2 + o.m2 + d * d * self.n * f }
    }

    /// The moments of the whole warp's values, in every lane (warp-collective).
    #[inline(always)]
    fn warp(mut self) -> Moments {
        let mut m = 16;
        while m > 0 {
            let o = Moments {
                n: shfl_xor_f32(self.n, m),
                mean: shfl_xor_f32(self.mean, m),
                m2: shfl_xor_f32(self.m2, m),
            };
            self = self.merge(o);
            m >>= 1;
        }
        self
    }
}

/// Rows of a block whose LayerNorm statistics one warp computes together (their loads issue at
/// once).
const STAT_ROWS: usize = 4;
const _: () = assert!(STAT_ROWS == 4, "row_statistics stores four rows by hand");

/// The LayerNorm statistics (mean, `1 / sqrt(var + eps)`) of the block's [`GEMM_TC_M`] rows of A,
/// into `stats` (two f32 per row): warp `w` takes rows `w, w + warps, ...`, [`STAT_ROWS`] at a
/// time, each lane eight consecutive k of every 256 (one memory round trip for rows up to 256
/// long). Rows of one chunk take two exact passes over the registers ([`short_moments`]), longer
/// ones moments merged pairwise ([`long_moments`]). Warp-collective; rows past m repeat the last
/// one.
///
/// # Safety
/// `o.a` holds A's rows (the kernel's contract); `stats` holds `2 * GEMM_TC_M` f32.
#[inline(always)]
pub(super) unsafe fn row_statistics(
    o: &Operands,
    p: &GemmParams,
    a0: u64,
    row0: u32,
    eps: f32,
    stats: *mut f32,
) {
    let (warps, lane) = (block_dim_x() / 32, lane_id());
    let mut rr = thread_idx_x() / 32;
    while rr < GEMM_TC_M {
        let base = |i: u32| a0 + (row0 + rr + i * warps).min(p.m - 1) as u64 * p.a_rs;
        // SAFETY: forwarded (the contract).
        let mv = unsafe { if p.k <= 256 { short_moments(o, p, &base) } else { long_moments(o, p, &base) } };
        // Const-indexed (a rolled loop would keep the statistics in local memory).
        macro_rules! store {
            ($($i:literal),*) => {$(
                let r = rr + $i * warps;
                if lane == 0 && r < GEMM_TC_M {
                    // SAFETY: r < GEMM_TC_M: inside the statistics.
                    unsafe {
                        *stats.add(2 * r as usize) = mv[$i].0;
                        *stats.add(2 * r as usize + 1) = 1.0 / math::sqrt(mv[$i].1 + eps);
                    }
                }
            )*};
        }
        store!(0, 1, 2, 3);
        rr += STAT_ROWS as u32 * warps;
    }
}

/// (mean, variance) of the [`STAT_ROWS`] rows starting at `base(i)` for any k: each lane's chunks
/// merged as moments, then the lanes' (every lane gets the results).
///
/// # Safety
/// As [`row_statistics`].
#[inline(always)]
unsafe fn long_moments(o: &Operands, p: &GemmParams, base: &impl Fn(u32) -> u64) -> [(f32, f32); STAT_ROWS] {
    let lane = lane_id();
    let mut mo = [Moments::NONE; STAT_ROWS];
    let mut c0 = 0;
    while c0 < p.k {
        let kk = c0 + 8 * lane;
        // Whole chunks of 256 load as vectors (the same choice for the whole warp).
        let full = o.a_vec && c0 + 256 <= p.k;
        let count = p.k.saturating_sub(kk).min(8);
        // SAFETY: k below p.k of rows below m: inside A (the contract).
        let v: [[f32; 8]; STAT_ROWS] =
            core::array::from_fn(|i| unsafe { eight(o.a, base(i as u32), p.a_cs, kk, p.k, full) });
        for (m, v) in mo.iter_mut().zip(&v) {
            *m = m.merge(Moments::of(v, count));
        }
        c0 += 256;
    }
    // Const-indexed (a rolled loop around the shuffles would keep `mo` in local memory).
    macro_rules! row {
        ($i:literal) => {{
            let m = mo[$i].warp();
            (m.mean, m.m2 / m.n)
        }};
    }
    [row!(0), row!(1), row!(2), row!(3)]
}

/// [`long_moments`] for rows of at most 256 (one 8-value chunk per lane, all in registers): the
/// mean from a warp sum, then the variance from a warp sum of the squared deviations, instead of
/// the pairwise merges and their divisions.
///
/// # Safety
/// As [`row_statistics`], with `p.k <= 256`.
#[inline(always)]
unsafe fn short_moments(o: &Operands, p: &GemmParams, base: &impl Fn(u32) -> u64) -> [(f32, f32); STAT_ROWS] {
    let kk = 8 * lane_id();
    let full = o.a_vec && p.k == 256;
    let count = p.k.saturating_sub(kk).min(8);
    let inv_k = 1.0 / p.k as f32;
    // SAFETY: k below p.k of rows below m: inside A (the contract).
    let v: [[f32; 8]; STAT_ROWS] =
        core::array::from_fn(|i| unsafe { eight(o.a, base(i as u32), p.a_cs, kk, p.k, full) });
    // Const-indexed (a rolled loop around the shuffles would keep `v` in local memory).
    macro_rules! row {
        ($i:literal) => {{
            let mean = warp_sum_f32(v[$i].iter().fold(0.0f32, |s, &x| s + x)) * inv_k;
            let mut m2 = 0.0f32;
            for (q, &x) in v[$i].iter().enumerate() {
                let d = if (q as u32) < count { x - mean } else { 0.0 };
                m2 = math::fma(d, d, m2);
            }
            (mean, warp_sum_f32(m2) * inv_k)
        }};
    }
    [row!(0), row!(1), row!(2), row!(3)]
}
