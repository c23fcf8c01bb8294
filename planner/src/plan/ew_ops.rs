//! Elementwise ops lowered to hand-built elementwise programs (`ew_program_f32`): the variadic
//! Sum, Mean, Max and Min (a chain of the binary instruction over up to four inputs per launch;
//! more inputs take further launches that read the running result back), PRelu and Shrink.
//! All f32; one input is a copy. And a unary op left on its own: its kernel (f32, or f64 for the
//! ops that have one).

use kernels_gpu::abi::{
    BinaryOp, EW_MAX_INPUTS, EwInstr, UnaryOp, UnaryParams, ew_binary_code, ew_extra, ew_src,
};

use super::fuse::EwProgram;
use super::lower::{Lowered, bytes_of, dims, ew_program, f32_only, linear_grid};
use super::{Arg, GRID_STRIDE_THREADS as THREADS, PlanOptions, PlannedValue, Step};
use crate::graph::{NodeId, ValueId};
use crate::tensor_info::DType;

/// Unary op `u` of node `id` from `x` to `out`: the op's f64 kernel where both are f64 and it has
/// one, else its f32 kernel (f32 operands).
pub(super) fn unary(
    id: NodeId,
    label: String,
    u: UnaryOp,
    x: ValueId,
    out: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    // (The same dtype in and out: the graph checks.)
    let kernel = match u.kernel_f64() {
        Some(k) if values[x.index()].dtype == DType::F64 && values[out.index()].dtype == DType::F64 => k,
        _ => {
            f32_only(values, &[x, out])?;
            u.kernel()
        }
    };
    let elems = dims(values, x)?.0.iter().product::<usize>() as u64;
    let p = UnaryParams { elems, alpha: u.alpha(), _pad: 0 };
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label,
        kernel,
        grid: linear_grid(o, elems.div_ceil(4)),
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args: vec![Arg::Params(bytes_of(&p)), Arg::Value(x), Arg::Value(out)],
    }])
}

/// Which variadic op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Variadic {
    /// Sum.
    Sum,
    /// Mean: the sum divided by the input count.
    Mean,
    /// Maximum (NaN propagates).
    Max,
    /// Minimum (NaN propagates).
    Min,
}

fn instr(op: u32, dst: u32, a: u32, b: u32, imm: f32) -> EwInstr {
    EwInstr { op, dst, a, b, imm, aux: 0 }
}

/// The programs of a variadic op over `n` inputs: each folds up to [`EW_MAX_INPUTS`] operands
/// into register 0; every launch after the first reads the running result as its input 0.
/// Returns, per launch, the program and how many of the node's inputs it consumes.
pub(super) fn variadic_programs(op: Variadic, n: usize) -> Vec<(EwProgram, usize)> {
    let code = ew_binary_code(match op {
        Variadic::Sum | Variadic::Mean => BinaryOp::Add,
        Variadic::Max => BinaryOp::Max,
        Variadic::Min => BinaryOp::Min,
    });
    let mut out = Vec::new();
    let mut used = 0;
    while used < n {
        let carried = usize::from(used > 0);
        let take = (EW_MAX_INPUTS - carried).min(n - used);
        let operands = carried + take;
        let mut instrs = Vec::new();
        let mut acc = ew_src::INPUT0;
        for k in 1..operands {
            instrs.push(instr(code, 0, acc, ew_src::INPUT0 + k as u32, 0.0));
            acc = 0;
        }
        used += take;
        if op == Variadic::Mean && used == n {
            instrs.push(instr(ew_binary_code(BinaryOp::Div), 0, acc, ew_src::IMM, n as f32));
            acc = 0;
        }
        if acc != 0 {
            // A launch of one operand (only when n == 1 without Mean): copy through Max(x, x).
            instrs.push(instr(ew_binary_code(BinaryOp::Max), 0, acc, acc, 0.0));
        }
        out.push((EwProgram { instrs, out_reg: 0 }, take));
    }
    out
}

