//! Intermediate-memory planning: every tensor a node produces lives in one arena at an offset
//! planned from tensor lifetimes.
//!
//! `plan` reads like its steps: bind the symbolic input dims and re-infer shapes, order the nodes,
//! compute each value's lifetime in that order, merge in-place chains (an elementwise op whose input
//! dies at that op writes over it), then place the buffers with greedy-by-size best fit among
//! lifetime-overlapping buffers (free gaps between placed buffers are merged before fitting), under
//! three orderings (by size, by lifetime length, by first use), keeping the smallest arena.
//!
//! A node may also ask for scratch buffers ([`Scratch`]: workspace a kernel needs only while that
//! node runs, such as a recurrent layer's input projection). Each gets a value id after the
//! graph's values and a slot live at that node's step alone, placed like any other buffer.
//!
//! Outside the arena: graph inputs and outputs (callers own them), initializers (the weights have
//! their own allocation), and values whose size depends on data (NonZero-like outputs, everything
//! downstream of them, control-flow bodies); those are listed in `MemoryPlan::dynamic` and get a
//! run-time region with a free list (`host::arena`).
//!
//! Invariants (checked by [`MemoryPlan::verify`]): every slot is `alignment`-aligned and inside the
//! arena; two buffers whose lifetimes overlap do not overlap in memory, except an in-place pair,
//! which share one buffer and whose source is read by no step after the one that overwrites it.

mod assign;
mod lifetime;
mod stats;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::error::PlanError;
use crate::graph::{Graph, NodeId, ValueId};
use crate::tensor_info::Binding;

pub use lifetime::{Lifetime, analyse_lifetimes, is_view};
pub use stats::MemoryStats;

/// Default slot alignment in bytes (what cudaMalloc guarantees; enough for 16-byte vector access
/// and for TMA descriptors).
pub const DEFAULT_ALIGNMENT: u64 = 256;

/// One arena slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferSlot {
    /// Offset from the arena base, a multiple of the plan's alignment.
    pub offset: u64,
    /// Bytes the value occupies (its exact size, not rounded).
    pub bytes: u64,
}

/// The memory plan of one graph under one binding of its symbolic dims. Plain data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// Node execution order the lifetimes refer to.
    pub order: Vec<NodeId>,
    /// Bytes the arena must have.
    pub arena_bytes: u64,
    /// Slot alignment in bytes.
    pub alignment: u64,
    /// Arena slot of each value, indexed by `ValueId`; `None` outside the arena. Scratch buffers
    /// follow the graph's values (ids `graph.values.len()..`, in request order).
    pub slots: Vec<Option<BufferSlot>>,
    /// Lifetime (in steps of `order`) of each arena value, indexed by `ValueId`.
    pub lifetimes: Vec<Option<Lifetime>>,
    /// In-place pairs `(source, result)`: `result` overwrites `source`'s buffer at the step that
    /// consumes `source` for the last time.
    pub in_place: Vec<(ValueId, ValueId)>,
    /// View pairs `(source, view)`: a reshape-like result that shares its source's slot, so the
    /// reshape moves no data.
    pub views: Vec<(ValueId, ValueId)>,
    /// Node-produced values whose size is only known at run time (they go to the dynamic region).
    pub dynamic: Vec<ValueId>,
    /// Statistics.
    pub stats: MemoryStats,
}

/// Options of [`plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryOptions {
    /// Slot alignment in bytes (a power of two).
    pub alignment: u64,
    /// Let elementwise ops write over an input that dies at them.
    pub in_place: bool,
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions { alignment: DEFAULT_ALIGNMENT, in_place: true }
    }
}

/// A scratch buffer node `node` needs while it runs, and only then, or that its steps write for
/// `readers` to read: then it lives through the last of them (to the end of the order when `node`
/// is hoisted and a reader is not: written once, read by every run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scratch {
    /// The node whose steps use (or write) the buffer.
    pub node: NodeId,
    /// Its size.
    pub bytes: u64,
    /// Nodes whose steps read what `node`'s wrote into it.
    pub readers: Vec<NodeId>,
}

