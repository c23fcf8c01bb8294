//! Comparing a result with the reference: [`Tolerance`], one named level per kind of op, and
//! [`check_close`], which reports the first bad element with both values and the shape.

use kernels_gpu::abi::{BinaryOp, UnaryOp};

use planner::DType;

use crate::tensor::HostTensor;

/// How close a result must be to the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Bit-identical, except that any NaN matches any NaN (correctly rounded ops).
    Exact,
    /// Within this many units in the last place of the reference value.
    Ulp(u32),
    /// `|got - want| <= atol + rtol * |want|` with float32 transcendental-function bounds
    /// (`atol = 1e-6`, `rtol = 1e-5`).
    Close,
}

impl Tolerance {
    /// The level an f32 binary kernel is held to against the f64 reference.
    pub fn for_binary(op: BinaryOp) -> Tolerance {
        match op {
            BinaryOp::Pow => Tolerance::Ulp(4),
            _ => Tolerance::Exact,
        }
    }

    /// The level an f32 unary kernel is held to against the f64 reference.
    pub fn for_unary(op: UnaryOp) -> Tolerance {
        match op {
            UnaryOp::Relu | UnaryOp::LeakyRelu { .. } | UnaryOp::Sqrt | UnaryOp::Abs | UnaryOp::Neg => {
                Tolerance::Exact
            }
            _ => Tolerance::Close,
        }
    }

    /// Whether `got` is acceptable for the reference value `want`, both of element type `dtype`.
    fn accepts(self, got: f64, want: f64, dtype: DType) -> bool {
        if got.is_nan() || want.is_nan() {
            return got.is_nan() && want.is_nan();
        }
        if got == want {
            return true;
        }
        // Integers and bools compare exactly at every level.
        let eps = match dtype {
            DType::F32 => f32::EPSILON as f64,
            DType::F64 => f64::EPSILON,
            DType::F16 => half::f16::EPSILON.to_f64(),
            DType::BF16 => half::bf16::EPSILON.to_f64(),
            _ => return false,
        };
        // Half-precision storage rounds results; scale the absolute floor with the format.
        let scale = eps / f32::EPSILON as f64;
        match self {
            Tolerance::Exact => false,
            Tolerance::Ulp(n) => (got - want).abs() <= n as f64 * ulp(want, dtype, eps),
            Tolerance::Close => {
                (got - want).abs() <= 1e-6 * scale.max(1.0) + 1e-5 * scale.max(1.0) * want.abs()
            }
        }
    }
}

/// One unit in the last place of `w` in `dtype` (the spacing above `|w|`).
fn ulp(w: f64, dtype: DType, eps: f64) -> f64 {
    match dtype {
        DType::F32 => {
            let a = (w as f32).abs();
            (f32::from_bits(a.to_bits() + 1) - a).max(f32::MIN_POSITIVE) as f64
        }
        DType::F64 => (f64::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f64::MIN_POSITIVE),
        _ => (w.abs() * eps).max(eps * 6.1e-5),
    }
}

/// `Ok` when `got` has `want`'s dtype and shape and every element is within `tol`; otherwise a
/// message naming the first bad index, both values, the shape and how many elements are off.
pub fn check_close(got: &HostTensor, want: &HostTensor, tol: Tolerance) -> Result<(), String> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Err(format!("{}{:?}, expected {}{:?}", got.dtype(), got.shape(), want.dtype(), want.shape()));
    }
    let (g, w) = (got.data().to_f64s(), want.data().to_f64s());
    let bad: Vec<usize> = (0..g.len()).filter(|&i| !tol.accepts(g[i], w[i], got.dtype())).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{} of {} elements outside {tol:?}; first at index {i}: got {:e}, expected {:e} ({}{:?})",
            bad.len(),
            g.len(),
            g[i],
            w[i],
            got.dtype(),
            got.shape()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(data: &[f32]) -> HostTensor {
        HostTensor::new(vec![data.len()], data.to_vec()).unwrap()
    }

    #[test]
    fn levels() {
        assert!(check_close(&t(&[1.0, f32::NAN]), &t(&[1.0, f32::NAN]), Tolerance::Exact).is_ok());
        assert!(check_close(&t(&[1.0]), &t(&[1.0 + f32::EPSILON]), Tolerance::Exact).is_err());
        assert!(check_close(&t(&[1.0]), &t(&[1.0 + f32::EPSILON]), Tolerance::Ulp(1)).is_ok());
        assert!(check_close(&t(&[1.0]), &t(&[1.0 + 8.0 * f32::EPSILON]), Tolerance::Ulp(4)).is_err());
        assert!(check_close(&t(&[100.0]), &t(&[100.0005]), Tolerance::Close).is_ok());
        assert!(check_close(&t(&[100.0]), &t(&[100.01]), Tolerance::Close).is_err());
        assert!(check_close(&t(&[f32::NAN]), &t(&[0.0]), Tolerance::Close).is_err());
        let e = check_close(&t(&[0.0, 2.0]), &t(&[0.0, 3.0]), Tolerance::Close).unwrap_err();
        assert!(e.contains("index 1"), "{e}");
    }
}
