//! An ONNX `Scan` whose body is elementwise, as one `scan_program_f32` launch: one thread per
//! element of the channel shape (the shape every body value broadcasts to) runs the whole time
//! loop, the body compiled to a register program (`abi::ScanProgramParams`). The scans the
//! recurrence lift (`scan_lift/recurrence.rs`) makes of unrolled loops are of this kind, and so
//! is a `Scan` a model carries when it fits ([`fits`]; `stage.rs` then leaves it in the plan
//! instead of running it as control flow, its body a plan per iteration).
//!
//! What the kernel takes: f32 throughout; body ops of the elementwise programs (`fuse::ew_node`)
//! and Identity; scalar f32 initializers of the body as immediates; no outer-scope reads; every
//! carried state of the channel shape unless the body passes it through unchanged (a
//! loop-invariant operand, which may broadcast); every scan output of the channel shape per step;
//! up to 8 inputs, 4 outputs used, 48 instructions, 32 registers and 8 carried states.

use kernels_gpu::abi::{
    EwInstr, KernelId, MAX_RANK, SCAN_PROG_COPIES, SCAN_PROG_INPUTS, SCAN_PROG_INSTRS, SCAN_PROG_OUTPUTS,
    SCAN_PROG_REGS, ScanOperand, ScanProgramParams,
};

use super::fuse::{EwNode, Operand, ew_node, scalar_f32};
use super::lower::{Lowered, bytes_of, dims, f32_only};
use super::{Arg, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Op, Scan};
use crate::tensor_info::DType;

/// Threads per block: the kernel holds up to 255 registers a thread, so at most 256 fit a block;
/// fewer spread a short channel list over more multiprocessors.
const THREADS: u32 = 64;

/// A body value's place in the program: a register, or an immediate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Slot {
    Reg(u32),
    Imm(f32),
}

