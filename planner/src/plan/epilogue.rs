//! GEMM-epilogue fusion: a Gemm or MatMul (f32) whose result is read only by one elementwise
//! program (or one elementwise op: a program of one node), possibly through reshape-like views,
//! becomes an [`Op::FusedGemm`] that writes the program's result directly. The GEMM result is the
//! program's input 0 (it stays in a register); the program's other inputs (a residual stream, a
//! bias row) become inputs of the fused node, read at their broadcast offsets over the output. The
//! GEMM's result and the views of it are dropped from the value table, so they get no buffer. A
//! Gather of f32 data fuses the same way into an [`Op::FusedGather`] (an embedding lookup and the
//! position embedding added to it: one launch, `gather_program_f32`), and a Conv into an
//! [`Op::FusedConv`] (a QDQ model's requantization after each convolution, a residual add: the
//! `wgmma` convolutions apply the program as they store; the others run it as a step after).
//!
//! Runs after [`super::fuse::elementwise_programs`]. Anything unusual keeps the unfused pair: a
//! non-f32 or data-dependent value, a GEMM result that is a graph output or read elsewhere, a
//! program input that does not broadcast to the output, a program that would not fit the kernel.
//!
//! Memory: the fused node's output may overwrite a program input in place (see
//! `memory::lifetime`): only a program input of the output's size (read element for element, by
//! the thread that writes that element) and never a GEMM operand.

use kernels_gpu::abi::{Activation, EW_MAX_INPUTS, MAX_RANK, ew_src};

use super::PlannedValue;
use super::fuse::{EwProgram, Programs, compile_program, drop_values_mapped, ew_node, remove_nodes};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{FusedConv, FusedGather, FusedGemm, Op};
use crate::tensor_info::{DType, TensorInfo};

/// The program a [`Op::FusedGemm`] applies in its epilogue: input 0 is the GEMM result, inputs
/// `1..` are the node's inputs after its A, B, C slots.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GemmProgram {
    /// The program.
    pub program: EwProgram,
    /// The fused consumer's op, for the step label (`Add`, `Sum[8 ops]`).
    pub label: String,
}

/// [`PlanOptions::activation_tolerance`](super::PlanOptions::activation_tolerance)'s default.
pub const F32_ACTIVATION_TOLERANCE: f32 = 2e-6;

