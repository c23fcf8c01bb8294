//! An ONNX `Scan` whose body is elementwise, as one `scan_program_f32` launch: one thread per
//! element of the channel shape (the shape every body value broadcasts to) runs the whole time
//! loop, the body compiled to a register program (`abi::ScanProgramParams`). The scans the
//! recurrence lift (`scan_lift/recurrence.rs`) makes of unrolled loops are of this kind, and so
//! is a `Scan` a model carries when it fits ([`fits`]; `stage.rs` then leaves it in the plan
//! instead of running it as control flow, its body a plan per iteration).
//!
//! One program is recognized and runs on a kernel of its own: RWKV-4's WKV (`wkv4_f32`, the
//! recurrence in registers instead of interpreted: 26 us a launch instead of 288 on the
//! H200 at transformers' RWKV sizes), when the program gives
//! what that recurrence gives at sample points for some assignment of its states and operands
//! ([`wkv4_roles`]): any spelling of it is recognized, not one exporter's.
//!
//! What the kernel takes: f32 throughout; body ops of the elementwise programs (`fuse::ew_node`)
//! and Identity; scalar f32 initializers of the body as immediates; no outer-scope reads; every
//! carried state of the channel shape unless the body passes it through unchanged (a
//! loop-invariant operand, which may broadcast); every scan output of the channel shape per step;
//! up to 8 inputs, 4 outputs used, 48 instructions, 32 registers and 8 carried states.

use kernels_gpu::abi::{
    EwInstr, KernelId, MAX_RANK, SCAN_PROG_COPIES, SCAN_PROG_INPUTS, SCAN_PROG_INSTRS, SCAN_PROG_OUTPUTS,
    SCAN_PROG_REGS, ScanOperand, ScanProgramParams, scan_program_shared_bytes,
};

use super::fuse::{EwNode, Operand, ew_node, scalar_f32};
use super::lower::{Lowered, bytes_of, dims, f32_only};
use super::movement::contiguous_u64;
use super::reduce::axis_index;
use super::{Arg, PlanOptions, PlannedValue, Step, capped_grid};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Op, Scan};
use crate::tensor_info::DType;

/// Threads per block: few, so that a short channel list spreads over many multiprocessors (each
/// thread runs a whole time loop).
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
                instrs.push(EwInstr { op, dst, a, b, imm, aux: 0 });
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
                    instrs.push(EwInstr { op, dst, a, b, imm, aux: 0 });
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

/// An operand over channel shape `chan`: `shape` (a step's shape, broadcasting into `chan`) at
/// element strides `strides` of its own dims; stepping `step` elements a step from `start`.
fn operand(
    chan: &[usize],
    shape: &[usize],
    strides: &[u64],
    (start, step): (u64, u64),
    reg: u32,
    per_step: bool,
) -> ScanOperand {
    let mut o = ScanOperand { start, step, reg, per_step: u32::from(per_step), ..ScanOperand::default() };
    let lead = chan.len() - shape.len();
    for (i, (&d, &s)) in shape.iter().zip(strides).enumerate() {
        if d != 1 {
            o.strides[MAX_RANK - chan.len() + lead + i] = s;
        }
    }
    o
}

/// `shape` without dim `axis`, the element strides of the rest, and the stride of `axis`.
fn without(shape: &[usize], axis: usize) -> (Vec<usize>, Vec<u64>, u64) {
    let mut st = contiguous_u64(shape);
    let mut s = shape.to_vec();
    s.remove(axis);
    let step = st.remove(axis);
    (s, st, step)
}

/// The (start, step) of an operand stepping `stride` elements a step over `len` steps, from
/// the last step back when `reverse` (the step in two's complement).
fn stepping(len: usize, stride: u64, reverse: bool) -> (u64, u64) {
    if reverse { ((len.max(1) - 1) as u64 * stride, stride.wrapping_neg()) } else { (0, stride) }
}

