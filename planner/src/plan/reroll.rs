//! Unrolled maps rolled back up. An exporter that traces a Python loop over time writes out the
//! loop's body once per step and stacks the results (transformers' Mamba:
//! `for i in range(L): ys.append((h_i @ C[:, i, :].unsqueeze(-1))[:, :, 0])`, then
//! `torch.stack(ys, -1)`):
//!
//! ```text
//! y = Concat(f(Gather(S1, 0, a1), Gather(S2, 0, a2), W), ..., f(Gather(S1, L-1, a1), ..., W), axis)
//! ```
//!
//! with `f` the same computation at every step, reading step `t` of some tensors (a scalar
//! constant index `t`, or `t - L`, along an axis of length `L`) and values every step shares. At
//! sequence 256 that is a thousand launches of tiny kernels per layer. When the `L` inputs of a
//! `Concat` are such a body (walked in lockstep from the `Concat` back to the step reads and the
//! shared values: equal operators and attributes, equal constants), the body is computed once over
//! the whole axis instead, as JAX's `vmap` batches a function: each step read `Gather(S, t, a)`
//! becomes `S` itself with the step axis at `a`, and every op of the body takes the step axis as
//! one more leading dimension (elementwise ops with NumPy broadcasting, MatMul, Gather by a shared
//! index, Unsqueeze, Squeeze, Transpose, Reshape, Softmax). The `Concat` is then the batched result
//! with its step axis moved to the concatenation axis. A body with any other op, or read
//! differently, stays as it is and still runs.
//!
//! Runs after the scan lift (`scan_lift.rs`), whose steps read elsewhere (Mamba's readout) become
//! such step reads of the scan's output.

use std::collections::HashMap;

use super::contract::reshape;
use super::lower::{binary_op, unary_op};
use super::reduce::axis_index;
use crate::constant::ConstTensor;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::TensorInfo;

/// Values a run may visit in lockstep walks in all (a bound on the pass's time and memory on
/// hostile graphs).
const BUDGET: usize = 1 << 24;

/// Ops deep a walk may go from its `Concat` (the walk recurses: a bound on its stack on a hostile
/// graph's long per-step chains; an exporter's step bodies are tens of ops deep).
pub(super) const MAX_DEPTH: usize = 512;

/// `graph` (of shapes `infos`) with every unrolled map rolled up (module doc), and one line per
/// `Concat` rolled; `None` when there is none. Shapes must be known (a bound graph).
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, Vec<String>)> {
    let defs = super::fuse::producers(graph);
    let mut g = graph.clone();
    let mut budget = BUDGET;
    let mut lifted = Vec::new();
    let mut replace: Vec<Option<Vec<Node>>> = vec![None; graph.nodes.len()];
    for (i, n) in graph.nodes.iter().enumerate() {
        let Op::Concat(op::Concat { axis }) = n.op else { continue };
        let Some(steps) = n.inputs.iter().copied().collect::<Option<Vec<_>>>() else { continue };
        let (Some(out), true) = (n.output(0), steps.len() >= 2) else { continue };
        let name = graph.node_label(NodeId(i as u32));
        let mut roll = Roll {
            src: graph,
            infos,
            defs: &defs,
            len: steps.len(),
            g: &mut g,
            memo: HashMap::new(),
            depth: 0,
            nodes: Vec::new(),
            budget: &mut budget,
            name: &name,
        };
        if let Some(()) = roll.concat(&steps, axis, out) {
            lifted.push(format!(
                "{name}: {} unrolled steps rolled into one computation over the axis ({} nodes)",
                steps.len(),
                roll.nodes.len()
            ));
            replace[i] = Some(std::mem::take(&mut roll.nodes));
        }
    }
    if lifted.is_empty() {
        return None;
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(replace).flat_map(|(n, r)| r.unwrap_or_else(|| vec![n])).collect();
    Some((crate::dce::eliminate(&g), lifted))
}

/// A lockstep of values, one per step: the same at every step, or batched over the steps.
#[derive(Clone, Debug)]
enum B {
    Shared(ValueId),
    /// `v` holds every step's value, the step axis at `axis` (`v`'s rank is the steps' plus 1);
    /// `dims` are one step's.
    Batched {
        v: ValueId,
        axis: usize,
        dims: Vec<usize>,
    },
}

/// One `Concat`'s walk: the source graph, and the nodes it emits into `g`.
struct Roll<'a> {
    src: &'a Graph,
    infos: &'a [TensorInfo],
    defs: &'a [Option<(usize, usize)>],
    len: usize,
    g: &'a mut Graph,
    memo: HashMap<Vec<ValueId>, Option<B>>,
    nodes: Vec<Node>,
    budget: &'a mut usize,
    /// Current recursion depth of the walk.
    depth: usize,
    name: &'a str,
}

