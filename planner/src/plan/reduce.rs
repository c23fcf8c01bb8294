//! Lowering of the reductions (the ONNX `Reduce*` family, ArgMax / ArgMin, GlobalAveragePool,
//! GlobalMaxPool) to the `reduce` kernels. The input's dims are split into kept and reduced ones,
//! size-1 dims dropped and adjacent dims of the same kind merged (see
//! `kernels_gpu::abi::ReduceParams`), so any set of axes runs without a transpose; the launch
//! shape picks how many threads share an output.

use kernels_gpu::abi::{
    KernelId, MAX_RANK, Params, REDUCE_SHARED_BYTES, REDUCE_WARP, ReduceOp, ReduceParams,
};

use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{ArgReduce, Op, Reduce};
use crate::tensor_info::DType;

type Lowered = Result<Vec<Step>, String>;

/// Longest reduction a warp owns; longer ones get a block.
const WARP_MAX_LEN: u64 = 1024;
/// Reduced elements per thread a block-per-output launch aims at.
const BLOCK_ELEMS_PER_THREAD: u64 = 8;
/// Outputs from which a reduction whose innermost input dim is kept runs a thread per output
/// (neighbouring threads then read neighbouring elements).
const THREAD_MIN_OUTPUTS: u64 = 4096;
/// Reductions this short run a thread per output: a thread finishes them before a warp combines.
const THREAD_MAX_LEN: u64 = 8;

/// The reduction node being lowered.
pub(super) struct ReduceNode<'a> {
    /// The node.
    pub id: NodeId,
    /// Its label.
    pub label: String,
    /// Its inputs (`None` for omitted optional inputs).
    pub ins: &'a [Option<ValueId>],
    /// Its first output.
    pub out: ValueId,
}

fn static_dims(values: &[PlannedValue], v: ValueId, dtype: DType) -> Result<&[usize], String> {
    let pv = &values[v.index()];
    if pv.dtype != dtype {
        return Err(format!("`{}` is {}; the reduction kernel takes {dtype} here", pv.name, pv.dtype));
    }
    pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

/// The `ReduceOp` of a `Reduce*` op.
pub(super) fn reduce_op(op: &Op) -> Option<(ReduceOp, &Reduce)> {
    Some(match op {
        Op::ReduceSum(r) => (ReduceOp::Sum, r),
        Op::ReduceMean(r) => (ReduceOp::Mean, r),
        Op::ReduceMax(r) => (ReduceOp::Max, r),
        Op::ReduceMin(r) => (ReduceOp::Min, r),
        Op::ReduceProd(r) => (ReduceOp::Prod, r),
        Op::ReduceL1(r) => (ReduceOp::L1, r),
        Op::ReduceL2(r) => (ReduceOp::L2, r),
        Op::ReduceLogSum(r) => (ReduceOp::LogSum, r),
        Op::ReduceLogSumExp(r) => (ReduceOp::LogSumExp, r),
        Op::ReduceSumSquare(r) => (ReduceOp::SumSquare, r),
        _ => return None,
    })
}

/// The reduction view of a contiguous input of shape `dims` reducing the axes flagged in
/// `reduced`, or `None` when more than [`MAX_RANK`] kept or reduced runs remain.
pub fn reduce_params(dims: &[usize], reduced: &[bool]) -> Option<ReduceParams> {
    let mut strides = vec![1u64; dims.len()];
    for a in (0..dims.len().saturating_sub(1)).rev() {
        strides[a] = strides[a + 1] * dims[a + 1] as u64;
    }
    // (extent, stride) runs of each kind, outermost first; size-1 dims carry no index.
    let mut kept: Vec<(u64, u64)> = Vec::new();
    let mut red: Vec<(u64, u64)> = Vec::new();
    let mut last_kind: Option<bool> = None;
    for (a, &d) in dims.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let runs = if reduced[a] { &mut red } else { &mut kept };
        match runs.last_mut() {
            Some((n, st)) if last_kind == Some(reduced[a]) => (*n, *st) = (*n * d as u64, strides[a]),
            _ => runs.push((d as u64, strides[a])),
        }
        last_kind = Some(reduced[a]);
    }
    if kept.len() > MAX_RANK || red.len() > MAX_RANK {
        return None;
    }
    let mut p = ReduceParams {
        outputs: kept.iter().map(|r| r.0).product(),
        len: red.iter().map(|r| r.0).product(),
        kept_rank: kept.len() as u32,
        red_rank: red.len() as u32,
        ..ReduceParams::default()
    };
    for (d, &(n, st)) in kept.iter().enumerate() {
        let i = MAX_RANK - kept.len() + d;
        (p.kept_shape[i], p.kept_strides[i]) = (n, st);
    }
    for (d, &(n, st)) in red.iter().enumerate() {
        let i = MAX_RANK - red.len() + d;
        (p.red_shape[i], p.red_strides[i]) = (n, st);
    }
    Some(p)
}

