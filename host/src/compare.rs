//! Comparing a result with the reference: [`Tolerance`], one named level per kind of op, and
//! [`check_close`], which reports the first bad element with both values and the shape.

use kernels_gpu::abi::{BinaryOp, UnaryOp};

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

    fn accepts(self, got: f32, want: f32) -> bool {
        if got.is_nan() || want.is_nan() {
            return got.is_nan() && want.is_nan();
        }
        if got == want {
            return true;
        }
        match self {
            Tolerance::Exact => false,
            Tolerance::Ulp(n) => {
                let ulp = (f32::from_bits(want.abs().to_bits() + 1) - want.abs()).max(f32::MIN_POSITIVE);
                ((got as f64 - want as f64).abs()) <= n as f64 * ulp as f64
            }
            Tolerance::Close => (got as f64 - want as f64).abs() <= 1e-6 + 1e-5 * (want as f64).abs(),
        }
    }
}

/// `Ok` when `got` has `want`'s shape and every element is within `tol`; otherwise a message naming
/// the first bad index, both values, the shape and how many elements are off.
pub fn check_close(got: &HostTensor, want: &HostTensor, tol: Tolerance) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?}, expected {:?}", got.shape(), want.shape()));
    }
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !tol.accepts(got.data()[i], want.data()[i])).collect();
    match bad.first() {
        None => Ok(()),
        Some(&i) => Err(format!(
            "{} of {} elements outside {tol:?}; first at index {i}: got {:e}, expected {:e} (shape {:?})",
            bad.len(),
            got.len(),
            got.data()[i],
            want.data()[i],
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