/// NumPy broadcast of two shapes, `None` when they do not broadcast.
fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let x = if i + a.len() >= r { a[i + a.len() - r] } else { 1 };
            let y = if i + b.len() >= r { b[i + b.len() - r] } else { 1 };
            match (x, y) {
                (x, y) if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// The body compiled: instructions over registers, the registers of its inputs and outputs.
struct Program {
    instrs: Vec<EwInstr>,
    /// Register of each body input (states, then scan inputs).
    input_regs: Vec<u32>,
    /// Slot of each body output (states, then scan outputs).
    outputs: Vec<Slot>,
    /// Shape of each body value (broadcast over the body's ops).
    shapes: Vec<Option<Vec<usize>>>,
}

/// Compiles `body` given the shapes of its inputs.
fn compile(body: &Graph, input_shapes: &[Vec<usize>]) -> Result<Program, String> {
    if !body.captures.is_empty() {
        return Err("its body reads values of the outer graph".into());
    }
    let order = crate::validate::topo_order(body).map_err(|e| e.to_string())?;
    let mut shapes: Vec<Option<Vec<usize>>> = vec![None; body.values.len()];
    let mut slot: Vec<Option<Slot>> = vec![None; body.values.len()];
    let mut next_reg = 0u32;
    let mut fresh = |free: &mut Vec<u32>| -> Result<u32, String> {
        if let Some(r) = free.pop() {
            return Ok(r);
        }
        next_reg += 1;
        if next_reg > SCAN_PROG_REGS {
            return Err(format!("its body needs more than {SCAN_PROG_REGS} registers"));
        }
        Ok(next_reg - 1)
    };
    let mut free = Vec::new();
    let mut input_regs = Vec::new();
    for (&v, s) in body.inputs.iter().zip(input_shapes) {
        let r = fresh(&mut free)?;
        input_regs.push(r);
        slot[v.index()] = Some(Slot::Reg(r));
        shapes[v.index()] = Some(s.clone());
    }
    for (&v, c) in &body.initializers {
        if body.inputs.contains(&v) {
            continue;
        }
        shapes[v.index()] = Some(c.dims.clone());
        if let Some(x) = scalar_f32(body, v) {
            slot[v.index()] = Some(Slot::Imm(x));
        }
    }
    // Last reader (position in `order`) of each value; body outputs live to the end.
    let mut last = vec![0usize; body.values.len()];
    for (k, id) in order.iter().enumerate() {
        for v in body.nodes[id.index()].inputs.iter().flatten() {
            last[v.index()] = k;
        }
    }
    for &v in &body.outputs {
        last[v.index()] = usize::MAX;
    }
    let mut instrs = Vec::new();
    let src_code = |s: Slot| match s {
        Slot::Reg(r) => (r, 0.0),
        Slot::Imm(x) => (SCAN_PROG_REGS, x),
    };
    for (k, &id) in order.iter().enumerate() {
        let n = &body.nodes[id.index()];
        let label = body.node_label(id);
        let (Some(out), true) = (n.output(0), n.outputs.iter().flatten().count() == 1) else {
            return Err(format!("body node {label} has other than one output"));
        };
        let ins: Vec<ValueId> = n.inputs.iter().flatten().copied().collect();
        let mut in_slots = Vec::new();
        let mut shape: Vec<usize> = Vec::new();
        for &v in &ins {
            let s = slot[v.index()].ok_or_else(|| {
                format!(
                    "body node {label} reads `{}`, which is not a scalar constant or a value of the body",
                    body.value_name(v)
                )
            })?;
            in_slots.push(s);
            let vs = shapes[v.index()].as_deref().unwrap_or(&[]);
            shape = broadcast(&shape, vs)
                .ok_or_else(|| format!("body node {label}: operand shapes do not broadcast"))?;
        }
        if matches!(n.op, Op::Identity) {
            let [s] = in_slots[..] else { return Err(format!("body node {label}: Identity of one input")) };
            slot[out.index()] = Some(s);
            shapes[out.index()] = Some(shape);
            continue;
        }
        let form = ew_node(body, n).ok_or_else(|| {
            format!("body node {label} ({}) is not an elementwise op of the scan kernel", n.op.name())
        })?;
        // Registers of operands read for the last time here are free for the result (each
        // instruction reads its operands before writing) unless a later instruction of a chain
        // still reads them.
        let chain_reads: Vec<ValueId> = match &form {
            EwNode::Chain(steps) => steps
                .iter()
                .skip(1)
                .filter_map(|(_, o)| match o {
                    Operand::Input(i) => n.inputs.get(*i).copied().flatten(),
                    Operand::Imm(_) => None,
                })
                .collect(),
            EwNode::Binary(_) => Vec::new(),
        };
        let mut after = Vec::new();
        for &v in &ins {
            if last[v.index()] == k
                && !body.inputs.contains(&v)
                && let Some(Slot::Reg(r)) = slot[v.index()]
                && !free.contains(&r)
                && !after.contains(&r)
            {
                if chain_reads.contains(&v) { after.push(r) } else { free.push(r) }
            }
        }
        let dst = fresh(&mut free)?;
        free.extend(after);
        match form {
            EwNode::Binary(op) => {
                let [a, b] = in_slots[..] else {
                    return Err(format!("body node {label}: two operands expected"));
                };
                let ((a, x), (b, y)) = (src_code(a), src_code(b));
                if a == SCAN_PROG_REGS && b == SCAN_PROG_REGS && x.to_bits() != y.to_bits() {
                    return Err(format!("body node {label}: two different constant operands"));
                }
                let imm = if a == SCAN_PROG_REGS { x } else { y };
                instrs.push(EwInstr { op, dst, a, b, imm, _pad: 0 });
            }
            EwNode::Chain(steps) => {
                let Some(&Slot::Reg(mut a)) = in_slots.first() else {
                    return Err(format!("body node {label}: a constant or missing first operand"));
                };
                for (op, operand) in steps {
                    let (b, imm) = match operand {
                        Operand::Imm(x) => (SCAN_PROG_REGS, x),
                        Operand::Input(i) => {
                            let v = n.inputs.get(i).copied().flatten().ok_or("missing input")?;
                            match slot[v.index()] {
                                Some(Slot::Reg(r)) => (r, 0.0),
                                Some(Slot::Imm(x)) => (SCAN_PROG_REGS, x),
                                None => return Err(format!("body node {label}: missing operand")),
                            }
                        }
                    };
                    instrs.push(EwInstr { op, dst, a, b, imm, _pad: 0 });
                    a = dst;
                }
            }
        }
        slot[out.index()] = Some(Slot::Reg(dst));
        shapes[out.index()] = Some(shape);
    }
    if instrs.len() > SCAN_PROG_INSTRS {
        return Err(format!(
            "its body is {} instructions; the scan kernel takes {SCAN_PROG_INSTRS}",
            instrs.len()
        ));
    }
    let outputs = (body.outputs.iter())
        .map(|&v| {
            slot[v.index()].ok_or_else(|| format!("body output `{}` is not computed", body.value_name(v)))
        })
        .collect::<Result<_, _>>()?;
    Ok(Program { instrs, input_regs, outputs, shapes })
}

/// Row-major element strides of `shape`.
fn contiguous(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// An operand over channel shape `chan`: `shape` (a step's shape, broadcasting into `chan`) at
/// element strides `strides` of its own dims; stepping `step` elements a step from `start`.
fn operand(
    chan: &[usize],
    shape: &[usize],
    strides: &[usize],
    start: u64,
    step: u64,
    reg: u32,
    per_step: bool,
) -> ScanOperand {
    let mut o = ScanOperand { start, step, reg, per_step: u32::from(per_step), ..ScanOperand::default() };
    let lead = chan.len() - shape.len();
    for (i, (&d, &s)) in shape.iter().zip(strides).enumerate() {
        if d != 1 {
            o.strides[MAX_RANK - chan.len() + lead + i] = s as u64;
        }
    }
    o
}

/// `shape` without dim `axis`, and the element strides of the rest.
fn without(shape: &[usize], axis: usize) -> (Vec<usize>, Vec<usize>, usize) {
    let strides = contiguous(shape);
    let mut s = shape.to_vec();
    let mut st = strides.clone();
    s.remove(axis);
    st.remove(axis);
    (s, st, strides[axis])
}

/// Normalized axis `a` of a rank-`r` tensor.
fn axis(a: i64, r: usize) -> Result<usize, String> {
    let n = if a < 0 { a + r as i64 } else { a };
    usize::try_from(n).ok().filter(|&n| n < r).ok_or_else(|| format!("axis {a} out of range for rank {r}"))
}

/// A launch: the parameters, the node inputs and outputs its operand slots take (by index; the
/// primary output, the kernel's last argument, last).
struct Launch {
    p: ScanProgramParams,
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    len: usize,
}

/// The launch of Scan `s` with inputs of dims `in_dims` and outputs of dims `out_dims` (`None`:
/// omitted), or why it does not fit the kernel (module doc). f32 is the caller's to check.
fn launch(s: &Scan, in_dims: &[Vec<usize>], out_dims: &[Option<Vec<usize>>]) -> Result<Launch, String> {
    let m = s.num_scan_inputs;
    let states = in_dims.len().checked_sub(m).ok_or("fewer inputs than num_scan_inputs")?;
    let body = &s.body;
    let outs = out_dims.len().checked_sub(states).ok_or("fewer outputs than states")?;
    if body.inputs.len() != states + m || body.outputs.len() != states + outs {
        return Err("the body's inputs and outputs do not match the node's".into());
    }
    if body.values.iter().any(|v| v.info.as_ref().is_some_and(|i| i.dtype != DType::F32)) {
        return Err("its body computes in other than f32".into());
    }
    // Step shapes of the body's inputs, and the scan length.
    let mut input_shapes: Vec<Vec<usize>> = in_dims[..states].to_vec();
    let mut len = None;
    let mut scans = Vec::new();
    for (j, d) in in_dims[states..].iter().enumerate() {
        let a = axis(s.scan_input_axes.get(j).copied().unwrap_or(0), d.len())?;
        if *len.get_or_insert(d[a]) != d[a] {
            return Err("scan inputs of different lengths".into());
        }
        let (shape, strides, step) = without(d, a);
        let reverse = s.scan_input_directions.get(j).copied().unwrap_or(0) != 0;
        input_shapes.push(shape.clone());
        scans.push((shape, strides, step, reverse));
    }
    let len = len.ok_or("no scan input")?;
    let prog = compile(body, &input_shapes)?;
    // The channel shape: every body value broadcasts to it.
    let mut chan: Vec<usize> = Vec::new();
    for sh in prog.shapes.iter().flatten() {
        chan = broadcast(&chan, sh).ok_or("body values of shapes that do not broadcast")?;
    }
    if chan.len() > MAX_RANK {
        return Err(format!("a step of rank {} (the scan kernel takes {MAX_RANK})", chan.len()));
    }
    let mut p = ScanProgramParams {
        channels: chan.iter().product::<usize>() as u64,
        steps: len as u64,
        rank: chan.len() as u32,
        ..ScanProgramParams::default()
    };
    for (d, &x) in chan.iter().enumerate() {
        p.dims[MAX_RANK - chan.len() + d] = x as u64;
    }
    let mut inputs: Vec<(ScanOperand, usize)> = Vec::new();
    let mut copies = Vec::new();
    let mut outputs: Vec<(ScanOperand, usize)> = Vec::new();
    for i in 0..states {
        let reg = prog.input_regs[i];
        let shape = &input_shapes[i];
        let through = prog.outputs[i] == Slot::Reg(reg);
        if !through && *shape != chan {
            return Err(format!("carried state {i} has shape {shape:?}, not the step's {chan:?}"));
        }
        inputs.push((operand(&chan, shape, &contiguous(shape), 0, 0, reg, false), i));
        match prog.outputs[i] {
            Slot::Reg(r) if r != reg => copies.push([reg, r]),
            Slot::Reg(_) => {}
            Slot::Imm(_) => return Err(format!("carried state {i} is set to a constant")),
        }
        if out_dims[i].is_some() {
            outputs.push((operand(&chan, shape, &contiguous(shape), 0, 0, reg, false), i));
        }
    }
    for (j, (shape, strides, step, reverse)) in scans.iter().enumerate() {
        let start = if *reverse { ((len.max(1) - 1) * step) as u64 } else { 0 };
        let step = if *reverse { (*step as u64).wrapping_neg() } else { *step as u64 };
        let reg = prog.input_regs[states + j];
        inputs.push((operand(&chan, shape, strides, start, step, reg, true), states + j));
    }
    for k in 0..outs {
        let Some(yd) = &out_dims[states + k] else { continue };
        let Slot::Reg(reg) = prog.outputs[states + k] else {
            return Err(format!("scan output {k} is a constant"));
        };
        let a = axis(s.scan_output_axes.get(k).copied().unwrap_or(0), yd.len())?;
        let (shape, strides, step) = without(yd, a);
        if shape != chan {
            return Err(format!("scan output {k} has steps of shape {shape:?}, not the step's {chan:?}"));
        }
        let reverse = s.scan_output_directions.get(k).copied().unwrap_or(0) != 0;
        let start = if reverse { ((len.max(1) - 1) * step) as u64 } else { 0 };
        let step = if reverse { (step as u64).wrapping_neg() } else { step as u64 };
        outputs.push((operand(&chan, &shape, &strides, start, step, reg, true), states + k));
    }
    if inputs.len() > SCAN_PROG_INPUTS || outputs.len() > SCAN_PROG_OUTPUTS || copies.len() > SCAN_PROG_COPIES
    {
        return Err(format!(
            "{} inputs, {} outputs and {} carried states (the scan kernel takes {SCAN_PROG_INPUTS}, {SCAN_PROG_OUTPUTS} and {SCAN_PROG_COPIES})",
            inputs.len(),
            outputs.len(),
            copies.len()
        ));
    }
    if outputs.is_empty() {
        return Err("no output is used".into());
    }
    p.n_inputs = inputs.len() as u32;
    p.n_instr = prog.instrs.len() as u32;
    p.n_copies = copies.len() as u32;
    p.n_outputs = SCAN_PROG_OUTPUTS as u32;
    for (k, (op, _)) in inputs.iter().enumerate() {
        p.inputs[k] = op.clone();
    }
    for (k, c) in copies.iter().enumerate() {
        p.copies[k] = *c;
    }
    for (k, ins) in prog.instrs.iter().enumerate() {
        p.instrs[k] = *ins;
    }
    // The primary output in the kernel's last slot, the others from slot 0 (null slots between).
    let primary = outputs.len() - 1;
    for (k, (op, _)) in outputs.iter().enumerate() {
        p.outputs[if k == primary { SCAN_PROG_OUTPUTS - 1 } else { k }] = op.clone();
    }
    Ok(Launch {
        p,
        inputs: inputs.iter().map(|x| x.1).collect(),
        outputs: outputs.iter().map(|x| x.1).collect(),
        len,
    })
}

/// Whether Scan `s` of input dims `in_dims` and output dims `out_dims` (`None`: omitted) fits
/// the scan kernel (f32 throughout being the caller's to know), or why not.
pub(super) fn check(s: &Scan, in_dims: &[Vec<usize>], out_dims: &[Option<Vec<usize>>]) -> Result<(), String> {
    launch(s, in_dims, out_dims).map(|_| ())
}

/// Whether Scan node `node` of graph shapes `infos` runs as one kernel launch: shapes known, f32
/// throughout, and [`check`].
pub(crate) fn fits(s: &Scan, node: &crate::graph::Node, infos: &[crate::TensorInfo]) -> bool {
    let info =
        |v: ValueId| infos.get(v.index()).filter(|i| i.dtype == DType::F32).and_then(|i| i.shape.as_known());
    let Some(in_dims) = node.inputs.iter().map(|v| v.and_then(info)).collect::<Option<Vec<_>>>() else {
        return false;
    };
    let out_dims: Option<Vec<Option<Vec<usize>>>> =
        node.outputs.iter().map(|y| y.map_or(Some(None), |v| info(v).map(Some))).collect();
    out_dims.is_some_and(|o| check(s, &in_dims, &o).is_ok())
}

/// Lowers Scan node `id` to one `scan_program_f32` launch (module doc), or says why not.
pub(super) fn lower(g: &Graph, id: NodeId, s: &Scan, values: &[PlannedValue], o: &PlanOptions) -> Lowered {
    let n = &g.nodes[id.index()];
    let ins: Vec<ValueId> = n.inputs.iter().map(|v| v.ok_or("an omitted input")).collect::<Result<_, _>>()?;
    let written: Vec<ValueId> = n.outputs.iter().flatten().copied().collect();
    f32_only(values, &ins)?;
    f32_only(values, &written)?;
    let in_dims: Vec<Vec<usize>> =
        ins.iter().map(|&v| dims(values, v).map(|d| d.0.to_vec())).collect::<Result<_, _>>()?;
    let out_dims: Vec<Option<Vec<usize>>> = (n.outputs.iter())
        .map(|y| y.map(|v| dims(values, v).map(|d| d.0.to_vec())).transpose())
        .collect::<Result<_, _>>()?;
    let l = launch(s, &in_dims, &out_dims)?;
    let mut args = vec![Arg::Params(bytes_of(&l.p))];
    for k in 0..SCAN_PROG_INPUTS {
        args.push(l.inputs.get(k).map_or(Arg::Null, |&i| Arg::Value(ins[i])));
    }
    let (&primary, others) = l.outputs.split_last().ok_or("no output is used")?;
    for k in 0..SCAN_PROG_OUTPUTS - 1 {
        args.push(others.get(k).and_then(|&i| n.outputs[i]).map_or(Arg::Null, Arg::Output));
    }
    args.push(Arg::Value(n.outputs[primary].ok_or("no output is used")?));
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label: format!("Scan[{} ops x {} steps]", l.p.n_instr, l.len),
        kernel: KernelId::ScanProgramF32,
        grid: capped_grid(o.sm_count, l.p.channels.div_ceil(THREADS as u64)),
        block: [THREADS, 1, 1],
        shared_bytes: 0,
        args,
    }])
}
