//! Reference `ai.onnx.preview.training` optimizers: `Adagrad`, `Adam` and `Momentum`.
//!
//! Inputs are `R` (scalar learning rate), `T` (scalar I64 update count) and then `groups` lists
//! of `n` same-shaped float tensors (`X…`, `G…`, states…); outputs are the `n` updated `X`
//! followed by each updated state list. Each tensor group updates elementwise and independently.

use planner::op::{Adagrad, Adam, Momentum, MomentumMode};

use super::operand::{Floats, expect_shape, floats, ints, required, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// `R` and `T` plus, per optimized tensor, its `groups` operands (`X`, `G`, states) in order.
struct Step {
    r: f64,
    t: i64,
    sets: Vec<Vec<Floats>>,
}

fn step(node: &NodeCtx, inputs: &[Option<&HostTensor>], groups: usize) -> Result<Step, HostError> {
    let r = floats(node, required(node, inputs, 0, "R")?, "R")?;
    let t = ints(node, required(node, inputs, 1, "T")?, "T")?;
    let (&[r], &[t]) = (r.data.as_slice(), t.as_slice()) else {
        return Err(node.err("R and T must hold one element each"));
    };
    let rest = inputs.len().saturating_sub(2);
    if rest == 0 || !rest.is_multiple_of(groups) {
        return Err(node.err(format!("expected R, T and {groups} lists of equal length, got {rest} tensors")));
    }
    let n = rest / groups;
    let mut sets = crate::tensor::try_with_capacity(n, "a working buffer")?;
    for k in 0..n {
        let mut set = crate::tensor::try_with_capacity(groups, "a working buffer")?;
        for g in 0..groups {
            let slot = 2 + g * n + k;
            let v = floats(node, required(node, inputs, slot, "optimizer operand")?, "optimizer operand")?;
            if let Some(x) = set.first() {
                let x: &Floats = x;
                expect_shape(node, &v.shape, &x.shape, &format!("input {slot}"))?;
            }
            set.push(v);
        }
        sets.push(set);
    }
    Ok(Step { r, t, sets })
}

/// Runs `update` on every element of every tensor group (`vals[j]` is operand `j` of the
/// group) and lays the results out as `n` outputs per produced list, list by list.
fn apply(
    node: &NodeCtx,
    s: &Step,
    lists: usize,
    update: impl Fn(&[f64]) -> Vec<f64>,
) -> Result<Vec<HostTensor>, HostError> {
    let mut per_list: Vec<Vec<HostTensor>> = (0..lists).map(|_| Vec::with_capacity(s.sets.len())).collect();
    for set in &s.sets {
        let len = set.first().map_or(0, |x| x.data.len());
        let mut outs = vec![Vec::with_capacity(len); lists];
        for i in 0..len {
            let vals: Vec<f64> = set.iter().map(|t| t.data[i]).collect();
            for (out, v) in outs.iter_mut().zip(update(&vals)) {
                out.push(v);
            }
        }
        // List 0 is X (operand 0); list j > 0 is state operand j + 1 (after G).
        for (j, (data, dst)) in outs.into_iter().zip(per_list.iter_mut()).enumerate() {
            let src = if j == 0 { 0 } else { j + 1 };
            let like = set.get(src).ok_or_else(|| node.err("missing optimizer operand"))?;
            dst.push(tensor(node, like.dtype, like.shape.clone(), data)?);
        }
    }
    Ok(per_list.into_iter().flatten().collect())
}

/// `Adagrad`: `r' = R / (1 + T·decay_factor)`, `g = norm_coefficient·X + G`, `H' = H + g²`,
/// `X' = X − r'·g / (√H' + epsilon)`.
pub fn adagrad(
    node: &NodeCtx,
    a: &Adagrad,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let s = step(node, inputs, 3)?;
    let rate = s.r / (1.0 + s.t as f64 * a.decay_factor as f64);
    let (norm, eps) = (a.norm_coefficient as f64, a.epsilon as f64);
    apply(node, &s, 2, |v| {
        let (x, g, h) = (v[0], v[1], v[2]);
        let g = norm * x + g;
        let h = h + g * g;
        vec![x - rate * g / (h.sqrt() + eps), h]
    })
}

/// `Adam`: `g = norm_coefficient·X + G`, `V' = α·V + (1−α)·g`, `H' = β·H + (1−β)·g²`,
/// `r' = R·√(1−β^T) / (1−α^T)` when `T > 0` (else `R`),
/// `X' = (1 − norm_coefficient_post)·(X − r'·V' / (√H' + epsilon))`.
pub fn adam(node: &NodeCtx, a: &Adam, inputs: &[Option<&HostTensor>]) -> Result<Vec<HostTensor>, HostError> {
    let s = step(node, inputs, 4)?;
    let (alpha, beta) = (a.alpha as f64, a.beta as f64);
    let rate = if s.t > 0 {
        let t = s.t as f64;
        s.r * (1.0 - beta.powf(t)).sqrt() / (1.0 - alpha.powf(t))
    } else {
        s.r
    };
    let (norm, post, eps) = (a.norm_coefficient as f64, a.norm_coefficient_post as f64, a.epsilon as f64);
    apply(node, &s, 3, |v| {
        let (x, g, m, h) = (v[0], v[1], v[2], v[3]);
        let g = norm * x + g;
        let m = alpha * m + (1.0 - alpha) * g;
        let h = beta * h + (1.0 - beta) * g * g;
        vec![(1.0 - post) * (x - rate * (m / (h.sqrt() + eps))), m, h]
    })
}

/// `Momentum`: `g = norm_coefficient·X + G`, `V' = α·V + β'·g` with `β' = β` when `T > 0`
/// (1 at the first update), then `X' = X − R·V'` (standard) or `X' = X − R·(g + α·V')`
/// (Nesterov).
pub fn momentum(
    node: &NodeCtx,
    a: &Momentum,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let s = step(node, inputs, 3)?;
    let (alpha, norm) = (a.alpha as f64, a.norm_coefficient as f64);
    let beta = if s.t > 0 { a.beta as f64 } else { 1.0 };
    let r = s.r;
    apply(node, &s, 2, |v| {
        let (x, g, m) = (v[0], v[1], v[2]);
        let g = norm * x + g;
        let m = alpha * m + beta * g;
        let x = match a.mode {
            MomentumMode::Standard => x - r * m,
            MomentumMode::Nesterov => x - r * (g + alpha * m),
        };
        vec![x, m]
    })
}

#[cfg(test)]
mod tests {
    use planner::op::{Adagrad, Adam, Momentum, MomentumMode};

    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, ti, vals};

    #[test]
    fn adagrad_by_hand() {
        // r' = 0.1 / (1 + 2·0.5) = 0.05; g = 0.5·2 + 1 = 2; H' = 5 + 4 = 9;
        // X' = 2 − 0.05·2 / (3 + 1) = 1.975.
        let a = Adagrad { decay_factor: 0.5, epsilon: 1.0, norm_coefficient: 0.5 };
        let (r, t, x, g, h) =
            (tf(&[], &[0.1]), ti(&[], &[2]), tf(&[1], &[2.0]), tf(&[1], &[1.0]), tf(&[1], &[5.0]));
        let out = adagrad(&node("Adagrad"), &a, &[Some(&r), Some(&t), Some(&x), Some(&g), Some(&h)]).unwrap();
        assert_eq!(out.len(), 2);
        assert_close(&vals(&out[0]), &[1.975], 1e-6);
        assert_close(&vals(&out[1]), &[9.0], 1e-6);
    }

    #[test]
    fn adam_by_hand() {
        // T = 1, α = 0.5, β = 0.75: g = 1; V' = 0.5·1 + 0.5·1 = 1; H' = 0.75·0 + 0.25·1 = 0.25;
        // r' = 0.1·√0.25 / 0.5 = 0.1; X' = (1 − 0.5)·(3 − 0.1·1 / 0.5) = 1.4.
        let a =
            Adam { alpha: 0.5, beta: 0.75, epsilon: 0.0, norm_coefficient: 0.0, norm_coefficient_post: 0.5 };
        let (r, t) = (tf(&[], &[0.1]), ti(&[], &[1]));
        let (x, g, v, h) = (tf(&[1], &[3.0]), tf(&[1], &[1.0]), tf(&[1], &[1.0]), tf(&[1], &[0.0]));
        let ins = [Some(&r), Some(&t), Some(&x), Some(&g), Some(&v), Some(&h)];
        let out = adam(&node("Adam"), &a, &ins).unwrap();
        assert_eq!(out.len(), 3);
        assert_close(&vals(&out[0]), &[1.4], 1e-6);
        assert_close(&vals(&out[1]), &[1.0], 1e-6);
        assert_close(&vals(&out[2]), &[0.25], 1e-6);
    }

    #[test]
    fn momentum_by_hand_standard_nesterov_and_multiple() {
        // T = 1, α = 0.5, β = 2, norm 0: V' = 0.5·4 + 2·1 = 4; standard X' = 1 − 0.1·4 = 0.6;
        // Nesterov X' = 1 − 0.1·(1 + 0.5·4) = 0.7. At T = 0, β' = 1: V' = 2 + 1 = 3.
        let mut a = Momentum { alpha: 0.5, beta: 2.0, norm_coefficient: 0.0, mode: MomentumMode::Standard };
        let (r, t1, t0) = (tf(&[], &[0.1]), ti(&[], &[1]), ti(&[], &[0]));
        let (x1, x2) = (tf(&[1], &[1.0]), tf(&[2], &[1.0, 1.0]));
        let (g1, g2) = (tf(&[1], &[1.0]), tf(&[2], &[1.0, 1.0]));
        let (v1, v2) = (tf(&[1], &[4.0]), tf(&[2], &[4.0, 4.0]));
        let ins = [Some(&r), Some(&t1), Some(&x1), Some(&x2), Some(&g1), Some(&g2), Some(&v1), Some(&v2)];
        let out = momentum(&node("Momentum"), &a, &ins).unwrap();
        let got: Vec<Vec<f64>> = out.iter().map(vals).collect();
        assert_eq!(out.len(), 4);
        assert_close(&got.concat(), &[0.6, 0.6, 0.6, 4.0, 4.0, 4.0], 1e-6);
        a.mode = MomentumMode::Nesterov;
        let out = momentum(&node("Momentum"), &a, &ins).unwrap();
        assert_close(&vals(&out[0]), &[0.7], 1e-6);
        let ins = [Some(&r), Some(&t0), Some(&x1), Some(&g1), Some(&v1)];
        let out = momentum(&node("Momentum"), &a, &ins).unwrap();
        assert_close(&vals(&out[1]), &[3.0], 1e-6);
        // Mismatched group shapes and a ragged input list are errors.
        assert!(
            momentum(&node("Momentum"), &a, &[Some(&r), Some(&t0), Some(&x1), Some(&g2), Some(&v1)]).is_err()
        );
        assert!(momentum(&node("Momentum"), &a, &ins[..4]).is_err());
    }
}
