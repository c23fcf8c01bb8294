//! Test fixtures shared by the nn reference tests: tensor builders, a seeded generator and a
//! closeness check that reports the first bad index.

use planner::DType;

use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// A node context for tests.
pub(crate) fn node(op: &'static str) -> NodeCtx<'static> {
    NodeCtx::new("test", op)
}

/// An f32 tensor.
pub(crate) fn t32(shape: &[usize], data: &[f32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), data.to_vec()).expect("test tensor length matches shape")
}

/// An f32 tensor from f64 values.
pub(crate) fn tf(shape: &[usize], data: &[f64]) -> HostTensor {
    t32(shape, &data.iter().map(|&x| x as f32).collect::<Vec<_>>())
}

/// An i64 tensor.
pub(crate) fn ti(shape: &[usize], data: &[i64]) -> HostTensor {
    HostTensor::new(shape.to_vec(), data.to_vec()).expect("test tensor length matches shape")
}

/// The elements of any tensor as f64.
pub(crate) fn vals(t: &HostTensor) -> Vec<f64> {
    t.data().to_f64s()
}

/// Asserts `got` and `want` have equal length and agree within `atol + rtol * |want|`.
pub(crate) fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "length differs: got {} want {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "index {i}: got {g}, want {w} (tol {tol})\n got: {got:?}\nwant: {want:?}");
    }
}

/// Asserts a tensor has the given shape and dtype.
pub(crate) fn assert_meta(t: &HostTensor, shape: &[usize], dtype: DType) {
    assert_eq!(t.shape(), shape, "shape");
    assert_eq!(t.dtype(), dtype, "dtype");
}

/// A small seeded generator (SplitMix64), so property tests need no extra dependency.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`, rounded to f32 so tensors built from it are exact.
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (lo + (hi - lo) * u) as f32 as f64
    }

    /// `n` uniform values.
    pub(crate) fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// Uniform integer in `[lo, hi]`.
    pub(crate) fn int(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}