/// Plans the arena of `graph` with its symbolic input dims bound by `binding`.
pub fn plan(graph: &Graph, binding: &Binding, options: &MemoryOptions) -> Result<MemoryPlan, PlanError> {
    plan_with(graph, binding, options, Extras::default())
}

/// [`plan`], with the values in `extra_views` (outputs of data-moving nodes whose readers walk
/// them through strides, e.g. a transpose feeding a GEMM) also made views of their node's first
/// input.
pub fn plan_with_views(
    graph: &Graph,
    binding: &Binding,
    options: &MemoryOptions,
    extra_views: &[ValueId],
) -> Result<MemoryPlan, PlanError> {
    plan_with(graph, binding, options, Extras { views: extra_views, ..Extras::default() })
}

/// [`plan`], with scratch buffers: `scratch[i]` gets value id `graph.values.len() + i`, a slot in
/// the arena and a lifetime of its node's step.
pub fn plan_with_scratch(
    graph: &Graph,
    binding: &Binding,
    options: &MemoryOptions,
    scratch: &[Scratch],
) -> Result<MemoryPlan, PlanError> {
    plan_with(graph, binding, options, Extras { scratch, ..Extras::default() })
}

/// What the lowering adds to a graph's own values and uses ([`plan_with`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    /// Results its readers walk through strides ([`plan_with_views`]).
    pub views: &'a [ValueId],
    /// Scratch buffers ([`plan_with_scratch`]).
    pub scratch: &'a [Scratch],
    /// Results a fused kernel keeps on chip or never forms: no slot and no lifetime.
    pub elided: &'a [ValueId],
    /// Values a node's step reads beyond its inputs (a GEMM reading the tables its A operand
    /// was gathered from): live until that node.
    pub reads: &'a [(NodeId, ValueId)],
    /// Inputs a node's step does not read (a GEMM or Conv reading its weight packed instead).
    pub unread: &'a [(NodeId, ValueId)],
    /// Nodes that read only weights and each other's results (`plan::hoist`): ordered first, in
    /// the given order's relative order, and their results that later nodes read live to the end
    /// of the order (computed once, read by every run).
    pub hoisted: &'a [NodeId],
}

/// [`plan`] with the lowering's [`Extras`].
pub fn plan_with(
    graph: &Graph,
    binding: &Binding,
    options: &MemoryOptions,
    extras: Extras,
) -> Result<MemoryPlan, PlanError> {
    if !options.alignment.is_power_of_two() {
        return Err(PlanError::Memory {
            detail: format!("alignment {} is not a power of two", options.alignment),
        });
    }
    let bound = bind_inputs(graph, binding)?;
    let mut life = analyse_lifetimes(&bound, options.in_place, extras)?;
    lifetime::add_scratch(&mut life, extras.scratch)?;
    let buffers = assign::buffers(&life, options.alignment);
    let (arena_bytes, offsets) = assign::best_of_orderings(&buffers);
    let mut slots = vec![None; life.lifetimes.len()];
    for (b, &offset) in buffers.iter().zip(&offsets) {
        for &v in &b.members {
            slots[v.index()] = Some(BufferSlot { offset, bytes: life.bytes[v.index()].unwrap_or(0) });
        }
    }
    let stats = stats::compute(&buffers, &offsets, arena_bytes, &life, options.alignment);
    let plan = MemoryPlan {
        order: life.order,
        arena_bytes,
        alignment: options.alignment,
        slots,
        lifetimes: life.lifetimes,
        in_place: life.in_place,
        views: life.views,
        dynamic: life.dynamic,
        stats,
    };
    plan.verify(graph)?;
    Ok(plan)
}

