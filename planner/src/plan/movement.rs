//! Lowering of the data-movement ops to the `movement` kernels: Transpose (the permutation
//! collapsed to the fewest output dims, see `kernels_gpu::abi::TransposeParams`), Gather (data
//! viewed as `[outer, axis_len, inner]`), GatherND, Pad, and every op that is a strided copy —
//! Slice, Split, Concat, Expand, Tile (see `kernels_gpu::abi::StridedCopyParams`). Kernels are
//! picked by element size, so all of them move any dtype.

use kernels_gpu::abi::{
    KernelId, MAX_RANK, PadParams, Params, ReverseSequenceParams, StridedCopyParams, TransposeParams,
    pad_mode,
};

use super::lower::{Lowered, dims};
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Pad, PadMode, Slice, Split};
use crate::shape_infer::slice_range;
use crate::tensor_info::DType;

mod gather;
pub(super) use gather::{gather, gather_nd, gather_program};

fn static_dims(values: &[PlannedValue], v: ValueId, dtype: DType) -> Result<&[usize], String> {
    let pv = &values[v.index()];
    if pv.dtype != dtype {
        return Err(format!("`{}` is {}; the movement kernel takes {dtype} here", pv.name, pv.dtype));
    }
    pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

/// The constant integers of input `v` (folded shape operands), or why not.
pub(super) fn const_ints(g: &Graph, v: ValueId, what: &str) -> Result<Vec<i64>, String> {
    g.initializers
        .get(&v)
        .and_then(|c| c.to_i64s())
        .ok_or_else(|| format!("{what} must be a constant (it is computed at run time)"))
}

/// Row-major element strides of `dims`.
pub(super) fn contiguous(dims: &[usize]) -> Vec<i64> {
    contiguous_u64(dims).into_iter().map(|s| s.min(i64::MAX as u64) as i64).collect()
}

/// [`contiguous`] as the unsigned strides of the GEMM and attention views. Saturating: only an
/// empty tensor (a dim of 0; a plan's values hold at most 2^48 elements) can have dims whose
/// product passes 2^64, and its strides are never used to address anything.
pub(super) fn contiguous_u64(dims: &[usize]) -> Vec<u64> {
    let mut strides = vec![0u64; dims.len()];
    let mut s = 1u64;
    for (k, &d) in dims.iter().enumerate().rev() {
        strides[k] = s;
        s = s.saturating_mul(d as u64);
    }
    strides
}

/// Strides of a reshape of the strided view `(od, os)` to `nd` without moving data, if there are
/// any (NumPy's no-copy reshape: each group of old dims that merges or splits must be contiguous
/// within itself). Attention traces its operands through it; the GEMMs read einsum operands and
/// write results through it (`fuse::transposes`).
pub(super) fn reshape_strides(od: &[usize], os: &[u64], nd: &[usize]) -> Option<Vec<u64>> {
    let product = |d: &[usize]| d.iter().try_fold(1usize, |p, &x| p.checked_mul(x));
    if od.contains(&0) || product(od).is_none() || product(od) != product(nd) {
        return None;
    }
    let (od, os): (Vec<usize>, Vec<u64>) =
        od.iter().zip(os).filter(|(d, _)| **d != 1).map(|(d, s)| (*d, *s)).unzip();
    let mut ns = vec![1u64; nd.len()];
    let (mut oi, mut ni) = (0, 0);
    while oi < od.len() && ni < nd.len() {
        let (mut oj, mut nj) = (oi + 1, ni + 1);
        let (mut op, mut np) = (od[oi], nd[ni]);
        while op != np {
            if np < op {
                np *= *nd.get(nj)?;
                nj += 1;
            } else {
                op *= *od.get(oj)?;
                oj += 1;
            }
        }
        if (oi..oj - 1).any(|k| os[k] != od[k + 1] as u64 * os[k + 1]) {
            return None;
        }
        ns[nj - 1] = os[oj - 1];
        for k in (ni + 1..nj).rev() {
            ns[k - 1] = ns[k] * nd[k] as u64;
        }
        (oi, ni) = (oj, nj);
    }
    nd[ni..].iter().all(|&d| d == 1).then_some(ns)
}

/// Kernel of an element-size family (1, 2, 4, 8 bytes).
pub(super) fn by_size(dtype: DType, kernels: [Option<KernelId>; 4], what: &str) -> Result<KernelId, String> {
    let k = match dtype.size_bytes() {
        1 => kernels[0],
        2 => kernels[1],
        4 => kernels[2],
        8 => kernels[3],
        _ => None,
    };
    k.ok_or_else(|| format!("{what} has no kernel for {dtype} elements"))
}

/// One strided-copy launch: `y[y_off + idx . ys] = x[x_off + idx . xs]` over `shape`, dims
/// collapsed where both sides are contiguous. Copies of nothing give no step.
#[allow(clippy::too_many_arguments)]
pub(super) fn strided_copy(
    id: NodeId,
    label: &str,
    (x, x_off, xs): (ValueId, i64, &[i64]),
    (y, y_off, ys): (ValueId, i64, &[i64]),
    shape: &[usize],
    dtype: DType,
    o: &PlanOptions,
) -> Result<Vec<Step>, String> {
    let elems: u64 = shape.iter().map(|&d| d as u64).product();
    if elems == 0 {
        return Ok(Vec::new());
    }
    let mut dims = super::elementwise::collapse_dims(shape, &[xs.to_vec(), ys.to_vec()]);
    if dims.len() > MAX_RANK {
        return Err(format!("the copy collapses to {} dims, more than {MAX_RANK}", dims.len()));
    }
    // Whole 16-byte vectors where the inner run is contiguous on both sides and every offset,
    // stride and the inner extent are whole vectors (slots are 256-byte aligned; the kernel
    // checks the pointers).
    let wide = 16 / dtype.size_bytes().max(1);
    let vectors = wide > 1
        && dims.last().is_some_and(|(n, s)| n % wide == 0 && s.iter().all(|&st| st == 1))
        && [x_off, y_off]
            .iter()
            .chain(dims.iter().rev().skip(1).flat_map(|(_, s)| s))
            .all(|v| v % wide as i64 == 0);
    let (elems, x_off, y_off) = if vectors {
        for (k, (n, s)) in dims.iter_mut().rev().enumerate() {
            if k == 0 {
                *n /= wide;
            } else {
                s.iter_mut().for_each(|st| *st /= wide as i64);
            }
        }
        (elems / wide as u64, x_off / wide as i64, y_off / wide as i64)
    } else {
        (elems, x_off, y_off)
    };
    let mut p = StridedCopyParams {
        elems,
        rank: dims.len() as u32,
        x_offset: x_off,
        y_offset: y_off,
        ..StridedCopyParams::default()
    };
    let first = MAX_RANK - dims.len();
    for (k, (n, s)) in dims.into_iter().enumerate() {
        (p.shape[first + k], p.x_strides[first + k], p.y_strides[first + k]) = (n as u64, s[0], s[1]);
    }
    let sizes = [
        Some(KernelId::StridedCopyB1),
        Some(KernelId::StridedCopyB2),
        Some(KernelId::StridedCopyB4),
        Some(KernelId::StridedCopyB8),
    ];
    let kernel = if vectors { KernelId::StridedCopyB16 } else { by_size(dtype, sizes, label)? };
    Ok(step(id, label.to_string(), kernel, &p, elems, o, vec![Arg::Value(x), Arg::Value(y)]))
}

/// One grid-stride launch of `kernel` over `work` items: `params`, then `args`.
pub(super) fn step(
    id: NodeId,
    label: String,
    kernel: KernelId,
    params: &impl Params,
    work: u64,
    o: &PlanOptions,
    args: Vec<Arg>,
) -> Vec<Step> {
    let grid = capped_grid(o.sm_count, work.div_ceil(THREADS as u64));
    let mut all = vec![Arg::Params(params.as_bytes().to_vec())];
    all.extend(args);
    vec![Step::Kernel {
        nodes: vec![id],
        label,
        kernel,
        grid,
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args: all,
    }]
}

/// The collapsed transpose of an input of shape `dims` by `perm` (output axis `d` is input axis
/// `perm[d]`), or `None` when more than [`MAX_RANK`] dims remain.
pub fn transpose_params(dims: &[usize], perm: &[usize]) -> Option<TransposeParams> {
    let mut in_strides = vec![0u64; dims.len()];
    let mut s = 1u64;
    for (a, &d) in dims.iter().enumerate().rev() {
        in_strides[a] = s;
        s *= d as u64;
    }
    let elems: u64 = dims.iter().map(|&d| d as u64).product();
    // (extent, input stride) of each output dim, size-1 dims dropped, adjacent dims merged when the
    // outer one's stride is the inner one's stride times its extent.
    let mut kept: Vec<(u64, u64)> = Vec::new();
    if elems > 1 {
        for &a in perm {
            let (n, st) = (dims[a] as u64, in_strides[a]);
            if n == 1 {
                continue;
            }
            match kept.last_mut() {
                Some((pn, ps)) if *ps == st * n => (*pn, *ps) = (*pn * n, st),
                _ => kept.push((n, st)),
            }
        }
    }
    if kept.len() > MAX_RANK {
        return None;
    }
    let mut p = TransposeParams { elems, rank: kept.len() as u32, ..TransposeParams::default() };
    let first = MAX_RANK - kept.len();
    for (d, (n, st)) in kept.into_iter().enumerate() {
        (p.out_shape[first + d], p.in_strides[first + d]) = (n, st);
    }
    Some(p)
}

/// ONNX Transpose of f32 with static shapes; `perm` defaults to the reversed axes.
pub(super) fn transpose(
    id: NodeId,
    label: String,
    x: ValueId,
    out: ValueId,
    perm: Option<&[usize]>,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (d, dtype) = dims(values, x)?;
    let perm: Vec<usize> = perm.map_or_else(|| (0..d.len()).rev().collect(), <[usize]>::to_vec);
    let mut seen = vec![false; d.len()];
    if perm.len() != d.len() || perm.iter().any(|&a| a >= d.len() || std::mem::replace(&mut seen[a], true)) {
        return Err(format!("perm {perm:?} is not a permutation of {} axes", d.len()));
    }
    if dtype.size_bytes() != 4 {
        // Other element sizes: the strided copy with permuted input strides.
        let strides = contiguous(d);
        let xs: Vec<i64> = perm.iter().map(|&a| strides[a]).collect();
        let shape: Vec<usize> = perm.iter().map(|&a| d[a]).collect();
        let ys = contiguous(&shape);
        return strided_copy(id, &label, (x, 0, &xs), (out, 0, &ys), &shape, dtype, o);
    }
    let p = transpose_params(d, &perm).ok_or("the permutation collapses to more than 8 dims")?;
    Ok(step(id, label, KernelId::TransposeF32, &p, p.elems, o, vec![Arg::Value(x), Arg::Value(out)]))
}

/// The node being lowered: its id, label and operands.
pub(super) struct MoveNode<'a> {
    pub id: NodeId,
    pub label: String,
    pub ins: &'a [Option<ValueId>],
    pub outs: &'a [Option<ValueId>],
}

