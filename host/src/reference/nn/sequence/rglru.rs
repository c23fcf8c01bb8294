//! Griffin RG-LRU core: SOFIE's `GriffinRGLRU` and ferrofuse's `RGLRU` (OPS.md "SOFIE's
//! contracts" and "Griffin RG-LRU", step 6 with the `sqrt(1 − a²)` normalization), and ferrofuse's
//! `LinearScan`, the same recurrence without the normalization.
//!
//! `h_t = a_t ⊙ h_{t−1} + sqrt(1 − a_t²) ⊙ x_t` (`LinearScan`: `+ x_t`), `y_t = h_t`. Where the
//! reset mask is set, `a_t` is zeroed and the multiplier is 1, so `h_t = x_t`. Gating (r, i, Λ)
//! happens upstream.

use planner::DType;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::nn::operand::{Floats, expect_shape, input, input_opt, optional, tensor};
use crate::tensor::HostTensor;

/// Runs the scan over x, a `(B, L, W)` (`normalized`: x scaled by `sqrt(1 − a²)`); returns y and
/// the final state `(B, W)`.
fn scan(
    node: &NodeCtx,
    x: &Floats,
    a: &Floats,
    reset: Option<&[f64]>,
    init: Option<&Floats>,
    normalized: bool,
) -> Result<(Vec<f64>, Vec<f64>), HostError> {
    let [b, l, w] = <[usize; 3]>::try_from(x.shape.as_slice())
        .map_err(|_| node.err(format!("x must be (B, L, W), got {:?}", x.shape)))?;
    expect_shape(node, &a.shape, &x.shape, "a")?;
    if let Some(r) = reset
        && r.len() != b * l
    {
        return Err(node.err(format!("reset must be ({b}, {l}), got {} elements", r.len())));
    }
    if let Some(i) = init {
        expect_shape(node, &i.shape, &[b, w], "initial_state")?;
    }
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    let mut state = init.map_or(vec![0.0; b * w], |i| i.data.clone());
    for bi in 0..b {
        let h = &mut state[bi * w..(bi + 1) * w];
        for t in 0..l {
            let reset_here = reset.is_some_and(|r| r[bi * l + t] != 0.0);
            let o = (bi * l + t) * w;
            for (j, hj) in h.iter_mut().enumerate() {
                let (av, xv) = (a.data[o + j], x.data[o + j]);
                let scale = if normalized { (1.0 - av * av).max(0.0).sqrt() } else { 1.0 };
                *hj = if reset_here { xv } else { av * *hj + scale * xv };
                y[o + j] = *hj;
            }
        }
    }
    Ok((y, state))
}

