//! Hoisting: the nodes that read only weights (and each other's results) compute the same values
//! on every run. Exporters leave many of them: transformers' causal and padding masks built from
//! `Range`, `CumSum`, `GatherND` and `Where` over constant position ids, position-embedding
//! lookups of constant positions, RWKV's `1 - mix` and `-exp(decay)`, an int8 weight dequantized
//! for a float GEMM. The plan orders their steps first ([`super::Plan::hoisted`]); the session runs
//! them on the device once per binding (again only after another binding or a stage used the
//! arena) and replays the rest. Their results that later steps read keep their arena slots for
//! the whole run (`memory::Extras::hoisted`), so no step writes over them.
//!
//! Nothing is computed on the host: this decides only when the device computes what.

use crate::graph::{Graph, NodeId, ValueId};
use crate::op::Op;

use super::{PlanOptions, PlannedValue, sequence};

/// The nodes of `g` (the fused graph the plan lowers) whose steps compute values of the weights
/// alone, in topological order. `skip(id)`: a node the lowering emits no step of its own for and
/// whose result has no slot (an MLP chain member, a weight's transpose read through strides, a
/// gather a GEMM reads in place); it is not hoisted, and neither is what reads it. (A transpose
/// of an arena value read or written through strides is a view, hoisted with its source.)
/// `reads`: values a node's step reads beyond its inputs. Not hoisted either: a node without
/// inputs, control flow (its bodies run on the host's schedule), a node writing a graph output
/// (the output buffer is written every run), one of data-dependent size, one keeping recurrent
/// state. The hoisted results that later steps read
/// stay in the arena: at most [`PlanOptions::hoist_max_bytes`] of them (the largest run again
/// every run until the rest fits).
pub(super) fn nodes(
    g: &Graph,
    values: &[PlannedValue],
    options: &PlanOptions,
    skip: impl Fn(NodeId) -> bool,
    reads: &[(NodeId, ValueId)],
    unread: &[(NodeId, ValueId)],
) -> Vec<NodeId> {
    if !options.hoist_constants {
        return Vec::new();
    }
    let Ok(order) = crate::validate::topo_order(g) else { return Vec::new() };
    let mut constant = vec![false; g.values.len()];
    for v in g.initializers.keys().filter(|v| !g.inputs.contains(v)) {
        constant[v.index()] = true;
    }
    let mut output = vec![false; g.values.len()];
    for o in &g.outputs {
        output[o.index()] = true;
    }
    // The nodes each value is read by (inputs, captures and the lowering's extra reads).
    let mut readers: Vec<Vec<NodeId>> = vec![Vec::new(); g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for u in node.uses().into_iter().filter(|&u| !unread.contains(&(NodeId(i as u32), u))) {
            readers[u.index()].push(NodeId(i as u32));
        }
    }
    for &(n, v) in reads {
        readers[v.index()].push(n);
    }
    let mut hoisted = vec![false; g.nodes.len()];
    for &id in &order {
        let node = &g.nodes[id.index()];
        let uses = node.uses();
        let extra = reads.iter().filter(|(n, _)| *n == id).map(|&(_, v)| v);
        let outs: Vec<ValueId> = node.outputs.iter().flatten().copied().collect();
        let hoist = !skip(id)
            && !uses.is_empty()
            && !matches!(node.op, Op::If(_) | Op::Loop(_) | Op::Scan(_))
            && uses.iter().copied().chain(extra).all(|v| constant[v.index()])
            && !outs.is_empty()
            && outs.iter().all(|v| !output[v.index()] && values[v.index()].bytes().is_some())
            && matches!(sequence::persistent_state(g, id, values, options), Ok(None));
        if hoist {
            outs.iter().for_each(|v| constant[v.index()] = true);
            hoisted[id.index()] = true;
        }
    }
    // Within the budget of kept bytes: the largest kept result's node (and what it feeds) runs
    // every run again, until the rest fits.
    for _ in 0..MAX_BUDGET_ROUNDS {
        let mut largest: Option<(u64, NodeId)> = None;
        let mut total = 0u64;
        for (i, node) in g.nodes.iter().enumerate().filter(|&(i, _)| hoisted[i]) {
            for v in node.outputs.iter().flatten() {
                if readers[v.index()].iter().any(|r| !hoisted[r.index()]) {
                    let bytes = values[v.index()].bytes().unwrap_or(0);
                    total = total.saturating_add(bytes);
                    if largest.is_none_or(|(b, _)| bytes > b) {
                        largest = Some((bytes, NodeId(i as u32)));
                    }
                }
            }
        }
        let Some((_, node)) = largest.filter(|_| total > options.hoist_max_bytes) else {
            return order.into_iter().filter(|id| hoisted[id.index()]).collect();
        };
        // The node and every hoisted node downstream of it run every run.
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            if !std::mem::replace(&mut hoisted[n.index()], false) {
                continue;
            }
            for v in g.nodes[n.index()].outputs.iter().flatten() {
                stack.extend(readers[v.index()].iter().copied().filter(|r| hoisted[r.index()]));
            }
        }
    }
    Vec::new()
}

