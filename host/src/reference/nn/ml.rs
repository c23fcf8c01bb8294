//! Reference `ai.onnx.ml` operators (`Binarizer`, `ArrayFeatureExtractor`) and the text
//! featurizer `TfIdfVectorizer` over integer tokens.

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

/// `TfIdfVectorizer(X)` over integer rows (`[C]` or `[B, C]`), as ONNX's reference counts: per
/// row and per skip distance `d` in `1 ..= max_skip_count + 1`, from every start position, the
/// items `start, start + d, ...` are walked through the pool's n-grams (prefixes included) for as
/// long as a prefix of the pool matches; each n-gram reached that is at least `min_gram_length`
/// long counts once into its output column. 1-grams are counted at distance 1 only. The counts
/// are then weighed per `mode`; the output is f32 `[W]` or `[B, W]`.
pub fn tf_idf_vectorizer(
    node: &NodeCtx,
    attrs: &planner::op::TfIdfVectorizer,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    use std::collections::HashMap;
    let x = required(node, inputs, 0, "X")?;
    let items = ints(node, x, "X")?;
    let (rows, cols) = match x.shape() {
        [c] => (1, *c),
        [b, c] => (*b, *c),
        s => return Err(node.err(format!("X must be [C] or [B, C], got {s:?}"))),
    };
    // Every prefix of every n-gram of the pool, with its id (0: only a prefix), as ONNX's
    // reference numbers them: consecutively from 1 in pool order, n-grams outside the counted
    // lengths taking ids without entering.
    let mut grams: HashMap<&[i64], usize> = HashMap::new();
    let mut id = 1;
    for (k, &start) in attrs.ngram_counts.iter().enumerate() {
        let n = k + 1;
        let end = attrs.ngram_counts.get(k + 1).copied().unwrap_or(attrs.pool.len() as i64);
        let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
            return Err(node.err("ngram_counts holds a negative start"));
        };
        let pool = attrs.pool.get(start..end).ok_or_else(|| {
            node.err(format!("ngram_counts entry {k} ({start}..{end}) is outside the pool"))
        })?;
        let counted = (attrs.min_gram_length..=attrs.max_gram_length).contains(&n);
        for gram in pool.chunks_exact(n) {
            if counted {
                for p in 1..n {
                    grams.entry(&gram[..p]).or_insert(0);
                }
                // (A gram listed twice takes its last id, as ONNX's reference numbers it.)
                grams.insert(gram, id);
            }
            id += 1;
        }
    }
    // (Out of range: too many columns for `count`.)
    let width = attrs.width().unwrap_or(usize::MAX);
    let n = count(node, &[rows, width])?;
    let mut counts = vec![0u64; n];
    for r in 0..rows {
        let row = &items[r * cols..(r + 1) * cols];
        let mut shortest = attrs.min_gram_length;
        // A distance of `cols` or more reaches no second item: larger ones count nothing more.
        for d in 1..=attrs.max_skip_count.saturating_add(1).min(cols.max(1)) {
            for start in 0..cols {
                if start.saturating_add(d.saturating_mul(shortest.saturating_sub(1))) >= cols {
                    break;
                }
                let mut walked = Vec::with_capacity(attrs.max_gram_length.min(cols));
                let mut at = start;
                while walked.len() < attrs.max_gram_length && at < cols {
                    walked.push(row[at]);
                    let Some(&gid) = grams.get(walked.as_slice()) else { break };
                    if walked.len() >= shortest && gid != 0 {
                        let column = attrs.ngram_indexes.get(gid - 1).and_then(|&c| usize::try_from(c).ok());
                        let column =
                            column.ok_or_else(|| node.err(format!("n-gram {gid} has no output column")))?;
                        counts[r * width + column] += 1;
                    }
                    at += d;
                }
            }
            if shortest == 1 {
                shortest = 2;
                if shortest > attrs.max_gram_length {
                    break;
                }
            }
        }
    }
    use planner::op::TfIdfMode;
    let w = &attrs.weights;
    let data: Vec<f32> = counts
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let weight = w.get(i % width.max(1)).copied();
            match attrs.mode {
                TfIdfMode::Tf => c as f32,
                TfIdfMode::Idf if c > 0 => weight.unwrap_or(1.0),
                TfIdfMode::Idf => 0.0,
                TfIdfMode::TfIdf => weight.map_or(c as f32, |w| w * c as f32),
            }
        })
        .collect();
    let shape = if x.shape().len() == 1 { vec![width] } else { vec![rows, width] };
    Ok(vec![HostTensor::new(shape, data)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, tf, ti, vals};

    /// Hostile lengths and distances are bounded by the row, not allocated or looped over.
    #[test]
    fn tf_idf_bounds_hostile_lengths_and_skips() {
        let t = planner::op::TfIdfVectorizer {
            min_gram_length: 1,
            max_gram_length: 1 << 60,
            max_skip_count: usize::MAX,
            mode: planner::op::TfIdfMode::Tf,
            ngram_counts: vec![0, 2],
            ngram_indexes: vec![0, 1, 2],
            pool: vec![5, 6, 5, 6],
            weights: vec![],
        };
        let x = ti(&[2, 4], &[5, 6, 5, 6, 6, 5, 6, 6]);
        let out = tf_idf_vectorizer(&node("TfIdf"), &t, &[Some(&x)]).unwrap();
        // Row 0: 5 x2, 6 x2, (5 6) at distance 1 twice and at distance 3 once; row 1: 5 once,
        // 6 three times, (5 6) at distances 1 and 2.
        assert_eq!(vals(&out[0]), [2., 2., 3., 1., 3., 2.]);
        let bad = planner::op::TfIdfVectorizer { ngram_counts: vec![0, 9], ..t };
        assert!(tf_idf_vectorizer(&node("TfIdf"), &bad, &[Some(&x)]).is_err());
    }

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
