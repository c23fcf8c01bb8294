//! Lifetimes of node-produced values in execution order, and the in-place merging of elementwise
//! results into an input that dies at the same step.

use serde::{Deserialize, Serialize};

use super::{Extras, Scratch};
use crate::error::PlanError;
use crate::graph::{Definition, Graph, NodeId, ValueId};
use crate::op::Op;
use crate::shape_infer;
use crate::validate;

/// Steps (positions in the execution order) during which a value must stay in memory: from the step
/// that defines it through the last step that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifetime {
    /// Step that writes the value.
    pub first_step: usize,
    /// Last step that reads it (its defining step when nothing reads it).
    pub last_step: usize,
}

impl Lifetime {
    /// True when the two lifetimes share a step.
    pub fn overlaps(&self, other: &Lifetime) -> bool {
        self.first_step <= other.last_step && other.first_step <= self.last_step
    }
}

/// Values sharing one buffer (an in-place chain, or a single value).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Member values, in chain order.
    pub members: Vec<ValueId>,
    /// Bytes of the largest member.
    pub bytes: u64,
    /// Union of the members' lifetimes.
    pub life: Lifetime,
}

/// Everything the placement needs to know about a graph's values.
#[derive(Debug, Clone, PartialEq)]
pub struct LifetimeAnalysis {
    /// Execution order.
    pub order: Vec<NodeId>,
    /// Lifetime of each arena value, indexed by `ValueId`.
    pub lifetimes: Vec<Option<Lifetime>>,
    /// Exact bytes of each arena value, indexed by `ValueId`.
    pub bytes: Vec<Option<u64>>,
    /// In-place pairs `(source, result)`.
    pub in_place: Vec<(ValueId, ValueId)>,
    /// View pairs `(source, view)`: a reshape-like result that shares its source's bytes.
    pub views: Vec<(ValueId, ValueId)>,
    /// Node-produced values of data-dependent size.
    pub dynamic: Vec<ValueId>,
    /// Buffers to place.
    pub groups: Vec<Group>,
    /// How many nodes of `order` (its first) are hoisted.
    pub hoisted: usize,
}

/// Elementwise ops whose kernels may write their output over an input of the same shape and dtype
/// (each output element depends only on the same element of the inputs).
fn writes_in_place(op: &Op) -> bool {
    matches!(
        op,
        Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Pow
            | Op::Max
            | Op::Min
            | Op::Abs
            | Op::Neg
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Reciprocal
            | Op::Floor
            | Op::Ceil
            | Op::Erf
            | Op::Relu
            | Op::LeakyRelu(_)
            | Op::Sigmoid
            | Op::Tanh
            | Op::Softplus
            | Op::Gelu(_)
            | Op::Elu(_)
            | Op::Selu(_)
            | Op::HardSigmoid(_)
            | Op::HardSwish
            | Op::Clip(_)
            | Op::Sin
            | Op::Cos
    )
}

/// The inputs `node`'s output may overwrite in place (subject to the lifetime, size and dtype
/// checks): every input of an elementwise op; the program inputs of a [`Op::FusedGemm`] or
/// [`Op::FusedGather`] (whose
/// kernel reads each output element's program inputs in the thread that writes it, right before),
/// but never one of its GEMM operands, which other threads read while outputs are written. A
/// program input of the output's size is read without broadcast, so it maps element to element.
/// A scatter's data (its output before the updates land: the copy that puts it there is then
/// dropped), never its indices or updates, which the kernel reads while it writes. Nothing for a
/// [`Op::FusedConv`]: where its convolution has no program epilogue, the convolution writes the
/// output before a program step reads the inputs.
fn in_place_sources(node: &crate::graph::Node) -> Vec<ValueId> {
    if matches!(node.op, Op::ScatterNd(_) | Op::ScatterElements(_)) {
        return node.input(0).into_iter().collect();
    }
    if matches!(node.op, Op::FusedConv(_)) {
        return Vec::new();
    }
    if let Some(n) = node.op.fused_operands() {
        let operands: Vec<Option<ValueId>> = node.inputs.iter().take(n).copied().collect();
        return node
            .inputs
            .iter()
            .skip(n)
            .flatten()
            .copied()
            .filter(|v| !operands.contains(&Some(*v)))
            .collect();
    }
    if writes_in_place(&node.op) { node.inputs.iter().flatten().copied().collect() } else { Vec::new() }
}

/// Ops whose output is its input's bytes under another shape (no data movement).
pub fn is_view(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) | Op::Identity | Op::Dropout(_)
    )
}