impl MoveNode<'_> {
    pub(super) fn input(&self, i: usize) -> Result<ValueId, String> {
        self.ins.get(i).copied().flatten().ok_or_else(|| format!("input {i} is missing"))
    }

    pub(super) fn output(&self) -> Result<ValueId, String> {
        self.outs.first().copied().flatten().ok_or_else(|| "the output is omitted".to_string())
    }
}

pub(super) use super::reduce::axis_index as axis_of;

/// ONNX Slice (starts, ends, axes, steps constant after folding).
pub(super) fn slice(n: &MoveNode, s: &Slice, g: &Graph, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (d, dtype) = dims(values, x)?;
    let (starts, ends, axes, steps) = match (&s.starts, &s.ends) {
        (Some(st), Some(en)) => (st.clone(), en.clone(), s.axes.clone(), None),
        _ => {
            let opt = |i: usize, what: &str| match n.ins.get(i).copied().flatten() {
                Some(v) => const_ints(g, v, what).map(Some),
                None => Ok(None),
            };
            (
                const_ints(g, n.input(1)?, "starts")?,
                const_ints(g, n.input(2)?, "ends")?,
                opt(3, "axes")?,
                opt(4, "steps")?,
            )
        }
    };
    let count = starts.len();
    let axes = axes.unwrap_or_else(|| (0..count as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; count]);
    if ends.len() != count || axes.len() != count || steps.len() != count {
        return Err("starts, ends, axes and steps differ in length".into());
    }
    let strides = contiguous(d);
    let (mut shape, mut xs, mut x_off) = (d.to_vec(), strides.clone(), 0i64);
    for k in 0..count {
        let a = axis_of(axes[k], d.len())?;
        let (first, len) =
            slice_range(d[a] as i64, starts[k], ends[k], steps[k]).ok_or("a slice step is 0")?;
        shape[a] = len;
        x_off += first * strides[a];
        xs[a] = strides[a] * steps[k];
    }
    strided_copy(n.id, &n.label, (x, x_off, &xs), (y, 0, &contiguous(&shape)), &shape, dtype, o)
}