/// The activation a program of one input computes, when it is one of the GEMM epilogue's
/// built-in activations: an activation spelled out as elementwise ops (GPT-2's eight-op
/// GELU-tanh, `x * sigmoid(x)`) then runs as that activation (one inline function instead of the
/// interpreted program), as ONNX Runtime's and TensorRT's GELU fusions do. The program must read
/// only input 0 (and immediates) and agree with the activation within `tolerance` (2e-6 for f32
/// graphs; relative to `1 + |x|`) at several hundred points from -12 to 12, at ±1e3 .. ±1e30, and at 0, ±inf and NaN. The result is
/// then not the same bits as the unfused chain (the activation rounds differently), but within
/// the engine's f32 tolerance of it.
pub(super) fn as_activation(program: &EwProgram, tolerance: f32) -> Option<Activation> {
    use kernels_gpu::math;
    let input0 = ew_src::INPUT0;
    let reads = |s: u32| s < ew_src::INPUT0 || s == input0 || s >= ew_src::IMM;
    if program.instrs.is_empty() || !program.instrs.iter().all(|i| reads(i.a) && reads(i.b)) {
        return None;
    }
    // The program on the host, with the functions the device applies.
    let eval = |x: f32| -> Option<f32> {
        let mut regs = [0f32; kernels_gpu::abi::EW_REGS as usize];
        let src = |regs: &[f32], s: u32, imm: f32| match s {
            s if s < ew_src::INPUT0 => regs[s as usize],
            s if s == input0 => x,
            _ => imm,
        };
        for i in &program.instrs {
            let v = math::ew_instr(i, src(&regs, i.a, i.imm), src(&regs, i.b, i.imm));
            *regs.get_mut(i.dst as usize)? = v;
        }
        Some(src(&regs, program.out_reg, 0.0))
    };
    let mut points: Vec<f32> = (-400..=400).map(|i| i as f32 * 0.03).collect();
    points.extend(
        [20.0, 50.0, 100.0, 1e3, 1e4, 1e6, 1e12, 1e30, 1e-20, 3e-3].iter().flat_map(|&x: &f32| [x, -x]),
    );
    points.extend([0.0, f32::INFINITY, f32::NEG_INFINITY]);
    let values: Vec<f32> = points.iter().map(|&x| eval(x)).collect::<Option<_>>()?;
    if !eval(f32::NAN)?.is_nan() {
        return None;
    }
    // A looser tolerance only for programs whose constants are all values of the narrow float
    // the graph was widened from (an f32 program's GELU constants are not f16 values), and
    // never looser than that narrow float's rounding.
    let narrow_constants =
        program.instrs.iter().filter(|i| i.a >= ew_src::IMM || i.b >= ew_src::IMM).all(|i| {
            let f16_value = half::f16::from_f32(i.imm).to_f32() == i.imm;
            let bf16_value = half::bf16::from_f32(i.imm).to_f32() == i.imm;
            f16_value || bf16_value
        });
    let tolerance = if narrow_constants { tolerance } else { tolerance.min(F32_ACTIVATION_TOLERANCE) };
    // How far the program is from `a`, relative to 1 + |x| (infinite where they disagree on
    // NaN or infinity).
    let distance = |a: Activation| -> f32 {
        points.iter().zip(&values).fold(0.0f32, |worst, (&x, &p)| {
            let f = math::activate(a, x, 0.0);
            let d = if (p.is_nan() && f.is_nan()) || p == f {
                0.0
            } else if p.is_finite() && f.is_finite() {
                (p - f).abs() / (1.0 + x.abs())
            } else {
                f32::INFINITY
            };
            worst.max(d)
        })
    };
    let candidates = [
        Activation::GeluTanh,
        Activation::GeluErf,
        Activation::Silu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Relu,
    ];
    // The closest built-in activation, if it is within the tolerance.
    candidates
        .into_iter()
        .map(|a| (distance(a), a))
        .filter(|&(d, _)| d <= tolerance)
        .min_by(|x, y| x.0.total_cmp(&y.0))
        .map(|(_, a)| a)
}

/// Epilogue programs by the output value of their [`Op::FusedGemm`].
pub(super) type GemmPrograms = std::collections::BTreeMap<ValueId, GemmProgram>;

/// What [`gemm_programs`] returns: the graph, the activation epilogues, the elementwise
/// programs, the caller's keyed map re-keyed, and the GEMM programs.
type Fused<T> =
    (Graph, Vec<(NodeId, Activation, f32)>, Programs, std::collections::BTreeMap<ValueId, T>, GemmPrograms);

