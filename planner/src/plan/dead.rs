//! Steps that write nothing a run can see: each value they write is read by no later step, is no
//! graph output and shares its slot with neither (a view of it, or a result written over it in
//! place). Lowering emits such steps where a node has several results and only some are read:
//! a Split writes each part with a step of its own (an int8 GPT-2 export splits the projection's
//! f32 result and its integers, and reads two parts of one and one of the other: three dead
//! copies a layer). Dropping them changes no result; the memory plan keeps their slots.
//!
//! A step is kept whenever what it does is not fully known: a kernel with fewer arguments than
//! it writes ([`Step::reads_writes`] is `None`) or one that reads or writes a persistent state
//! slot ([`Arg::State`]).

use super::{Arg, Step};
use crate::graph::ValueId;

/// `steps` without the dead ones (module docs), and how many of the first `hoisted` remain.
/// `outputs`: the graph's outputs; `aliases`: pairs of values that share a slot (views and
/// in-place results); `values`: the number of values.
pub(super) fn drop(
    steps: Vec<Step>,
    hoisted: usize,
    outputs: &[ValueId],
    aliases: &[(ValueId, ValueId)],
    values: usize,
) -> (Vec<Step>, usize) {
    // Classes of values sharing a slot (union-find, by index).
    let mut parent: Vec<usize> = (0..values).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for &(a, b) in aliases {
        let (ra, rb) = (root(&mut parent, a.index()), root(&mut parent, b.index()));
        parent[ra] = rb;
    }
    let mut live = vec![false; values];
    for &o in outputs {
        let r = root(&mut parent, o.index());
        live[r] = true;
    }
    let mut keep = vec![true; steps.len()];
    for (i, step) in steps.iter().enumerate().rev() {
        let stateful =
            matches!(step, Step::Kernel { args, .. } if args.iter().any(|a| matches!(a, Arg::State(_))));
        let reads = match step.reads_writes() {
            Some((reads, writes)) if !stateful => {
                let seen = writes.iter().any(|w| {
                    let r = root(&mut parent, w.index());
                    live[r]
                });
                if !writes.is_empty() && !seen {
                    keep[i] = false;
                    continue;
                }
                reads
            }
            // Not fully known: kept, and everything it touches is live.
            _ => step.values(),
        };
        for v in reads {
            let r = root(&mut parent, v.index());
            live[r] = true;
        }
    }
    let hoisted = keep[..hoisted.min(keep.len())].iter().filter(|&&k| k).count();
    let steps = steps.into_iter().zip(keep).filter_map(|(s, k)| k.then_some(s)).collect();
    (steps, hoisted)
}

#[cfg(test)]
mod tests {
    use crate::op::{Op, Split};
    use crate::plan::{PlanOptions, Step, compile};
    use crate::tensor_info::{DType, Dim};
    use crate::{Binding, Graph};

    /// A Split read in one part of three: one copy, not three; read in all three, three.
    #[test]
    fn unread_parts_of_a_split_are_not_copied() {
        for used in [1usize, 3] {
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, vec![Dim::Known(64), Dim::Known(96)]);
            let t = g.op1(Op::Tanh, &[x]);
            let parts = g.push(Op::Split(Split { axis: 1, split: None, num_outputs: Some(3) }), &[t], 3);
            for &p in &parts[..used] {
                let y = g.op1(Op::Transpose(crate::op::Transpose { perm: Some(vec![1, 0]) }), &[p]);
                g.output(y);
            }
            let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
            let copies = (plan.steps.iter())
                .filter(|s| matches!(s, Step::Kernel { label, .. } if label == "Split"))
                .count();
            assert_eq!(copies, used, "{plan}");
            plan.validate().unwrap();
        }
    }
}
