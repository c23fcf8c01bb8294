//! Attribute structs of the loss operators `NegativeLogLikelihoodLoss` and
//! `SoftmaxCrossEntropyLoss` (opsets 12/13).

use serde::{Deserialize, Serialize};

/// How a loss operator reduces its per-element losses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LossReduction {
    /// Keep the per-element losses (shape of the target).
    None,
    /// Sum of the weighted losses.
    Sum,
    /// Weighted mean: the sum of the weighted losses over the sum of the weights applied
    /// (default).
    #[default]
    Mean,
}

/// `NegativeLogLikelihoodLoss(input (N, C, d...), target (N, d...), weight? (C))`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NegativeLogLikelihoodLoss {
    /// Reduction (default mean).
    pub reduction: LossReduction,
    /// Target value that contributes neither loss nor weight (default none).
    pub ignore_index: Option<i64>,
}

/// `SoftmaxCrossEntropyLoss(scores (N, C, d...), labels (N, d...), weights? (C))`, outputs
/// the loss and optionally the log-probabilities (log-softmax of the scores along axis 1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftmaxCrossEntropyLoss {
    /// Reduction (default mean).
    pub reduction: LossReduction,
    /// Target value that contributes neither loss nor weight (default none).
    pub ignore_index: Option<i64>,
}
