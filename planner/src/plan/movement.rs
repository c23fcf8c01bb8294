//! Lowering of the data-movement ops (Transpose, Gather) to the `movement` kernels: the permutation
//! is collapsed to the fewest output dims (see `kernels_gpu::abi::TransposeParams`), Gather's data
//! is viewed as `[outer, axis_len, inner]` (see `kernels_gpu::abi::GatherParams`).

use kernels_gpu::abi::{GatherParams, KernelId, MAX_RANK, Params, TransposeParams};

use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{NodeId, ValueId};
use crate::tensor_info::DType;

type Lowered = Result<Vec<Step>, String>;

fn static_dims(values: &[PlannedValue], v: ValueId, dtype: DType) -> Result<&[usize], String> {
    let pv = &values[v.index()];
    if pv.dtype != dtype {
        return Err(format!("`{}` is {}; the movement kernel takes {dtype} here", pv.name, pv.dtype));
    }
    pv.dims.as_deref().ok_or_else(|| format!("`{}` has a data-dependent shape", pv.name))
}

fn step(
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
    let d = static_dims(values, x, DType::F32)?;
    static_dims(values, out, DType::F32)?;
    let perm: Vec<usize> = perm.map_or_else(|| (0..d.len()).rev().collect(), <[usize]>::to_vec);
    let mut seen = vec![false; d.len()];
    if perm.len() != d.len() || perm.iter().any(|&a| a >= d.len() || std::mem::replace(&mut seen[a], true)) {
        return Err(format!("perm {perm:?} is not a permutation of {} axes", d.len()));
    }
    let p = transpose_params(d, &perm).ok_or("the permutation collapses to more than 8 dims")?;
    Ok(step(id, label, KernelId::TransposeF32, &p, p.elems, o, vec![Arg::Value(x), Arg::Value(out)]))
}

/// ONNX Gather of f32 data by i64 indices along `axis`, static shapes.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather(
    id: NodeId,
    label: String,
    data: ValueId,
    indices: ValueId,
    out: ValueId,
    axis: i64,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let d = static_dims(values, data, DType::F32)?;
    let n_idx = static_dims(values, indices, DType::I64)?.iter().product::<usize>() as u64;
    static_dims(values, out, DType::F32)?;
    let r = d.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) {
        return Err(format!("axis {axis} is out of range for rank {r}"));
    }
    let a = a as usize;
    let prod = |s: &[usize]| s.iter().product::<usize>() as u64;
    let p = GatherParams { outer: prod(&d[..a]), axis_len: d[a] as u64, inner: prod(&d[a + 1..]), n_idx };
    let work = p.outer * p.n_idx * p.inner;
    let args = vec![Arg::Value(data), Arg::Value(indices), Arg::Value(out)];
    Ok(step(id, label, KernelId::GatherF32, &p, work, o, args))
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
