//! Lowering of the channel normalizations to the `norm` kernels: BatchNormalization (inference,
//! a thread per element) and GroupNormalization / InstanceNormalization (a row per `(n, group)`,
//! the row kernels' launch shapes).

use kernels_gpu::abi::{BatchNormParams, GroupNormParams, KernelId, LrnParams, Params};

use super::conv::{ConvNode, grid_stride_step, static_f32};
use super::rows::launch;
use super::{Arg, PlanOptions, PlannedValue, Step};
use crate::op::{BatchNormalization, GroupNormalization, InstanceNormalization, Lrn};

type Lowered = Result<Vec<Step>, String>;

/// ONNX LRN of f32 `(N, C, ...)`.
pub(super) fn lrn(n: ConvNode, values: &[PlannedValue], a: &Lrn, o: &PlanOptions) -> Lowered {
    let (x, out) = (n.input(0, "X")?, n.output()?);
    let xd = static_f32(values, x)?;
    if xd.len() < 2 || a.size == 0 {
        return Err(format!("X {xd:?} must be (N, C, ...) and size positive"));
    }
    let p = LrnParams {
        n: xd[0] as u64,
        c: xd[1] as u64,
        inner: xd[2..].iter().product::<usize>() as u64,
        size: u32::try_from(a.size).map_err(|_| "size past u32")?,
        alpha: a.alpha,
        beta: a.beta,
        bias: a.bias,
    };
    let work = xd.iter().product::<usize>() as u64;
    Ok(vec![grid_stride_step(&n, KernelId::LrnF32, &p, work, o, vec![Arg::Value(x), Arg::Value(out)])])
}

