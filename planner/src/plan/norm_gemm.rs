//! LayerNormalization folded into the GEMM that reads it (a transformer's pre-norm before its QKV
//! projection and MLP, the final norm before the LM head): the GEMM reads the LayerNorm's input
//! and normalizes each row of A as it loads it (`gemm_tc_packed_norm_f32`), so the normalized
//! rows never exist in memory and the LayerNorm launch is gone.
//!
//! Taken only where that kernel runs: the LayerNormalization normalizes the last axis, has no
//! Mean / InvStdDev outputs, its rows are at least [`NORM_GEMM_MIN_K`] long, its scale (and bias)
//! are constant vectors of the row length, and its
//! output is read only as A of one Gemm (no transA) or MatMul whose GEMM takes the packed
//! tensor-core path (a constant 2-D B, `m` above the GEMV range, tiles that would underfill the
//! device) with no epilogue program other than a recognized activation. Runs after
//! [`super::epilogue::gemm_programs`], the last pass that rewrites the graph.

use std::collections::BTreeMap;

/// Shortest rows whose LayerNorm folds into the GEMM. The fold adds the row statistics (a load
/// round trip and warp reductions) before the GEMM's loop; on short rows that costs more than the
/// LayerNorm launch it saves. Measured on the H200 with graph replay: GPT-2 of issue 5 (rows of
/// 256) 206.8 us folded against 215.4 us unfolded; the GPT-2 fixture (rows of 64) 108.9 us
/// folded against 81.3 us unfolded.
pub const NORM_GEMM_MIN_K: usize = 256;

use kernels_gpu::abi::Activation;

use super::epilogue::GemmPrograms;
use super::fuse::{Programs, drop_values_mapped, remove_nodes};
use super::{PlanOptions, PlannedValue};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;
use crate::tensor_info::{DType, TensorInfo};

/// A LayerNormalization a GEMM applies to its A rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct NormGemm {
    pub epsilon: f32,
    pub scale: ValueId,
    pub bias: Option<ValueId>,
}

/// The folded LayerNorms, by the output value of the GEMM that applies each.
pub(super) type NormGemms = BTreeMap<ValueId, NormGemm>;

/// What [`fuse`] returns: the graph and the other passes' tables in its ids.
type Fused<T> =
    (Graph, Vec<(NodeId, Activation, f32)>, Programs, BTreeMap<ValueId, T>, GemmPrograms, NormGemms);

/// The graph with each foldable LayerNormalization removed and its GEMM reading the LayerNorm's
/// input; the activation epilogues, elementwise programs, `keyed` (another pass's table by output
/// value) and the GEMM programs re-keyed to it; and the folded LayerNorms.
pub(super) fn fuse<T>(
    g: Graph,
    infos: &[TensorInfo],
    epilogues: Vec<(NodeId, Activation, f32)>,
    programs: Programs,
    keyed: BTreeMap<ValueId, T>,
    gemm_programs: GemmPrograms,
    o: &PlanOptions,
) -> Fused<T> {
    // (LayerNorm node, its reader, GEMM node, fold)
    let mut folds: Vec<(usize, usize, usize, NormGemm)> = Vec::new();
    if o.tensor_core_gemm && o.pack_gemm_weights {
        let readers = super::fuse::reader_counts(&g);
        let values = PlannedValue::of_graph(&g, infos);
        let mut taken = vec![false; g.nodes.len()];
        for (li, ln) in g.nodes.iter().enumerate() {
            let Some((first, gi, fold)) = fold_of(&g, infos, &values, &readers, &gemm_programs, ln, o) else {
                continue;
            };
            if taken[gi] {
                continue;
            }
            taken[gi] = true;
            folds.push((li, first, gi, fold));
        }
    }
    if folds.is_empty() {
        return (g, epilogues, programs, keyed, gemm_programs, NormGemms::new());
    }
    let mut out = g;
    let mut removed = vec![false; out.nodes.len()];
    let mut dead = vec![false; out.values.len()];
    for &(li, first, _, _) in &folds {
        // The reader takes the LayerNorm's input instead (a view of it is a view of the input).
        let (x, y) = (out.nodes[li].inputs[0], out.nodes[li].output(0));
        out.nodes[first].inputs[0] = x;
        removed[li] = true;
        if let Some(y) = y {
            dead[y.index()] = true;
        }
    }
    let new_id = remove_nodes(&mut out, &removed);
    let (out, map) = drop_values_mapped(out, &dead);
    let re = |v: ValueId| map[v.index()];
    let norms = folds
        .into_iter()
        .filter_map(|(_, _, gi, f)| {
            let at = out.nodes[new_id[gi]?.index()].output(0)?;
            let bias = match f.bias {
                None => None,
                Some(b) => Some(re(b)?),
            };
            Some((at, NormGemm { scale: re(f.scale)?, bias, ..f }))
        })
        .collect();
    let programs = programs.into_iter().filter_map(|(v, p)| Some((re(v)?, p))).collect();
    let keyed = keyed.into_iter().filter_map(|(v, p)| Some((re(v)?, p))).collect();
    let gemm_programs = gemm_programs.into_iter().filter_map(|(v, p)| Some((re(v)?, p))).collect();
    let epilogues =
        epilogues.into_iter().filter_map(|(p, a, alpha)| Some((new_id[p.index()]?, a, alpha))).collect();
    (out, epilogues, programs, keyed, gemm_programs, norms)
}