/// Sum / Mean / Max / Min of f32 inputs broadcast to the output.
pub(super) fn variadic(
    id: NodeId,
    label: String,
    op: Variadic,
    ins: &[Option<ValueId>],
    out: ValueId,
    values: &[PlannedValue],
) -> Lowered {
    let inputs: Vec<ValueId> =
        ins.iter().map(|v| v.ok_or("an input is omitted")).collect::<Result<_, _>>()?;
    let mut all = inputs.clone();
    all.push(out);
    f32_only(values, &all)?;
    if let [x] = inputs.as_slice()
        && dims(values, *x)?.0 == dims(values, out)?.0
    {
        let bytes = values[out.index()].bytes().ok_or("data-dependent output size")?;
        return Ok(vec![Step::Copy { node: id, src: *x, dst: out, bytes }]);
    }
    let mut steps = Vec::new();
    let mut next = 0;
    for (program, take) in variadic_programs(op, inputs.len()) {
        let mut operands = if next > 0 { vec![out] } else { Vec::new() };
        operands.extend_from_slice(&inputs[next..next + take]);
        next += take;
        steps.extend(ew_program(id, label.clone(), &program, &operands, out, values)?);
    }
    Ok(steps)
}

/// PRelu: `x < 0 ? slope * x : x`, the slope broadcast to `x`.
pub(super) fn prelu(
    id: NodeId,
    label: String,
    (x, slope): (ValueId, ValueId),
    out: ValueId,
    values: &[PlannedValue],
) -> Lowered {
    f32_only(values, &[x, slope, out])?;
    if dims(values, x)?.0 != dims(values, out)?.0 {
        return Err("the slope does not broadcast to X".into());
    }
    let p = EwProgram {
        instrs: vec![instr(ew_extra::PRELU, 0, ew_src::INPUT0, ew_src::INPUT0 + 1, 0.0)],
        out_reg: 0,
    };
    ew_program(id, label, &p, &[x, slope], out, values)
}

/// Mod with `fmod = 1` on f32: `fmod(a, b)`, broadcast.
pub(super) fn fmod(
    id: NodeId,
    label: String,
    (a, b): (ValueId, ValueId),
    out: ValueId,
    values: &[PlannedValue],
) -> Lowered {
    f32_only(values, &[a, b, out])?;
    let p = EwProgram {
        instrs: vec![instr(ew_extra::FMOD, 0, ew_src::INPUT0, ew_src::INPUT0 + 1, 0.0)],
        out_reg: 0,
    };
    ew_program(id, label, &p, &[a, b], out, values)
}

/// Shrink: `x < -lambd ? x + bias : x > lambd ? x - bias : 0` (register 1 holds the bias).
#[allow(clippy::too_many_arguments)]
pub(super) fn shrink(
    id: NodeId,
    label: String,
    x: ValueId,
    out: ValueId,
    (lambd, bias): (f32, f32),
    values: &[PlannedValue],
) -> Lowered {
    f32_only(values, &[x, out])?;
    let p = EwProgram {
        instrs: vec![
            instr(ew_binary_code(BinaryOp::Max), 1, ew_src::IMM, ew_src::IMM, bias),
            instr(ew_extra::SHRINK, 0, ew_src::INPUT0, 1, lambd),
        ],
        out_reg: 0,
    };
    ew_program(id, label, &p, &[x], out, values)
}

#[cfg(test)]
mod tests {
    use super::{Variadic, variadic_programs};
    use kernels_gpu::abi::{BinaryOp, ew_binary_code, ew_src};

    #[test]
    fn variadic_programs_fold_four_inputs_per_launch() {
        let add = ew_binary_code(BinaryOp::Add);
        // Three inputs: one launch, two adds into r0.
        let p = variadic_programs(Variadic::Sum, 3);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].1, 3);
        let ops: Vec<(u32, u32, u32)> = p[0].0.instrs.iter().map(|i| (i.op, i.a, i.b)).collect();
        assert_eq!(ops, [(add, ew_src::INPUT0, ew_src::INPUT0 + 1), (add, 0, ew_src::INPUT0 + 2)]);
        // Nine inputs: 4, then 3 + the running result, then 2 + the running result.
        let p = variadic_programs(Variadic::Mean, 9);
        assert_eq!(p.iter().map(|(_, t)| *t).collect::<Vec<_>>(), [4, 3, 2]);
        assert_eq!(p[0].0.instrs.len(), 3);
        let last = p[2].0.instrs.last().unwrap();
        assert_eq!((last.op, last.imm), (ew_binary_code(BinaryOp::Div), 9.0));
        assert!(p[1].0.instrs.iter().all(|i| i.op == add));
        // Mean of one: a division by 1.
        let p = variadic_programs(Variadic::Mean, 1);
        assert_eq!(p[0].0.instrs.len(), 1);
        // Max of one input broadcast to a larger output: one Max(x, x).
        let p = variadic_programs(Variadic::Max, 1);
        assert_eq!((p[0].0.instrs[0].a, p[0].0.instrs[0].b), (ew_src::INPUT0, ew_src::INPUT0));
    }
}
