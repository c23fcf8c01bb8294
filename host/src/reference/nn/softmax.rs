//! Reference `Softmax`, `LogSoftmax` and `Hardmax` with opset-13 semantics: the op acts along the
//! single axis `axis`, every other axis indexing independent rows.
//!
//! (Before opset 13 the input was flattened to 2-D at `axis`; the loader is responsible for
//! rewriting such nodes, these functions implement only the opset-13 form.)

use planner::op::Softmax;

use super::operand::{OutBuf, axis, float_view, required};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// Applies `f(row) -> row` to every 1-D fibre of `x` along `axis` (outer, axis, inner layout).
fn along_axis(
    node: &NodeCtx,
    attr_axis: i64,
    inputs: &[Option<&HostTensor>],
    f: impl Fn(&[f64]) -> Vec<f64>,
) -> Result<Vec<HostTensor>, HostError> {
    let x = float_view(node, required(node, inputs, 0, "input")?, "input")?;
    if x.shape.is_empty() {
        return Err(node.err("input must have rank >= 1"));
    }
    let ax = axis(node, attr_axis, x.shape.len())?;
    let len = x.shape[ax];
    let inner: usize = x.shape[ax + 1..].iter().product();
    let outer: usize = x.shape[..ax].iter().product();
    let mut y = OutBuf::new(node, x.dtype, x.shape.to_vec())?;
    let mut row = crate::tensor::try_filled(len, 0.0, "a working buffer")?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            for (k, r) in row.iter_mut().enumerate() {
                *r = x.at(at(k));
            }
            for (k, v) in f(&row).into_iter().enumerate() {
                y.set(at(k), v);
            }
        }
    }
    Ok(vec![y.finish(node)?])
}

fn max_of(row: &[f64]) -> f64 {
    row.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// ONNX `Softmax` (opset 13): `exp(x − max) / Σ exp(x − max)` along `axis`.
pub fn softmax(
    node: &NodeCtx,
    attrs: &Softmax,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    along_axis(node, attrs.axis, inputs, |row| {
        let m = max_of(row);
        let e: Vec<f64> = row.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    })
}

/// ONNX `LogSoftmax` (opset 13): `x − max − log Σ exp(x − max)` along `axis`.
pub fn log_softmax(
    node: &NodeCtx,
    attrs: &Softmax,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    along_axis(node, attrs.axis, inputs, |row| {
        let m = max_of(row);
        let lse = row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        row.iter().map(|v| v - m - lse).collect()
    })
}

/// ONNX `Hardmax` (opset 13): 1 at the first maximum along `axis`, 0 elsewhere.
pub fn hardmax(
    node: &NodeCtx,
    attrs: &Softmax,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    along_axis(node, attrs.axis, inputs, |row| {
        let mut best = 0;
        for (k, v) in row.iter().enumerate() {
            if *v > row[best] {
                best = k;
            }
        }
        (0..row.len()).map(|k| if k == best { 1.0 } else { 0.0 }).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

    #[test]
    fn softmax_rows_sum_to_one_on_every_axis() {
        let mut rng = Rng::new(31);
        for _ in 0..20 {
            let shape = [rng.int(1, 3), rng.int(1, 4), rng.int(1, 5)];
            let x = tf(&shape, &rng.vec(shape.iter().product(), -20.0, 20.0));
            for ax in 0..3 {
                let y =
                    vals(&softmax(&node("Softmax"), &Softmax { axis: ax as i64 }, &[Some(&x)]).unwrap()[0]);
                let (len, inner) = (shape[ax], shape[ax + 1..].iter().product::<usize>());
                let outer: usize = shape[..ax].iter().product();
                for o in 0..outer {
                    for i in 0..inner {
                        let s: f64 = (0..len).map(|k| y[(o * len + k) * inner + i]).sum();
                        assert!((s - 1.0).abs() < 1e-6, "axis {ax}: row sums to {s}");
                    }
                }
                assert!(y.iter().all(|v| (0.0..=1.0).contains(v)));
            }
        }
    }

    #[test]
    fn softmax_log_softmax_and_hardmax_by_hand() {
        let x = tf(&[2, 3], &[0., 1., 2., 5., 5., 1.]);
        let y = vals(&softmax(&node("Softmax"), &Softmax::default(), &[Some(&x)]).unwrap()[0]);
        let e = [1.0, 1f64.exp(), 2f64.exp()];
        let s: f64 = e.iter().sum();
        assert_close(&y[..3], &[e[0] / s, e[1] / s, e[2] / s], 1e-6);
        let l = vals(&log_softmax(&node("LogSoftmax"), &Softmax::default(), &[Some(&x)]).unwrap()[0]);
        assert_close(&l[..3], &[-s.ln(), 1.0 - s.ln(), 2.0 - s.ln()], 1e-6);
        let h = vals(&hardmax(&node("Hardmax"), &Softmax::default(), &[Some(&x)]).unwrap()[0]);
        assert_eq!(h, [0., 0., 1., 1., 0., 0.]);
        let h0 = vals(&hardmax(&node("Hardmax"), &Softmax { axis: 0 }, &[Some(&x)]).unwrap()[0]);
        assert_eq!(h0, [0., 0., 1., 1., 1., 0.]);
        assert!(softmax(&node("Softmax"), &Softmax { axis: 2 }, &[Some(&x)]).is_err());
    }
}
