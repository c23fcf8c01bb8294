//! Lowering of the element-indexed ops to the `indexing` kernels — GatherElements, ScatterElements
//! (a copy of the data, then the update pass), Trilu, CumSum — and of DepthToSpace / SpaceToDepth, which
//! are a transpose through strides (one strided copy over a 6-D view of the output).

use kernels_gpu::abi::{
    CumSumParams, ElementsParams, KernelId, MAX_RANK, Params, ScatterNdParams, TriluParams, scatter_reduction,
};

use super::lower::{Lowered, dims};
use super::movement::{MoveNode, axis_of, by_size, contiguous, step, strided_copy};
use super::{Arg, PlanOptions, PlannedValue, Step};
use crate::graph::ValueId;
use crate::op::{DepthToSpaceMode, ScatterReduction};
use crate::tensor_info::DType;

/// The [`ElementsParams`] of indices `id` addressing data `dd` along `axis`, checked as the CPU
/// reference checks them (same rank, no larger than the data off the axis).
pub fn elements_params(
    dd: &[usize],
    id: &[usize],
    axis: i64,
    index: DType,
) -> Result<ElementsParams, String> {
    let rank = dd.len();
    let a = axis_of(axis, rank)?;
    if rank == 0 || rank > MAX_RANK {
        return Err(format!("rank {rank} is outside 1..={MAX_RANK}"));
    }
    if id.len() != rank || dd.iter().zip(id).enumerate().any(|(d, (&n, &m))| d != a && m > n) {
        return Err(format!("indices {id:?} do not fit data {dd:?} along axis {a}"));
    }
    let index_bytes = match index {
        DType::I64 => 8,
        DType::I32 => 4,
        other => return Err(format!("indices of {other}")),
    };
    let first = MAX_RANK - rank;
    let strides = contiguous(dd);
    let mut p = ElementsParams {
        elems: id.iter().product::<usize>() as u64,
        axis_len: dd[a] as u64,
        rank: rank as u32,
        axis: (first + a) as u32,
        index_bytes,
        ..ElementsParams::default()
    };
    for d in 0..rank {
        (p.shape[first + d], p.data_strides[first + d]) = (id[d] as u64, strides[d] as u64);
    }
    Ok(p)
}

/// ONNX GatherElements of 1-, 4- or 8-byte data, i32 or i64 indices.
pub(super) fn gather_elements(n: &MoveNode, axis: i64, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, idx, y) = (n.input(0)?, n.input(1)?, n.output()?);
    let ((xd, dtype), (id, it)) = (dims(values, x)?, dims(values, idx)?);
    let p = elements_params(xd, id, axis, it)?;
    if p.elems == 0 {
        return Ok(Vec::new());
    }
    let kernel = by_size(
        dtype,
        [
            Some(KernelId::GatherElementsB1),
            None,
            Some(KernelId::GatherElementsB4),
            Some(KernelId::GatherElementsB8),
        ],
        "GatherElements",
    )?;
    let args = vec![Arg::Value(x), Arg::Value(idx), Arg::Value(y)];
    Ok(step(n.id, n.label.clone(), kernel, &p, p.elems, o, args))
}

/// ONNX ScatterElements of f32: the data copied to the output, then the updates applied.
pub(super) fn scatter_elements(
    n: &MoveNode,
    axis: i64,
    reduction: ScatterReduction,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, idx, upd, y) = (n.input(0)?, n.input(1)?, n.input(2)?, n.output()?);
    let ((xd, dtype), (id, it), (ud, ut)) = (dims(values, x)?, dims(values, idx)?, dims(values, upd)?);
    if dtype != DType::F32 || ut != DType::F32 {
        return Err(format!("ScatterElements of {dtype} has no kernel yet (f32 only)"));
    }
    if ud != id {
        return Err(format!("updates {ud:?} and indices {id:?} differ in shape"));
    }
    let mut p = elements_params(xd, id, axis, it)?;
    p.reduction = reduction_code(reduction);
    scatter_steps(n, (x, idx, upd, y), (KernelId::ScatterElementsF32, &p, p.elems), values, o)
}