/// SOFIE `GriffinRGLRU(x[B,L,D], a[B,L,D]) -> y[B,L,D]` (OPS.md "SOFIE's contracts"): the scan
/// from a zero state, no reset.
pub fn griffin_rglru(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (x, a) = (input(node, inputs, 0, "x")?, input(node, inputs, 1, "a")?);
    let (y, _) = scan(node, &x, &a, None, None, true)?;
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

/// ferrofuse `RGLRU` (OPS.md "Griffin RG-LRU"): inputs x `(B,L,W)`, a `(B,L,W)`, reset? `(B,L)`
/// (bool or numeric, nonzero = position 0), initial_state? `(B,W)`; outputs y (x's dtype) and the
/// final state `(B,W)` in F32.
pub fn rglru(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (x, a) = (input(node, inputs, 0, "x")?, input(node, inputs, 1, "a")?);
    let reset = optional(inputs, 2).map(|r| r.data().to_f64s());
    let init = input_opt(node, inputs, 3, "initial_state")?;
    let (y, state) = scan(node, &x, &a, reset.as_deref(), init.as_ref(), true)?;
    outputs(node, &x, y, state)
}

/// ferrofuse `LinearScan`: inputs x `(B,L,W)`, a `(B,L,W)`, initial_state? `(B,W)`; outputs
/// `y_t = a_t ⊙ y_{t−1} + x_t` (x's dtype) and the final state `(B,W)` in F32.
pub fn linear_scan(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (x, a) = (input(node, inputs, 0, "x")?, input(node, inputs, 1, "a")?);
    let init = input_opt(node, inputs, 2, "initial_state")?;
    let (y, state) = scan(node, &x, &a, None, init.as_ref(), false)?;
    outputs(node, &x, y, state)
}

/// y in x's dtype and shape, and the final state `(B, W)` in F32.
fn outputs(node: &NodeCtx, x: &Floats, y: Vec<f64>, state: Vec<f64>) -> Result<Vec<HostTensor>, HostError> {
    let state_shape = vec![x.shape[0], x.shape[2]];
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?, tensor(node, DType::F32, state_shape, state)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

    #[test]
    fn zero_decay_passes_x_through() {
        let mut rng = Rng::new(41);
        let x = tf(&[2, 4, 3], &rng.vec(24, -2.0, 2.0));
        let a = tf(&[2, 4, 3], &[0.0; 24]);
        let y = rglru(&node("RGLRU"), &(), &[Some(&x), Some(&a)]).unwrap();
        assert_eq!(vals(&y[0]), vals(&x));
        assert_eq!(vals(&y[1]), vals(&x)[9..12].iter().chain(&vals(&x)[21..24]).copied().collect::<Vec<_>>());
        assert_eq!(y[1].dtype(), DType::F32);
        let g = griffin_rglru(&node("GriffinRGLRU"), &(), &[Some(&x), Some(&a)]).unwrap();
        assert_eq!(vals(&g[0]), vals(&x));
    }

    #[test]
    fn normalized_recurrence_by_hand_with_reset_and_state() {
        let x = tf(&[1, 3, 1], &[1., 2., 3.]);
        let a = tf(&[1, 3, 1], &[0.6, 0.6, 0.6]);
        let h1 = 0.8;
        let h2 = 0.6 * h1 + 0.8 * 2.;
        let y = rglru(&node("RGLRU"), &(), &[Some(&x), Some(&a)]).unwrap();
        assert_close(&vals(&y[0]), &[h1, h2, 0.6 * h2 + 0.8 * 3.], 1e-6);
        let reset = HostTensor::new(vec![1, 3], vec![false, true, false]).unwrap();
        let init = tf(&[1, 1], &[10.]);
        let y = rglru(&node("RGLRU"), &(), &[Some(&x), Some(&a), Some(&reset), Some(&init)]).unwrap();
        let h1 = 0.6 * 10. + 0.8;
        assert_close(&vals(&y[0]), &[h1, 2., 0.6 * 2. + 0.8 * 3.], 1e-6);
        assert_close(&vals(&y[1]), &[0.6 * 2. + 0.8 * 3.], 1e-6);
        let bad = tf(&[1, 2, 1], &[0.; 2]);
        assert!(rglru(&node("RGLRU"), &(), &[Some(&x), Some(&bad)]).is_err());
    }

    #[test]
    fn linear_scan_by_hand_from_a_state() {
        let x = tf(&[1, 3, 2], &[1., -1., 2., 0., 3., 1.]);
        let a = tf(&[1, 3, 2], &[0.5, 2., 0.5, 2., 0.5, 2.]);
        let init = tf(&[1, 2], &[4., 1.]);
        let y = linear_scan(&node("LinearScan"), &(), &[Some(&x), Some(&a), Some(&init)]).unwrap();
        // Channel 0: 0.5·4 + 1 = 3, 0.5·3 + 2 = 3.5, 0.5·3.5 + 3 = 4.75; channel 1: 2·1 − 1 = 1,
        // 2·1 + 0 = 2, 2·2 + 1 = 5.
        assert_close(&vals(&y[0]), &[3., 1., 3.5, 2., 4.75, 5.], 1e-12);
        assert_close(&vals(&y[1]), &[4.75, 5.], 1e-12);
        // From zero: channel 0: 1, 2.5, 4.25; channel 1: −1, −2, −3.
        let y = linear_scan(&node("LinearScan"), &(), &[Some(&x), Some(&a)]).unwrap();
        assert_close(&vals(&y[1]), &[4.25, -3.], 1e-12);
        let bad = tf(&[1, 3], &[0.; 3]);
        assert!(linear_scan(&node("LinearScan"), &(), &[Some(&x), Some(&a), Some(&bad)]).is_err());
    }
}
