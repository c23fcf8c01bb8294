//! Reference `LRN`, `LpNormalization` and `Det`.

use planner::op::{LpNormalization, Lrn};

use super::operand::{axis, input, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// ONNX `LRN` on `(N, C, ...)`: `y = x / (bias + alpha / size * Σ x²)^beta`, the sum over
/// channels `c - floor((size-1)/2) ..= c + ceil((size-1)/2)` clipped to `[0, C)`.
pub fn lrn(
    node: &NodeCtx,
    attrs: &Lrn,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    if x.shape.len() < 2 {
        return Err(node.err(format!("X {:?} must be (N, C, ...)", x.shape)));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let inner: usize = x.shape[2..].iter().product();
    let (before, after) = ((attrs.size - 1) / 2, attrs.size / 2);
    let scale = attrs.alpha as f64 / attrs.size as f64;
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    for b in 0..n {
        for ch in 0..c {
            let (lo, hi) = (ch.saturating_sub(before), (ch + after).min(c - 1));
            for i in 0..inner {
                let at = |k: usize| (b * c + k) * inner + i;
                let sq: f64 = (lo..=hi).map(|k| x.data[at(k)] * x.data[at(k)]).sum();
                y[at(ch)] = x.data[at(ch)] / (attrs.bias as f64 + scale * sq).powf(attrs.beta as f64);
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

/// ONNX `LpNormalization`: `x / ||x||_p` along `axis` (p = 1: sum of absolute values; p = 2:
/// Euclidean); a zero norm gives 0.
pub fn lp_normalization(
    node: &NodeCtx,
    attrs: &LpNormalization,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "input")?;
    let ax = axis(node, attrs.axis, x.shape.len())?;
    let len = x.shape[ax];
    let inner: usize = x.shape[ax + 1..].iter().product();
    let outer: usize = x.shape[..ax].iter().product();
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let norm = match attrs.p {
                1 => (0..len).map(|k| x.data[at(k)].abs()).sum::<f64>(),
                _ => (0..len).map(|k| x.data[at(k)] * x.data[at(k)]).sum::<f64>().sqrt(),
            };
            for k in 0..len {
                y[at(k)] = if norm == 0.0 { 0.0 } else { x.data[at(k)] / norm };
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

/// Determinant of the row-major `m x m` matrix `a` by Gaussian elimination with partial pivoting.
fn determinant(mut a: Vec<f64>, m: usize) -> f64 {
    let mut det = 1.0;
    for col in 0..m {
        let pivot =
            (col..m).max_by(|&i, &j| a[i * m + col].abs().total_cmp(&a[j * m + col].abs())).unwrap_or(col);
        if a[pivot * m + col] == 0.0 {
            return 0.0;
        }
        if pivot != col {
            for k in 0..m {
                a.swap(pivot * m + k, col * m + k);
            }
            det = -det;
        }
        let p = a[col * m + col];
        det *= p;
        for row in col + 1..m {
            let f = a[row * m + col] / p;
            for k in col..m {
                a[row * m + k] -= f * a[col * m + k];
            }
        }
    }
    det
}

/// ONNX `Det`: the determinant of each trailing `M x M` matrix.
pub fn det(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let r = x.shape.len();
    if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
        return Err(node.err(format!("X {:?} must end in square matrices", x.shape)));
    }
    let m = x.shape[r - 1];
    let size = m * m;
    let batch: usize = x.shape[..r - 2].iter().product();
    let y = (0..batch).map(|b| determinant(x.data[b * size..(b + 1) * size].to_vec(), m)).collect();
    Ok(vec![tensor(node, x.dtype, x.shape[..r - 2].to_vec(), y)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, vals};

    #[test]
    fn lrn_sums_neighbouring_channels() {
        // C = 3, size 3: channel 1 sees all three; channel 0 sees 0 and 1.
        let x = tf(&[1, 3, 1], &[1.0, 2.0, 3.0]);
        let attrs = Lrn { alpha: 3.0, beta: 1.0, bias: 1.0, size: 3 };
        let y = lrn(&node("LRN"), &attrs, &[Some(&x)]).unwrap();
        assert_close(&vals(&y[0]), &[1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0], 1e-7);
        // size 2 sums channels c and c + 1.
        let attrs = Lrn { alpha: 2.0, beta: 1.0, bias: 0.0, size: 2 };
        let y = lrn(&node("LRN"), &attrs, &[Some(&x)]).unwrap();
        assert_close(&vals(&y[0]), &[1.0 / 5.0, 2.0 / 13.0, 3.0 / 9.0], 1e-7);
    }

    #[test]
    fn lp_normalization_l1_l2_and_zero_rows() {
        let x = tf(&[2, 2], &[3.0, -4.0, 0.0, 0.0]);
        let y = lp_normalization(&node("Lp"), &LpNormalization::default(), &[Some(&x)]).unwrap();
        assert_close(&vals(&y[0]), &[0.6, -0.8, 0.0, 0.0], 1e-7);
        let l1 = LpNormalization { axis: 0, p: 1 };
        let x = tf(&[2, 2], &[1.0, 2.0, -3.0, 2.0]);
        let y = lp_normalization(&node("Lp"), &l1, &[Some(&x)]).unwrap();
        assert_close(&vals(&y[0]), &[0.25, 0.5, -0.75, 0.5], 1e-7);
    }

    #[test]
    fn shrink_hard_and_soft() {
        use crate::reference::unary::shrink;
        let got: Vec<f64> = [-2.0, -1.0, 0.0, 1.0, 2.0].iter().map(|&x| shrink(x, 1.5, 1.5)).collect();
        assert_eq!(got, [-0.5, 0.0, 0.0, 0.0, 0.5]);
        assert_eq!(shrink(-0.6, 0.5, 0.0), -0.6);
    }

    #[test]
    fn det_with_pivoting_and_batches() {
        let x = tf(&[2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 1.0, 0.0]);
        let y = det(&node("Det"), &(), &[Some(&x)]).unwrap();
        assert_eq!(y[0].shape(), [2]);
        assert_close(&vals(&y[0]), &[-2.0, -1.0], 1e-12);
        let s = tf(&[3, 3], &[2.0, 0.0, 1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 1.0]);
        // 2(3-2) - 0 + 1(1-3) = 0.
        assert_close(&vals(&det(&node("Det"), &(), &[Some(&s)]).unwrap()[0]), &[0.0], 1e-12);
    }
}