/// ONNX Split: one strided copy per output, at its offset along the axis.
pub(super) fn split(n: &MoveNode, s: &Split, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let x = n.input(0)?;
    let (d, dtype) = dims(values, x)?;
    let a = axis_of(s.axis, d.len())?;
    if n.outs.iter().any(Option::is_none) {
        return Err("Split with an omitted output has no kernel yet".into());
    }
    let xs = contiguous(d);
    let mut at = 0i64;
    let mut steps = Vec::new();
    for out in n.outs {
        let Some(y) = *out else { continue };
        let (od, _) = dims(values, y)?;
        steps.extend(strided_copy(
            n.id,
            &n.label,
            (x, at * xs[a], &xs),
            (y, 0, &contiguous(od)),
            od,
            dtype,
            o,
        )?);
        at += od[a] as i64;
    }
    Ok(steps)
}

/// ONNX Concat: one strided copy per input into its place in the output.
pub(super) fn concat(n: &MoveNode, axis: i64, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let y = n.output()?;
    let (od, dtype) = dims(values, y)?;
    let a = axis_of(axis, od.len())?;
    let ys = contiguous(od);
    let mut at = 0i64;
    let mut steps = Vec::new();
    for (i, inp) in n.ins.iter().enumerate() {
        let x = inp.ok_or_else(|| format!("input {i} is missing"))?;
        let (xd, _) = dims(values, x)?;
        steps.extend(strided_copy(
            n.id,
            &n.label,
            (x, 0, &contiguous(xd)),
            (y, at * ys[a], &ys),
            xd,
            dtype,
            o,
        )?);
        at += xd[a] as i64;
    }
    Ok(steps)
}