/// A launch: the parameters, the node inputs and outputs its operand slots take (by index; the
/// primary output, the kernel's last argument, last).
struct Launch {
    kernel: KernelId,
    p: ScanProgramParams,
    /// The node input each input slot reads.
    inputs: Vec<Option<usize>>,
    /// The node output each output slot writes (the last slot, the kernel's last argument, is the
    /// per-step output's).
    outputs: [Option<usize>; SCAN_PROG_OUTPUTS],
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
        let a = axis_index(s.scan_input_axes.get(j).copied().unwrap_or(0), d.len())?;
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
        // Read once before the first step; its final value (when used) written once after the last.
        let once = operand(&chan, shape, &contiguous_u64(shape), (0, 0), reg, false);
        inputs.push((once, i));
        match prog.outputs[i] {
            Slot::Reg(r) if r != reg => copies.push([reg, r]),
            Slot::Reg(_) => {}
            Slot::Imm(_) => return Err(format!("carried state {i} is set to a constant")),
        }
        if out_dims[i].is_some() {
            outputs.push((once, i));
        }
    }
    for (j, (shape, strides, step, reverse)) in scans.iter().enumerate() {
        let reg = prog.input_regs[states + j];
        inputs.push((operand(&chan, shape, strides, stepping(len, *step, *reverse), reg, true), states + j));
    }
    for k in 0..outs {
        let Some(yd) = &out_dims[states + k] else { continue };
        let Slot::Reg(reg) = prog.outputs[states + k] else {
            return Err(format!("scan output {k} is a constant"));
        };
        let a = axis_index(s.scan_output_axes.get(k).copied().unwrap_or(0), yd.len())?;
        let (shape, strides, step) = without(yd, a);
        if shape != chan {
            return Err(format!("scan output {k} has steps of shape {shape:?}, not the step's {chan:?}"));
        }
        let reverse = s.scan_output_directions.get(k).copied().unwrap_or(0) != 0;
        outputs.push((operand(&chan, &shape, &strides, stepping(len, step, reverse), reg, true), states + k));
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
    if let Some(roles) = wkv4_roles(&prog, states, &copies, &outputs) {
        // RWKV-4's WKV: the dedicated kernel, its operands by role.
        let mut slots = Vec::new();
        for &i in &roles.inputs {
            let (op, node_input) = inputs.iter().find(|x| x.1 == i).cloned().ok_or("a WKV operand")?;
            p.inputs[slots.len()] = op;
            slots.push(Some(node_input));
        }
        let mut outs = [None; SCAN_PROG_OUTPUTS];
        for (slot, i) in roles.outputs.iter().enumerate() {
            if let Some(&(op, o)) = i.and_then(|i| outputs.iter().find(|x| x.1 == i)) {
                p.outputs[slot] = op;
                outs[slot] = Some(o);
            }
        }
        p.n_inputs = slots.len() as u32;
        p.n_outputs = SCAN_PROG_OUTPUTS as u32;
        return Ok(Launch { kernel: KernelId::Wkv4F32, p, inputs: slots, outputs: outs, len });
    }
    p.n_inputs = inputs.len() as u32;
    p.n_instr = prog.instrs.len() as u32;
    p.n_copies = copies.len() as u32;
    p.n_outputs = SCAN_PROG_OUTPUTS as u32;
    for (k, (op, _)) in inputs.iter().enumerate() {
        p.inputs[k] = *op;
    }
    for (k, c) in copies.iter().enumerate() {
        p.copies[k] = *c;
    }
    for (k, ins) in prog.instrs.iter().enumerate() {
        p.instrs[k] = *ins;
    }
    // The per-step output (the last) in the kernel's last slot, the others from slot 0.
    let mut outs = [None; SCAN_PROG_OUTPUTS];
    let primary = outputs.len() - 1;
    for (k, (op, o)) in outputs.iter().enumerate() {
        let slot = if k == primary { SCAN_PROG_OUTPUTS - 1 } else { k };
        p.outputs[slot] = *op;
        outs[slot] = Some(*o);
    }
    Ok(Launch {
        kernel: KernelId::ScanProgramF32,
        p,
        inputs: inputs.iter().map(|x| Some(x.1)).collect(),
        outputs: outs,
        len,
    })
}

/// Which node inputs and outputs play which part of RWKV-4's WKV (`wkv4_f32`'s slots).
struct Wkv4Roles {
    /// Initial numerator, denominator and maximum, u, w, k, v.
    inputs: [usize; 7],
    /// Final numerator, denominator and maximum (when written), the per-step output.
    outputs: [Option<usize>; 4],
}

/// RWKV-4's WKV step on the host, as `wkv4_f32` computes it: (output, numerator, denominator,
/// maximum) from (numerator, denominator, maximum, u, w, k, v).
fn wkv4_step(x: [f32; 7]) -> [f32; 4] {
    use kernels_gpu::math::{add, div, exp, max, mul, sub};
    let [a, b, p, u, w, k, v] = x;
    let ww = add(k, u);
    let q = max(p, ww);
    let (e1, e2) = (exp(sub(p, q)), exp(sub(ww, q)));
    let y = div(add(mul(e1, a), mul(e2, v)), add(mul(e1, b), e2));
    let ww = add(p, w);
    let q = max(ww, k);
    let (e1, e2) = (exp(sub(ww, q)), exp(sub(k, q)));
    [y, add(mul(e1, a), mul(e2, v)), add(mul(e1, b), e2), q]
}