/// ONNX BatchNormalization of f32, inference form (one output).
pub(super) fn batch_norm(
    n: ConvNode,
    values: &[PlannedValue],
    a: &BatchNormalization,
    o: &PlanOptions,
) -> Lowered {
    if a.training_mode || n.outs.iter().skip(1).any(Option::is_some) {
        return Err("only the inference form (one output, training_mode 0) has a kernel".into());
    }
    let x = n.input(0, "X")?;
    let out = n.output()?;
    let xd = static_f32(values, x)?;
    if xd.len() < 2 {
        return Err(format!("X must be (N, C, ...), got {xd:?}"));
    }
    let c = xd[1];
    let mut args = vec![Arg::Value(x)];
    for (i, what) in [(1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var")] {
        let v = n.input(i, what)?;
        if static_f32(values, v)? != [c] {
            return Err(format!("{what} must be [{c}]"));
        }
        args.push(Arg::Value(v));
    }
    args.push(Arg::Value(out));
    let elems = xd.iter().product::<usize>() as u64;
    let p = BatchNormParams {
        elems,
        plane: xd[2..].iter().product::<usize>() as u64,
        channels: c as u64,
        epsilon: a.epsilon,
        _pad: 0,
    };
    Ok(vec![grid_stride_step(&n, KernelId::BatchNormF32, &p, elems, o, args)])
}

/// The per-channel operand `what` (input `i`), checked to hold one of `lens` f32; its length.
fn affine(
    n: &ConvNode,
    values: &[PlannedValue],
    i: usize,
    what: &str,
    lens: &[usize],
) -> Result<usize, String> {
    let v = n.input(i, what)?;
    let d = static_f32(values, v)?;
    match d {
        [l] if lens.contains(l) => Ok(*l),
        _ => Err(format!("{what} {d:?} must be one of {lens:?} long")),
    }
}

/// X `(N, C, ...)` normalised per `(n, group)` of `groups` groups.
fn group_rows(n: ConvNode, values: &[PlannedValue], groups: usize, epsilon: f32, o: &PlanOptions) -> Lowered {
    let x = n.input(0, "X")?;
    let out = n.output()?;
    let xd = static_f32(values, x)?;
    if xd.len() < 2 {
        return Err(format!("X must be (N, C, ...), got {xd:?}"));
    }
    let c = xd[1];
    if groups == 0 || c % groups != 0 {
        return Err(format!("{groups} groups do not divide the {c} channels"));
    }
    // The opset-18 GroupNormalization form: one scale and bias per group.
    let lens: &[usize] = if groups == c { &[c] } else { &[c, groups] };
    let scale_len = affine(&n, values, 1, "scale", lens)?;
    if affine(&n, values, 2, "bias", &[scale_len])? != scale_len {
        return Err("scale and bias lengths differ".into());
    }
    let plane = xd[2..].iter().product::<usize>() as u64;
    let cpg = (c / groups) as u64;
    let mut p = GroupNormParams {
        rows: (xd[0] * groups) as u64,
        len: cpg * plane,
        plane,
        groups: groups as u64,
        channels_per_group: cpg,
        epsilon,
        per_group_affine: u32::from(scale_len != c),
        ..GroupNormParams::default()
    };
    let (tpr, grid, block, shared_bytes) = launch(p.rows, p.len, 1, o);
    p.threads_per_row = tpr;
    let args = vec![
        Arg::Params(p.as_bytes().to_vec()),
        Arg::Value(x),
        Arg::Value(n.input(1, "scale")?),
        Arg::Value(n.input(2, "bias")?),
        Arg::Value(out),
    ];
    Ok(vec![Step::Kernel {
        nodes: vec![n.id],
        label: n.label,
        kernel: KernelId::GroupNormF32,
        grid,
        block,
        shared_bytes,
        args,
    }])
}

/// ONNX GroupNormalization of f32 (opset 21: per-channel scale and bias; opset 18: per group).
pub(super) fn group_norm(
    n: ConvNode,
    values: &[PlannedValue],
    a: &GroupNormalization,
    o: &PlanOptions,
) -> Lowered {
    group_rows(n, values, a.num_groups, a.epsilon, o)
}

/// ONNX InstanceNormalization of f32: a group per channel.
pub(super) fn instance_norm(
    n: ConvNode,
    values: &[PlannedValue],
    a: &InstanceNormalization,
    o: &PlanOptions,
) -> Lowered {
    let x = n.input(0, "X")?;
    let c = *static_f32(values, x)?.get(1).ok_or("X must be (N, C, ...)")?;
    group_rows(n, values, c, a.epsilon, o)
}

#[cfg(test)]
mod tests {
    use crate::op::{self, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};
    use crate::{ConstTensor, Graph, ValueId};
    use kernels_gpu::abi::{GroupNormParams, KernelId, ROW_SHARED_BYTES};

    fn params(step: &Step) -> GroupNormParams {
        let Step::Kernel { args, .. } = step else { panic!("{step:?}") };
        let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
        assert_eq!(b.len(), core::mem::size_of::<GroupNormParams>());
        let u64_at = |i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        GroupNormParams {
            rows: u64_at(0),
            len: u64_at(1),
            plane: u64_at(2),
            groups: u64_at(3),
            channels_per_group: u64_at(4),
            epsilon: f32::from_bits(u32_at(40)),
            threads_per_row: u32_at(44),
            per_group_affine: u32_at(48),
            _pad: u32_at(52),
        }
    }

    fn vec_of(g: &mut Graph, name: &str, n: usize) -> ValueId {
        g.initializer(name, ConstTensor::from_f32(&[n], &vec![1.0; n]).unwrap())
    }

    #[test]
    fn channel_normalizations_lower_to_norm_kernels() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(2), Dim::Known(32), Dim::Known(56), Dim::Known(56)]);
        let (s, b, m, v) = (
            vec_of(&mut g, "s", 32),
            vec_of(&mut g, "b", 32),
            vec_of(&mut g, "m", 32),
            vec_of(&mut g, "v", 32),
        );
        let bn = g.op1(Op::BatchNormalization(op::BatchNormalization::default()), &[x, s, b, m, v]);
        let gn_attrs = op::GroupNormalization { epsilon: 1e-5, num_groups: 8, stash_type: DType::F32 };
        let gn = g.op1(Op::GroupNormalization(gn_attrs), &[bn, s, b]);
        let (s8, b8) = (vec_of(&mut g, "s8", 8), vec_of(&mut g, "b8", 8));
        let gn18 = op::GroupNormalization { epsilon: 1e-5, num_groups: 8, stash_type: DType::F32 };
        let gn18 = g.op1(Op::GroupNormalization(gn18), &[gn, s8, b8]);
        let inst = g.op1(Op::InstanceNormalization(op::InstanceNormalization::default()), &[gn18, s, b]);
        g.output(inst);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let steps: Vec<(KernelId, &Step)> = plan
            .steps
            .iter()
            .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some((*kernel, s)) } else { None })
            .collect();
        let kernels: Vec<KernelId> = steps.iter().map(|s| s.0).collect();
        assert_eq!(
            kernels,
            [KernelId::BatchNormF32, KernelId::GroupNormF32, KernelId::GroupNormF32, KernelId::GroupNormF32],
            "{text}"
        );
        let p = params(steps[1].1);
        assert_eq!(
            (p.rows, p.len, p.plane, p.groups, p.channels_per_group, p.per_group_affine),
            (16, 4 * 3136, 3136, 8, 4, 0)
        );
        let Step::Kernel { block, shared_bytes, .. } = steps[1].1 else { unreachable!() };
        assert_eq!((p.threads_per_row, block[0], *shared_bytes), (1024, 1024, ROW_SHARED_BYTES));
        assert_eq!(params(steps[2].1).per_group_affine, 1);
        let p = params(steps[3].1);
        assert_eq!((p.rows, p.len, p.groups, p.channels_per_group), (64, 3136, 32, 1));
    }
}