/// ONNX Expand: the input broadcast to the output shape (stride 0 on broadcast dims).
pub(super) fn expand(n: &MoveNode, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let ((xd, dtype), (od, _)) = (dims(values, x)?, dims(values, y)?);
    let xs: Vec<i64> =
        super::elementwise::broadcast_strides(xd, od.len()).into_iter().map(|s| s as i64).collect();
    strided_copy(n.id, &n.label, (x, 0, &xs), (y, 0, &contiguous(od)), od, dtype, o)
}

/// ONNX Tile: output dim `d` is `[repeats[d], n[d]]` row-major, read with stride 0 over the repeats.
pub(super) fn tile(n: &MoveNode, g: &Graph, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let reps = const_ints(g, n.input(1)?, "repeats")?;
    if reps.len() != xd.len() || reps.iter().any(|&r| r < 0) {
        return Err(format!("repeats {reps:?} for rank {}", xd.len()));
    }
    let strides = contiguous(xd);
    let (mut shape, mut xs) = (Vec::new(), Vec::new());
    for k in 0..xd.len() {
        shape.extend([reps[k] as usize, xd[k]]);
        xs.extend([0, strides[k]]);
    }
    strided_copy(n.id, &n.label, (x, 0, &xs), (y, 0, &contiguous(&shape)), &shape, dtype, o)
}

