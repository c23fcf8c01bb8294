//! Activation fusion: an activation whose only input is a GEMM's (Gemm, MatMul or Conv, f32)
//! output, when it is that output's only consumer, becomes the GEMM kernel's epilogue. The
//! rewritten graph has the GEMM write the activation's output directly, and the intermediate
//! value is dropped from the value table (ids renumbered), so it gets no buffer.

use kernels_gpu::abi::Activation;

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{GeluApproximation, Op};
use crate::tensor_info::{DType, TensorInfo};

fn activation_of(op: &Op) -> Option<(Activation, f32)> {
    Some(match op {
        Op::Relu => (Activation::Relu, 0.0),
        Op::Sigmoid => (Activation::Sigmoid, 0.0),
        Op::Tanh => (Activation::Tanh, 0.0),
        Op::LeakyRelu(l) => (Activation::LeakyRelu, l.alpha),
        Op::Gelu(g) => match g.approximate {
            GeluApproximation::None => (Activation::GeluErf, 0.0),
            GeluApproximation::Tanh => (Activation::GeluTanh, 0.0),
        },
        _ => return None,
    })
}

/// The fused graph and, per GEMM node of it (new ids), the activation its epilogue applies.
pub(super) fn activations(g: &Graph, infos: &[TensorInfo]) -> (Graph, Vec<(NodeId, Activation, f32)>) {
    let readers = reader_counts(g);
    let producer = producers(g);
    let mut out = g.clone();
    let mut removed = vec![false; g.nodes.len()];
    let mut fused: Vec<(usize, Activation, f32)> = Vec::new();
    for (ai, act_node) in g.nodes.iter().enumerate() {
        let (Some((act, alpha)), [Some(x)], [Some(y)]) =
            (activation_of(&act_node.op), act_node.inputs.as_slice(), act_node.outputs.as_slice())
        else {
            continue;
        };
        let Some((pi, 0)) = producer[x.index()] else { continue };
        if !matches!(g.nodes[pi].op, Op::Gemm(_) | Op::MatMul | Op::Conv(_)) {
            continue;
        }
        let single_use = readers[x.index()] == 1 && !g.outputs.contains(x);
        let f32s = infos.get(x.index()).is_some_and(|i| i.dtype == DType::F32);
        if single_use && f32s && !removed[pi] && !fused.iter().any(|(p, ..)| *p == pi) {
            out.nodes[pi].outputs[0] = Some(*y);
            removed[ai] = true;
            fused.push((pi, act, alpha));
        }
    }
    let new_id = remove_nodes(&mut out, &removed);
    let mut dead = vec![false; g.values.len()];
    for (ai, n) in g.nodes.iter().enumerate() {
        if removed[ai] {
            for x in n.inputs.iter().flatten() {
                dead[x.index()] = true;
            }
        }
    }
    let epilogues = fused.into_iter().filter_map(|(p, a, alpha)| Some((new_id[p]?, a, alpha))).collect();
    (drop_values(out, &dead), epilogues)
}

/// How many node inputs read each value, indexed by `ValueId` (a node reading a value twice
/// counts twice).
pub(super) fn reader_counts(g: &Graph) -> Vec<usize> {
    let mut readers = vec![0usize; g.values.len()];
    for n in &g.nodes {
        for u in n.uses() {
            readers[u.index()] += 1;
        }
    }
    readers
}

/// The node index and output slot that produce each value, indexed by `ValueId` (`None` for
/// inputs, initializers and captures).
pub(super) fn producers(g: &Graph) -> Vec<Option<(usize, usize)>> {
    g.definitions()
        .into_iter()
        .map(|d| match d {
            Some(crate::graph::Definition::Node { node, slot }) => Some((node.index(), slot)),
            _ => None,
        })
        .collect()
}

/// Removes the nodes marked in `removed` from `g`; returns each old node's new id.
pub(super) fn remove_nodes(g: &mut Graph, removed: &[bool]) -> Vec<Option<NodeId>> {
    let mut new_id = vec![None; g.nodes.len()];
    let mut nodes = Vec::with_capacity(g.nodes.len());
    for (i, n) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        if !removed[i] {
            new_id[i] = Some(NodeId(nodes.len() as u32));
            nodes.push(n);
        }
    }
    g.nodes = nodes;
    new_id
}