/// The roles, when the body computes RWKV-4's WKV: three carried states, two loop-invariant
/// operands and two step inputs, one per-step output, whose program gives what [`wkv4_step`]
/// gives for some assignment of them to its parts at sample points (within f32 rounding, so any
/// spelling of the same function is recognized: operand orders, duplicated subexpressions).
/// `inputs` and `outputs` are the launch's operands (with their node input and output indices).
fn wkv4_roles(
    prog: &Program,
    states: usize,
    copies: &[[u32; 2]],
    outputs: &[(ScanOperand, usize)],
) -> Option<Wkv4Roles> {
    if states != 5 || copies.len() != 3 || prog.input_regs.len() != 7 || prog.outputs.len() != 6 {
        return None;
    }
    let carried: Vec<usize> =
        (0..states).filter(|&i| copies.iter().any(|c| c[0] == prog.input_regs[i])).collect();
    let shared: Vec<usize> = (0..states).filter(|i| !carried.contains(i)).collect();
    // Loop-invariant operands must not have their final values read (the kernel keeps them in
    // registers only); the per-step output is the body's last.
    if shared.iter().any(|&i| outputs.iter().any(|o| o.1 == i)) || !outputs.iter().any(|o| o.1 == 5) {
        return None;
    }
    let Slot::Reg(out_reg) = prog.outputs[5] else { return None };
    let perms3 = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut uniform = |lo: f32, hi: f32| {
        rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        lo + (hi - lo) * ((rng >> 40) as f32 / (1u64 << 24) as f32)
    };
    let samples: Vec<[f32; 7]> = (0..8)
        .map(|_| {
            [
                uniform(0.1, 2.0),
                uniform(0.1, 2.0),
                uniform(-2.0, 2.0),
                uniform(-1.0, 1.0),
                uniform(-2.0, -0.1),
                uniform(-2.0, 2.0),
                uniform(-2.0, 2.0),
            ]
        })
        .collect();
    for sp in perms3 {
        for sh in [[0, 1], [1, 0]] {
            for st in [[0, 1], [1, 0]] {
                // Node input of each role: states by sp, shared by sh, step inputs by st.
                let inputs = [
                    carried[sp[0]],
                    carried[sp[1]],
                    carried[sp[2]],
                    shared[sh[0]],
                    shared[sh[1]],
                    states + st[0],
                    states + st[1],
                ];
                let matches = samples.iter().all(|x| {
                    let mut r = [0f32; SCAN_PROG_REGS as usize];
                    for (role, &i) in inputs.iter().enumerate() {
                        r[prog.input_regs[i] as usize] = x[role];
                    }
                    for ins in &prog.instrs {
                        let src = |s: u32| if s < SCAN_PROG_REGS { r[s as usize] } else { ins.imm };
                        r[ins.dst as usize] =
                            kernels_gpu::math::ew_op(ins.op, src(ins.a), src(ins.b), ins.imm);
                    }
                    let want = wkv4_step(*x);
                    let got = [
                        r[out_reg as usize],
                        state_update(&r, prog, copies, inputs[0]),
                        state_update(&r, prog, copies, inputs[1]),
                        state_update(&r, prog, copies, inputs[2]),
                    ];
                    got.iter().zip(want).all(|(&g, w)| (g - w).abs() <= 1e-5 * (1.0 + w.abs()))
                });
                if matches {
                    let fin = |i: usize| outputs.iter().any(|o| o.1 == i).then_some(i);
                    return Some(Wkv4Roles {
                        inputs,
                        outputs: [fin(inputs[0]), fin(inputs[1]), fin(inputs[2]), Some(5)],
                    });
                }
            }
        }
    }
    None
}

/// The value carried state `i` (a node input) takes after a step: its copy's source register.
fn state_update(r: &[f32], prog: &Program, copies: &[[u32; 2]], i: usize) -> f32 {
    let reg = prog.input_regs[i];
    copies.iter().find(|c| c[0] == reg).map_or(f32::NAN, |c| r[c[1] as usize])
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
        args.push(l.inputs.get(k).copied().flatten().map_or(Arg::Null, |i| Arg::Value(ins[i])));
    }
    for o in &l.outputs[..SCAN_PROG_OUTPUTS - 1] {
        args.push(o.and_then(|i| n.outputs[i]).map_or(Arg::Null, Arg::Output));
    }
    let primary = l.outputs[SCAN_PROG_OUTPUTS - 1].and_then(|i| n.outputs[i]).ok_or("no output is used")?;
    args.push(Arg::Value(primary));
    let (what, shared_bytes) = match l.kernel {
        KernelId::Wkv4F32 => ("RWKV-4 WKV".to_string(), 0),
        _ => (format!("{} ops", l.p.n_instr), scan_program_shared_bytes(THREADS)),
    };
    Ok(vec![Step::Kernel {
        nodes: vec![id],
        label: format!("Scan[{what} x {} steps]", l.len),
        kernel: l.kernel,
        grid: capped_grid(o.sm_count, l.p.channels.div_ceil(THREADS as u64)),
        block: [THREADS, 1, 1],
        shared_bytes,
        args,
    }])
}