/// ONNX Pad (pads, constant value and axes constant after folding).
pub(super) fn pad(n: &MoveNode, pa: &Pad, g: &Graph, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let rank = xd.len();
    let pads = match &pa.pads {
        Some(p) => p.clone(),
        None => const_ints(g, n.input(1)?, "pads")?,
    };
    let axes: Vec<usize> = match n.ins.get(3).copied().flatten() {
        Some(v) => {
            const_ints(g, v, "axes")?.into_iter().map(|a| axis_of(a, rank)).collect::<Result<_, _>>()?
        }
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(format!("{} pads for {} axes", pads.len(), axes.len()));
    }
    // The constant, from the plan or (`run_time`) read by the kernel.
    let (value_bits, run_time) = match n.ins.get(2).copied().flatten() {
        Some(v) => match g.initializers.get(&v) {
            Some(c) => {
                let mut b = [0u8; 8];
                let k = c.bytes.len().min(8);
                b[..k].copy_from_slice(&c.bytes[..k]);
                (u64::from_le_bytes(b), None)
            }
            None => {
                let (vd, vt) = dims(values, v)?;
                if vt != dtype || vd.iter().product::<usize>() != 1 {
                    return Err(format!("the constant value is {vt} {vd:?}, not one {dtype}"));
                }
                (0, Some(v))
            }
        },
        None => match (pa.value, dtype) {
            (Some(v), DType::F32) => (v.to_bits() as u64, None),
            (Some(v), _) if v != 0.0 => return Err(format!("a legacy pad value on {dtype} data")),
            _ => (0, None),
        },
    };
    let mode = match pa.mode {
        PadMode::Constant => pad_mode::CONSTANT,
        PadMode::Reflect => pad_mode::REFLECT,
        PadMode::Edge => pad_mode::EDGE,
        PadMode::Wrap => pad_mode::WRAP,
    };
    let mut begin = vec![0i64; rank];
    for (i, &a) in axes.iter().enumerate() {
        begin[a] = pads[i];
    }
    pad_launch(n, (x, y), &begin, (mode, value_bits, run_time), values, o)
}

/// The Pad launch writing `y` from `x`, element `i` of `y` along each dim reading `i - begin[d]`
/// of `x` (a negative `begin` crops), outside `x` per `mode` (`value_bits` for a constant, or the
/// element of `run_time` when given).
fn pad_launch(
    n: &MoveNode,
    (x, y): (ValueId, ValueId),
    begin: &[i64],
    (mode, value_bits, run_time): (u32, u64, Option<ValueId>),
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((xd, dtype), (od, _)) = (dims(values, x)?, dims(values, y)?);
    let rank = xd.len();
    if rank > MAX_RANK {
        return Err(format!("rank {rank} is above {MAX_RANK}"));
    }
    if mode != pad_mode::CONSTANT && xd.contains(&0) && !od.contains(&0) {
        return Err("non-constant padding of an empty input".into());
    }
    let elems: u64 = od.iter().map(|&d| d as u64).product();
    let mut p = PadParams { elems, rank: rank as u32, mode, value_bits, ..PadParams::default() };
    let first = MAX_RANK - rank;
    for k in 0..rank {
        (p.out_shape[first + k], p.in_shape[first + k], p.begin[first + k]) =
            (od[k] as u64, xd[k] as u64, begin[k]);
    }
    if elems == 0 {
        return Ok(Vec::new());
    }
    let kernel = by_size(dtype, [None, None, Some(KernelId::PadB4), Some(KernelId::PadB8)], "Pad")?;
    let value = run_time.map_or(Arg::Null, Arg::Value);
    Ok(step(n.id, n.label.clone(), kernel, &p, elems, o, vec![Arg::Value(x), value, Arg::Value(y)]))
}

/// ONNX CenterCropPad: each listed axis cropped or zero-padded to its target size about the
/// centre (the input's extra or missing half rounded down at the start), as a Pad with negative
/// begins where it crops.
pub(super) fn center_crop_pad(
    n: &MoveNode,
    axes: Option<&[i64]>,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let ((xd, _), (od, _)) = (dims(values, x)?, dims(values, y)?);
    let rank = xd.len();
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| axis_of(a, rank)).collect::<Result<_, _>>()?,
        None => (0..rank).collect(),
    };
    let mut begin = vec![0i64; rank];
    for &a in &axes {
        let (dim, target) = (xd[a] as i64, od[a] as i64);
        begin[a] = if target <= dim { -((dim - target) / 2) } else { (target - dim) / 2 };
    }
    pad_launch(n, (x, y), &begin, (pad_mode::CONSTANT, 0, None), values, o)
}