/// The data `x` copied to the output `y`, then the update launch (`kernel` with `p`, over `work`
/// updates, reading `idx` and `upd`) when there is any update.
fn scatter_steps(
    n: &MoveNode,
    (x, idx, upd, y): (ValueId, ValueId, ValueId, ValueId),
    (kernel, p, work): (KernelId, &impl Params, u64),
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let bytes = values[y.index()].bytes().ok_or("data-dependent output size")?;
    let mut steps = vec![Step::Copy { node: n.id, src: x, dst: y, bytes }];
    if work > 0 {
        let args = vec![Arg::Value(idx), Arg::Value(upd), Arg::Value(y)];
        steps.extend(step(n.id, n.label.clone(), kernel, p, work, o, args));
    }
    Ok(steps)
}

/// The kernels' code of a scatter reduction.
fn reduction_code(r: ScatterReduction) -> u32 {
    match r {
        ScatterReduction::None => scatter_reduction::NONE,
        ScatterReduction::Add => scatter_reduction::ADD,
        ScatterReduction::Mul => scatter_reduction::MUL,
        ScatterReduction::Max => scatter_reduction::MAX,
        ScatterReduction::Min => scatter_reduction::MIN,
    }
}

/// ONNX ScatterND of f32: the data copied to the output (a copy `compile` drops when the output
/// takes the data's buffer in place), then the update slices applied.
pub(super) fn scatter_nd(
    n: &MoveNode,
    reduction: ScatterReduction,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, idx, upd, y) = (n.input(0)?, n.input(1)?, n.input(2)?, n.output()?);
    let ((xd, dtype), (id, it), (ud, ut)) = (dims(values, x)?, dims(values, idx)?, dims(values, upd)?);
    if dtype != DType::F32 || ut != DType::F32 {
        return Err(format!("ScatterND of {dtype} has no kernel yet (f32 only)"));
    }
    let index_bytes = match it {
        DType::I64 => 8,
        DType::I32 => 4,
        other => return Err(format!("indices of {other}")),
    };
    let Some((&k, tuple_dims)) = id.split_last() else {
        return Err("indices must have rank at least 1".into());
    };
    if k == 0 || k > xd.len() || k > MAX_RANK {
        return Err(format!("index tuples of length {k} for data of rank {}", xd.len()));
    }
    let mut want = tuple_dims.to_vec();
    want.extend_from_slice(&xd[k..]);
    if ud != want.as_slice() {
        return Err(format!("updates {ud:?} should be {want:?}"));
    }
    let slice = xd[k..].iter().product::<usize>() as u64;
    let strides = super::movement::contiguous_u64(xd);
    let mut p = ScatterNdParams {
        elems: ud.iter().product::<usize>() as u64,
        slice,
        k: k as u32,
        index_bytes,
        reduction: reduction_code(reduction),
        ..ScatterNdParams::default()
    };
    for d in 0..k {
        (p.dims[d], p.strides[d]) = (xd[d] as u64, strides[d]);
    }
    let work = if slice > 0 { p.elems } else { 0 };
    scatter_steps(n, (x, idx, upd, y), (KernelId::ScatterNdF32, &p, work), values, o)
}

/// ONNX Trilu of 1-, 4- or 8-byte elements; `k` (input 1, one i64) is read on the device, so it
/// may be computed at run time.
pub(super) fn trilu(n: &MoveNode, upper: bool, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let k = n.ins.get(1).copied().flatten();
    if let Some(k) = k {
        let (kd, kt) = dims(values, k)?;
        if kt != DType::I64 || kd.iter().product::<usize>() != 1 {
            return Err(format!("k must be one i64, got {kt} {kd:?}"));
        }
    }
    let r = xd.len();
    if r < 2 {
        return Err(format!("Trilu needs rank >= 2, got {xd:?}"));
    }
    let elems = xd.iter().product::<usize>() as u64;
    if elems == 0 {
        return Ok(Vec::new());
    }
    let p =
        TriluParams { elems, rows: xd[r - 2] as u64, cols: xd[r - 1] as u64, upper: upper as u32, _pad: 0 };
    let kernel = by_size(
        dtype,
        [Some(KernelId::TriluB1), None, Some(KernelId::TriluB4), Some(KernelId::TriluB8)],
        "Trilu",
    )?;
    let args = vec![Arg::Value(x), k.map_or(Arg::Null, Arg::Value), Arg::Value(y)];
    Ok(step(n.id, n.label.clone(), kernel, &p, elems, o, args))
}