/// A copy of `graph` whose input shapes have every symbolic dim replaced by its bound size, so that
/// re-running shape inference makes every size that does not depend on data concrete.
pub fn bind_inputs(graph: &Graph, binding: &Binding) -> Result<Graph, PlanError> {
    let mut g = graph.clone();
    for &v in &graph.inputs {
        if let Some(info) = g.values[v.index()].info.as_mut() {
            let dims = info.shape.bind(binding)?;
            info.shape = crate::tensor_info::Shape::known(&dims);
        }
    }
    Ok(g)
}

impl MemoryPlan {
    /// The value whose buffer `v` is: `v` itself, or for a view without a slot of its own (a view
    /// of a graph input) the input it views, through any chain of views.
    pub fn home(&self, mut v: ValueId) -> ValueId {
        while self.slots.get(v.index()).copied().flatten().is_none() {
            match self.views.iter().find(|&&(_, view)| view == v) {
                Some(&(src, _)) => v = src,
                None => break,
            }
        }
        v
    }

    /// Checks the plan's invariants against the graph it was made for.
    pub fn verify(&self, graph: &Graph) -> Result<(), PlanError> {
        let bad = |detail: String| PlanError::Memory { detail };
        let live: Vec<(ValueId, BufferSlot, Lifetime)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((ValueId(i as u32), (*s)?, self.lifetimes.get(i).copied().flatten()?)))
            .collect();
        for &(v, s, _) in &live {
            if s.offset % self.alignment != 0 || s.offset + s.bytes > self.arena_bytes {
                return Err(bad(format!("{v} slot {s:?} misaligned or outside {} bytes", self.arena_bytes)));
            }
        }
        // View classes: a source and its (transitive) views share one buffer by design (a
        // union-find with path halving: linear in the views, not views x slots).
        let mut class: Vec<usize> = (0..self.slots.len()).collect();
        fn root(class: &mut [usize], mut i: usize) -> usize {
            while class[i] != i {
                class[i] = class[class[i]];
                i = class[i];
            }
            i
        }
        for &(src, view) in &self.views {
            let (a, b) = (root(&mut class, src.index()), root(&mut class, view.index()));
            class[b] = a;
        }
        for i in 0..class.len() {
            class[i] = root(&mut class, i);
        }
        let in_place: std::collections::HashSet<(ValueId, ValueId)> = self.in_place.iter().copied().collect();
        let pair = |a: ValueId, b: ValueId| {
            in_place.contains(&(a, b)) || in_place.contains(&(b, a)) || class[a.index()] == class[b.index()]
        };
        // Buffers live at the same step must not share bytes: a sweep over the steps, each buffer
        // checked against those still live when it starts (not every pair of the plan).
        let mut by_start: Vec<usize> = (0..live.len()).collect();
        by_start.sort_by_key(|&i| live[i].2.first_step);
        let mut active: Vec<usize> = Vec::new();
        for &i in &by_start {
            let (a, sa, la) = live[i];
            active.retain(|&j| live[j].2.last_step >= la.first_step);
            for &j in &active {
                let (b, sb, lb) = live[j];
                let space = sa.offset < sb.offset + sb.bytes && sb.offset < sa.offset + sa.bytes;
                if space && !pair(a, b) {
                    return Err(bad(format!("{a} {sa:?} {la:?} overlaps {b} {sb:?} {lb:?}")));
                }
            }
            active.push(i);
        }
        // In place is only sound if the overwritten value has no reader after the overwrite; the
        // last read of every view class, in one pass over the steps.
        let mut last_read: Vec<Option<usize>> = vec![None; class.len()];
        for (step, n) in self.order.iter().enumerate() {
            for u in graph.nodes[n.index()].uses() {
                if let Some(c) = class.get(u.index()) {
                    last_read[*c] = Some(step);
                }
            }
        }
        for &(src, dst) in &self.in_place {
            let step = self.lifetimes[dst.index()].map(|l| l.first_step);
            // Every view of the overwritten value counts as a read of it.
            let last_read = last_read[class[src.index()]];
            if step.is_none() || last_read != step {
                return Err(bad(format!(
                    "{dst} overwrites {src}, which is read at step {last_read:?} (overwrite at {step:?})"
                )));
            }
        }
        Ok(())
    }
}