/// ONNX ReverseSequence of 4- or 8-byte elements; the lengths (i64) are read on the device.
pub(super) fn reverse_sequence(
    n: &MoveNode,
    (batch_axis, time_axis): (usize, usize),
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, lens, y) = (n.input(0)?, n.input(1)?, n.output()?);
    let ((xd, dtype), (ld, lt)) = (dims(values, x)?, dims(values, lens)?);
    if xd.len() < 2 || batch_axis.max(time_axis) > 1 || batch_axis == time_axis {
        return Err(format!("input {xd:?} with batch axis {batch_axis} and time axis {time_axis}"));
    }
    if lt != DType::I64 || ld != [xd[batch_axis]] {
        return Err(format!("sequence_lens {ld:?} {lt} must be ({}) int64", xd[batch_axis]));
    }
    let p = ReverseSequenceParams {
        d0: xd[0] as u64,
        d1: xd[1] as u64,
        inner: xd[2..].iter().product::<usize>() as u64,
        batch_axis: batch_axis as u32,
        _pad: 0,
    };
    let kernel = by_size(
        dtype,
        [None, None, Some(KernelId::ReverseSequenceB4), Some(KernelId::ReverseSequenceB8)],
        "ReverseSequence",
    )?;
    let work = p.d0 * p.d1 * p.inner;
    Ok(step(n.id, n.label.clone(), kernel, &p, work, o, vec![Arg::Value(x), Arg::Value(lens), Arg::Value(y)]))
}

#[cfg(test)]
mod tests {
    use super::transpose_params;
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};
    use crate::{ConstTensor, Graph};
    use kernels_gpu::abi::{KernelId, MAX_RANK};

    #[test]
    fn transposes_collapse_to_the_fewest_dims() {
        // Identity: one contiguous run.
        let p = transpose_params(&[2, 3, 4], &[0, 1, 2]).unwrap();
        assert_eq!((p.rank, p.elems, p.out_shape[MAX_RANK - 1], p.in_strides[MAX_RANK - 1]), (1, 24, 24, 1));
        // [2, 3, 4] -> perm [2, 0, 1]: dims 0 and 1 stay adjacent and merge.
        let p = transpose_params(&[2, 3, 4], &[2, 0, 1]).unwrap();
        assert_eq!(p.rank, 2);
        assert_eq!(&p.out_shape[MAX_RANK - 2..], &[4, 6]);
        assert_eq!(&p.in_strides[MAX_RANK - 2..], &[1, 4]);
        // Size-1 dims vanish; a single element is rank 0.
        let p = transpose_params(&[1, 5, 1, 7], &[3, 2, 1, 0]).unwrap();
        assert_eq!(
            (p.rank, &p.out_shape[MAX_RANK - 2..], &p.in_strides[MAX_RANK - 2..]),
            (2, &[7, 5][..], &[1, 7][..])
        );
        assert_eq!(transpose_params(&[1, 1], &[1, 0]).unwrap().rank, 0);
    }

    #[test]
    fn transpose_and_gather_compile_to_movement_kernels() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into()), Dim::Known(3), Dim::Known(5)]);
        let t = g.transpose(x, &[2, 0, 1]);
        let idx = g.initializer("idx", ConstTensor::from_i64(&[2, 2], &[0, -1, 2, 1]).unwrap());
        let y = g.gather(t, idx, 1);
        g.output(y);
        let plan = compile(&g, &Binding::new().with("n", 4), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let kernels: Vec<KernelId> = plan
            .steps
            .iter()
            .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
            .collect();
        assert_eq!(kernels, [KernelId::TransposeF32, KernelId::GatherF32], "{text}");
        let Step::Kernel { args, .. } = &plan.steps[1] else { unreachable!() };
        let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
        let u64_at = |i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        // t is [5, 4, 3]: outer 5, axis 4, inner 3, four indices.
        assert_eq!((u64_at(0), u64_at(1), u64_at(2), u64_at(3)), (5, 4, 3, 4));
        assert_eq!(args.len(), 4);
    }
}