/// `g` without the values marked dead (which nothing defines or reads), ids renumbered.
pub(super) fn drop_values(g: Graph, dead: &[bool]) -> Graph {
    drop_values_mapped(g, dead).0
}

/// [`drop_values`], and each old value's new id (`None` for the dropped ones).
pub(super) fn drop_values_mapped(mut g: Graph, dead: &[bool]) -> (Graph, Vec<Option<ValueId>>) {
    let mut map = vec![None; g.values.len()];
    let mut values = Vec::with_capacity(g.values.len());
    for (i, v) in g.values.drain(..).enumerate() {
        if !dead[i] {
            map[i] = Some(ValueId(values.len() as u32));
            values.push(v);
        }
    }
    g.values = values;
    let re = |v: ValueId| map[v.index()].expect("only unreferenced values are dropped");
    for n in &mut g.nodes {
        for slot in n.inputs.iter_mut().chain(n.outputs.iter_mut()).flatten() {
            *slot = re(*slot);
        }
        for sub in n.op.subgraphs_mut() {
            for c in &mut sub.captures {
                c.outer = re(c.outer);
            }
        }
    }
    for v in g.inputs.iter_mut().chain(g.outputs.iter_mut()) {
        *v = re(*v);
    }
    g.initializers = std::mem::take(&mut g.initializers).into_iter().map(|(v, c)| (re(v), c)).collect();
    (g, map)
}

/// Operand transposes a MatMul reads through strides: MatMul output value -> for its A and B
/// operands, the permutation and the transpose's source (which the launch reads).
pub(super) type OperandPerms = std::collections::BTreeMap<ValueId, [Option<(Vec<usize>, ValueId)>; 2]>;

/// Whether the batch dims (all but the last two) of `dims` permuted by `perm` collapse into at most
/// one strided dim, so the GEMM kernel's single batch stride can walk them.
pub(super) fn batch_collapses(dims: &[usize], perm: &[usize]) -> bool {
    let mut strides = vec![0usize; dims.len()];
    let mut s = 1;
    for (k, &d) in dims.iter().enumerate().rev() {
        strides[k] = s;
        s *= d;
    }
    let batch: Vec<(usize, usize)> = perm[..perm.len().saturating_sub(2)]
        .iter()
        .map(|&a| (dims[a], strides[a]))
        .filter(|&(n, _)| n != 1)
        .collect();
    batch.windows(2).all(|w| w[0].1 == w[1].1 * w[1].0)
}

/// Transpose fusion: a Transpose (f32, static shape, arena source) whose only reader is one
/// operand of a MatMul moves no data: its output becomes a view of its input (the memory plan gives
/// both one slot) and the MatMul reads it with permuted strides (the kernels take any row, column
/// and batch strides). Returns the absorbed transposes' outputs and, per MatMul output, the
/// permutations of its A and B operands.
pub(super) fn transposes(g: &Graph, infos: &[TensorInfo]) -> (Vec<ValueId>, OperandPerms) {
    let readers = reader_counts(g);
    let defs = producers(g);
    let producer = |v: ValueId| defs[v.index()].filter(|&(_, slot)| slot == 0).map(|(node, _)| node);
    let mut absorbed = Vec::new();
    let mut perms = OperandPerms::new();
    for mm in &g.nodes {
        let is_matmul = matches!(mm.op, Op::MatMul | Op::FusedGemm(crate::op::FusedGemm { gemm: None, .. }));
        let (true, Some(y)) = (is_matmul, mm.output(0)) else { continue };
        for operand in 0..2 {
            let Some(Some(t)) = mm.inputs.get(operand).copied() else { continue };
            let Some(ti) = producer(t) else { continue };
            let Op::Transpose(tr) = &g.nodes[ti].op else { continue };
            let Some(Some(src)) = g.nodes[ti].inputs.first().copied() else { continue };
            let info = &infos[src.index()];
            let Some(dims) = info.shape.as_known() else { continue };
            let perm: Vec<usize> = tr.perm.clone().unwrap_or_else(|| (0..dims.len()).rev().collect());
            // An arena source: the transpose becomes a view of it (its slot lives as long as the
            // MatMul reads it); a weight: the MatMul reads the weight itself.
            let arena_source = producer(src).is_some() && !g.outputs.contains(&src);
            let weight_source = g.initializers.contains_key(&src);
            let ok = info.dtype == DType::F32
                && (arena_source || weight_source)
                && dims.len() >= 2
                && perm.len() == dims.len()
                && readers[t.index()] == 1
                && mm.inputs.iter().filter(|i| **i == Some(t)).count() == 1
                && !g.outputs.contains(&t)
                && batch_collapses(&dims, &perm);
            if ok {
                absorbed.push(t);
                perms.entry(y).or_insert([None, None])[operand] = Some((perm, src));
            }
        }
    }
    (absorbed, perms)
}

