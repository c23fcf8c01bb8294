//! Tree ensembles (ai.onnx.ml TreeEnsemble).

use super::Params;

/// f64 words per branch node in the tables of `tree::tree_ensemble_f32`: mode, feature, split,
/// true child, true child is a leaf, false child, false child is a leaf, a NaN feature takes the
/// true child, first member, member count.
pub const TREE_NODE_WORDS: u64 = 10;

/// `TreeParams::aggregate` values.
pub mod tree_aggregate {
    /// Sum of the leaf weights.
    pub const SUM: u32 = 0;
    /// Sum divided by the number of trees.
    pub const AVERAGE: u32 = 1;
    /// Minimum.
    pub const MIN: u32 = 2;
    /// Maximum.
    pub const MAX: u32 = 3;
}

/// Parameters of `tree::tree_ensemble_f32`: X `(rows, features)` f32, Y `(rows, targets)` f32, and
/// the ensemble as f64 tables (all integers exact): `nodes` branch nodes of [`TREE_NODE_WORDS`]
/// words, then `trees` root indices, then `leaves` (target, weight) pairs, then the members of the
/// membership nodes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TreeParams {
    /// Rows of X.
    pub rows: u64,
    /// Features per row.
    pub features: u64,
    /// Targets per row of Y.
    pub targets: u64,
    /// Branch nodes.
    pub nodes: u64,
    /// Trees.
    pub trees: u64,
    /// Leaves.
    pub leaves: u64,
    /// One of [`tree_aggregate`].
    pub aggregate: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// The value a target starts from (0, or the largest / lowest f32 for min / max).
    pub init: f64,
}

// SAFETY: #[repr(C)], six u64, two u32, one f64: no padding.
unsafe impl Params for TreeParams {}
