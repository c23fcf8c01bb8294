//! Attribute structs of the `ai.onnx.preview` and `ai.onnx.ml` operators: `FlexAttention`,
//! `Binarizer`, `TreeEnsemble`.

use serde::{Deserialize, Serialize};

use crate::graph::Graph;

/// `FlexAttention` (ai.onnx.preview): `prob_mod(softmax(score_mod(scale · Q Kᵀ))) · V` on 4-D
/// `(B, H, S, D)` tensors; query head `h` reads K/V head `h / (Hq / Hkv)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlexAttention {
    /// Score scale (default `1 / sqrt(head_size)`).
    pub scale: Option<f32>,
    /// One-input, one-output graph applied to the scores `(B, H, L, S)` before the softmax.
    pub score_mod: Option<Box<Graph>>,
    /// One-input, one-output graph applied to the probabilities after the softmax.
    pub prob_mod: Option<Box<Graph>>,
}

/// `Binarizer` (ai.onnx.ml): `x > threshold ? 1 : 0` in the input's dtype.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Binarizer {
    /// Threshold (default 0).
    pub threshold: f32,
}

/// `TreeEnsemble` aggregation of the leaf weights reached per target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeAggregate {
    /// Sum divided by the number of trees.
    Average,
    /// Sum (default).
    #[default]
    Sum,
    /// Minimum (targets no leaf reaches hold the dtype's largest value).
    Min,
    /// Maximum (targets no leaf reaches hold the dtype's lowest value).
    Max,
}

/// `TreeEnsemble` (ai.onnx.ml, opset 5): X `(N, F)` -> Y `(N, n_targets)`. Branch node `i`
/// compares feature `nodes_featureids[i]` with `nodes_splits[i]` by `nodes_modes[i]` (0 `<=`,
/// 1 `<`, 2 `>=`, 3 `>`, 4 `==`, 5 `!=`, 6 membership in `members[i]`), or NaN when
/// `nodes_missing_value_tracks_true[i]`, and follows the true or false child (a leaf index when
/// the matching `*_leafs` flag is set). Only `post_transform` NONE is represented.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeEnsemble {
    /// Number of output targets.
    pub n_targets: usize,
    /// How leaf weights combine.
    pub aggregate: TreeAggregate,
    /// Root branch node of each tree.
    pub tree_roots: Vec<usize>,
    /// Per branch node: comparison mode (0..=6).
    pub nodes_modes: Vec<u8>,
    /// Per branch node: the feature compared.
    pub nodes_featureids: Vec<usize>,
    /// Per branch node: the threshold.
    pub nodes_splits: Vec<f64>,
    /// Per branch node: the child taken when the comparison holds.
    pub nodes_truenodeids: Vec<usize>,
    /// Per branch node: whether that child is a leaf.
    pub nodes_trueleafs: Vec<bool>,
    /// Per branch node: the child taken otherwise.
    pub nodes_falsenodeids: Vec<usize>,
    /// Per branch node: whether that child is a leaf.
    pub nodes_falseleafs: Vec<bool>,
    /// Per branch node: whether a NaN feature takes the true child (empty: never).
    pub nodes_missing_value_tracks_true: Vec<bool>,
    /// Per branch node: the set tested by membership nodes (empty for the others).
    pub members: Vec<Vec<f64>>,
    /// Per leaf: the target it contributes to.
    pub leaf_targetids: Vec<usize>,
    /// Per leaf: its weight.
    pub leaf_weights: Vec<f64>,
}