/// The node reading LayerNormalization `ln`'s output (the GEMM, or the first of the views between
/// them), the GEMM node, and the fold, when it applies.
#[allow(clippy::too_many_arguments)]
fn fold_of(
    g: &Graph,
    infos: &[TensorInfo],
    values: &[PlannedValue],
    readers: &[usize],
    gemm_programs: &GemmPrograms,
    ln: &crate::graph::Node,
    o: &PlanOptions,
) -> Option<(usize, usize, NormGemm)> {
    let Op::LayerNormalization(attrs) = &ln.op else { return None };
    if ln.outputs.iter().skip(1).any(Option::is_some) {
        return None;
    }
    let (x, y) = (ln.inputs.first().copied().flatten()?, ln.output(0)?);
    let f32_dims = |v: ValueId| {
        let i = &infos[v.index()];
        if i.dtype == DType::F32 { i.shape.as_known() } else { None }
    };
    let xd = f32_dims(x)?;
    let k = *xd.last()?;
    let last_axis = attrs.axis == -1 || attrs.axis == xd.len() as i64 - 1;
    // Scale and bias: constant vectors of the row length.
    let vector = |v: ValueId| g.initializers.contains_key(&v) && f32_dims(v).as_deref() == Some(&[k][..]);
    let scale = ln.inputs.get(1).copied().flatten()?;
    let bias = ln.inputs.get(2).copied().flatten();
    if !last_axis || k < NORM_GEMM_MIN_K || !vector(scale) || bias.is_some_and(|b| !vector(b)) {
        return None;
    }
    // Down the reshape-like views that keep the rows (single reader each) to the GEMM.
    let reader = |v: ValueId| {
        if g.outputs.contains(&v) || readers[v.index()] != 1 {
            return None;
        }
        let r = g.nodes.iter().position(|n| n.uses().contains(&v))?;
        let node = &g.nodes[r];
        let only_a = node.inputs.first().copied().flatten() == Some(v)
            && !node.inputs.iter().skip(1).any(|&i| i == Some(v));
        only_a.then_some(r)
    };
    let first = reader(y)?;
    let mut gi = first;
    while crate::memory::is_view(&g.nodes[gi].op) {
        let w = g.nodes[gi].output(0)?;
        if g.nodes[gi].outputs.iter().skip(1).any(Option::is_some) || f32_dims(w)?.last() != Some(&k) {
            return None;
        }
        gi = reader(w)?;
    }
    let gemm = &g.nodes[gi];
    match &gemm.op {
        Op::Gemm(a) if !a.trans_a => {}
        Op::MatMul => {}
        // A program epilogue only when it is a recognized activation without other inputs.
        Op::FusedGemm(f) if f.gemm.as_ref().is_none_or(|a| !a.trans_a) && gemm.inputs.len() <= 3 => {
            let p = gemm_programs.get(&gemm.output(0)?)?;
            super::epilogue::as_activation(&p.program, o.activation_tolerance)?;
        }
        _ => return None,
    }
    let (p, _, b, _) =
        super::gemm::gemm_of(g, NodeId(gi as u32), values, &super::fuse::OperandPerms::new()).ok()?;
    let packs = g.initializers.contains_key(&b) && p.b_shared() && p.k > 0 && p.n > 0;
    // A is the LayerNorm's output, row-major: its rows are the rows the kernel normalizes.
    let rows = p.a_cs == 1 && p.a_rs == k as u64 && p.k as usize == k && p.batch == 1;
    if !packs || !rows || super::gemm::tensor_core(&p, o).is_none() {
        return None;
    }
    Some((first, gi, NormGemm { epsilon: attrs.epsilon, scale, bias }))
}