/// Launch shape for `p` (threads per output, grid, block, shared bytes).
fn launch(p: &ReduceParams, o: &PlanOptions) -> (u32, [u32; 3], [u32; 3], u32) {
    let grid = |blocks: u64| capped_grid(o.sm_count, blocks);
    // The innermost input dim is reduced: lanes of a warp read neighbouring elements.
    let inner_reduced = p.red_rank > 0 && p.red_strides[MAX_RANK - 1] == 1;
    if p.len <= THREAD_MAX_LEN || (!inner_reduced && p.outputs >= THREAD_MIN_OUTPUTS) {
        (1, grid(p.outputs.div_ceil(THREADS as u64)), [THREADS, 1, 1], 0)
    } else if p.len <= WARP_MAX_LEN {
        let per_block = (THREADS / REDUCE_WARP) as u64;
        (REDUCE_WARP, grid(p.outputs.div_ceil(per_block)), [THREADS, 1, 1], REDUCE_SHARED_BYTES)
    } else {
        let threads = p.len.div_ceil(BLOCK_ELEMS_PER_THREAD).next_multiple_of(32).clamp(128, 1024) as u32;
        (threads, grid(p.outputs), [threads, 1, 1], REDUCE_SHARED_BYTES)
    }
}

fn step(n: ReduceNode, kernel: KernelId, p: ReduceParams, x: ValueId, o: &PlanOptions) -> Vec<Step> {
    let (tpr, grid, block, shared_bytes) = launch(&p, o);
    let p = ReduceParams { threads_per_row: tpr, ..p };
    let args = vec![Arg::Params(p.as_bytes().to_vec()), Arg::Value(x), Arg::Value(n.out)];
    vec![Step::Kernel { nodes: vec![n.id], label: n.label, kernel, grid, block, shared_bytes, args }]
}