/// ONNX CumSum (CumProd with `product`) of f32, f64, i32 or i64 along a constant axis (input
/// 1): one thread per line.
pub(super) fn cumsum(
    n: &MoveNode,
    (a, product): (&crate::op::CumSum, bool),
    g: &crate::graph::Graph,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let axis = match super::movement::const_ints(g, n.input(1)?, "CumSum's axis")?[..] {
        [axis] => axis,
        ref other => return Err(format!("CumSum's axis must be one integer, got {other:?}")),
    };
    let (xd, dtype) = dims(values, x)?;
    let axis = axis_of(axis, xd.len())?;
    let kernel = match dtype {
        DType::F32 => KernelId::CumSumF32,
        DType::F64 => KernelId::CumSumF64,
        DType::I32 => KernelId::CumSumI32,
        DType::I64 => KernelId::CumSumI64,
        other => {
            return Err(format!(
                "a cumulative sum or product of {other} has no GPU kernel (f32, f64, i32, i64 do)"
            ));
        }
    };
    let (outer, len, inner) = (
        xd[..axis].iter().product::<usize>() as u64,
        xd[axis] as u64,
        xd[axis + 1..].iter().product::<usize>() as u64,
    );
    let lines = outer * inner;
    if lines == 0 || len == 0 {
        return Ok(Vec::new());
    }
    let p = CumSumParams {
        lines,
        len,
        inner,
        exclusive: a.exclusive as u32,
        reverse: a.reverse as u32,
        product: product as u32,
        _pad: 0,
    };
    Ok(step(n.id, n.label.clone(), kernel, &p, lines, o, vec![Arg::Value(x), Arg::Value(y)]))
}

/// The 4-D `[n, c, h, w]` input of a DepthToSpace / SpaceToDepth.
fn nchw(d: &[usize]) -> Result<[usize; 4], String> {
    <[usize; 4]>::try_from(d).map_err(|_| format!("expects a 4-D input, got {d:?}"))
}

/// ONNX DepthToSpace: the output `[n, c / b², h·b, w·b]` viewed as `[n, c / b², h, b, w, b]`,
/// each element read from its input channel (DCR: `(i·b + j)·c/b² + c'`; CRD: `c'·b² + i·b + j`).
pub(super) fn depth_to_space(
    n: &MoveNode,
    b: usize,
    mode: DepthToSpaceMode,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let [nn, c, h, w] = nchw(xd)?;
    if b == 0 || !c.is_multiple_of(b * b) {
        return Err(format!("channels {c} are not divisible by blocksize² ({b}²)"));
    }
    let co = c / (b * b);
    let s = contiguous(xd);
    let (bi, sc) = (b as i64, s[1]);
    let xs = match mode {
        DepthToSpaceMode::Dcr => [s[0], sc, s[2], bi * co as i64 * sc, s[3], co as i64 * sc],
        DepthToSpaceMode::Crd => [s[0], bi * bi * sc, s[2], bi * sc, s[3], sc],
    };
    let shape = [nn, co, h, b, w, b];
    strided_copy(n.id, &n.label, (x, 0, &xs), (y, 0, &contiguous(&shape)), &shape, dtype, o)
}