/// A fused elementwise program: its instructions and result register. Its inputs are the
/// operands of the node standing for it (see [`elementwise_programs`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EwProgram {
    pub instrs: Vec<kernels_gpu::abi::EwInstr>,
    pub out_reg: u32,
}

/// Elementwise programs by the output value of the node standing for each.
pub(super) type Programs = std::collections::BTreeMap<ValueId, EwProgram>;

/// An operand of a program instruction while compiling it.
#[derive(Clone, Copy, PartialEq)]
enum Src {
    Reg(u32),
    Input(u32),
    Imm(f32),
}

/// The second operand of a [`EwNode::Chain`] instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Operand {
    /// A constant (the instruction's immediate).
    Imm(f32),
    /// The node's input of this index, read at run time (broadcast to the output).
    Input(usize),
}

/// How a node computes inside an elementwise program.
pub(super) enum EwNode {
    /// A binary op (code) on inputs 0 and 1.
    Binary(u32),
    /// Instructions applied in turn to input 0 (each `(code, operand)`; binary codes read the
    /// operand as their second one, unary codes its immediate as their parameter): the unary ops,
    /// and ops spelled as a few of them (Selu, HardSigmoid, Clip).
    Chain(Vec<(u32, Operand)>),
}

/// The value of `v` when it is a one-element f32 constant (a program immediate).
pub(super) fn scalar_f32(g: &Graph, v: ValueId) -> Option<f32> {
    let c = g.initializers.get(&v).filter(|c| c.elems() == 1 && c.dtype == DType::F32)?;
    Some(c.to_f64s()[0] as f32)
}

/// Input `i` of `node` as a chain operand: its value when it is a scalar f32 constant, else the
/// input itself; `None` when absent.
fn operand_input(g: &Graph, node: &crate::graph::Node, i: usize) -> Option<Operand> {
    let v = node.inputs.get(i).copied().flatten()?;
    Some(scalar_f32(g, v).map_or(Operand::Input(i), Operand::Imm))
}

