//! f16 / bf16 graphs on the GPU by widening: every f16 and bf16 value is computed and stored in
//! f32, as PyTorch computes f16 elementwise ops, reductions and row ops (issue 23).
//!
//! The GPU's kernels take f32 (and a few f16 / bf16 elementwise ones) so far; a model stored in
//! f16 or bf16 would otherwise be refused node by node. Widening rewrites the bound graph:
//! - float16 / bfloat16 weights become f32 copies (exact: both widen losslessly) for the nodes
//!   that read them, so each is converted once when the plan is made, not at every run;
//! - float16 / bfloat16 graph inputs are cast up by a `Cast` on the GPU, outputs cast back down
//!   to their declared dtype;
//! - attributes that name the dtype of what a node makes (`Cast.to`, `EyeLike.dtype`, the fill of
//!   `ConstantOfShape`, `Constant`, window ops) name f32 instead, and declared intermediate infos
//!   follow; but a `Cast` / `CastLike` to f16 / bf16 from another dtype rounds as the graph says:
//!   it keeps its narrow result and a cast back up follows it.
//!
//! Results are those of the graph computed in f32 (more accurate than f16 arithmetic: the
//! intermediate roundings to f16 are skipped), within f16 / bf16 tolerance of the reference; the
//! activations take twice the memory of native f16 storage. Graphs whose f16 bits matter
//! (`BitCast`) or with nested graphs (If / Loop / Scan, whose captured values would change dtype)
//! are left as they are, and refused by node as before.

use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::shape_infer;
use crate::tensor_info::{DType, TensorInfo};