#[cfg(test)]
mod tests {
    use kernels_gpu::abi::KernelId;

    use crate::ConstTensor;
    use crate::graph::{Graph, ValueId};
    use crate::op::{self, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};

    fn known(dims: &[usize]) -> Vec<Dim> {
        dims.iter().map(|&d| Dim::Known(d)).collect()
    }

    fn weight(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
        let data: Vec<f32> =
            (0..dims.iter().product::<usize>()).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect();
        g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
    }

    /// `y = Gemm(LayerNorm(x, scale, bias), w, c)` with x `[m, k]`; returns the graph and the
    /// LayerNorm's output.
    fn pre_norm(m: usize, k: usize, n: usize, scale_const: bool) -> (Graph, ValueId) {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[m, k]));
        let scale = if scale_const {
            weight(&mut g, "scale", &[k])
        } else {
            g.input("scale", DType::F32, known(&[k]))
        };
        let bias = weight(&mut g, "bias", &[k]);
        let h = g.op1(Op::LayerNormalization(op::LayerNormalization::default()), &[x, scale, bias]);
        let (w, c) = (weight(&mut g, "w", &[k, n]), weight(&mut g, "c", &[n]));
        let y = g.push(Op::Gemm(op::Gemm::default()), &[h, w, c], 1)[0];
        g.output(y);
        (g, h)
    }

    fn kernels(p: &crate::plan::Plan) -> Vec<KernelId> {
        p.steps
            .iter()
            .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
            .collect()
    }

    #[test]
    fn a_pre_norm_folds_into_the_packed_tensor_core_gemm() {
        let (g, _) = pre_norm(128, 256, 96, true);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        plan.validate().unwrap();
        assert_eq!(kernels(&plan), [KernelId::GemmTcPackedNormF32], "{plan}");
        let text = plan.to_string();
        assert!(text.contains("LayerNorm+Gemm gemm_tc_packed_norm_f32"), "{text}");
        // [p, norm params, x, packed w, c, scale, bias, y]: the GEMM reads the LayerNorm's input.
        let Step::Kernel { args, shared_bytes, .. } = &plan.steps[0] else { panic!() };
        assert_eq!(args.len(), 8);
        assert_eq!(*shared_bytes, kernels_gpu::abi::GEMM_TC_NORM_SHARED_BYTES);
        let name = |a: &Arg| match a {
            Arg::Value(v) => plan.values[v.index()].name.clone(),
            _ => String::new(),
        };
        assert_eq!(
            [name(&args[2]), name(&args[4]), name(&args[5]), name(&args[6])],
            ["x", "c", "scale", "bias"].map(String::from)
        );
        assert!(name(&args[3]).ends_with("/tc-packed"), "{text}");
        // Nothing of [m, k] lives in the arena: the normalized rows never exist.
        assert_eq!(plan.memory.arena_bytes, 0, "{text}");
    }

    #[test]
    fn the_layer_norm_stays_where_the_fold_does_not_apply() {
        for (what, g, options) in [
            ("GEMV-sized m", pre_norm(4, 256, 96, true).0, PlanOptions::default()),
            ("rows shorter than NORM_GEMM_MIN_K", pre_norm(128, 255, 96, true).0, PlanOptions::default()),
            ("scale not constant", pre_norm(128, 256, 96, false).0, PlanOptions::default()),
            (
                "switched off",
                pre_norm(128, 256, 96, true).0,
                PlanOptions { fuse_layer_norm_gemm: false, ..PlanOptions::default() },
            ),
            (
                "weights not packed",
                pre_norm(128, 256, 96, true).0,
                PlanOptions { pack_gemm_weights: false, ..PlanOptions::default() },
            ),
            (
                "read twice",
                {
                    let (mut g, h) = pre_norm(128, 256, 96, true);
                    g.output(h);
                    g
                },
                PlanOptions::default(),
            ),
        ] {
            let plan = compile(&g, &Binding::new(), &options).unwrap();
            let ks = kernels(&plan);
            assert!(
                ks.contains(&KernelId::LayerNormF32) && !ks.contains(&KernelId::GemmTcPackedNormF32),
                "{what}: {plan}"
            );
        }
    }
}
