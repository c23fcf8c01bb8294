//! Reference `ai.onnx.ml` operators: `Binarizer` and `ArrayFeatureExtractor`.

use planner::op::Binarizer;

use super::operand::{count, ints, numbers, required, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::gather_elems;
use crate::tensor::HostTensor;

/// `Binarizer(X)`: `x > threshold ? 1 : 0`, in X's dtype and shape.
pub fn binarizer(
    node: &NodeCtx,
    attrs: &Binarizer,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = required(node, inputs, 0, "X")?;
    let f = numbers(node, x, "X")?;
    let t = f64::from(attrs.threshold);
    let data = f.data.iter().map(|&v| if v > t { 1.0 } else { 0.0 }).collect();
    Ok(vec![tensor(node, x.dtype(), f.shape, data)?])
}

/// `ArrayFeatureExtractor(X, Y)`: the elements of X's last axis at the (flattened) indices Y, as
/// `X.shape[..-1] + [len(Y)]`; 1-D X gives `[1, len(Y)]`. Negative indices count from the end.
pub fn array_feature_extractor(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = required(node, inputs, 0, "X")?;
    let idx = ints(node, required(node, inputs, 1, "Y")?, "Y")?;
    let shape = x.shape();
    let Some((&n, outer_dims)) = shape.split_last() else {
        return Err(node.err("X must have rank 1 or more"));
    };
    let picks = idx
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + n as i64 } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| j < n)
                .ok_or_else(|| node.err(format!("index {i} is out of range for a last axis of {n}")))
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let outer = count(node, outer_dims)?;
    let mut out_shape = if outer_dims.is_empty() { vec![1] } else { outer_dims.to_vec() };
    out_shape.push(picks.len());
    let mut offsets = crate::tensor::try_with_capacity(count(node, &out_shape)?, "a working buffer")?;
    for o in 0..outer {
        offsets.extend(picks.iter().map(|&p| o * n + p));
    }
    Ok(vec![gather_elems(x, &offsets, out_shape)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, tf, ti, vals};

    #[test]
    fn binarizer_by_hand() {
        let x = tf(&[2, 2], &[-1., 0.5, 1.0, 2.0]);
        let out = binarizer(&node("Binarizer"), &Binarizer { threshold: 0.5 }, &[Some(&x)]).unwrap();
        assert_eq!(vals(&out[0]), [0., 0., 1., 1.]);
    }

    #[test]
    fn array_feature_extractor_by_hand() {
        let x = tf(&[3, 4], &(0..12).map(f64::from).collect::<Vec<_>>());
        let out = array_feature_extractor(&node("AFE"), &(), &[Some(&x), Some(&ti(&[2], &[0, -1]))]).unwrap();
        assert_eq!(out[0].shape(), [3, 2]);
        assert_eq!(vals(&out[0]), [0., 3., 4., 7., 8., 11.]);
        let v = tf(&[3], &[5., 6., 7.]);
        let out =
            array_feature_extractor(&node("AFE"), &(), &[Some(&v), Some(&ti(&[1, 2], &[2, 1]))]).unwrap();
        assert_eq!(out[0].shape(), [1, 2]);
        assert_eq!(vals(&out[0]), [7., 6.]);
        assert!(array_feature_extractor(&node("AFE"), &(), &[Some(&v), Some(&ti(&[1], &[3]))]).is_err());
    }
}