/// ONNX SpaceToDepth: the output `[n, c·b², h / b, w / b]` viewed as `[n, b, b, c, h/b, w/b]`
/// (channel `(i·b + j)·c + c'`), each element read from row `h'·b + i`, column `w'·b + j`.
pub(super) fn space_to_depth(n: &MoveNode, b: usize, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let (x, y) = (n.input(0)?, n.output()?);
    let (xd, dtype) = dims(values, x)?;
    let [nn, c, h, w] = nchw(xd)?;
    if b == 0 || !h.is_multiple_of(b) || !w.is_multiple_of(b) {
        return Err(format!("spatial dims {h}x{w} are not divisible by blocksize {b}"));
    }
    let s = contiguous(xd);
    let bi = b as i64;
    let xs = [s[0], s[2], s[3], s[1], bi * s[2], bi * s[3]];
    let shape = [nn, b, b, c, h / b, w / b];
    strided_copy(n.id, &n.label, (x, 0, &xs), (y, 0, &contiguous(&shape)), &shape, dtype, o)
}

#[cfg(test)]
mod tests {
    use super::elements_params;
    use crate::Graph;
    use crate::op::{self, LossReduction, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};
    use kernels_gpu::abi::{KernelId, MAX_RANK, StridedCopyParams};

    fn known(d: &[usize]) -> Vec<Dim> {
        d.iter().map(|&n| Dim::Known(n)).collect()
    }

