//! Reference elementwise ops (ONNX Add, Sub, Mul, Div, Pow, Max, Min with multidirectional
//! broadcasting; Relu, LeakyRelu, Sigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg, Erf, Gelu, Softplus and
//! SiLU = x * Sigmoid(x)). Each value is computed in f64 and rounded once to f32.

use kernels_gpu::abi::{BinaryOp, UnaryOp};

use crate::error::HostError;
use crate::shape::broadcast_shape;
use crate::tensor::HostTensor;

/// `op(a, b)` with NumPy broadcasting.
pub fn binary(op: BinaryOp, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    let out = broadcast_shape(a.shape(), b.shape()).ok_or_else(|| HostError::Broadcast {
        op: format!("{op:?}"),
        lhs: a.shape().to_vec(),
        rhs: b.shape().to_vec(),
    })?;
    let (ad, bd) = (a.f32s(&format!("{op:?} input A"))?, b.f32s(&format!("{op:?} input B"))?);
    let n: usize = out.iter().product();
    let mut data = crate::tensor::try_with_capacity(n, "a working buffer")?;
    let mut index = vec![0usize; out.len()];
    for _ in 0..n {
        let x = ad[source_offset(a.shape(), &index)] as f64;
        let y = bd[source_offset(b.shape(), &index)] as f64;
        data.push(apply_binary(op, x, y) as f32);
        increment(&mut index, &out);
    }
    HostTensor::new(out, data)
}

/// `op(x)`.
pub fn unary(op: UnaryOp, x: &HostTensor) -> Result<HostTensor, HostError> {
    let data: Vec<f32> =
        x.f32s(&format!("{op:?} input"))?.iter().map(|&v| apply_unary(op, v as f64) as f32).collect();
    HostTensor::new(x.shape().to_vec(), data)
}

/// Offset in a row-major tensor of `shape` of the element that output multi-index `index`
/// (right-aligned against `shape`) reads: size-1 dimensions read index 0.
fn source_offset(shape: &[usize], index: &[usize]) -> usize {
    let skip = index.len() - shape.len();
    shape.iter().zip(&index[skip..]).fold(0, |off, (&d, &i)| off * d + if d == 1 { 0 } else { i })
}

/// Advances a row-major multi-index.
fn increment(index: &mut [usize], shape: &[usize]) {
    for d in (0..shape.len()).rev() {
        index[d] += 1;
        if index[d] < shape[d] {
            return;
        }
        index[d] = 0;
    }
}

fn apply_binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Max if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Min => a.min(b),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn apply_unary(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Neg => -x,
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::GeluErf => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::GeluTanh => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + u.tanh())
        }
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Softplus => {
            if x > 30.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], data: &[f32]) -> HostTensor {
        HostTensor::new(shape.to_vec(), data.to_vec()).unwrap()
    }

    #[test]
    fn broadcasting_reads_the_right_elements() {
        let a = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = t(&[3], &[10., 20., 30.]);
        assert_eq!(
            binary(BinaryOp::Add, &a, &b).unwrap().f32s("y").unwrap(),
            &[11., 22., 33., 14., 25., 36.]
        );
        let c = t(&[2, 1], &[100., 200.]);
        assert_eq!(
            binary(BinaryOp::Sub, &c, &b).unwrap().f32s("y").unwrap(),
            &[90., 80., 70., 190., 180., 170.]
        );
        assert!(binary(BinaryOp::Mul, &a, &t(&[2], &[1., 2.])).is_err());
    }

    #[test]
    fn unary_values() {
        let x = t(&[4], &[-2., 0., 1., 4.]);
        assert_eq!(unary(UnaryOp::Relu, &x).unwrap().f32s("y").unwrap(), &[0., 0., 1., 4.]);
        assert_eq!(
            unary(UnaryOp::LeakyRelu { alpha: 0.5 }, &x).unwrap().f32s("y").unwrap(),
            &[-1., 0., 1., 4.]
        );
        assert_eq!(unary(UnaryOp::Sqrt, &x).unwrap().f32s("y").unwrap()[3], 2.0);
        assert!((unary(UnaryOp::GeluErf, &x).unwrap().f32s("y").unwrap()[2] - 0.841_344_7).abs() < 1e-6);
        assert!(
            (unary(UnaryOp::Softplus, &x).unwrap().f32s("y").unwrap()[1] - std::f32::consts::LN_2).abs()
                < 1e-7
        );
    }
}