fn narrow(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// How far (relative to `1 + |x|`) a spelled-out activation whose constants are rounded to a
/// narrow float may stray from the exact one: GPT-2's GELU-tanh moves by 5.7e-6 with f16
/// constants and 1.5e-4 with bf16 ones; a few times that, well short of the 6.4e-3 between
/// GELU-tanh and `x·σ(1.702x)` (erf- and tanh-GELU, 1.3e-4 apart, are told apart by taking the
/// closest).
pub(crate) fn rounding(d: DType) -> f32 {
    match d {
        DType::BF16 => 5e-4,
        _ => 2e-5,
    }
}

/// A graph widened from f16 / bf16 ([`run`]).
pub(crate) struct Widened {
    /// The graph, computed in f32.
    pub graph: Graph,
    /// A line saying what was widened.
    pub line: String,
    /// The coarser of the two narrow dtypes it had.
    pub coarsest: DType,
    /// The narrow dtype of every MatMul / Gemm operand (A and B) when they all have the same one
    /// (an f16 or bf16 model's projections): its GEMMs may multiply in that type
    /// (`PlanOptions::narrow_gemms`), which is what the model asks for.
    pub gemms: Option<DType>,
}

/// `graph` with its f16 / bf16 values widened to f32 ([`Widened`]); `None` when it has none (or
/// cannot be widened, see the module docs).
pub(crate) fn run(graph: &Graph) -> Result<Option<Widened>, PlanError> {
    // Narrow values start at a narrow input, weight, declared value or attribute: without one,
    // no shape inference is spent here (every f32 plan comes this way).
    let declared = graph.values.iter().any(|v| v.info.as_ref().is_some_and(|i| narrow(i.dtype)));
    let weights = graph.initializers.values().any(|c| narrow(c.dtype));
    if !declared && !weights && !graph.nodes.iter().any(|n| names_narrow(&n.op)) {
        return Ok(None);
    }
    let infos = shape_infer::infer(graph)?;
    let widened = infos.iter().filter(|i| narrow(i.dtype)).count();
    if widened == 0 {
        return Ok(None);
    }
    let coarsest = if infos.iter().any(|i| i.dtype == DType::BF16) { DType::BF16 } else { DType::F16 };
    let bits_matter =
        graph.nodes.iter().any(|n| matches!(n.op, Op::BitCast(_)) || !n.op.subgraphs().is_empty());
    if bits_matter {
        return Ok(None);
    }
    let mut g = graph.clone();
    // (An output listed twice is cast down once.)
    let mut outputs: Vec<ValueId> = g.outputs.clone();
    outputs.sort();
    outputs.dedup();
    // Values read under another id from now on: narrow inputs and weights by their f32 copies,
    // narrow outputs by the f32 values their producers now write.
    let mut renamed: Vec<(ValueId, ValueId)> = Vec::new();
    let mut casts: Vec<Node> = Vec::new();
    for &v in &graph.inputs {
        if narrow(infos[v.index()].dtype) {
            let name = format!("{}:widened", graph.value_name(v));
            let w = g.add_value(name.clone(), None);
            casts.push(cast(name, v, w, DType::F32));
            renamed.push((v, w));
        }
    }
    for (&v, c) in &graph.initializers {
        if narrow(c.dtype) && !graph.inputs.contains(&v) {
            let w = g.initializer(&format!("{}:widened", graph.value_name(v)), widen_const(c)?);
            renamed.push((v, w));
        }
    }
    let defined: Vec<Option<crate::graph::Definition>> = graph.definitions();
    for &o in &outputs {
        let dtype = infos[o.index()].dtype;
        if !narrow(dtype) || !matches!(defined[o.index()], Some(crate::graph::Definition::Node { .. })) {
            continue;
        }
        let name = format!("{}:widened", graph.value_name(o));
        let p = g.add_value(name.clone(), None);
        for node in &mut g.nodes {
            for slot in node.outputs.iter_mut().flatten() {
                if *slot == o {
                    *slot = p;
                }
            }
        }
        casts.push(cast(format!("{name}:narrowed"), p, o, dtype));
        renamed.push((o, p));
    }
    let mut roundings: Vec<Node> = Vec::new();
    for i in 0..g.nodes.len() {
        // A cast to a narrow float from anything but that dtype rounds: it keeps its narrow
        // result, read through a cast back up (the GPU has both casts), so the value computed in
        // f32 from then on is the rounded one.
        if let Some(to) = rounds_to(&g.nodes[i], &infos)
            && let Some(y) = g.nodes[i].output(0)
        {
            let name = format!("{}:rounded", g.nodes[i].name);
            let t = g.add_value(name.clone(), None);
            let node = &mut g.nodes[i];
            node.op = Op::Cast(op::Cast::to(to));
            node.inputs.truncate(1);
            node.outputs[0] = Some(t);
            roundings.push(cast(name, t, y, DType::F32));
        } else {
            widen_attributes(&mut g.nodes[i].op)?;
        }
        for slot in g.nodes[i].inputs.iter_mut().flatten() {
            if let Some(&(_, w)) = renamed.iter().find(|(v, _)| v == slot) {
                *slot = w;
            }
        }
    }
    g.nodes.extend(roundings);
    g.nodes.extend(casts);
    // Declared infos of what is now f32 (the graph's own inputs and outputs keep theirs).
    let boundary: Vec<ValueId> = graph.inputs.iter().chain(&outputs).copied().collect();
    for (i, v) in g.values.iter_mut().enumerate() {
        if let Some(info) = v.info.as_mut()
            && narrow(info.dtype)
            && !boundary.contains(&ValueId(i as u32))
        {
            *info = TensorInfo { dtype: DType::F32, shape: info.shape.clone() };
        }
    }
    crate::validate::graph(&g)?;
    let line = format!(
        "{widened} float16 / bfloat16 value(s) computed in float32 (no GPU kernels for them yet): \
         weights widened when planned, inputs cast up and outputs cast down on the GPU"
    );
    // The one narrow dtype of every GEMM operand, if there is one.
    let mut operand_dtypes = (graph.nodes.iter())
        .filter(|n| matches!(n.op, Op::MatMul | Op::Gemm(_)))
        .flat_map(|n| n.inputs.iter().take(2))
        .map(|v| v.map(|v| infos[v.index()].dtype));
    let gemms = match operand_dtypes.next() {
        Some(Some(d)) if narrow(d) && operand_dtypes.all(|o| o == Some(d)) => Some(d),
        _ => None,
    };
    Ok(Some(Widened { graph: g, line, coarsest, gemms }))
}

/// The narrow float a `Cast` / `CastLike` node makes when it rounds: its result is f16 / bf16
/// and its input (in the graph before widening, of inferred dtypes `infos`) another dtype.
fn rounds_to(node: &Node, infos: &[TensorInfo]) -> Option<DType> {
    let dtype = |k: usize| node.input(k).map(|v| infos[v.index()].dtype);
    let to = match &node.op {
        Op::Cast(c) => c.to,
        Op::CastLike(_) => dtype(1)?,
        _ => return None,
    };
    (narrow(to) && dtype(0)? != to).then_some(to)
}

fn cast(name: String, from: ValueId, to: ValueId, dtype: DType) -> Node {
    Node { name, op: Op::Cast(op::Cast::to(dtype)), inputs: vec![Some(from)], outputs: vec![Some(to)] }
}

/// `c` as f32 (exact for f16 and bf16).
fn widen_const(c: &ConstTensor) -> Result<ConstTensor, PlanError> {
    if narrow(c.dtype) { ConstTensor::from_f64s(DType::F32, &c.dims, &c.to_f64s()) } else { Ok(c.clone()) }
}

/// True when an op's attributes give an output f16 / bf16 (what [`widen_attributes`] changes).
fn names_narrow(op: &Op) -> bool {
    match op {
        Op::Cast(c) => narrow(c.to),
        Op::EyeLike(e) => e.dtype.is_some_and(narrow),
        Op::SignalWindow(w) => narrow(w.output_dtype),
        Op::MelWeightMatrix(m) => narrow(m.output_dtype),
        Op::ConstantOfShape(c) => narrow(c.value.dtype),
        Op::Constant(c) => narrow(c.value.dtype),
        _ => false,
    }
}

/// The dtypes an op's attributes give its outputs, f16 / bf16 ones made f32.
fn widen_attributes(op: &mut Op) -> Result<(), PlanError> {
    let f32_for = |d: &mut DType| {
        if narrow(*d) {
            *d = DType::F32;
        }
    };
    match op {
        Op::Cast(c) => f32_for(&mut c.to),
        Op::EyeLike(e) => e.dtype.iter_mut().for_each(f32_for),
        Op::SignalWindow(w) => f32_for(&mut w.output_dtype),
        Op::MelWeightMatrix(m) => f32_for(&mut m.output_dtype),
        Op::ConstantOfShape(c) => c.value = widen_const(&c.value)?,
        Op::Constant(c) => c.value = widen_const(&c.value)?,
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_info::Dim;

    /// An f16 input, f16 weights and an f16 output: the widened graph computes in f32 between a
    /// cast up and a cast down, and declares the same input and output as before.
    #[test]
    fn f16_graphs_compute_in_f32_between_casts() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F16, vec![Dim::Known(2), Dim::Known(3)]);
        let w = ConstTensor::from_f64s(DType::F16, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let w = g.initializer("w", w);
        let y = g.op1(Op::MatMul, &[x, w]);
        let h = g.op1(Op::Cast(op::Cast::to(DType::BF16)), &[y]);
        let r = g.op1(Op::Relu, &[h]);
        g.output(r);
        let Widened { graph: wide, line, coarsest, gemms } = run(&g).unwrap().expect("widened");
        assert_eq!(coarsest, DType::BF16);
        // The one MatMul multiplies f16 by f16.
        assert_eq!(gemms, Some(DType::F16));
        assert!(line.starts_with("5 float16 / bfloat16 value(s)"), "{line}");
        let infos = shape_infer::infer(&wide).unwrap();
        assert_eq!(infos[x.index()].dtype, DType::F16);
        assert_eq!(infos[r.index()].dtype, DType::BF16);
        // Every node but the output's cast down and the rounding cast to bf16 (f16 -> bf16
        // rounds: kept, read back through a cast up) computes in f32.
        let mut narrow_results = Vec::new();
        for node in &wide.nodes {
            let outs: Vec<DType> = node.outputs.iter().flatten().map(|v| infos[v.index()].dtype).collect();
            if node.outputs.contains(&Some(r)) {
                continue;
            }
            if outs != [DType::F32] {
                narrow_results.push((node.op.clone(), outs));
            }
        }
        assert_eq!(narrow_results, [(Op::Cast(op::Cast::to(DType::BF16)), vec![DType::BF16])]);
        assert_eq!(wide.nodes.len(), g.nodes.len() + 3);
    }

    /// A cast to f16 from f32 rounds in the widened graph; one from f16 to f16 is a copy.
    #[test]
    fn casts_to_a_narrow_float_round_unless_they_keep_the_dtype() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(2)]);
        let h = g.op1(Op::Cast(op::Cast::to(DType::F16)), &[x]);
        let same = g.op1(Op::Cast(op::Cast::to(DType::F16)), &[h]);
        let like = g.op1(Op::CastLike(op::CastLike::default()), &[x, same]);
        let y = g.op1(Op::Cast(op::Cast::to(DType::F32)), &[like]);
        g.output(y);
        let wide = run(&g).unwrap().expect("widened").graph;
        let casts: Vec<DType> = (wide.nodes.iter())
            .filter_map(|n| match &n.op {
                Op::Cast(c) => Some(c.to),
                _ => None,
            })
            .collect();
        // x -> f16 -> f32 (rounds), f16 -> f16 made f32 -> f32, CastLike x -> f16 -> f32
        // (rounds), then the f32 cast.
        assert_eq!(casts, [DType::F16, DType::F32, DType::F16, DType::F32, DType::F32, DType::F32]);
        let infos = shape_infer::infer(&wide).unwrap();
        assert_eq!(infos[y.index()].dtype, DType::F32);
    }

    /// An output listed twice is cast down once (one definition).
    #[test]
    fn an_output_listed_twice_is_narrowed_once() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F16, vec![Dim::Known(2)]);
        let r = g.op1(Op::Relu, &[x]);
        g.output(r);
        g.output(r);
        let wide = run(&g).unwrap().expect("widened").graph;
        assert_eq!(wide.nodes.iter().filter(|n| matches!(n.op, Op::Cast(_))).count(), 2);
    }

    #[test]
    fn graphs_without_narrow_floats_or_with_bitcasts_are_left_alone() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(2)]);
        let r = g.op1(Op::Relu, &[x]);
        g.output(r);
        assert!(run(&g).unwrap().is_none());
        let mut g = Graph::new();
        let x = g.input("x", DType::F16, vec![Dim::Known(2)]);
        let r = g.op1(Op::BitCast(op::BitCast { to: DType::I16 }), &[x]);
        g.output(r);
        assert!(run(&g).unwrap().is_none());
    }
}