/// `axis` of a rank-`rank` tensor, negative counting from the back.
pub(super) fn axis_index(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if (0..rank as i64).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// Checks that the output has `outputs` elements (shape inference agrees with the view).
fn check_outputs(
    values: &[PlannedValue],
    out: ValueId,
    dtype: DType,
    p: &ReduceParams,
) -> Result<(), String> {
    let od = static_dims(values, out, dtype)?;
    let elems = od.iter().product::<usize>() as u64;
    if elems != p.outputs {
        return Err(format!("output has {elems} elements, the reduction makes {}", p.outputs));
    }
    Ok(())
}

/// ONNX `Reduce*` of f32 or f64: axes from the legacy attribute or from input 1, which must be a constant
/// (an initializer, or folded into one).
pub(super) fn reduce(
    g: &Graph,
    n: ReduceNode,
    values: &[PlannedValue],
    op: ReduceOp,
    attrs: &Reduce,
    o: &PlanOptions,
) -> Lowered {
    let x = n.ins.first().copied().flatten().ok_or("missing input")?;
    let (dtype, kernel) = match values[x.index()].dtype {
        DType::F64 => (DType::F64, KernelId::ReduceF64),
        _ => (DType::F32, KernelId::ReduceF32),
    };
    let d = static_dims(values, x, dtype)?;
    let listed: Vec<i64> = match (&attrs.axes, n.ins.get(1).copied().flatten()) {
        (Some(a), _) => a.clone(),
        (None, Some(t)) => g
            .constant(t)
            .and_then(|c| c.to_i64s())
            .ok_or_else(|| format!("axes `{}` must be a constant integer tensor", values[t.index()].name))?,
        (None, None) => Vec::new(),
    };
    let mut reduced = vec![listed.is_empty() && !attrs.noop_with_empty_axes; d.len()];
    for &a in &listed {
        let a = axis_index(a, d.len())?;
        if std::mem::replace(&mut reduced[a], true) {
            return Err(format!("axis {a} is repeated in {listed:?}"));
        }
    }
    let mut p = reduce_params(d, &reduced).ok_or("the axes split into more than 8 kept or reduced runs")?;
    p.op = op as u32;
    check_outputs(values, n.out, dtype, &p)?;
    Ok(step(n, kernel, p, x, o))
}

/// ONNX ArgMax (`max`) / ArgMin of f32 along one axis, i64 output.
pub(super) fn arg_reduce(
    n: ReduceNode,
    values: &[PlannedValue],
    max: bool,
    attrs: &ArgReduce,
    o: &PlanOptions,
) -> Lowered {
    let x = n.ins.first().copied().flatten().ok_or("missing input")?;
    let d = static_dims(values, x, DType::F32)?;
    let mut reduced = vec![false; d.len()];
    if !d.is_empty() {
        reduced[axis_index(attrs.axis, d.len())?] = true;
    }
    let mut p = reduce_params(d, &reduced).ok_or("the axis splits into more than 8 kept runs")?;
    if p.len == 0 {
        return Err("ArgMax/ArgMin over an empty axis has no answer".into());
    }
    if p.len >= u32::MAX as u64 {
        return Err(format!("the axis has {} elements; the kernel indexes below 2^32 - 1", p.len));
    }
    (p.op, p.select_last) = (u32::from(!max), u32::from(attrs.select_last_index));
    check_outputs(values, n.out, DType::I64, &p)?;
    Ok(step(n, KernelId::ArgReduceF32, p, x, o))
}

/// ONNX GlobalAveragePool (`max == false`) / GlobalMaxPool of f32: a mean / maximum over every dim
/// after the first two. The maximum skips NaN, as the reference does.
pub(super) fn global_pool(n: ReduceNode, values: &[PlannedValue], max: bool, o: &PlanOptions) -> Lowered {
    let x = n.ins.first().copied().flatten().ok_or("missing input")?;
    let d = static_dims(values, x, DType::F32)?;
    if d.len() < 2 {
        return Err(format!("X must have rank >= 2, got {d:?}"));
    }
    let reduced: Vec<bool> = (0..d.len()).map(|a| a >= 2).collect();
    let mut p = reduce_params(d, &reduced).ok_or("too many dims")?;
    p.op = if max { ReduceOp::MaxNumber } else { ReduceOp::Mean } as u32;
    check_outputs(values, n.out, DType::F32, &p)?;
    Ok(step(n, KernelId::ReduceF32, p, x, o))
}

#[cfg(test)]
mod tests {
    use super::reduce_params;
    use crate::op::{self, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};
    use crate::{ConstTensor, Graph};
    use kernels_gpu::abi::{KernelId, MAX_RANK, REDUCE_WARP, ReduceOp, ReduceParams};

    const R: usize = MAX_RANK;

    fn params(step: &Step) -> ReduceParams {
        let Step::Kernel { args, .. } = step else { panic!("{step:?}") };
        let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
        assert_eq!(b.len(), core::mem::size_of::<ReduceParams>());
        let u64_at = |i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        let u32_at = |i: usize| u32::from_ne_bytes(b[(2 + 4 * R) * 8 + 4 * i..][..4].try_into().unwrap());
        let arr = |k: usize| -> [u64; R] { std::array::from_fn(|d| u64_at(2 + k * R + d)) };
        ReduceParams {
            outputs: u64_at(0),
            len: u64_at(1),
            kept_shape: arr(0),
            kept_strides: arr(1),
            red_shape: arr(2),
            red_strides: arr(3),
            kept_rank: u32_at(0),
            red_rank: u32_at(1),
            op: u32_at(2),
            select_last: u32_at(3),
            threads_per_row: u32_at(4),
            _pad: u32_at(5),
        }
    }

    #[test]
    fn views_collapse_kept_and_reduced_runs() {
        // Trailing axes of NCHW: one kept run [N*C] and one contiguous reduced run [H*W].
        let p = reduce_params(&[2, 64, 8, 8], &[false, false, true, true]).unwrap();
        assert_eq!((p.outputs, p.len, p.kept_rank, p.red_rank), (128, 64, 1, 1));
        assert_eq!((p.kept_shape[R - 1], p.kept_strides[R - 1]), (128, 64));
        assert_eq!((p.red_shape[R - 1], p.red_strides[R - 1]), (64, 1));
        // A reduced size-1 dim between two kept ones vanishes, and they merge.
        let p = reduce_params(&[3, 4, 1, 5, 6], &[true, false, true, false, true]).unwrap();
        assert_eq!((p.outputs, p.len, p.kept_rank, p.red_rank), (20, 18, 1, 2));
        assert_eq!((p.kept_shape[R - 1], p.kept_strides[R - 1]), (20, 6));
        assert_eq!(&p.red_shape[R - 2..], &[3, 6]);
        assert_eq!(&p.red_strides[R - 2..], &[120, 1]);
        // Alternating kept and reduced runs.
        let p = reduce_params(&[2, 3, 4, 5], &[false, true, false, true]).unwrap();
        assert_eq!((&p.kept_shape[R - 2..], &p.kept_strides[R - 2..]), (&[2, 4][..], &[60, 5][..]));
        assert_eq!((&p.red_shape[R - 2..], &p.red_strides[R - 2..]), (&[3, 5][..], &[20, 1][..]));
        // A middle axis: [outer, len, inner].
        let p = reduce_params(&[2, 3, 4], &[false, true, false]).unwrap();
        assert_eq!((&p.kept_shape[R - 2..], &p.kept_strides[R - 2..]), (&[2, 4][..], &[12, 1][..]));
        assert_eq!((p.red_shape[R - 1], p.red_strides[R - 1], p.red_rank), (3, 4, 1));
        // Everything reduced, a scalar, an empty reduced dim.
        let p = reduce_params(&[5, 7], &[true, true]).unwrap();
        assert_eq!((p.outputs, p.len, p.kept_rank, p.red_rank, p.red_shape[R - 1]), (1, 35, 0, 1, 35));
        let p = reduce_params(&[], &[]).unwrap();
        assert_eq!((p.outputs, p.len, p.kept_rank, p.red_rank), (1, 1, 0, 0));
        let p = reduce_params(&[4, 0], &[false, true]).unwrap();
        assert_eq!((p.outputs, p.len), (4, 0));
    }

    #[test]
    fn reductions_lower_with_constant_axes_and_pick_a_launch_shape() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into()), Dim::Known(3), Dim::Known(2048)]);
        // Opset-18 form: axes as input 1 (an initializer).
        let axes = g.initializer("axes", ConstTensor::from_i64(&[1], &[-1]).unwrap());
        let attrs = op::Reduce { keepdims: false, ..op::Reduce::default() };
        let s = g.op1(Op::ReduceSum(attrs.clone()), &[x, axes]);
        // Legacy attribute form, over the middle axis.
        let m = g.op1(Op::ReduceMax(op::Reduce { axes: Some(vec![1]), ..op::Reduce::default() }), &[x]);
        let a = g.op1(Op::ArgMin(op::ArgReduce { axis: 2, keepdims: false, select_last_index: true }), &[x]);
        let l = g.op1(Op::ReduceLogSumExp(op::Reduce::default()), &[s]);
        let gp = g.op1(Op::GlobalAveragePool, &[x]);
        for v in [s, m, a, l, gp] {
            g.output(v);
        }
        let plan = compile(&g, &Binding::new().with("n", 5), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let steps: Vec<(KernelId, ReduceParams, [u32; 3], u32)> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Kernel { kernel, block, shared_bytes, .. } => {
                    Some((*kernel, params(s), *block, *shared_bytes))
                }
                _ => None,
            })
            .collect();
        assert_eq!(steps.len(), 5, "{text}");
        for (kernel, p, block, shared) in steps {
            match (kernel, ReduceOp::from_code(p.op)) {
                (KernelId::ReduceF32, ReduceOp::Sum) => {
                    // 15 rows of 2048 contiguous elements: a block of 256 threads per row.
                    assert_eq!(
                        (p.outputs, p.len, p.threads_per_row, block[0], shared),
                        (15, 2048, 256, 256, 256)
                    );
                }
                (KernelId::ReduceF32, ReduceOp::Max) => {
                    // [5, 3, 2048] over axis 1: the innermost dim is kept, a short reduction.
                    assert_eq!(
                        (p.outputs, p.len, p.red_strides[R - 1], p.threads_per_row),
                        (10240, 3, 2048, 1)
                    );
                }
                (KernelId::ArgReduceF32, _) => {
                    assert_eq!((p.op, p.select_last, p.outputs, p.len), (1, 1, 15, 2048));
                }
                (KernelId::ReduceF32, ReduceOp::LogSumExp) => {
                    // All 15 elements of s into one: a warp.
                    assert_eq!((p.outputs, p.len, p.threads_per_row), (1, 15, REDUCE_WARP));
                }
                (KernelId::ReduceF32, ReduceOp::Mean) => assert_eq!((p.outputs, p.len), (15, 2048)),
                other => panic!("unexpected {other:?}:\n{text}"),
            }
        }
    }

    #[test]
    fn noop_with_empty_axes_and_refusals() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(4), Dim::Known(6)]);
        let noop = op::Reduce { noop_with_empty_axes: true, ..op::Reduce::default() };
        let y = g.op1(Op::ReduceL1(noop), &[x]);
        g.output(y);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let p = params(&plan.steps[0]);
        assert_eq!((p.outputs, p.len, p.red_rank, p.op), (24, 1, 0, ReduceOp::L1 as u32));

        // Axes that are a graph input, not a constant, are refused with the reason.
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(4), Dim::Known(6)]);
        let axes = g.input("axes", DType::I64, vec![Dim::Known(1)]);
        let y = g.op1(Op::ReduceSum(op::Reduce::default()), &[x, axes]);
        g.output(y);
        let e = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap_err().to_string();
        assert!(e.contains("must be a constant"), "{e}");
    }
}