/// Bytes of a tensor of `dtype` and `dims`, `None` past u64.
fn checked_bytes(dtype: crate::tensor_info::DType, dims: &[usize]) -> Option<u64> {
    dims.iter().try_fold(dtype.size_bytes() as u64, |acc, &d| acc.checked_mul(d as u64))
}

/// Lifetimes, sizes and in-place groups of every node-produced value of `g`, whose input shapes must
/// already be bound (see `bind_inputs`). Graph outputs are excluded: the caller owns them, and so
/// are `elided` values (results a fused kernel keeps on chip: no buffer).
pub fn analyse_lifetimes(g: &Graph, in_place: bool, extras: Extras) -> Result<LifetimeAnalysis, PlanError> {
    let Extras { views: extra_views, elided, reads, unread, hoisted, .. } = extras;
    let infos = shape_infer::infer(g)?;
    // The hoisted nodes first (they read only weights and each other: still a topological order).
    let mut is_hoisted = vec![false; g.nodes.len()];
    for h in hoisted.iter().filter(|h| h.index() < g.nodes.len()) {
        is_hoisted[h.index()] = true;
    }
    let (order, n_hoisted) = {
        let topo = validate::topo_order(g)?;
        let (mut first, rest): (Vec<NodeId>, Vec<NodeId>) =
            topo.into_iter().partition(|n| is_hoisted[n.index()]);
        let n_hoisted = first.len();
        first.extend(rest);
        (first, n_hoisted)
    };
    let defs = g.definitions();
    let n = g.values.len();
    let mut step_of = vec![0usize; g.nodes.len()];
    for (s, id) in order.iter().enumerate() {
        step_of[id.index()] = s;
    }
    let mut lifetimes: Vec<Option<Lifetime>> = vec![None; n];
    let mut bytes: Vec<Option<u64>> = vec![None; n];
    let mut dynamic = Vec::new();
    for v in 0..n {
        let Some(Definition::Node { node, .. }) = defs[v] else { continue };
        if g.outputs.contains(&ValueId(v as u32)) || elided.contains(&ValueId(v as u32)) {
            continue;
        }
        let info = &infos[v];
        match info.shape.as_known() {
            Some(dims) => {
                let size = checked_bytes(info.dtype, &dims).ok_or_else(|| PlanError::Memory {
                    detail: format!("value `{}` of shape {dims:?} overflows u64 bytes", g.values[v].name),
                })?;
                bytes[v] = Some(size);
                let first = step_of[node.index()];
                lifetimes[v] = Some(Lifetime { first_step: first, last_step: first });
            }
            None => dynamic.push(ValueId(v as u32)),
        }
    }
    // What each node's step reads: its uses and the extra reads the lowering names.
    let uses = |id: NodeId| {
        let extra = reads.iter().filter(move |(n, _)| *n == id).map(|&(_, v)| v);
        let read = move |v: &ValueId| !unread.contains(&(id, *v));
        g.nodes[id.index()].uses().into_iter().filter(read).chain(extra)
    };
    for (s, id) in order.iter().enumerate() {
        for u in uses(*id) {
            if let Some(l) = lifetimes[u.index()].as_mut() {
                l.last_step = l.last_step.max(s);
            }
        }
    }
    // A hoisted result that a later step reads is computed once and read by every run: it lives
    // to the end of the order, and nothing writes over it in place.
    let mut pinned = vec![false; n];
    for v in 0..n {
        let (Some(Definition::Node { node, .. }), Some(l)) = (defs[v], lifetimes[v].as_mut()) else {
            continue;
        };
        if is_hoisted[node.index()] && l.last_step >= n_hoisted {
            l.last_step = order.len() - 1;
            pinned[v] = true;
        }
    }

    // Union-find over values: each in-place result joins its source's group.
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut v: usize) -> usize {
        while parent[v] != v {
            parent[v] = parent[parent[v]];
            v = parent[v];
        }
        v
    }
    // Views first: a reshape-like result between arena values shares its source's buffer (only
    // the op's sole output; Dropout's mask must be absent). A view of a graph input (or of such a
    // view) is the input's own buffer: it takes no slot and no lifetime, so nothing writes it in
    // place (a caller's device tensor bound as the input is never overwritten).
    let mut views = Vec::new();
    let mut of_input: Vec<bool> = (0..n).map(|v| g.inputs.contains(&ValueId(v as u32))).collect();
    let input_bytes = |v: ValueId| checked_bytes(infos[v.index()].dtype, &infos[v.index()].shape.as_known()?);
    for id in &order {
        let node = &g.nodes[id.index()];
        let (Some(x), Some(y)) = (node.inputs.first().copied().flatten(), node.output(0)) else { continue };
        if !(is_view(&node.op) || extra_views.contains(&y))
            || node.outputs.iter().skip(1).any(Option::is_some)
        {
            continue;
        }
        if lifetimes[x.index()].is_some()
            && bytes[y.index()].is_some()
            && bytes[x.index()] == bytes[y.index()]
        {
            let r = root(&mut parent, x.index());
            parent[y.index()] = r;
            views.push((x, y));
        } else if of_input[x.index()]
            && lifetimes[y.index()].is_some()
            && bytes[y.index()].is_some()
            && (if g.inputs.contains(&x) { input_bytes(x) } else { bytes[x.index()] }) == bytes[y.index()]
        {
            lifetimes[y.index()] = None;
            of_input[y.index()] = true;
            views.push((x, y));
        }
    }
    // View classes (before in-place results join the groups), and the last step that reads any
    // member of each.
    let vclass: Vec<usize> = (0..n).map(|v| root(&mut parent, v)).collect();
    let mut class_last = vec![0usize; n];
    let mut class_pinned = vec![false; n];
    for v in 0..n {
        if let Some(l) = lifetimes[v] {
            class_last[vclass[v]] = class_last[vclass[v]].max(l.last_step);
        }
        class_pinned[vclass[v]] |= pinned[v];
    }
    let mut pairs = Vec::new();
    if in_place {
        for (s, id) in order.iter().enumerate() {
            let node = &g.nodes[id.index()];
            let Some(y) = node.output(0) else { continue };
            if bytes[y.index()].is_none() {
                continue;
            }
            let used: Vec<ValueId> = uses(*id).collect();
            let source = in_place_sources(node).into_iter().find(|x| {
                let r = vclass[x.index()];
                // The whole view class dies here, and this node reads no other member of it.
                let sole = used.iter().all(|u| u == x || vclass[u.index()] != r);
                // A value the step reads beyond the node's inputs (a GEMM's A segments) is read
                // while the result is written: never its buffer.
                let extra = reads.contains(&(*id, *x));
                lifetimes[x.index()].is_some_and(|l| l.last_step == s)
                    && class_last[r] == s
                    && sole
                    && !extra
                    && !class_pinned[r]
                    && bytes[x.index()] == bytes[y.index()]
                    && infos[x.index()].dtype == infos[y.index()].dtype
            });
            if let Some(x) = source {
                let r = root(&mut parent, x.index());
                parent[y.index()] = r;
                pairs.push((x, y));
            }
        }
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    for v in 0..n {
        let (Some(life), Some(size)) = (lifetimes[v], bytes[v]) else { continue };
        let r = root(&mut parent, v);
        let gi = *group_of[r].get_or_insert_with(|| {
            groups.push(Group { members: Vec::new(), bytes: 0, life });
            groups.len() - 1
        });
        let grp = &mut groups[gi];
        grp.members.push(ValueId(v as u32));
        grp.bytes = grp.bytes.max(size);
        grp.life.first_step = grp.life.first_step.min(life.first_step);
        grp.life.last_step = grp.life.last_step.max(life.last_step);
    }
    Ok(LifetimeAnalysis {
        order,
        lifetimes,
        bytes,
        in_place: pairs,
        views,
        dynamic,
        groups,
        hoisted: n_hoisted,
    })
}

/// Appends the scratch buffers to `life`: value ids after the graph's, one buffer each, live at
/// their node's step, or through their last reader's (to the end of the order when the node is
/// hoisted and a reader is not).
pub(super) fn add_scratch(life: &mut LifetimeAnalysis, scratch: &[Scratch]) -> Result<(), PlanError> {
    let step_of = |n: NodeId| {
        life.order.iter().position(|&m| m == n).ok_or_else(|| PlanError::Memory {
            detail: format!("scratch for node {n}, which is not in the execution order"),
        })
    };
    for s in scratch {
        let step = step_of(s.node)?;
        let mut last = step;
        for &r in &s.readers {
            last = last.max(step_of(r)?);
        }
        // Written by a hoisted node for a later one: read by every run.
        if step < life.hoisted && last >= life.hoisted {
            last = life.order.len() - 1;
        }
        let v = ValueId(life.lifetimes.len() as u32);
        let l = Lifetime { first_step: step, last_step: last };
        life.lifetimes.push(Some(l));
        life.bytes.push(Some(s.bytes));
        life.groups.push(Group { members: vec![v], bytes: s.bytes, life: l });
    }
    Ok(())
}