/// The fused graph, the activation epilogues, elementwise programs and `keyed` (another pass's
/// parameters by output value, such as fused attentions) re-keyed to it, and the epilogue program
/// of each fused GEMM.
pub(super) fn gemm_programs<T>(
    g: Graph,
    infos: &[TensorInfo],
    epilogues: Vec<(NodeId, Activation, f32)>,
    mut programs: Programs,
    keyed: std::collections::BTreeMap<ValueId, T>,
) -> Fused<T> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for u in n.uses() {
            readers[u.index()].push(i);
        }
    }
    let known_f32 = |v: ValueId| {
        let i = &infos[v.index()];
        if i.dtype == DType::F32 { i.shape.as_known() } else { None }
    };
    let values = PlannedValue::of_graph(&g, infos);
    let no_perms = super::fuse::OperandPerms::new();
    let mut taken = vec![false; g.nodes.len()];
    let mut fusions: Vec<Fusion> = Vec::new();
    for (gi, gnode) in g.nodes.iter().enumerate() {
        let producer = match &gnode.op {
            Op::Gemm(a) => Producer::Gemm(Some(a.clone())),
            Op::MatMul => Producer::Gemm(None),
            Op::Gather(a) => Producer::Gather(a.axis),
            Op::Conv(a) => Producer::Conv(a.clone()),
            _ => continue,
        };
        let (Some(x), 1) = (gnode.output(0), gnode.outputs.len()) else { continue };
        // The producer must lower on its own (the fused node lowers through the same path): a
        // GEMM as `gemm_of` takes it, a Gather of f32 data with int64 or int32 indices of known
        // shape.
        let lowers = match producer {
            Producer::Gemm(_) => super::gemm::gemm_of(&g, NodeId(gi as u32), &values, &no_perms).is_ok(),
            Producer::Gather(_) => {
                let (data, idx) = (gnode.input(0), gnode.input(1));
                data.and_then(known_f32).is_some()
                    && idx.is_some_and(|i| {
                        matches!(infos[i.index()].dtype, DType::I64 | DType::I32)
                            && infos[i.index()].shape.as_known().is_some()
                    })
            }
            // A Conv of f32 operands of static shapes (its parameters check them).
            Producer::Conv(ref a) => {
                let n = super::conv::ConvNode {
                    id: NodeId(gi as u32),
                    label: String::new(),
                    ins: &gnode.inputs,
                    outs: &gnode.outputs,
                };
                super::conv::conv_params(&n, &values, a).is_ok()
            }
        };
        if taken[gi] || !lowers {
            continue;
        }
        let Some(f) = fusion_of(&g, (gi, producer), x, &readers, &known_f32, &programs, &taken) else {
            continue;
        };
        taken[gi] = true;
        for &m in &f.removed {
            taken[m] = true;
        }
        fusions.push(f);
    }
    if fusions.is_empty() {
        return (g, epilogues, programs, keyed, GemmPrograms::new());
    }
    let mut out = g.clone();
    let mut removed = vec![false; g.nodes.len()];
    let mut dead = vec![false; g.values.len()];
    let mut fused: Vec<(usize, GemmProgram)> = Vec::new();
    for f in fusions {
        let node = &mut out.nodes[f.node];
        node.op = match f.producer {
            Producer::Gemm(gemm) => Op::FusedGemm(FusedGemm { gemm, dims: f.dims }),
            Producer::Gather(axis) => Op::FusedGather(FusedGather { axis, dims: f.dims }),
            Producer::Conv(conv) => Op::FusedConv(FusedConv { conv, dims: f.dims }),
        };
        // The producer's operands (A, B, C; data, indices; X, W, B), then the program's other
        // inputs.
        let mut inputs: Vec<Option<ValueId>> = node.inputs.clone();
        inputs.resize(node.op.fused_operands().unwrap_or(inputs.len()), None);
        if let Some(bias) = f.bias {
            inputs[2] = Some(bias);
        }
        inputs.extend(f.extras.iter().copied().map(Some));
        node.inputs = inputs;
        node.outputs = vec![Some(f.y)];
        for &m in &f.removed {
            removed[m] = true;
        }
        for v in f.dropped {
            dead[v.index()] = true;
        }
        // A consumed program now lives in the GEMM's epilogue (its output is the fused node's).
        programs.remove(&f.y);
        fused.push((f.node, GemmProgram { program: f.program, label: f.label }));
    }
    let new_id = remove_nodes(&mut out, &removed);
    let (out, map) = drop_values_mapped(out, &dead);
    let gemm_programs =
        fused.into_iter().filter_map(|(n, p)| Some((out.nodes[new_id[n]?.index()].output(0)?, p))).collect();
    let programs = programs.into_iter().filter_map(|(v, p)| Some((map[v.index()]?, p))).collect();
    let keyed = keyed.into_iter().filter_map(|(v, p)| Some((map[v.index()]?, p))).collect();
    let epilogues =
        epilogues.into_iter().filter_map(|(p, a, alpha)| Some((new_id[p.index()]?, a, alpha))).collect();
    (out, epilogues, programs, keyed, gemm_programs)
}

