//! Reference `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss` (opsets 12/13).
//!
//! With input `(N, C, d...)` and target `(N, d...)`, each position `(n, d)` whose target `t` is
//! not `ignore_index` contributes `loss = -w[t] * input[n, t, d]` with weight `w[t]` (1 without
//! weights); ignored positions contribute loss 0 and weight 0. Reduction `none` returns the
//! losses, `sum` their sum, `mean` their sum over the sum of the weights applied (so without
//! weights, over the number of positions not ignored). A target outside `[0, C)` that is not
//! `ignore_index` is an error. SoftmaxCrossEntropyLoss applies this to the log-softmax of its
//! scores along axis 1, which it also returns as its optional second output.

use planner::op::LossReduction;

use super::operand::{Floats, input, input_opt, ints, required, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// The loss over log-probabilities `x` `(N, C, d...)`, shaped and reduced.
fn nll(
    node: &NodeCtx,
    x: &Floats,
    target: &[i64],
    target_shape: &[usize],
    weight: Option<&Floats>,
    reduction: LossReduction,
    ignore_index: Option<i64>,
) -> Result<HostTensor, HostError> {
    if x.shape.len() < 2 || target_shape.len() + 1 != x.shape.len() {
        return Err(node.err(format!(
            "input {:?} and target {target_shape:?} must be (N, C, d...) and (N, d...)",
            x.shape
        )));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    if target_shape[0] != n || target_shape[1..] != x.shape[2..] {
        return Err(node.err(format!("target {target_shape:?} does not match input {:?}", x.shape)));
    }
    if let Some(w) = weight
        && w.shape != [c]
    {
        return Err(node.err(format!("weight {:?} must have shape [{c}]", w.shape)));
    }
    let inner: usize = x.shape[2..].iter().product();
    let mut losses = crate::tensor::try_filled(n * inner, 0.0, "a working buffer")?;
    let mut weight_sum = 0.0;
    for b in 0..n {
        for d in 0..inner {
            let at = b * inner + d;
            let t = target[at];
            if Some(t) == ignore_index {
                continue;
            }
            let class = usize::try_from(t)
                .ok()
                .filter(|&k| k < c)
                .ok_or_else(|| node.err(format!("target {t} is outside [0, {c})")))?;
            let w = weight.map_or(1.0, |w| w.data[class]);
            losses[at] = -w * x.data[(b * c + class) * inner + d];
            weight_sum += w;
        }
    }
    match reduction {
        LossReduction::None => tensor(node, x.dtype, target_shape.to_vec(), losses),
        LossReduction::Sum => tensor(node, x.dtype, Vec::new(), vec![losses.iter().sum()]),
        LossReduction::Mean => {
            tensor(node, x.dtype, Vec::new(), vec![losses.iter().sum::<f64>() / weight_sum])
        }
    }
}

/// Target (input 1) as integers with its shape.
fn target(node: &NodeCtx, inputs: &[Option<&HostTensor>]) -> Result<(Vec<i64>, Vec<usize>), HostError> {
    let t = required(node, inputs, 1, "target")?;
    Ok((ints(node, t, "target")?, t.shape().to_vec()))
}

/// ONNX `NegativeLogLikelihoodLoss(input, target, weight?)`.
pub fn negative_log_likelihood_loss(
    node: &NodeCtx,
    attrs: &planner::op::NegativeLogLikelihoodLoss,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "input")?;
    let (t, shape) = target(node, inputs)?;
    let w = input_opt(node, inputs, 2, "weight")?;
    Ok(vec![nll(node, &x, &t, &shape, w.as_ref(), attrs.reduction, attrs.ignore_index)?])
}

/// ONNX `SoftmaxCrossEntropyLoss(scores, labels, weights?)` -> loss, log_prob.
pub fn softmax_cross_entropy_loss(
    node: &NodeCtx,
    attrs: &planner::op::SoftmaxCrossEntropyLoss,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let mut x = input(node, inputs, 0, "scores")?;
    if x.shape.len() < 2 {
        return Err(node.err(format!("scores {:?} must be (N, C, d...)", x.shape)));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let inner: usize = x.shape[2..].iter().product();
    for b in 0..n {
        for d in 0..inner {
            let at = |k: usize| (b * c + k) * inner + d;
            let max = (0..c).map(|k| x.data[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let log_sum = (0..c).map(|k| (x.data[at(k)] - max).exp()).sum::<f64>().ln();
            for k in 0..c {
                x.data[at(k)] = x.data[at(k)] - max - log_sum;
            }
        }
    }
    let (t, shape) = target(node, inputs)?;
    let w = input_opt(node, inputs, 2, "weights")?;
    let loss = nll(node, &x, &t, &shape, w.as_ref(), attrs.reduction, attrs.ignore_index)?;
    let log_prob = tensor(node, x.dtype, x.shape.clone(), x.data)?;
    Ok(vec![loss, log_prob])
}

#[cfg(test)]
mod tests {
    use planner::op::{NegativeLogLikelihoodLoss as Nll, SoftmaxCrossEntropyLoss as Sce};

    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, ti, vals};

    fn nll_of(attrs: Nll, ins: &[Option<&HostTensor>]) -> Vec<f64> {
        vals(&negative_log_likelihood_loss(&node("NegativeLogLikelihoodLoss"), &attrs, ins).unwrap()[0])
    }

    #[test]
    fn nll_reductions_weights_and_ignore_index() {
        // N = 2, C = 3.
        let x = tf(&[2, 3], &[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]);
        let t = ti(&[2], &[2, 0]);
        let none = Nll { reduction: LossReduction::None, ignore_index: None };
        assert_close(&nll_of(none.clone(), &[Some(&x), Some(&t)]), &[3.0, 4.0], 0.0);
        let sum = Nll { reduction: LossReduction::Sum, ..none.clone() };
        assert_close(&nll_of(sum, &[Some(&x), Some(&t)]), &[7.0], 0.0);
        assert_close(&nll_of(Nll::default(), &[Some(&x), Some(&t)]), &[3.5], 0.0);
        // Weighted mean: (0.5 * 3 + 2 * 4) / (0.5 + 2) = 3.8.
        let w = tf(&[3], &[2.0, 1.0, 0.5]);
        assert_close(&nll_of(Nll::default(), &[Some(&x), Some(&t), Some(&w)]), &[3.8], 1e-7);
        // Ignoring class 0 leaves only the first position, weight 0.5: 1.5 / 0.5.
        let ii = Nll { ignore_index: Some(0), ..Nll::default() };
        assert_close(&nll_of(ii.clone(), &[Some(&x), Some(&t), Some(&w)]), &[3.0], 1e-7);
        assert_close(&nll_of(ii, &[Some(&x), Some(&t)]), &[3.0], 1e-7);
        let bad = ti(&[2], &[3, 0]);
        assert!(negative_log_likelihood_loss(&node("N"), &Nll::default(), &[Some(&x), Some(&bad)]).is_err());
    }

    #[test]
    fn nll_keeps_spatial_dims() {
        // (N, C, d) = (1, 2, 2): targets [1, 0] pick x[0,1,0] = -3 and x[0,0,1] = -2.
        let x = tf(&[1, 2, 2], &[-1.0, -2.0, -3.0, -4.0]);
        let t = ti(&[1, 2], &[1, 0]);
        let none = Nll { reduction: LossReduction::None, ignore_index: None };
        let y = negative_log_likelihood_loss(&node("N"), &none, &[Some(&x), Some(&t)]).unwrap();
        assert_eq!(y[0].shape(), [1, 2]);
        assert_close(&vals(&y[0]), &[3.0, 2.0], 0.0);
    }

    #[test]
    fn softmax_cross_entropy_of_uniform_scores() {
        // Equal scores: log_prob = -ln 2 everywhere, loss = ln 2.
        let x = tf(&[1, 2], &[5.0, 5.0]);
        let t = ti(&[1], &[1]);
        let out = softmax_cross_entropy_loss(&node("S"), &Sce::default(), &[Some(&x), Some(&t)]).unwrap();
        let ln2 = std::f64::consts::LN_2;
        assert_close(&vals(&out[0]), &[ln2], 1e-7);
        assert_close(&vals(&out[1]), &[-ln2, -ln2], 1e-7);
        // Scores (0, ln 3): p = (1/4, 3/4); class 0 costs ln 4.
        let x = tf(&[1, 2], &[0.0, 3f64.ln()]);
        let t = ti(&[1], &[0]);
        let out = softmax_cross_entropy_loss(&node("S"), &Sce::default(), &[Some(&x), Some(&t)]).unwrap();
        assert_close(&vals(&out[0]), &[4f64.ln()], 1e-6);
    }
}