/// Rounds of [`nodes`]' budget at most; a graph that needs more hoists nothing.
const MAX_BUDGET_ROUNDS: usize = 64;

/// Whether `v` is computed by the device from the model's weights alone (not a weight itself): a
/// node's result whose inputs are weights or such results, through nodes that have inputs and
/// are no control flow. A superset of what [`nodes`] hoists (which also weighs its budget and
/// what the lowering skips): such a value is the same on every run, whenever it is computed.
pub(super) fn from_weights(g: &Graph, v: ValueId) -> bool {
    use crate::graph::Definition;
    let defs = g.definitions();
    let weight = |x: ValueId| g.initializers.contains_key(&x) && !g.inputs.contains(&x);
    if weight(v) {
        return false;
    }
    let mut seen = vec![false; g.values.len()];
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        if std::mem::replace(&mut seen[x.index()], true) || weight(x) {
            continue;
        }
        let Some(Some(Definition::Node { node, .. })) = defs.get(x.index()) else { return false };
        let node = &g.nodes[node.index()];
        let uses = node.uses();
        if uses.is_empty() || matches!(node.op, Op::If(_) | Op::Loop(_) | Op::Scan(_)) {
            return false;
        }
        stack.extend(uses);
    }
    true
}

#[cfg(test)]
mod tests {
    use crate::ConstTensor;
    use crate::graph::Graph;
    use crate::op::{CumSum, Op};
    use crate::plan::{Arg, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};