/// The node whose result the program reads.
enum Producer {
    /// A Gemm (its attributes) or MatMul (`None`).
    Gemm(Option<crate::op::Gemm>),
    /// A Gather (its axis).
    Gather(i64),
    /// A Conv (its attributes).
    Conv(crate::op::Conv),
}

/// One producer-program fusion, in the ids of the graph it was found in.
struct Fusion {
    /// The producer node and what it is.
    node: usize,
    producer: Producer,
    /// The program's output, which the fused node writes.
    y: ValueId,
    dims: Vec<usize>,
    /// The program's inputs after input 0.
    extras: Vec<ValueId>,
    /// A MatMul's bias row, peeled off the program into the GEMM's C ([`peel_bias`]).
    bias: Option<ValueId>,
    program: EwProgram,
    label: String,
    /// The views and the consumer.
    removed: Vec<usize>,
    /// The GEMM result and its views.
    dropped: Vec<ValueId>,
}

/// The fusion of producer node `gi` (a GEMM or a Gather: `producer`), whose result is `x`, with the
/// program reading it, if it applies.
fn fusion_of(
    g: &Graph,
    (gi, producer): (usize, Producer),
    x: ValueId,
    readers: &[Vec<usize>],
    known_f32: &dyn Fn(ValueId) -> Option<Vec<usize>>,
    programs: &Programs,
    taken: &[bool],
) -> Option<Fusion> {
    let elems = known_f32(x)?.iter().product::<usize>();
    // Walk the reshape-like views (single reader each) down to the consumer.
    let (mut v, mut removed, mut dropped) = (x, Vec::new(), vec![x]);
    let consumer = loop {
        let [r] = readers[v.index()].as_slice() else { return None };
        if g.outputs.contains(&v) || taken[*r] || *r == gi {
            return None;
        }
        let node = &g.nodes[*r];
        if !crate::memory::is_view(&node.op) {
            break *r;
        }
        let (Some(Some(src)), Some(w)) = (node.inputs.first(), node.output(0)) else { return None };
        if node.outputs.iter().skip(1).any(Option::is_some) {
            return None; // Dropout's mask
        }
        if *src != v || known_f32(w)?.iter().product::<usize>() != elems {
            return None;
        }
        removed.push(*r);
        dropped.push(w);
        v = w;
    };
    let cnode = &g.nodes[consumer];
    let y = cnode.output(0).filter(|_| cnode.outputs.len() == 1)?;
    let (program, inputs, label) = match programs.get(&y) {
        Some(p) => {
            let label = format!("{}[{} ops]", cnode.op.name(), p.instrs.len());
            (p.clone(), cnode.inputs.iter().copied().collect::<Option<Vec<_>>>()?, label)
        }
        None => {
            ew_node(g, cnode)?;
            let (p, ins) = compile_program(g, &[consumer])?;
            (p, ins, cnode.op.name().to_string())
        }
    };
    let dims = known_f32(y)?;
    if known_f32(v)? != dims || inputs.len() > EW_MAX_INPUTS {
        return None;
    }
    let k0 = inputs.iter().position(|&i| i == v)?;
    if inputs.iter().filter(|&&i| i == v).count() != 1 {
        return None;
    }
    let extras: Vec<ValueId> = inputs.iter().copied().filter(|&i| i != v).collect();
    let mut strides = vec![broadcast(&dims, &dims)?];
    for &e in &extras {
        strides.push(broadcast(&known_f32(e)?, &dims)?);
    }
    if super::elementwise::collapse_dims(&dims, &strides).len() > MAX_RANK {
        return None;
    }
    // Input k0 becomes input 0; the inputs before it move up one slot.
    let slot = |s: u32| {
        let input0 = ew_src::INPUT0;
        if !(input0..input0 + EW_MAX_INPUTS as u32).contains(&s) {
            return s;
        }
        let k = (s - input0) as usize;
        let new = if k == k0 {
            0
        } else if k < k0 {
            k + 1
        } else {
            k
        };
        input0 + new as u32
    };
    let mut program = program;
    for ins in &mut program.instrs {
        (ins.a, ins.b) = (slot(ins.a), slot(ins.b));
    }
    // A MatMul's bias add becomes its C operand (dynamo writes `nn.Linear` over 3-D inputs as
    // MatMul + Add): the epilogue adds it without the program, and what remains (a GELU) may
    // be a built-in activation.
    let (program, extras, bias, label) = match producer {
        Producer::Gemm(None) => match peel_bias(&program, &extras, &dims, known_f32) {
            Some((program, extras, bias)) => {
                // The label counts what the program still does.
                let rest = match programs.get(&y) {
                    Some(_) => format!("{}[{} ops]", cnode.op.name(), program.instrs.len()),
                    None => label,
                };
                (program, extras, Some(bias), format!("Bias+{rest}"))
            }
            None => (program, extras, None, label),
        },
        _ => (program, extras, None, label),
    };
    removed.push(consumer);
    Some(Fusion { node: gi, producer, y, dims, extras, bias, program, label, removed, dropped })
}

