//! Lowering of the row ops (Softmax, LogSoftmax, Hardmax, LpNormalization, LayerNormalization,
//! RMSNormalization) to the `rows` kernels: the input is viewed as `[outer, len, inner]` and the
//! launch shape picks how many threads share a row (see `kernels_gpu::abi::RowParams`).

use kernels_gpu::abi::{HARDMAX_SHARED_BYTES, KernelId, Params, ROW_SHARED_BYTES, ROW_WARP, RowParams};

use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{NodeId, ValueId};

/// Longest row a warp owns; longer rows get a block.
const WARP_MAX_LEN: u64 = 1024;
/// Row elements per thread a block-per-row launch aims at (its block size is `len / this`, clamped).
const BLOCK_ELEMS_PER_THREAD: u64 = 8;
/// Largest block `layer_norm_f32` is launched with: its `.maxntid` (host/build.rs), which leaves
/// it 128 registers per thread (at 1024 threads it had 64 and spilled its row to local memory,
/// 16.6 µs for GPT-2's 2048 x 256 rows on the H200).
pub(super) const LAYER_NORM_MAX_THREADS: u32 = 512;

type Lowered = Result<Vec<Step>, String>;

/// The operands of a row node, checked: f32 and static shapes.
pub(super) struct RowNode<'a> {
    /// The node.
    pub id: NodeId,
    /// Its label.
    pub label: String,
    /// Its inputs (`None` for omitted optional inputs).
    pub ins: &'a [Option<ValueId>],
    /// Its first output.
    pub out: ValueId,
}