    /// `x [b, 8]`; `c = CumSum(w)` of a weight (hoisted); `s = sigmoid(x)`; `a = s + c`;
    /// output `a * s` (s is read after the Add, so only `c` dies at it).
    fn graph() -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Symbol("b".into()), Dim::Known(8)]);
        let w = g.initializer("w", ConstTensor::from_f32(&[8], &[0.5; 8]).unwrap());
        let axis = g.const_i64("axis", &[], &[0]);
        let c = g.op1(Op::CumSum(CumSum::default()), &[w, axis]);
        let s = g.sigmoid(x);
        let a = g.add(s, c);
        let y = g.mul(a, s);
        g.output(y);
        g
    }

    /// The value a step writes (its last value argument).
    fn written(step: &Step) -> crate::graph::ValueId {
        match step {
            Step::Kernel { args, .. } => {
                *args.iter().rev().find_map(|a| if let Arg::Value(v) = a { Some(v) } else { None }).unwrap()
            }
            Step::Copy { dst, .. } => *dst,
        }
    }

    /// `plan` with step 1's result moved onto the slot of step 0's (hoisted) result fails
    /// validation.
    fn assert_overwrite_refused(plan: &crate::plan::Plan) {
        let mut bad = plan.clone();
        let (c, target) = (written(&plan.steps[0]), written(&plan.steps[1]));
        bad.memory.slots[target.index()] = bad.memory.slots[c.index()];
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("which the hoisted steps computed once"), "{err}");
    }

    #[test]
    fn steps_of_the_weights_alone_come_first_and_keep_their_results_for_the_runs() {
        // Unfused (and at b = 1, c's size), the Add could write over c in place (c dies there):
        // hoisted, it must not.
        let o = PlanOptions { fuse_elementwise: false, ..PlanOptions::default() };
        let plan = compile(&graph(), &Binding::new().with("b", 1), &o).unwrap();
        let text = plan.to_string();
        assert_eq!(plan.hoisted, 1, "{text}");
        assert!(matches!(&plan.steps[0], Step::Kernel { label, .. } if label == "CumSum"), "{text}");
        assert!(text.contains("#0 once CumSum"), "{text}");
        assert!(text.contains("1 steps once per binding (their results kept: 32 bytes)"), "{text}");
        let c = written(&plan.steps[0]);
        assert_eq!(plan.hoisted_results(), vec![c], "{text}");
        assert!(plan.memory.in_place.iter().all(|&(src, _)| src != c), "{:?}\n{text}", plan.memory.in_place);
        let life = plan.memory.lifetimes[c.index()].unwrap();
        assert_eq!(life.last_step, plan.memory.order.len() - 1, "{text}");
        // The same steps without hoisting, and then the Add writes over c.
        let off =
            compile(&graph(), &Binding::new().with("b", 1), &PlanOptions { hoist_constants: false, ..o })
                .unwrap();
        assert_eq!((off.hoisted, off.steps.len()), (0, plan.steps.len()), "{off}");
        assert!(!off.memory.in_place.is_empty(), "{off}");
    }

    #[test]
    fn a_hoisted_result_read_through_a_view_is_kept_and_guarded() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Symbol("b".into()), Dim::Known(8)]);
        let w = g.initializer("w", ConstTensor::from_f32(&[8], &[0.5; 8]).unwrap());
        let axis = g.const_i64("axis", &[], &[0]);
        let c = g.op1(Op::CumSum(CumSum::default()), &[w, axis]);
        let shape = g.const_i64("shape", &[2], &[1, 8]);
        let r = g.reshape(c, shape);
        let s = g.sigmoid(x);
        let y = g.add(s, r);
        g.output(y);
        let o = PlanOptions { fuse_elementwise: false, ..PlanOptions::default() };
        let plan = compile(&g, &Binding::new().with("b", 3), &o).unwrap();
        let text = plan.to_string();
        assert_eq!(plan.hoisted, 1, "{text}");
        let c = written(&plan.steps[0]);
        assert_eq!(plan.hoisted_results(), vec![c], "{text}");
        assert!(text.contains("(their results kept: 32 bytes)"), "{text}");
        // A later step writing over the view's buffer is refused.
        assert_overwrite_refused(&plan);
    }

    #[test]
    fn past_the_budget_the_largest_kept_results_are_computed_every_run() {
        let o = PlanOptions { fuse_elementwise: false, ..PlanOptions::default() };
        let within =
            compile(&graph(), &Binding::new().with("b", 1), &PlanOptions { hoist_max_bytes: 32, ..o })
                .unwrap();
        assert_eq!(within.hoisted, 1, "{within}");
        let past = compile(&graph(), &Binding::new().with("b", 1), &PlanOptions { hoist_max_bytes: 31, ..o })
            .unwrap();
        assert_eq!((past.hoisted, past.steps.len()), (0, within.steps.len()), "{past}");
    }

    #[test]
    fn validation_refuses_hoisted_steps_that_read_run_values_or_runs_that_overwrite_them() {
        let o = PlanOptions { fuse_elementwise: false, ..PlanOptions::default() };
        let plan = compile(&graph(), &Binding::new().with("b", 4), &o).unwrap();
        let mut bad = plan.clone();
        bad.hoisted = 2; // the sigmoid of the input x
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("hoisted step 1 reads"), "{err}");
        // A later step writing where the hoisted result lies.
        assert_overwrite_refused(&plan);
    }

    #[test]
    fn nothing_is_hoisted_from_outputs_inputs_or_state() {
        // A graph output computed from weights alone is written every run; a default input
        // (an initializer a run may feed) is not a constant once fed.
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [8usize]);
        let w = g.initializer("w", ConstTensor::from_f32(&[8], &[0.5; 8]).unwrap());
        let axis = g.const_i64("axis", &[], &[0]);
        let c = g.op1(Op::CumSum(CumSum::default()), &[w, axis]);
        let y = g.add(x, c);
        g.output(c);
        g.output(y);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        assert_eq!(plan.hoisted, 0, "{plan}");
        let fed = graph().overriding(&[]).unwrap();
        let mut fed_w = fed.clone();
        let w = fed_w.initializers.keys().copied().find(|&v| fed_w.value_name(v) == "w").unwrap();
        fed_w.defaults.insert(w, None);
        let fed_w = fed_w.overriding(&["w"]).unwrap();
        let plan = compile(&fed_w, &Binding::new().with("b", 2), &PlanOptions::default()).unwrap();
        assert_eq!(plan.hoisted, 0, "{plan}");
    }
}
