//! Constructors of the `ai.onnx.preview.training` optimizers (domain version 1): `Adagrad`,
//! `Adam` and `Momentum`. Inputs pass through unchanged; the planner checks their grouping.

use planner::{Op, op};

use crate::error::OnnxError;

use super::lower::Lower;

/// `Adagrad`: `decay_factor`, `epsilon`, `norm_coefficient` (all default 0).
pub(crate) fn adagrad(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Adagrad {
        decay_factor: a.float_or("decay_factor", 0.0)?,
        epsilon: a.float_or("epsilon", 0.0)?,
        norm_coefficient: a.float_or("norm_coefficient", 0.0)?,
    };
    l.emit(Op::Adagrad(attrs))
}

/// `Adam`: `alpha` (0.9), `beta` (0.999), `epsilon`, `norm_coefficient`,
/// `norm_coefficient_post` (0).
pub(crate) fn adam(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let attrs = op::Adam {
        alpha: a.float_or("alpha", 0.9)?,
        beta: a.float_or("beta", 0.999)?,
        epsilon: a.float_or("epsilon", 0.0)?,
        norm_coefficient: a.float_or("norm_coefficient", 0.0)?,
        norm_coefficient_post: a.float_or("norm_coefficient_post", 0.0)?,
    };
    l.emit(Op::Adam(attrs))
}

/// `Momentum`: `alpha`, `beta`, `norm_coefficient` and `mode` (`standard` or `nesterov`) are
/// all required.
pub(crate) fn momentum(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    use op::MomentumMode as M;
    let a = l.attrs();
    let modes = [("standard", M::Standard), ("nesterov", M::Nesterov)];
    a.required("mode", a.string("mode")?)?;
    let attrs = op::Momentum {
        alpha: a.required("alpha", a.float("alpha")?)?,
        beta: a.required("beta", a.float("beta")?)?,
        norm_coefficient: a.required("norm_coefficient", a.float("norm_coefficient")?)?,
        mode: a.choice("mode", M::Standard, &modes)?,
    };
    l.emit(Op::Momentum(attrs))
}
