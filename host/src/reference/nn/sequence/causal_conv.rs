//! ferrofuse `CausalConvWithState`: the depthwise causal conv1d of Mamba's and Griffin's blocks
//! with a carried window (planner `CausalConvWithState`; not yet in OPS.md).
//!
//! Per channel the input is prefixed with the `K − 1` carried values (zeros when absent), so
//! `y[t] = bias + Σₖ w[k]·xp[t + k]` over the prefixed sequence `xp`, and the new state is the
//! last `K − 1` values of `xp`.

use planner::op::{CausalConvWithState, ConvActivation};

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::nn::operand::{expect_shape, input, input_opt, silu, tensor};
use crate::tensor::HostTensor;

/// ferrofuse `CausalConvWithState`. Inputs x `(B,D,L)` (`(B,L,D)` with `channels_last`), weight
/// `(D,K)`, bias? `(D)`, initial_state? `(B,D,K−1)`; outputs y (x's layout and dtype, after the
/// activation) and the final state `(B,D,K−1)`, also of x's dtype.
pub fn causal_conv_with_state(
    node: &NodeCtx,
    attrs: &CausalConvWithState,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "x")?;
    let dims = <[usize; 3]>::try_from(x.shape.as_slice())
        .map_err(|_| node.err(format!("x must be 3-D, got {:?}", x.shape)))?;
    // Channels-last: (B, L, D); the value of channel c at step t is at `at(row, t)` either way.
    let [b, d, l] = if attrs.channels_last { [dims[0], dims[2], dims[1]] } else { dims };
    let at = |row: usize, t: usize| {
        if attrs.channels_last { ((row / d) * l + t) * d + row % d } else { row * l + t }
    };
    let w = input(node, inputs, 1, "weight")?;
    let k = match w.shape.as_slice() {
        &[wd, k] if wd == d && k > 0 => k,
        s => return Err(node.err(format!("weight must be ({d}, K) with K > 0, got {s:?}"))),
    };
    let bias = input_opt(node, inputs, 2, "bias")?;
    if let Some(bias) = &bias {
        expect_shape(node, &bias.shape, &[d], "bias")?;
    }
    let init = input_opt(node, inputs, 3, "initial_state")?;
    if let Some(s) = &init {
        expect_shape(node, &s.shape, &[b, d, k - 1], "initial_state")?;
    }
    let mut y = crate::tensor::try_filled(x.data.len(), 0.0, "a working buffer")?;
    let mut state = crate::tensor::try_with_capacity(b * d * (k - 1), "a working buffer")?;
    for row in 0..b * d {
        let ch = row % d;
        let mut xp = match &init {
            Some(s) => s.data[row * (k - 1)..(row + 1) * (k - 1)].to_vec(),
            None => vec![0.0; k - 1],
        };
        xp.extend((0..l).map(|t| x.data[at(row, t)]));
        for t in 0..l {
            let acc: f64 = bias.as_ref().map_or(0.0, |v| v.data[ch])
                + (0..k).map(|j| w.data[ch * k + j] * xp[t + j]).sum::<f64>();
            y[at(row, t)] = match attrs.activation {
                ConvActivation::None => acc,
                ConvActivation::Silu => silu(acc),
            };
        }
        state.extend_from_slice(&xp[xp.len() - (k - 1)..]);
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?, tensor(node, x.dtype, vec![b, d, k - 1], state)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::conv::conv;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};
    use planner::op::Conv;

    #[test]
    fn equals_a_left_padded_depthwise_conv_and_carries_state() {
        let mut rng = Rng::new(61);
        let (b, d, l, k) = (2, 3, 6, 4);
        let x = rng.vec(b * d * l, -1.0, 1.0);
        let w = rng.vec(d * k, -1.0, 1.0);
        let bias = rng.vec(d, -1.0, 1.0);
        let (xt, wt, bt) = (tf(&[b, d, l], &x), tf(&[d, k], &w), tf(&[d], &bias));
        let out = causal_conv_with_state(
            &node("CausalConvWithState"),
            &CausalConvWithState::default(),
            &[Some(&xt), Some(&wt), Some(&bt)],
        )
        .unwrap();
        let attrs = Conv { group: d, pads: vec![k - 1, 0], ..Conv::default() };
        let want = conv(&node("Conv"), &attrs, &[Some(&xt), Some(&tf(&[d, 1, k], &w)), Some(&bt)]).unwrap();
        assert_close(&vals(&out[0]), &vals(&want[0]), 1e-6);
        let last: Vec<f64> = x.chunks(l).flat_map(|c| c[l - (k - 1)..].to_vec()).collect();
        assert_close(&vals(&out[1]), &last, 1e-7);
        // Split the sequence at 2: the carried window makes the halves equal the whole (with SiLU).
        let silu_attrs = CausalConvWithState { activation: ConvActivation::Silu, ..Default::default() };
        let part = |lo: usize, hi: usize| {
            tf(&[b, d, hi - lo], &x.chunks(l).flat_map(|c| c[lo..hi].to_vec()).collect::<Vec<_>>())
        };
        let whole =
            causal_conv_with_state(&node("C"), &silu_attrs, &[Some(&xt), Some(&wt), Some(&bt)]).unwrap();
        let first =
            causal_conv_with_state(&node("C"), &silu_attrs, &[Some(&part(0, 2)), Some(&wt), Some(&bt)])
                .unwrap();
        let second = causal_conv_with_state(
            &node("C"),
            &silu_attrs,
            &[Some(&part(2, l)), Some(&wt), Some(&bt), Some(&first[1])],
        )
        .unwrap();
        let joined: Vec<f64> = vals(&first[0])
            .chunks(2)
            .zip(vals(&second[0]).chunks(l - 2))
            .flat_map(|(a, c)| [a, c].concat())
            .collect();
        assert_close(&joined, &vals(&whole[0]), 1e-6);
        assert_close(&vals(&second[1]), &vals(&whole[1]), 1e-7);
        assert!(
            vals(&whole[0]).iter().zip(vals(&out[0])).any(|(a, c)| (a - c).abs() > 1e-3),
            "SiLU must apply"
        );
        // Channels-last: the same conv of x transposed to (B, L, D), its output transposed back,
        // the state as before.
        let swap = |v: &[f64], rows: usize, cols: usize| -> Vec<f64> {
            (0..b)
                .flat_map(|bi| {
                    (0..cols).flat_map(move |c| (0..rows).map(move |r| v[(bi * rows + r) * cols + c]))
                })
                .collect()
        };
        let last = CausalConvWithState { channels_last: true, ..silu_attrs.clone() };
        let xl = tf(&[b, l, d], &swap(&x, d, l));
        let init = &first[1];
        let got = causal_conv_with_state(&node("C"), &last, &[Some(&xl), Some(&wt), Some(&bt), Some(init)])
            .unwrap();
        let want =
            causal_conv_with_state(&node("C"), &silu_attrs, &[Some(&xt), Some(&wt), Some(&bt), Some(init)])
                .unwrap();
        assert_eq!(got[0].shape(), [b, l, d]);
        assert_close(&swap(&vals(&got[0]), l, d), &vals(&want[0]), 1e-12);
        assert_close(&vals(&got[1]), &vals(&want[1]), 1e-12);
    }
}
