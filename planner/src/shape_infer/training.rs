//! The `ai.onnx.preview.training` optimizers: `R` (float scalar), `T` (I64 scalar), then
//! `groups` tensor lists of `n` entries each (`X…`, `G…`, states…). Every output mirrors the input
//! it updates: the `n` updated `X` first, then each state list in input order.

use super::Ctx;
use crate::error::PlanError;
use crate::tensor_info::{DType, Shape, TensorInfo};

/// Outputs of an optimizer whose inputs after `R, T` form `groups` lists (3 for Adagrad and
/// Momentum, 4 for Adam).
pub(crate) fn optimizer(ctx: &mut Ctx, groups: usize) -> Result<Vec<TensorInfo>, PlanError> {
    let (r, t) = (ctx.input(0)?, ctx.input(1)?);
    ctx.require_float(r)?;
    if t.dtype != DType::I64 {
        return Err(ctx.dtype(format!("T must be int64, got {}", t.dtype)));
    }
    if r.rank() != 0 || t.rank() != 0 {
        return Err(ctx.mismatch(format!("R {r} and T {t} must be scalars")));
    }
    let rest = ctx.n_inputs().saturating_sub(2);
    if rest == 0 || !rest.is_multiple_of(groups) {
        return Err(
            ctx.arity(format!("expected R, T and {groups} lists of equal length, got {rest} tensors"))
        );
    }
    let n = rest / groups;
    let mut updated = Vec::with_capacity(rest);
    for k in 0..n {
        let x = ctx.input(2 + k)?;
        ctx.require_float(x)?;
        let mut dims = x.shape.0.clone();
        for g in 1..groups {
            let other = ctx.input(2 + g * n + k)?;
            if other.dtype != x.dtype || other.rank() != x.rank() {
                return Err(ctx.mismatch(format!("tensor {other} of list {g} does not match X {x}")));
            }
            for (d, o) in dims.iter_mut().zip(&other.shape.0) {
                *d = ctx.unify(d, o, "optimizer operand")?;
            }
        }
        updated.push(TensorInfo { dtype: x.dtype, shape: Shape(dims) });
    }
    // Outputs: X_new…, then one list per state (the inputs after G).
    let lists = groups - 1;
    Ok((0..lists).flat_map(|_| updated.iter().cloned()).collect())
}

#[cfg(test)]
mod tests {
    use crate::graph::Graph;
    use crate::op::{self, Op};
    use crate::shape_infer::infer;
    use crate::shape_infer::tests::{dims, info};
    use crate::tensor_info::DType;

    const F: DType = DType::F32;

    fn run(op: Op, xs: &[(&str, DType, &str)], n_out: usize) -> Result<Vec<crate::TensorInfo>, String> {
        let mut g = Graph::new();
        let mut ins = vec![g.input("r", F, dims("")), g.input("t", DType::I64, dims(""))];
        ins.extend(xs.iter().map(|(n, t, d)| g.input(n, *t, dims(d))));
        let outs = g.push(op, &ins, n_out);
        for &o in &outs {
            g.output(o);
        }
        let infos = infer(&g).map_err(|e| e.to_string())?;
        Ok(outs.iter().map(|o| infos[o.index()].clone()).collect())
    }

    #[test]
    fn outputs_mirror_the_updated_tensors() {
        let xs = [("x1", F, "3"), ("x2", F, "b,2"), ("g1", F, "3"), ("g2", F, "b,2")];
        let states = [("h1", F, "3"), ("h2", F, "b,2")];
        let ins: Vec<_> = xs.iter().chain(&states).copied().collect();
        let got = run(Op::Adagrad(op::Adagrad::default()), &ins, 4);
        assert_eq!(got, Ok(vec![info(F, "3"), info(F, "b,2"), info(F, "3"), info(F, "b,2")]));
        let adam = [("x", F, "2"), ("g", F, "2"), ("v", F, "2"), ("h", F, "2")];
        assert_eq!(run(Op::Adam(op::Adam::default()), &adam, 3), Ok(vec![info(F, "2"); 3]));
        assert!(run(Op::Momentum(op::Momentum::default()), &adam, 2).is_err());
        let bad = [("x", F, "2"), ("g", F, "3"), ("v", F, "2")];
        assert!(run(Op::Momentum(op::Momentum::default()), &bad, 2).is_err());
    }
}