impl Roll<'_> {
    fn dims(&self, v: ValueId) -> Option<Vec<usize>> {
        self.infos.get(v.index()).and_then(|i| i.shape.as_known())
    }

    /// Emits `op(inputs)` with one fresh output.
    fn emit(&mut self, op: Op, inputs: Vec<ValueId>, tag: &str) -> ValueId {
        let name = format!("{}:roll{}:{tag}", self.name, self.nodes.len());
        let out = self.g.add_value(name.clone(), None);
        self.nodes.push(Node {
            name,
            op,
            inputs: inputs.into_iter().map(Some).collect(),
            outputs: vec![Some(out)],
        });
        out
    }

    fn const_i64(&mut self, tag: &str, values: &[i64]) -> ValueId {
        let name = format!("{}:roll{}:{tag}", self.name, self.nodes.len());
        let t = ConstTensor::from_i64(&[values.len()], values).expect("a vector fills its dims");
        self.g.initializer(&name, t)
    }

    /// `v` viewed as `dims` (into `out` when given).
    fn reshape(&mut self, v: ValueId, dims: &[usize], out: Option<ValueId>) -> ValueId {
        let name = format!("{}:roll{}:reshape", self.name, self.nodes.len());
        let (node, y) = reshape(self.g, v, dims, name, out);
        self.nodes.push(node);
        y
    }

    /// `v` (step axis at `axis`, `rank` dims a step) with the step axis moved to `to`.
    fn move_axis(&mut self, v: ValueId, axis: usize, to: usize, rank: usize) -> ValueId {
        if axis == to {
            return v;
        }
        let mut perm: Vec<usize> = (0..=rank).filter(|&p| p != axis).collect();
        perm.insert(to, axis);
        self.emit(Op::Transpose(op::Transpose { perm: Some(perm) }), vec![v], "transpose")
    }

    /// The batched `b` with its step axis first and, when a step has fewer than `rank` dims,
    /// unit dims after it (so it broadcasts as each step did); a shared value as it is.
    fn leading(&mut self, b: &B, rank: usize) -> ValueId {
        match b {
            B::Shared(v) => *v,
            B::Batched { v, axis, dims } => {
                let f = self.move_axis(*v, *axis, 0, dims.len());
                if dims.len() >= rank {
                    return f;
                }
                let mut shape = vec![self.len];
                shape.extend(std::iter::repeat_n(1, rank - dims.len()));
                shape.extend(dims);
                self.reshape(f, &shape, None)
            }
        }
    }

    /// The lockstep `vals` (value `k` of step `k`), when every step computes it alike.
    fn walk(&mut self, vals: &[ValueId]) -> Option<B> {
        *self.budget = self.budget.checked_sub(vals.len())?;
        if let Some(b) = self.memo.get(vals) {
            return b.clone();
        }
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let b = self.walk_uncached(vals);
        self.depth -= 1;
        self.memo.insert(vals.to_vec(), b.clone());
        b
    }

    fn walk_uncached(&mut self, vals: &[ValueId]) -> Option<B> {
        let first = vals[0];
        if vals.iter().all(|&v| v == first) {
            return Some(B::Shared(first));
        }
        if let Some(c) = self.src.constant(first) {
            return vals.iter().all(|&v| self.src.constant(v) == Some(c)).then_some(B::Shared(first));
        }
        let nodes: Vec<&Node> = vals
            .iter()
            .map(|&v| match self.defs[v.index()] {
                Some((n, 0)) => Some(&self.src.nodes[n]),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let n0 = nodes[0];
        let alike =
            nodes.iter().all(|n| n.op == n0.op && n.inputs.len() == n0.inputs.len() && n.outputs.len() == 1);
        if !alike || n0.op.name().contains("Random") || n0.op.name().contains("Bernoulli") {
            return None;
        }
        if let Some(b) = self.step_read(&nodes) {
            return Some(b);
        }
        let mut ins = Vec::with_capacity(n0.inputs.len());
        for slot in 0..n0.inputs.len() {
            let lock: Option<Vec<ValueId>> = nodes.iter().map(|n| n.inputs[slot]).collect();
            match lock {
                Some(lock) => ins.push(Some(self.walk(&lock)?)),
                None if nodes.iter().all(|n| n.inputs[slot].is_none()) => ins.push(None),
                None => return None,
            }
        }
        if ins.iter().flatten().all(|b| matches!(b, B::Shared(_))) {
            return Some(B::Shared(first)); // the same op of the same values
        }
        self.batched(n0, &ins, first)
    }

    /// `Gather(S, t, axis)` at step `t` of every step (`t` as a scalar constant, or `t - L`),
    /// `S` shared and `L` long on the axis: `S`, batched along the axis.
    fn step_read(&mut self, nodes: &[&Node]) -> Option<B> {
        let Op::Gather(op::Gather { axis }) = nodes[0].op else { return None };
        let data = nodes[0].input(0)?;
        let dd = self.dims(data)?;
        let a = axis_index(axis, dd.len()).ok()?;
        let steps_read = dd[a] == self.len
            && nodes.iter().enumerate().all(|(k, n)| {
                let idx = n.input(1).and_then(|i| self.src.constant(i));
                n.input(0) == Some(data)
                    && idx.is_some_and(|c| {
                        c.dims.is_empty()
                            && c.to_i64s()
                                .is_some_and(|t| t == [k as i64] || t == [k as i64 - self.len as i64])
                    })
            });
        let mut dims = dd;
        dims.remove(a);
        steps_read.then_some(B::Batched { v: data, axis: a, dims })
    }

    /// Node `n` (step 0's, output `out0`) over the steps, of its operands `ins` (some batched).
    fn batched(&mut self, n: &Node, ins: &[Option<B>], out0: ValueId) -> Option<B> {
        let od = self.dims(out0)?;
        let rank = od.len();
        let batched = |v| Some(B::Batched { v, axis: 0, dims: od.clone() });
        let elementwise = binary_op(&n.op).is_some()
            || unary_op(&n.op).is_some()
            || super::logic::compare_code(&n.op).is_some()
            || matches!(n.op, Op::Where | Op::Cast(_) | Op::Reciprocal | Op::Identity | Op::Not);
        let ins: Vec<&B> = ins.iter().map(Option::as_ref).collect::<Option<_>>()?;
        if elementwise {
            let vs = ins.iter().map(|b| self.leading(b, rank)).collect();
            return batched(self.emit(n.op.clone(), vs, "map"));
        }
        // The one batched operand of a unary view or reduction: step axis first, the op's
        // axes one further.
        let only = |ins: &[&B]| match ins {
            [b @ B::Batched { .. }, rest @ ..] if rest.iter().all(|r| matches!(r, B::Shared(_))) => {
                Some((*b).clone())
            }
            _ => None,
        };
        let shift = |axes: &[i64], r: usize| -> Option<Vec<i64>> {
            axes.iter().map(|&a| axis_index(a, r).ok().map(|a| a as i64 + 1)).collect()
        };
        match &n.op {
            Op::MatMul => {
                let ranks: Vec<usize> = n
                    .inputs
                    .iter()
                    .map(|v| v.and_then(|v| self.dims(v)).map(|d| d.len()))
                    .collect::<Option<_>>()?;
                if ranks.iter().any(|&r| r < 2) {
                    return None;
                }
                let vs = ins.iter().map(|b| self.leading(b, rank)).collect();
                batched(self.emit(Op::MatMul, vs, "matmul"))
            }
            Op::Gather(op::Gather { axis }) => {
                let (B::Batched { v, axis: at, dims }, B::Shared(idx)) = (ins.first()?, ins.get(1)?) else {
                    return None;
                };
                let a = axis_index(*axis, dims.len()).ok()? as i64 + 1;
                let f = self.move_axis(*v, *at, 0, dims.len());
                batched(self.emit(Op::Gather(op::Gather { axis: a }), vec![f, *idx], "gather"))
            }
            Op::Unsqueeze(op::Unsqueeze { axes }) | Op::Squeeze(op::Squeeze { axes }) => {
                let B::Batched { v, axis, dims } = only(&ins)? else { return None };
                let axes = match (axes, n.input(1)) {
                    (Some(a), None) => a.clone(),
                    (None, Some(a)) => self.src.constant(a)?.to_i64s()?,
                    _ => return None,
                };
                // Unsqueeze's axes count in its output, Squeeze's in its input.
                let r = if matches!(n.op, Op::Unsqueeze(_)) { rank } else { dims.len() };
                let axes = shift(&axes, r)?;
                let f = self.move_axis(v, axis, 0, dims.len());
                let a = self.const_i64("axes", &axes);
                let op = match n.op {
                    Op::Unsqueeze(_) => Op::Unsqueeze(op::Unsqueeze { axes: None }),
                    _ => Op::Squeeze(op::Squeeze { axes: None }),
                };
                batched(self.emit(op, vec![f, a], "view"))
            }
            Op::Transpose(t) => {
                let B::Batched { v, axis, dims } = only(&ins)? else { return None };
                let r = dims.len();
                let perm = t.axes(r);
                let f = self.move_axis(v, axis, 0, r);
                let perm = std::iter::once(0).chain(perm.iter().map(|p| p + 1)).collect();
                batched(self.emit(Op::Transpose(op::Transpose { perm: Some(perm) }), vec![f], "transpose"))
            }
            Op::Reshape(_) => {
                let B::Batched { v, axis, dims } = only(&ins)? else { return None };
                // The step's shape (known: the graph is bound), after the step axis.
                let f = self.move_axis(v, axis, 0, dims.len());
                let shape: Vec<usize> = std::iter::once(self.len).chain(od.iter().copied()).collect();
                batched(self.reshape(f, &shape, None))
            }
            Op::Softmax(op::Softmax { axis }) | Op::LogSoftmax(op::Softmax { axis }) => {
                let B::Batched { v, axis: at, dims } = only(&ins)? else { return None };
                let a = axis_index(*axis, dims.len()).ok()? as i64 + 1;
                let f = self.move_axis(v, at, 0, dims.len());
                let op = match n.op {
                    Op::Softmax(_) => Op::Softmax(op::Softmax { axis: a }),
                    _ => Op::LogSoftmax(op::Softmax { axis: a }),
                };
                batched(self.emit(op, vec![f], "softmax"))
            }
            _ => None,
        }
    }

    /// `Concat(steps, axis)` into `out` as the batched body (module doc).
    fn concat(&mut self, steps: &[ValueId], axis: i64, out: ValueId) -> Option<()> {
        let od = self.dims(out)?;
        let B::Batched { v, axis: at, dims } = self.walk(steps)? else { return None };
        let c = axis_index(axis, dims.len()).ok()?;
        if dims.len() != od.len() {
            return None;
        }
        // Steps next to each other along the axis, then merged with it.
        let moved = self.move_axis(v, at, c, dims.len());
        self.reshape(moved, &od, Some(out));
        Some(())
    }
}