    fn kernels(g: &Graph) -> (Vec<KernelId>, String) {
        let plan = compile(g, &Binding::new(), &PlanOptions::default()).unwrap();
        let ks = plan
            .steps
            .iter()
            .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None });
        (ks.collect(), plan.to_string())
    }

    #[test]
    fn elements_params_right_align_the_axis_and_check_the_indices() {
        let p = elements_params(&[4, 5, 6], &[2, 7, 6], 1, DType::I32).unwrap();
        assert_eq!((p.elems, p.axis_len, p.rank, p.axis, p.index_bytes), (84, 5, 3, MAX_RANK as u32 - 2, 4));
        assert_eq!(&p.shape[MAX_RANK - 3..], &[2, 7, 6]);
        assert_eq!(&p.data_strides[MAX_RANK - 3..], &[30, 6, 1]);
        // Larger than the data off the axis, wrong rank, float indices: refused.
        assert!(elements_params(&[4, 5, 6], &[5, 1, 6], 1, DType::I64).is_err());
        assert!(elements_params(&[4, 5], &[4, 5, 1], 1, DType::I64).is_err());
        assert!(elements_params(&[4, 5], &[4, 5], -1, DType::F32).is_err());
    }

    #[test]
    fn depth_to_space_is_one_strided_copy() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[1, 8, 3, 5]));
        let mode = op::DepthToSpaceMode::Dcr;
        let y = g.op1(Op::DepthToSpace(op::DepthToSpace { blocksize: 2, mode }), &[x]);
        g.output(y);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let [Step::Kernel { kernel: KernelId::StridedCopyB4, args, .. }] = plan.steps.as_slice() else {
            panic!("{plan}")
        };
        let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
        assert_eq!(b.len(), std::mem::size_of::<StridedCopyParams>());
        // The params are 8-byte words: elems, rank (+ pad), offsets, shape, x strides, y strides.
        let word = |i: usize| i64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        assert_eq!(word(0), 120);
        // The view [n 1, co 2, h 3, i 2, w 5, j 2] reads x (strides [120, 15, 5, 1]) at
        // [120, 15, 5, 60, 1, 30]; the unit dim drops and co merges with h (both contiguous).
        let rank = word(1) as u32 as usize;
        let xs: Vec<i64> = (0..rank).map(|k| word(4 + MAX_RANK + (MAX_RANK - rank + k))).collect();
        assert_eq!(xs, [5, 60, 1, 30], "rank {rank}");
    }

    #[test]
    fn copies_of_whole_vectors_take_the_vector_kernel_in_vector_units() {
        let slice = |dims: &[usize], start: i64| {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(dims));
            let ints = |g: &mut Graph, n: &str, v: i64| g.const_i64(n, &[1], &[v]);
            let (s, e, a) =
                (ints(&mut g, "s", start), ints(&mut g, "e", dims[1] as i64), ints(&mut g, "a", 1));
            let y = g.op1(Op::Slice(op::Slice::default()), &[x, s, e, a]);
            g.output(y);
            compile(&g, &Binding::new(), &PlanOptions::default()).unwrap()
        };
        // Columns 4.. of [3, 12]: two vectors a row, rows three vectors apart, from vector 1.
        let plan = slice(&[3, 12], 4);
        let [Step::Kernel { kernel: KernelId::StridedCopyB16, args, .. }] = plan.steps.as_slice() else {
            panic!("{plan}")
        };
        let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
        let word = |i: usize| i64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        assert_eq!((word(0), word(1) as u32, word(2), word(3)), (6, 2, 1, 0), "{plan}");
        let at = |base: usize, k: usize| word(base + MAX_RANK - 2 + k);
        assert_eq!([at(4, 0), at(4, 1), at(4 + MAX_RANK, 0), at(4 + MAX_RANK, 1)], [3, 2, 3, 1]);
        assert_eq!([at(4 + 2 * MAX_RANK, 0), at(4 + 2 * MAX_RANK, 1)], [2, 1]);
        // A start or a run that is not whole vectors: 4-byte elements.
        for (dims, start) in [(&[3, 10][..], 2), (&[3, 14][..], 4)] {
            let plan = slice(dims, start);
            assert!(
                matches!(plan.steps.as_slice(), [Step::Kernel { kernel: KernelId::StridedCopyB4, .. }]),
                "{plan}"
            );
        }
    }

    #[test]
    fn new_ops_lower_to_their_kernels() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[4, 6]));
        let i = g.input("i", DType::I32, known(&[4, 3]));
        let ge = g.op1(Op::GatherElements(op::GatherElements { axis: -1 }), &[x, i]);
        let k = g.input("k", DType::I64, known(&[]));
        let tri = g.op1(Op::Trilu(op::Trilu { upper: false }), &[x, k]);
        let hm = g.op1(Op::Hardmax(op::Softmax { axis: 0 }), &[tri]);
        let inf = g.op1(Op::IsInf(op::IsInf::default()), &[hm]);
        for v in [ge, inf] {
            g.output(v);
        }
        let (ks, text) = kernels(&g);
        assert_eq!(
            ks,
            [KernelId::GatherElementsB4, KernelId::TriluB4, KernelId::HardmaxF32, KernelId::Compare],
            "{text}"
        );
    }

    #[test]
    fn variadic_sums_of_many_inputs_chain_programs() {
        let mut g = Graph::new();
        let ins: Vec<_> = (0..6).map(|k| g.input(&format!("x{k}"), DType::F32, known(&[3, 4]))).collect();
        let y = g.op1(Op::Mean, &ins);
        g.output(y);
        let (ks, text) = kernels(&g);
        assert_eq!(ks, [KernelId::EwProgramF32, KernelId::EwProgramF32], "{text}");
    }

    #[test]
    fn softmax_cross_entropy_without_log_prob_uses_scratch() {
        for with_log_prob in [false, true] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, known(&[3, 5, 2]));
            let t = g.input("t", DType::I64, known(&[3, 2]));
            let sce = op::SoftmaxCrossEntropyLoss { reduction: LossReduction::Mean, ignore_index: Some(-1) };
            let outs = g.push(Op::SoftmaxCrossEntropyLoss(sce), &[x, t], if with_log_prob { 2 } else { 1 });
            for y in outs {
                g.output(y);
            }
            let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
            let ks: Vec<KernelId> = plan
                .steps
                .iter()
                .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
                .collect();
            assert_eq!(ks, [KernelId::LogSoftmaxF32, KernelId::NllLossF32], "{plan}");
            // The reduced launch is one block with room for f64 partials.
            let Some(Step::Kernel { grid, shared_bytes, .. }) = plan.steps.last() else { panic!("{plan}") };
            assert_eq!((grid[0], *shared_bytes), (1, kernels_gpu::abi::LOSS_SHARED_BYTES), "{plan}");
        }
    }
}
