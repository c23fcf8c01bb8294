//! Lowering of the losses to the `loss` kernel: NegativeLogLikelihoodLoss is one launch;
//! SoftmaxCrossEntropyLoss is the `rows` log-softmax along the class axis (into its log_prob
//! output, or a scratch buffer when that output is omitted), then the same launch.

use kernels_gpu::abi::{KernelId, LOSS_SHARED_BYTES, LossParams, Params, loss_reduction};

use super::lower::{Lowered, dims, f32_only};
use super::rows::{self, RowNode};
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{NodeId, ValueId};
use crate::op::LossReduction;
use crate::tensor_info::DType;

/// Threads of the one block that reduces a loss.
const REDUCE_THREADS: u32 = 1024;

/// A loss node's operands and attributes.
pub(super) struct LossNode<'a> {
    /// The node.
    pub id: NodeId,
    /// Its label.
    pub label: String,
    /// Its inputs: scores or log-probabilities, target, optional weight.
    pub ins: &'a [Option<ValueId>],
    /// Its outputs: the loss, optional log-probabilities (SoftmaxCrossEntropyLoss).
    pub outs: &'a [Option<ValueId>],
    /// The reduction.
    pub reduction: LossReduction,
    /// The ignored target value.
    pub ignore_index: Option<i64>,
}

/// The NLL launch over log-probabilities `x`.
fn nll_step(n: &LossNode, x: ValueId, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let target = n.ins.get(1).copied().flatten().ok_or("the target is missing")?;
    let weight = n.ins.get(2).copied().flatten();
    let y = n.outs.first().copied().flatten().ok_or("the loss output is omitted")?;
    f32_only(values, &[x, y])?;
    let ((xd, _), (td, tt)) = (dims(values, x)?, dims(values, target)?);
    if xd.len() < 2 || td.len() + 1 != xd.len() || td[0] != xd[0] || td[1..] != xd[2..] {
        return Err(format!("input {xd:?} and target {td:?} are not (N, C, d...) and (N, d...)"));
    }
    if let Some(w) = weight {
        f32_only(values, &[w])?;
        if dims(values, w)?.0 != [xd[1]] {
            return Err(format!("the weight is not [{}]", xd[1]));
        }
    }
    let index_bytes = match tt {
        DType::I64 => 8,
        DType::I32 => 4,
        other => return Err(format!("a target of {other}")),
    };
    let p = LossParams {
        n: xd[0] as u64,
        classes: xd[1] as u64,
        inner: xd[2..].iter().product::<usize>() as u64,
        ignore_index: n.ignore_index.unwrap_or(0),
        has_ignore: n.ignore_index.is_some() as u32,
        reduction: match n.reduction {
            LossReduction::None => loss_reduction::NONE,
            LossReduction::Sum => loss_reduction::SUM,
            LossReduction::Mean => loss_reduction::MEAN,
        },
        index_bytes,
        _pad: 0,
    };
    let positions = p.n * p.inner;
    let (grid, block, shared_bytes) = if p.reduction == loss_reduction::NONE {
        if positions == 0 {
            return Ok(Vec::new());
        }
        (capped_grid(o.sm_count, positions.div_ceil(THREADS as u64)), [THREADS, 1, 1], 0)
    } else {
        ([1, 1, 1], [REDUCE_THREADS, 1, 1], LOSS_SHARED_BYTES)
    };
    let args = vec![
        Arg::Params(p.as_bytes().to_vec()),
        Arg::Value(x),
        Arg::Value(target),
        weight.map_or(Arg::Null, Arg::Value),
        Arg::Value(y),
    ];
    Ok(vec![Step::Kernel {
        nodes: vec![n.id],
        label: n.label.clone(),
        kernel: KernelId::NllLossF32,
        grid,
        block,
        shared_bytes,
        args,
    }])
}

/// NegativeLogLikelihoodLoss.
pub(super) fn nll(n: &LossNode, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let x = n.ins.first().copied().flatten().ok_or("the input is missing")?;
    nll_step(n, x, values, o)
}

/// The scratch buffer of a SoftmaxCrossEntropyLoss whose log_prob output is omitted: the
/// log-probabilities, shaped like the scores.
pub(super) fn sce_scratch(name: String, scores: &PlannedValue) -> PlannedValue {
    PlannedValue { name, dtype: DType::F32, dims: scores.dims.clone() }
}

/// SoftmaxCrossEntropyLoss: log-softmax along axis 1 into log_prob (or `scratch`), then NLL.
pub(super) fn sce(
    n: &LossNode,
    scratch: Option<ValueId>,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let x = n.ins.first().copied().flatten().ok_or("the scores are missing")?;
    let log_prob =
        n.outs.get(1).copied().flatten().or(scratch).ok_or("no buffer for the log-probabilities")?;
    if dims(values, x)?.0.len() < 2 {
        return Err("scores must be (N, C, d...)".into());
    }
    let row = RowNode { id: n.id, label: n.label.clone(), ins: n.ins, out: log_prob };
    let mut steps = rows::softmax(row, values, 1, true, o)?;
    steps.extend(nll_step(n, log_prob, values, o)?);
    Ok(steps)
}