/// `program` without its first instruction when that adds a bias row to the GEMM result
/// (`input0 + x` or `x + input0`, `x` one of `extras` of shape `[.., 1, n]` over an output of
/// `dims` whose last is `n`, read by no other instruction), and no other instruction reads the
/// GEMM result itself: the program reading the sum in the Add's register instead (up to the
/// instruction that overwrites it), the extras without `x` (later slots moved down) and `x`.
fn peel_bias(
    program: &EwProgram,
    extras: &[ValueId],
    dims: &[usize],
    known_f32: &dyn Fn(ValueId) -> Option<Vec<usize>>,
) -> Option<(EwProgram, Vec<ValueId>, ValueId)> {
    let input0 = ew_src::INPUT0;
    let (first, rest) = program.instrs.split_first()?;
    if first.op != kernels_gpu::abi::BinaryOp::Add as u32 {
        return None;
    }
    let other = match (first.a, first.b) {
        (a, b) if a == input0 && b != input0 => b,
        (a, b) if b == input0 && a != input0 => a,
        _ => return None,
    };
    let k = other.checked_sub(input0 + 1).filter(|&k| (k as usize) < extras.len())? as usize;
    let bias = extras[k];
    let shape = known_f32(bias)?;
    let n = *dims.last()?;
    let row = shape.last() == Some(&n) && shape.iter().rev().skip(1).all(|&d| d == 1);
    if !row
        || shape.len() > dims.len()
        || rest.iter().any(|i| [i.a, i.b].iter().any(|&s| s == input0 || s == other))
    {
        return None;
    }
    // Reads of the Add's register become reads of input 0 (which now holds the biased result)
    // until an instruction overwrites that register; slots above `other` move down one.
    let (sum, mut live) = (first.dst, true);
    let moved = |s: u32| if s > other && s < ew_src::IMM { s - 1 } else { s };
    let mut instrs = Vec::with_capacity(rest.len());
    for i in rest {
        let read = |s: u32| if live && s == sum { input0 } else { moved(s) };
        let mut j = *i;
        (j.a, j.b) = (read(i.a), read(i.b));
        if i.dst == sum {
            live = false;
        }
        instrs.push(j);
    }
    let out_reg = if live && program.out_reg == sum { input0 } else { program.out_reg };
    let mut extras = extras.to_vec();
    extras.remove(k);
    Some((EwProgram { instrs, out_reg }, extras, bias))
}

/// Element strides of an input of `shape` broadcast (unidirectionally) to `out`, or `None` when it
/// does not broadcast to it.
fn broadcast(shape: &[usize], out: &[usize]) -> Option<Vec<i64>> {
    if shape.len() > out.len() {
        return None;
    }
    let lead = out.len() - shape.len();
    if shape.iter().zip(&out[lead..]).any(|(&s, &o)| s != o && s != 1) {
        return None;
    }
    Some(super::elementwise::broadcast_strides_i64(shape, out.len()))
}