/// The elementwise-program form of `node`'s op, if it has one.
pub(super) fn ew_node(g: &Graph, node: &crate::graph::Node) -> Option<EwNode> {
    use Operand::Imm;
    use kernels_gpu::abi::{BinaryOp as B, ew_binary_code, ew_extra as x, ew_unary_code};
    if let Some(u) = super::lower::unary_op(&node.op) {
        return Some(EwNode::Chain(vec![(ew_unary_code(u), Imm(u.alpha()))]));
    }
    if let Some(b) = super::lower::binary_op(&node.op) {
        // Variadic Max / Min (and Sum, Mean) with other than two inputs are not one binary op.
        return (node.inputs.len() == 2).then(|| EwNode::Binary(ew_binary_code(b)));
    }
    let one = |c: u32| EwNode::Chain(vec![(c, Imm(0.0))]);
    Some(match &node.op {
        Op::Mod(m) if m.fmod && node.inputs.len() == 2 => EwNode::Binary(x::FMOD),
        Op::Floor => one(x::FLOOR),
        Op::Ceil => one(x::CEIL),
        Op::Round => one(x::ROUND),
        Op::Reciprocal => one(x::RECIPROCAL),
        Op::Sin => one(x::SIN),
        Op::Cos => one(x::COS),
        Op::Tan => one(x::TAN),
        Op::Asin => one(x::ASIN),
        Op::Acos => one(x::ACOS),
        Op::Atan => one(x::ATAN),
        Op::Sinh => one(x::SINH),
        Op::Cosh => one(x::COSH),
        Op::Asinh => one(x::ASINH),
        Op::Acosh => one(x::ACOSH),
        Op::Atanh => one(x::ATANH),
        Op::Sign => one(x::SIGN),
        Op::Softsign => one(x::SOFTSIGN),
        Op::HardSwish => one(x::HARD_SWISH),
        Op::Mish => one(x::MISH),
        Op::Elu(e) => EwNode::Chain(vec![(x::ELU, Imm(e.alpha))]),
        Op::Selu(e) => EwNode::Chain(vec![(x::ELU, Imm(e.alpha)), (ew_binary_code(B::Mul), Imm(e.gamma))]),
        Op::Celu(e) => EwNode::Chain(vec![(x::CELU, Imm(e.alpha))]),
        Op::ThresholdedRelu(t) => EwNode::Chain(vec![(x::THRESHOLDED_RELU, Imm(t.alpha))]),
        Op::HardSigmoid(h) => EwNode::Chain(vec![
            (ew_binary_code(B::Mul), Imm(h.alpha)),
            (ew_binary_code(B::Add), Imm(h.beta)),
            (ew_binary_code(B::Max), Imm(0.0)),
            (ew_binary_code(B::Min), Imm(1.0)),
        ]),
        Op::Clip(c) => {
            // ONNX: `Min(max, Max(x, min))`, NaN bounds propagating; each bound an attribute
            // (opset 6), a scalar constant (an immediate) or a value read at run time.
            let lo = c.min.map(Imm).or_else(|| operand_input(g, node, 1));
            let hi = c.max.map(Imm).or_else(|| operand_input(g, node, 2));
            let mut steps = Vec::new();
            if let Some(lo) = lo {
                steps.push((ew_binary_code(B::Max), lo));
            }
            if let Some(hi) = hi {
                steps.push((ew_binary_code(B::Min), hi));
            }
            if steps.is_empty() {
                steps.push((ew_binary_code(B::Max), Imm(f32::NEG_INFINITY)));
            }
            EwNode::Chain(steps)
        }
        _ => return None,
    })
}

