//! Attribute structs of the `ai.onnx.preview.training` optimizer operators (`Adagrad`, `Adam`,
//! `Momentum`, domain version 1).
//!
//! Each takes `R` (scalar learning rate), `T` (scalar I64 update count), then `n` groups of
//! tensors (`X…`, `G…` and the optimizer states), and returns the updated `X…` followed by the
//! updated states, one output per state input.

use serde::{Deserialize, Serialize};

/// `Adagrad(R, T, X…, G…, H…)` -> `(X_new…, H_new…)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Adagrad {
    /// Learning-rate decay: `r / (1 + T * decay_factor)` (default 0).
    pub decay_factor: f32,
    /// Added to `sqrt(H_new)` (default 0).
    pub epsilon: f32,
    /// L2 regularization: `G + norm_coefficient * X` (default 0).
    pub norm_coefficient: f32,
}

/// `Adam(R, T, X…, G…, V…, H…)` -> `(X_new…, V_new…, H_new…)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adam {
    /// First-moment decay (default 0.9).
    pub alpha: f32,
    /// Second-moment decay (default 0.999).
    pub beta: f32,
    /// Added to `sqrt(H_new)` (default 0).
    pub epsilon: f32,
    /// L2 regularization added to the gradient (default 0).
    pub norm_coefficient: f32,
    /// Shrinkage applied after the update: `(1 - norm_coefficient_post) * X` (default 0).
    pub norm_coefficient_post: f32,
}

impl Default for Adam {
    fn default() -> Self {
        Adam { alpha: 0.9, beta: 0.999, epsilon: 0.0, norm_coefficient: 0.0, norm_coefficient_post: 0.0 }
    }
}

/// Update rule of `Momentum`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MomentumMode {
    /// `X_new = X - R * V_new`.
    #[default]
    Standard,
    /// `X_new = X - R * (G_reg + alpha * V_new)`.
    Nesterov,
}

/// `Momentum(R, T, X…, G…, V…)` -> `(X_new…, V_new…)`; all attributes are required in ONNX.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Momentum {
    /// Decay of the accumulated momentum.
    pub alpha: f32,
    /// Coefficient of the gradient (1 at the first update, `T == 0`).
    pub beta: f32,
    /// L2 regularization added to the gradient.
    pub norm_coefficient: f32,
    /// Standard or Nesterov momentum.
    pub mode: MomentumMode,
}