fn static_f32(values: &[PlannedValue], v: ValueId) -> Result<&[usize], String> {
    let pv = &values[v.index()];
    if pv.dtype != crate::tensor_info::DType::F32 {
        return Err(format!("`{}` is {}; the row kernels take f32 so far", pv.name, pv.dtype));
    }
    pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

fn axis_index(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r.max(1)).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// Launch shape for `rows` rows of `len` elements `inner` apart: (threads per row, grid, block,
/// shared bytes). Also used by the channel normalizations (`norm`).
pub(super) fn launch(rows: u64, len: u64, inner: u64, o: &PlanOptions) -> (u32, [u32; 3], [u32; 3], u32) {
    launch_within(rows, len, inner, 1024, o)
}

/// [`launch`] with blocks of at most `max_threads` (a multiple of 32, at least 128).
fn launch_within(
    rows: u64,
    len: u64,
    inner: u64,
    max_threads: u32,
    o: &PlanOptions,
) -> (u32, [u32; 3], [u32; 3], u32) {
    let grid = |blocks: u64| capped_grid(o.sm_count, blocks);
    if inner > 1 {
        (1, grid(rows.div_ceil(THREADS as u64)), [THREADS, 1, 1], 0)
    } else if len <= WARP_MAX_LEN {
        let per_block = (THREADS / ROW_WARP) as u64;
        (ROW_WARP, grid(rows.div_ceil(per_block)), [THREADS, 1, 1], 0)
    } else {
        let threads =
            len.div_ceil(BLOCK_ELEMS_PER_THREAD).next_multiple_of(32).clamp(128, max_threads as u64) as u32;
        (threads, grid(rows), [threads, 1, 1], ROW_SHARED_BYTES)
    }
}

fn step(n: RowNode, kernel: KernelId, p: RowParams, o: &PlanOptions, operands: Vec<Arg>) -> Vec<Step> {
    let max_threads = if kernel == KernelId::LayerNormF32 { LAYER_NORM_MAX_THREADS } else { 1024 };
    let (tpr, grid, block, shared_bytes) = launch_within(p.outer * p.inner, p.len, p.inner, max_threads, o);
    let p = RowParams { threads_per_row: tpr, ..p };
    let mut args = vec![Arg::Params(p.as_bytes().to_vec())];
    args.extend(operands);
    args.push(Arg::Value(n.out));
    vec![Step::Kernel { nodes: vec![n.id], label: n.label, kernel, grid, block, shared_bytes, args }]
}

/// The `[outer, len, inner]` view of `n`'s input along `axis` (a scalar is one row of one), f32
/// in and out.
fn axis_view(n: &RowNode, values: &[PlannedValue], axis: i64) -> Result<(ValueId, RowParams), String> {
    let x = n.ins.first().copied().flatten().ok_or("missing input")?;
    let d = static_f32(values, x)?;
    static_f32(values, n.out)?;
    let (outer, len, inner) = if d.is_empty() {
        (1, 1, 1)
    } else {
        let a = axis_index(axis, d.len())?;
        (d[..a].iter().product::<usize>(), d[a], d[a + 1..].iter().product::<usize>())
    };
    Ok((x, RowParams { outer: outer as u64, len: len as u64, inner: inner as u64, ..RowParams::default() }))
}

/// Softmax (`log == false`) or LogSoftmax along `axis` (opset-13 semantics: one axis).
pub(super) fn softmax(n: RowNode, values: &[PlannedValue], axis: i64, log: bool, o: &PlanOptions) -> Lowered {
    let (x, p) = axis_view(&n, values, axis)?;
    let kernel = if log { KernelId::LogSoftmaxF32 } else { KernelId::SoftmaxF32 };
    Ok(step(n, kernel, p, o, vec![Arg::Value(x)]))
}

/// LpNormalization along `axis` with `p` 1 or 2.
pub(super) fn lp_norm(n: RowNode, values: &[PlannedValue], axis: i64, p: u32, o: &PlanOptions) -> Lowered {
    let kernel = match p {
        1 => KernelId::LpNorm1F32,
        2 => KernelId::LpNorm2F32,
        _ => return Err(format!("p = {p} (only 1 and 2 are defined)")),
    };
    let (x, rp) = axis_view(&n, values, axis)?;
    Ok(step(n, kernel, rp, o, vec![Arg::Value(x)]))
}

/// Hardmax along `axis` (opset-13 semantics: one axis): the softmax view, a block-per-row launch
/// with room for a (value, index) partial per warp.
pub(super) fn hardmax(n: RowNode, values: &[PlannedValue], axis: i64, o: &PlanOptions) -> Lowered {
    let (x, p) = axis_view(&n, values, axis)?;
    if p.len >= u32::MAX as u64 {
        return Err(format!("rows of {} elements (the kernel indexes them in u32)", p.len));
    }
    let mut steps = step(n, KernelId::HardmaxF32, p, o, vec![Arg::Value(x)]);
    if let Some(Step::Kernel { shared_bytes, .. }) = steps.first_mut()
        && *shared_bytes > 0
    {
        *shared_bytes = HARDMAX_SHARED_BYTES;
    }
    Ok(steps)
}

/// Elements of an operand that broadcasts unidirectionally to the normalised dims `norm`, when it
/// can be read as `operand[j % elems]` (its dims, leading 1s dropped, are a suffix of `norm`).
fn suffix_len(values: &[PlannedValue], v: ValueId, norm: &[usize]) -> Result<u64, String> {
    let d = static_f32(values, v)?;
    let first = d.iter().position(|&e| e != 1).unwrap_or(d.len());
    let d = &d[first..];
    if d.len() <= norm.len() && norm.ends_with(d) {
        Ok(d.iter().product::<usize>() as u64)
    } else {
        let name = &values[v.index()].name;
        Err(format!("`{name}` {d:?} broadcasts to {norm:?} in a way the row kernels do not read"))
    }
}

/// The `[outer, norm]` view of a normalisation's input (with the scale operand's length) and the
/// normalised dims.
type NormView = (ValueId, RowParams, Vec<usize>);

fn norm_view(n: &RowNode, values: &[PlannedValue], axis: i64) -> Result<NormView, String> {
    let [Some(x), Some(scale), ..] = n.ins else { return Err("missing X or scale".into()) };
    let d = static_f32(values, *x)?;
    static_f32(values, n.out)?;
    let a = axis_index(axis, d.len())?;
    let norm = &d[a.min(d.len())..];
    let p = RowParams {
        outer: d[..a.min(d.len())].iter().product::<usize>() as u64,
        len: norm.iter().product::<usize>() as u64,
        inner: 1,
        scale_len: suffix_len(values, *scale, norm)?,
        ..RowParams::default()
    };
    Ok((*x, p, norm.to_vec()))
}

/// LayerNormalization, Y only (the caller rejects nodes that produce Mean or InvStdDev).
pub(super) fn layer_norm(
    n: RowNode,
    values: &[PlannedValue],
    axis: i64,
    eps: f32,
    stats: [Option<ValueId>; 2],
    o: &PlanOptions,
) -> Lowered {
    let (x, mut p, norm) = norm_view(&n, values, axis)?;
    p.epsilon = eps;
    let scale = n.ins[1].ok_or("missing scale")?;
    let bias = n.ins.get(2).copied().flatten();
    if let Some(b) = bias {
        p.bias_len = suffix_len(values, b, &norm)?;
    }
    let [mean, rstd] = stats.map(|v| v.map_or(Arg::Null, Arg::Output));
    let operands = vec![Arg::Value(x), Arg::Value(scale), bias.map_or(Arg::Null, Arg::Value), mean, rstd];
    Ok(step(n, KernelId::LayerNormF32, p, o, operands))
}

/// RMSNormalization (opset 23).
pub(super) fn rms_norm(n: RowNode, values: &[PlannedValue], axis: i64, eps: f32, o: &PlanOptions) -> Lowered {
    let (x, mut p, _) = norm_view(&n, values, axis)?;
    p.epsilon = eps;
    let scale = n.ins[1].ok_or("missing scale")?;
    Ok(step(n, KernelId::RmsNormF32, p, o, vec![Arg::Value(x), Arg::Value(scale)]))
}

#[cfg(test)]
mod tests {
    use super::{LAYER_NORM_MAX_THREADS, launch, launch_within};
    use crate::op::{self, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};
    use crate::{ConstTensor, Graph};
    use kernels_gpu::abi::{KernelId, RowParams};

    fn params(step: &Step) -> RowParams {
        let Step::Kernel { args, .. } = step else { panic!("{step:?}") };
        let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
        assert_eq!(b.len(), core::mem::size_of::<RowParams>());
        let u64_at = |i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        RowParams {
            outer: u64_at(0),
            len: u64_at(1),
            inner: u64_at(2),
            scale_len: u64_at(3),
            bias_len: u64_at(4),
            epsilon: f32::from_bits(u32_at(40)),
            threads_per_row: u32_at(44),
        }
    }

    #[test]
    fn layer_norm_blocks_stay_within_its_launch_bound() {
        let o = PlanOptions::default();
        // Long rows: softmax may take 1024 threads, LayerNormalization at most its `.maxntid`.
        assert_eq!(launch(4, 16384, 1, &o).2[0], 1024);
        assert_eq!(launch_within(4, 16384, 1, LAYER_NORM_MAX_THREADS, &o).2[0], LAYER_NORM_MAX_THREADS);
        assert_eq!(launch_within(4, 2048, 1, LAYER_NORM_MAX_THREADS, &o).2[0], 256);
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(3), Dim::Known(20000)]);
        let scale = g.initializer("scale", ConstTensor::from_f32(&[20000], &vec![1.0; 20000]).unwrap());
        let y = g.push_opt(
            Op::LayerNormalization(op::LayerNormalization::default()),
            vec![Some(x), Some(scale)],
            1,
        )[0];
        g.output(y);
        let plan = compile(&g, &Binding::new(), &o).unwrap();
        let Step::Kernel { kernel, block, .. } = &plan.steps[0] else { panic!("{plan}") };
        assert_eq!((*kernel, block[0]), (KernelId::LayerNormF32, LAYER_NORM_MAX_THREADS));
    }

    #[test]
    fn softmax_and_layer_norm_compile_to_row_kernels() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into()), Dim::Known(4096)]);
        let scale = g.initializer("scale", ConstTensor::from_f32(&[4096], &vec![1.0; 4096]).unwrap());
        let bias = g.initializer("bias", ConstTensor::from_f32(&[1], &[0.5]).unwrap());
        let ln = Op::LayerNormalization(op::LayerNormalization::default());
        let y = g.push_opt(ln, vec![Some(x), Some(scale), Some(bias)], 1)[0];
        let s = g.softmax(y, -1);
        let r = g.input("r", DType::F32, vec![Dim::Known(3), Dim::Known(33), Dim::Known(5)]);
        let l = g.op1(Op::LogSoftmax(op::Softmax { axis: 1 }), &[r]);
        let w = g.initializer("w", ConstTensor::from_f32(&[5], &[1.0; 5]).unwrap());
        let rms = g.op1(Op::RmsNormalization(op::RmsNormalization::default()), &[l, w]);
        g.output(s);
        g.output(rms);
        let plan = compile(&g, &Binding::new().with("n", 7), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let kernels: Vec<KernelId> = plan
            .steps
            .iter()
            .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
            .collect();
        for k in [KernelId::LayerNormF32, KernelId::SoftmaxF32, KernelId::LogSoftmaxF32, KernelId::RmsNormF32]
        {
            assert!(kernels.contains(&k), "{k:?} missing:\n{text}");
        }
        for step in &plan.steps {
            let Step::Kernel { kernel, block, shared_bytes, .. } = step else { continue };
            let p = params(step);
            match kernel {
                KernelId::LayerNormF32 => {
                    assert_eq!((p.outer, p.len, p.inner, p.scale_len, p.bias_len), (7, 4096, 1, 4096, 1));
                    assert_eq!((p.threads_per_row, block[0], *shared_bytes), (block[0], 512, 128));
                }
                KernelId::LogSoftmaxF32 => {
                    assert_eq!((p.outer, p.len, p.inner, p.threads_per_row), (3, 33, 5, 1));
                }
                KernelId::RmsNormF32 => {
                    assert_eq!((p.outer, p.len, p.inner, p.scale_len, p.threads_per_row), (99, 5, 1, 5, 32));
                }
                _ => {}
            }
        }
    }

    #[test]
    fn layer_norm_statistics_are_kernel_outputs_and_odd_broadcasts_are_refused() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(2), Dim::Known(3), Dim::Known(4)]);
        let scale = g.initializer("scale", ConstTensor::from_f32(&[3, 1], &[1.0; 3]).unwrap());
        let ln = Op::LayerNormalization(op::LayerNormalization { axis: 1, ..Default::default() });
        let y = g.push_opt(ln.clone(), vec![Some(x), Some(scale)], 1)[0];
        g.output(y);
        let e = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap_err().to_string();
        assert!(e.contains("1 node(s)") && e.contains("broadcasts"), "{e}");
        // Mean and InvStdDev are written by the same launch (extra outputs before Y).
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(2), Dim::Known(3), Dim::Known(4)]);
        let scale = g.initializer("scale", ConstTensor::from_f32(&[4], &[1.0; 4]).unwrap());
        let ln = Op::LayerNormalization(op::LayerNormalization { axis: -1, ..Default::default() });
        let outs = g.push_opt(ln, vec![Some(x), Some(scale)], 3);
        for o in &outs {
            g.output(*o);
        }
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let Step::Kernel { args, kernel, .. } = &plan.steps[0] else { panic!("{plan}") };
        assert_eq!(*kernel, KernelId::LayerNormF32);
        assert_eq!(&args[4..], &[Arg::Output(outs[1]), Arg::Output(outs[2]), Arg::Value(outs[0])]);
    }
}