/// Compiles the members of a group (in execution order, the root last) into a program, or `None`
/// when it exceeds the kernel's inputs, instructions or registers. Returns the program and the
/// external (non-immediate) inputs in slot order.
pub(super) fn compile_program(g: &Graph, members: &[usize]) -> Option<(EwProgram, Vec<ValueId>)> {
    use kernels_gpu::abi::{EW_MAX_INPUTS, EW_MAX_INSTRS, EW_REGS, EwInstr, ew_src};
    let forms: Vec<EwNode> = members.iter().map(|&m| ew_node(g, &g.nodes[m])).collect::<Option<_>>()?;
    // The inputs a chain member's steps from step `from` on read at run time, in step order.
    let step_inputs = |k: usize, from: usize| -> Vec<Option<ValueId>> {
        let (EwNode::Chain(steps), ins) = (&forms[k], &g.nodes[members[k]].inputs) else {
            return Vec::new();
        };
        (steps.iter().skip(from))
            .filter_map(|(_, o)| match o {
                Operand::Input(i) => Some(ins.get(*i).copied().flatten()),
                Operand::Imm(_) => None,
            })
            .collect()
    };
    // The operands a member reads as values: a chain reads input 0, then the inputs its steps
    // read at run time in step order (its constant inputs are folded into its immediates).
    let operands = |k: usize| -> Vec<Option<ValueId>> {
        let ins = &g.nodes[members[k]].inputs;
        match &forms[k] {
            EwNode::Binary(_) => ins.iter().take(2).copied().collect(),
            EwNode::Chain(_) => ins.iter().take(1).copied().chain(step_inputs(k, 0)).collect(),
        }
    };
    // The values a member reads after its first instruction has written its result register
    // (a chain's run-time operands of steps after the first): that register must not be theirs.
    let late = |k: usize| -> Vec<ValueId> { step_inputs(k, 1).into_iter().flatten().collect() };
    let internal: Vec<ValueId> = members.iter().filter_map(|&m| g.nodes[m].output(0)).collect();
    let last_use = |v: ValueId| (0..members.len()).rev().find(|&k| operands(k).contains(&Some(v)));
    let mut inputs: Vec<ValueId> = Vec::new();
    let mut reg_of: Vec<(ValueId, u32)> = Vec::new();
    let mut free: Vec<u32> = (0..EW_REGS).rev().collect();
    let mut instrs = Vec::new();
    let mut out_reg = 0;
    for (k, &m) in members.iter().enumerate() {
        let node = &g.nodes[m];
        let mut srcs = Vec::with_capacity(2);
        for v in operands(k) {
            let v = v?;
            let src = if let Some(&(_, r)) = reg_of.iter().find(|(x, _)| *x == v) {
                Src::Reg(r)
            } else if let Some(x) = scalar_f32(g, v) {
                Src::Imm(x)
            } else if internal.contains(&v) {
                return None; // an internal value read before it is made
            } else {
                let slot = match inputs.iter().position(|&x| x == v) {
                    Some(i) => i,
                    None => {
                        inputs.push(v);
                        inputs.len() - 1
                    }
                };
                if slot >= EW_MAX_INPUTS {
                    return None;
                }
                Src::Input(slot as u32)
            };
            srcs.push(src);
        }
        // Registers whose value is read for the last time here are free for the result (each
        // instruction reads its operands before it writes), unless a later instruction of this
        // member still reads them: those are freed once the result has its register.
        let (mut release, mut release_after) = (Vec::new(), Vec::new());
        let late = late(k);
        for v in operands(k).into_iter().flatten() {
            if last_use(v) == Some(k)
                && let Some(i) = reg_of.iter().position(|(x, _)| *x == v)
            {
                let r = reg_of.remove(i).1;
                if late.contains(&v) { release_after.push(r) } else { release.push(r) }
            }
        }
        let code_of = |s: Src| match s {
            Src::Reg(r) => Some(r),
            Src::Input(i) => Some(ew_src::INPUT0 + i),
            Src::Imm(_) => None,
        };
        free.extend(release);
        let dst = free.pop()?;
        free.extend(release_after);
        match &forms[k] {
            EwNode::Binary(op) => {
                let (a, b, imm) = match (srcs[0], srcs[1]) {
                    (Src::Imm(_), Src::Imm(_)) => return None,
                    (Src::Imm(x), s) => (ew_src::IMM, code_of(s)?, x),
                    (s, Src::Imm(x)) => (code_of(s)?, ew_src::IMM, x),
                    (s, t) => (code_of(s)?, code_of(t)?, 0.0),
                };
                instrs.push(EwInstr { op: *op, dst, a, b, imm, _pad: 0 });
            }
            EwNode::Chain(steps) => {
                let mut a = code_of(srcs[0])?;
                let mut read = srcs[1..].iter();
                for &(op, operand) in steps {
                    let (b, imm) = match operand {
                        Operand::Imm(x) => (ew_src::IMM, x),
                        Operand::Input(_) => match *read.next()? {
                            Src::Imm(x) => (ew_src::IMM, x),
                            s => (code_of(s)?, 0.0),
                        },
                    };
                    instrs.push(EwInstr { op, dst, a, b, imm, _pad: 0 });
                    a = dst;
                }
            }
        }
        reg_of.push((node.output(0)?, dst));
        out_reg = dst;
    }
    if instrs.len() > EW_MAX_INSTRS {
        return None;
    }
    Some((EwProgram { instrs, out_reg }, inputs))
}

