//! Constructors of the `ai.onnx.preview` operator `FlexAttention` and the `ai.onnx.ml`
//! operators (`Binarizer`, `TreeEnsemble`; `ArrayFeatureExtractor` is mapped inline).

use planner::op::{self, Op};

use crate::error::OnnxError;

use super::lower::Lower;

/// `FlexAttention(Q, K, V)` with optional `scale` and the `score_mod` / `prob_mod` graphs.
/// `softmax_precision` other than float (1) is rejected: the reference computes in f64 and the
/// supported inputs are f32.
pub(crate) fn flex_attention(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let scale = a.float("scale")?;
    if let Some(p) = a.int("softmax_precision")?
        && p != 1
    {
        return Err(a.invalid("softmax_precision", format!("{p} (only float, 1, is supported)")));
    }
    let score_mod = l.optional_subgraph("score_mod")?;
    let prob_mod = l.optional_subgraph("prob_mod")?;
    for (g, name) in [(&score_mod, "score_mod"), (&prob_mod, "prob_mod")] {
        if let Some(g) = g
            && (g.inputs.len() != 1 || g.outputs.len() != 1)
        {
            return Err(l.invalid(format!(
                "{name} has {} inputs and {} outputs; expected 1 and 1",
                g.inputs.len(),
                g.outputs.len()
            )));
        }
    }
    l.emit(Op::FlexAttention(op::FlexAttention { scale, score_mod, prob_mod }))
}

/// `Binarizer` with `threshold` (default 0).
pub(crate) fn binarizer(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let threshold = l.attrs().float_or("threshold", 0.0)?;
    l.emit(Op::Binarizer(op::Binarizer { threshold }))
}

/// `TreeEnsemble` (ai.onnx.ml opset 5): the node arrays are checked for matching lengths and the
/// NaN-delimited `membership_values` are split over the membership (mode 6) nodes in node order.
/// `post_transform` other than NONE (0) is rejected.
pub(crate) fn tree_ensemble(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::TreeAggregate as G;
    let a = l.attrs();
    let post = a.int_or("post_transform", 0)?;
    if post != 0 {
        return Err(a.invalid("post_transform", format!("{post} (only NONE, 0, is supported)")));
    }
    let aggregate = match a.int_or("aggregate_function", 1)? {
        0 => G::Average,
        1 => G::Sum,
        2 => G::Min,
        3 => G::Max,
        other => return Err(a.invalid("aggregate_function", format!("{other} is not 0..=3"))),
    };
    let n_targets = a.required("n_targets", a.usize("n_targets")?)?;
    let usizes = |name: &str| -> Result<Vec<usize>, OnnxError> {
        let v = a.required(name, a.ints(name)?)?;
        v.iter()
            .map(|&i| usize::try_from(i).map_err(|_| a.invalid(name, format!("holds negative {i}"))))
            .collect()
    };
    let flags = |name: &str| -> Result<Vec<bool>, OnnxError> {
        Ok(a.ints(name)?.unwrap_or_default().iter().map(|&i| i != 0).collect())
    };
    let floats = |name: &str, req: bool| -> Result<Option<Vec<f64>>, OnnxError> {
        match l.tensor_attr(name)? {
            Some(t) => Ok(Some(t.to_f64s())),
            None if req => Err(a.invalid(name, "is required")),
            None => Ok(None),
        }
    };
    let nodes_modes: Vec<u8> = floats("nodes_modes", true)?
        .unwrap_or_default()
        .iter()
        .map(|&m| if (0.0..=6.0).contains(&m) && m.fract() == 0.0 { Ok(m as u8) } else { Err(m) })
        .collect::<Result<_, _>>()
        .map_err(|m| a.invalid("nodes_modes", format!("holds {m}, not 0..=6")))?;
    let t = op::TreeEnsemble {
        n_targets,
        aggregate,
        tree_roots: usizes("tree_roots")?,
        nodes_featureids: usizes("nodes_featureids")?,
        nodes_splits: floats("nodes_splits", true)?.unwrap_or_default(),
        nodes_truenodeids: usizes("nodes_truenodeids")?,
        nodes_trueleafs: flags("nodes_trueleafs")?,
        nodes_falsenodeids: usizes("nodes_falsenodeids")?,
        nodes_falseleafs: flags("nodes_falseleafs")?,
        nodes_missing_value_tracks_true: flags("nodes_missing_value_tracks_true")?,
        members: members(l, &nodes_modes, floats("membership_values", false)?)?,
        nodes_modes,
        leaf_targetids: usizes("leaf_targetids")?,
        leaf_weights: floats("leaf_weights", true)?.unwrap_or_default(),
    };
    let n = t.nodes_modes.len();
    let lens = [
        t.nodes_featureids.len(),
        t.nodes_splits.len(),
        t.nodes_truenodeids.len(),
        t.nodes_trueleafs.len(),
        t.nodes_falsenodeids.len(),
        t.nodes_falseleafs.len(),
    ];
    let missing = t.nodes_missing_value_tracks_true.len();
    if lens.iter().any(|&k| k != n) || (missing != 0 && missing != n) {
        return Err(l.invalid(format!("node attributes disagree in length: {n} modes, others {lens:?}")));
    }
    if t.leaf_targetids.len() != t.leaf_weights.len() {
        return Err(l.invalid("leaf_targetids and leaf_weights disagree in length"));
    }
    if let Some(&bad) = t.leaf_targetids.iter().find(|&&id| id >= n_targets) {
        return Err(l.invalid(format!("leaf target {bad} is not below n_targets {n_targets}")));
    }
    l.emit(Op::TreeEnsemble(t))
}

/// The sets of the membership nodes (in node order; NaN ends each), empty for other nodes.
fn members(l: &Lower<'_, '_>, modes: &[u8], values: Option<Vec<f64>>) -> Result<Vec<Vec<f64>>, OnnxError> {
    let values = values.unwrap_or_default();
    let mut sets = values.split(|v| v.is_nan());
    let mut out = Vec::with_capacity(modes.len());
    for &m in modes {
        if m == 6 {
            let set = sets
                .next()
                .ok_or_else(|| l.invalid("membership_values lacks a set for a membership node"))?;
            out.push(set.to_vec());
        } else {
            out.push(Vec::new());
        }
    }
    Ok(out)
}
