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
/// operands, the operand's element strides in the transpose's source and that source (which the
/// launch reads); third, the transpose of its result it writes through strides: the result's
/// strides in the transpose's output, and that output.
pub(super) type OperandPerms = std::collections::BTreeMap<ValueId, [Option<(Vec<u64>, ValueId)>; 3]>;

/// Transpose fusion: a Transpose (f32, static shape, arena source) whose only readers are operands
/// of MatMuls (one, or several that all take it: RecurrentGemma's block-diagonal gates read one
/// permuted input twice) moves no data: its output becomes a view of its input (the memory plan
/// gives both one slot) and each MatMul reads it with permuted strides (the kernels take any row,
/// column and two-level batch strides, `gemm::matmul_params`). Both operands are absorbed where the GEMM
/// can walk both views together, else the one it can; a MatMul's result is written through the
/// transpose (or reshape and transpose) that is its only reader. Returns the absorbed transposes'
/// outputs and, per MatMul output, the strides of its operands and result ([`OperandPerms`]).
pub(super) fn transposes(
    g: &Graph,
    infos: &[TensorInfo],
    exclude: impl Fn(ValueId) -> bool,
) -> (Vec<ValueId>, OperandPerms) {
    let readers = reader_counts(g);
    let defs = producers(g);
    let producer = |v: ValueId| defs[v.index()].filter(|&(_, slot)| slot == 0).map(|(node, _)| node);
    let mut absorbed = Vec::new();
    let mut perms = OperandPerms::new();
    // The Transpose reading each value (the one, where a value is read once).
    let transpose_of: std::collections::HashMap<ValueId, usize> = (g.nodes.iter().enumerate())
        .filter(|(_, n)| matches!(n.op, Op::Transpose(_)))
        .filter_map(|(i, n)| Some((n.inputs.first().copied().flatten()?, i)))
        .collect();
    // The Reshape reading each value, and its output.
    let reshape_of: std::collections::HashMap<ValueId, ValueId> = (g.nodes.iter())
        .filter(|n| matches!(n.op, Op::Reshape(_)))
        .filter_map(|n| Some((n.inputs.first().copied().flatten()?, n.output(0)?)))
        .collect();
    let is_matmul =
        |op: &Op| matches!(op, Op::MatMul | Op::FusedGemm(crate::op::FusedGemm { gemm: None, .. }));
    // How many MatMul A / B operand slots read each value.
    let mut operand_reads = vec![0usize; g.values.len()];
    for n in g.nodes.iter().filter(|n| is_matmul(&n.op)) {
        for v in n.inputs.iter().take(2).flatten() {
            operand_reads[v.index()] += 1;
        }
    }
    for mm in &g.nodes {
        let (true, Some(y), [Some(a), Some(b), ..]) = (is_matmul(&mm.op), mm.output(0), mm.inputs.as_slice())
        else {
            continue;
        };
        let (Some(ad), Some(bd), Some(yd)) = (
            infos[a.index()].shape.as_known(),
            infos[b.index()].shape.as_known(),
            infos[y.index()].shape.as_known(),
        ) else {
            continue;
        };
        // Each operand's candidate: its strides in the transpose's source, and the source. The
        // transpose may be reshaped first (an einsum merges the free and the contracted dims)
        // where the reshape only merges or splits dims the transpose left nested.
        let candidate = |t: ValueId| -> Option<((Vec<u64>, ValueId), ValueId)> {
            let td = infos[t.index()].shape.as_known()?;
            let (tn, reshaped) = match &g.nodes[producer(t)?].op {
                Op::Reshape(_) => {
                    let r = g.nodes[producer(t)?].inputs.first().copied().flatten()?;
                    (readers[r.index()] == 1).then_some(())?;
                    (&g.nodes[producer(r)?], Some(r))
                }
                _ => (&g.nodes[producer(t)?], None),
            };
            // The transpose's output: the value that becomes a view of the source.
            let Op::Transpose(tr) = &tn.op else { return None };
            let src = tn.inputs.first().copied().flatten()?;
            let info = &infos[src.index()];
            let dims = info.shape.as_known()?;
            let perm = tr.axes(dims.len());
            // An arena source: the transpose becomes a view of it (its slot lives as long as the
            // MatMul reads it); a weight: the MatMul reads the weight itself (not reshaped: the
            // transpose of a weight writes nothing for a reshape to view).
            let arena_source = producer(src).is_some() && !g.outputs.contains(&src);
            let weight_source = g.initializers.contains_key(&src) && reshaped.is_none();
            let ok = info.dtype == DType::F32
                && (arena_source || weight_source)
                && dims.len() >= 2
                && perm.len() == dims.len()
                && perm.iter().all(|&a| a < dims.len())
                // Read once by this MatMul; by other MatMuls' operands alone when not reshaped.
                && (readers[t.index()] == 1
                    || (reshaped.is_none() && readers[t.index()] == operand_reads[t.index()]))
                && mm.inputs.iter().filter(|i| **i == Some(t)).count() == 1
                && !g.outputs.contains(&t)
                && reshaped.is_none_or(|r| !g.outputs.contains(&r));
            if !ok {
                return None;
            }
            let src_strides = super::movement::contiguous_u64(&dims);
            let (pd, ps): (Vec<usize>, Vec<u64>) = perm.iter().map(|&a| (dims[a], src_strides[a])).unzip();
            let strides =
                if reshaped.is_some() { super::movement::reshape_strides(&pd, &ps, &td)? } else { ps };
            Some(((strides, src), reshaped.unwrap_or(t)))
        };
        // The transpose reading the result (directly or after a reshape), when it is its only
        // reader: the result's strides in the transpose's output, and that output.
        let result_transpose = |y: ValueId, yd: &[usize]| -> Option<(Vec<u64>, ValueId)> {
            let single = |v: ValueId| {
                readers[v.index()] == 1 && !g.outputs.contains(&v) && infos[v.index()].dtype == DType::F32
            };
            if !single(y) {
                return None;
            }
            let (tn, reshaped) = match transpose_of.get(&y) {
                Some(&t) => (&g.nodes[t], None),
                None => {
                    let r = *reshape_of.get(&y)?;
                    single(r).then_some(())?;
                    (&g.nodes[*transpose_of.get(&r)?], Some(r))
                }
            };
            let Op::Transpose(tr) = &tn.op else { return None };
            let z = tn.output(0)?;
            let td = infos[tn.input(0)?.index()].shape.as_known()?;
            let perm = tr.axes(td.len());
            // (A transpose a MatMul reads as an operand is that MatMul's view of the result as
            // written: the result is not written through it too.)
            if perm.len() != td.len()
                || perm.iter().any(|&a| a >= td.len())
                || g.outputs.contains(&z)
                || operand_reads[z.index()] > 0
            {
                return None;
            }
            let strides = super::gemm::output_strides(&td, &perm);
            match reshaped {
                Some(_) => Some((super::movement::reshape_strides(&td, &strides, yd)?, z)),
                None => Some((strides, z)),
            }
        };
        let walks = |pa: Option<&[u64]>, pb: Option<&[u64]>, py: Option<&[u64]>| {
            let view = super::gemm::operand_view;
            super::gemm::matmul_params(view(&ad, pa, true), view(&bd, pb, false), py).is_ok()
        };
        let (ca, cb) = (candidate(*a), candidate(*b));
        let (pa, pb) = (ca.as_ref().map(|c| c.0.0.as_slice()), cb.as_ref().map(|c| c.0.0.as_slice()));
        let mut keep = if walks(pa, pb, None) {
            [ca, cb, None]
        } else if pa.is_some() && walks(pa, None, None) {
            [ca, None, None]
        } else if pb.is_some() && walks(None, pb, None) {
            [None, cb, None]
        } else {
            [None, None, None]
        };
        // The result's only reader a Transpose: the GEMM writes the transposed layout (the
        // transpose's output a view of the result: one slot).
        if let Some(c) = result_transpose(y, &yd)
            && ad.len() >= 2
            && bd.len() >= 2
            && !exclude(y)
        {
            let view = |k: &Option<((Vec<u64>, ValueId), ValueId)>| k.as_ref().map(|c| c.0.0.clone());
            let (ka, kb) = (view(&keep[0]), view(&keep[1]));
            if walks(ka.as_deref(), kb.as_deref(), Some(&c.0)) {
                let z = c.1;
                keep[2] = Some((c, z));
            }
        }
        for (slot, c) in keep.into_iter().enumerate() {
            if let Some((view, transposed)) = c {
                absorbed.push(transposed);
                perms.entry(y).or_insert([None, None, None])[slot] = Some(view);
            }
        }
    }
    // A transpose read by several MatMuls is a view only where every one of them walks it;
    // otherwise it is written, and all of them read it. (Operand transposes only: a transpose
    // a result is written through is that result's only reader, however many read its output.)
    let written_through: Vec<ValueId> = perms.values().filter_map(|s| Some(s[2].as_ref()?.1)).collect();
    let takers = |t: ValueId| absorbed.iter().filter(|&&a| a == t).count();
    let partial: Vec<ValueId> = (absorbed.iter().copied())
        .filter(|&t| {
            !written_through.contains(&t) && readers[t.index()] > 1 && takers(t) < readers[t.index()]
        })
        .collect();
    for t in partial {
        let src = g.nodes[producer(t).expect("an absorbed transpose has a node")].input(0);
        for (y, slots) in perms.iter_mut() {
            let reader = &g.nodes[producer(*y).expect("a MatMul result")];
            for (slot, p) in slots.iter_mut().enumerate().take(2) {
                if reader.input(slot) == Some(t) && p.as_ref().map(|(_, s)| Some(*s)) == Some(src) {
                    *p = None;
                }
            }
        }
        absorbed.retain(|&a| a != t);
    }
    perms.retain(|_, slots| slots.iter().any(Option::is_some));
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
                instrs.push(EwInstr { op: *op, dst, a, b, imm, aux: 0 });
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
                    instrs.push(EwInstr { op, dst, a, b, imm, aux: 0 });
                    a = dst;
                }
            }
        }
        reg_of.push((node.output(0)?, dst));
        out_reg = dst;
    }
    let instrs = super::quantize_fold::fold_quantize(instrs, out_reg);
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