/// Elementwise fusion: maximal groups of f32 elementwise nodes (the ops of the single-op
/// elementwise kernels) whose intermediate values have the group's output shape and are read
/// only inside the group become one elementwise program. Scalar constants become immediates. The
/// group's last node stands for the program (as a `Sum` of the program's inputs, which has the
/// right shape and dtype for inference and memory planning); the other nodes and their values
/// are removed. Returns the graph, the epilogues re-keyed to new node ids, and the programs.
pub(super) fn elementwise_programs(
    g: Graph,
    infos: &[TensorInfo],
    epilogues: Vec<(NodeId, Activation, f32)>,
) -> (Graph, Vec<(NodeId, Activation, f32)>, Programs) {
    let Ok(order) = crate::validate::topo_order(&g) else { return (g, epilogues, Programs::new()) };
    // Execution position of each node (members are kept in this order).
    let mut pos = vec![0usize; g.nodes.len()];
    for (k, id) in order.iter().enumerate() {
        pos[id.index()] = k;
    }
    let mut readers = vec![0usize; g.values.len()];
    for n in &g.nodes {
        for v in n.inputs.iter().flatten() {
            readers[v.index()] += 1;
        }
    }
    let def: Vec<Option<usize>> = producers(&g).into_iter().map(|p| p.map(|(node, _)| node)).collect();
    let f32_known =
        |v: ValueId| infos[v.index()].dtype == DType::F32 && infos[v.index()].shape.as_known().is_some();
    let candidate = |i: usize| {
        let n = &g.nodes[i];
        ew_node(&g, n).is_some()
            && n.outputs.len() == 1
            && n.output(0).is_some_and(f32_known)
            && n.inputs.iter().flatten().all(|v| infos[v.index()].dtype == DType::F32)
            && !epilogues.iter().any(|(e, ..)| e.index() == i)
    };
    let mut assigned = vec![false; g.nodes.len()];
    let mut groups: Vec<(Vec<usize>, EwProgram, Vec<ValueId>)> = Vec::new();
    for &root in order.iter().rev() {
        let root = root.index();
        if assigned[root] || !candidate(root) {
            continue;
        }
        let shape = g.nodes[root].output(0).and_then(|v| infos[v.index()].shape.as_known());
        let mut members = vec![root];
        loop {
            let mut grown = false;
            for m in members.clone() {
                for v in g.nodes[m].inputs.iter().flatten() {
                    let Some(p) = def[v.index()] else { continue };
                    let fits = candidate(p)
                        && !assigned[p]
                        && !members.contains(&p)
                        && readers[v.index()] == 1
                        && !g.outputs.contains(v)
                        && infos[v.index()].shape.as_known() == shape;
                    if !fits {
                        continue;
                    }
                    let mut trial = members.clone();
                    trial.push(p);
                    trial.sort_by_key(|&i| pos[i]);
                    if compile_program(&g, &trial).is_some() {
                        members = trial;
                        grown = true;
                    }
                }
            }
            if !grown {
                break;
            }
        }
        if members.len() < 2 {
            continue;
        }
        let Some((program, inputs)) = compile_program(&g, &members) else { continue };
        if inputs.is_empty() {
            continue;
        }
        for &m in &members {
            assigned[m] = true;
        }
        groups.push((members, program, inputs));
    }
    if groups.is_empty() {
        return (g, epilogues, Programs::new());
    }
    let mut out = g.clone();
    let mut removed = vec![false; g.nodes.len()];
    let mut dead = vec![false; g.values.len()];
    let mut roots = Vec::new();
    for (members, program, inputs) in groups {
        let root = *members.last().expect("groups have members");
        for &m in &members[..members.len() - 1] {
            removed[m] = true;
            for v in g.nodes[m].outputs.iter().flatten() {
                dead[v.index()] = true;
            }
        }
        out.nodes[root].op = Op::Sum;
        out.nodes[root].inputs = inputs.into_iter().map(Some).collect();
        roots.push((root, program));
    }
    let new_id = remove_nodes(&mut out, &removed);
    let out = drop_values(out, &dead);
    let programs = roots
        .into_iter()
        .filter_map(|(root, p)| Some((out.nodes[new_id[root]?.index()].output(0)?, p)))
        .collect();
    let epilogues =
        epilogues.into_iter().filter_map(|(p, a, alpha)| Some((new_id[p.index()]?, a, alpha))).collect();
    (out, epilogues, programs)
}
