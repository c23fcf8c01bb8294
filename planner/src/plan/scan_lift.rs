//! Unrolled first-order linear recurrences become one `LinearScan` (OPS.md). An exporter that
//! traces a Python loop over time (transformers' RecurrentGemma `_rnn_scan`, any hand-written
//! `for t in range(L): h = a[:, t] * h + x[:, t]; y[:, t] = h`) writes each step out:
//!
//! ```text
//! a_t = Gather(A, t, axis)   x_t = Gather(X, t, axis)   h_t = Add(Mul(a_t, h_{t-1}), x_t)
//! ```
//!
//! (either operand order of the Mul and the Add), from an initial `h_{-1}` of a step's shape,
//! with the steps written back along `axis` either as a chain of
//! `buf' = ScatterElements(buf, idx_t, Unsqueeze(h_t, axis), axis)` (indices all `t`: a constant
//! or the `Expand` of one;
//! `Identity` between links allowed; the chain's first buffer is overwritten entirely) or as one
//! `Concat(Unsqueeze(h_0, axis), ..., Unsqueeze(h_{L-1}, axis), axis)`. At sequence 256 that is
//! 2,000 nodes per layer, each a kernel launch on the GPU and a host-side loop of tiny tensors on
//! the CPU reference.
//!
//! A chain of every step `t = 0 .. L-1` of an axis of length `L >= 2` (indices may be negative)
//! becomes `LinearScan(Reshape(X, [P, L, Q]), Reshape(A, [P, L, Q]), Reshape(h_{-1}, [P, Q])?)`
//! (P and Q the sizes before and after the axis: a view), placed where the first step was. Its
//! `y` (every step) is reshaped into the written-back buffer, when the steps were written back;
//! a step read anywhere else too (transformers' Mamba reads each state with a MatMul, which
//! `reroll.rs` then batches) is `Gather(y, t, axis)` of it; the last step is the scan's final
//! state when no other step is read. An all-zero `h_{-1}` (a constant, or the `Expand` of one) is
//! the scan's default and is dropped. Anything else (a partial chain, a differently indexed
//! write-back) is left as it is and still runs, unlifted.
//!
//! One chain is recognized first as more than a linear recurrence: transformers' Mamba, whose
//! step operands are `exp(A·Δ)` and `Δ·B·u` and whose states are read out by `C·h` and stacked,
//! becomes the one `SelectiveScan` it computes (`scan_lift/selective.rs`).

pub(super) mod recurrence;
mod selective;

use super::contract::reshape;
use super::reduce::axis_index;
use crate::constant::ConstTensor;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{self, Op, ScatterReduction};
use crate::tensor_info::{DType, TensorInfo};

/// `graph` (of shapes `infos`) with every unrolled linear recurrence lifted (module doc), and what
/// was lifted, one line per scan; `None` when there is none. Shapes must be known (a bound graph).
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, Vec<String>)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::Gather(_))) {
        return None;
    }
    let cx = Cx::new(graph, infos);
    let steps: Vec<Option<StepOf>> = (0..graph.nodes.len()).map(|i| cx.step(i)).collect();
    // The step reading h: node index by the value it reads as h_{t-1}.
    let mut next_of = vec![None; graph.values.len()];
    for (i, s) in steps.iter().enumerate() {
        if let Some(s) = s {
            next_of[s.prev.index()] = Some(i);
        }
    }
    let is_step_output = |v: ValueId| cx.defs[v.index()].is_some_and(|(d, _)| steps[d].is_some());
    let mut g = graph.clone();
    let mut lifted = Vec::new();
    // Nodes that become the lifted scan (at the first step's Add) and that are removed (the other
    // steps' Adds, the write-back's last node: its output is now the scan's).
    let mut replace: Vec<Option<Vec<Node>>> = vec![None; graph.nodes.len()];
    for (head, s) in steps.iter().enumerate() {
        let Some(s) = s else { continue };
        if is_step_output(s.prev) {
            continue; // not the first step of its chain
        }
        let mut chain = vec![head];
        while let Some(next) =
            chain.last().and_then(|&n| steps[n].as_ref()).and_then(|s| next_of[s.h.index()])
            && chain.len() <= graph.nodes.len()
        {
            chain.push(next);
        }
        let name = graph.node_label(NodeId(chain[chain.len() - 1] as u32));
        if let Some(sel) = cx.selective(&chain, &steps) {
            // The steps go; the scan goes where the readout's Concat was.
            if chain.iter().chain([&sel.anchor()]).any(|&i| replace[i].is_some()) {
                continue;
            }
            lifted.push(format!(
                "{name}: SelectiveScan of {} steps (transformers' Mamba recurrence and its readout, into `{}`)",
                chain.len(),
                graph.value_name(sel.output())
            ));
            for &i in &chain {
                replace[i] = Some(Vec::new());
            }
            replace[sel.anchor()] = Some(sel.nodes(&mut g, &name));
            continue;
        }
        let Some(scan) = cx.lift(&chain, &steps) else { continue };
        let removed: Vec<usize> = chain.iter().copied().chain(scan.writeback).collect();
        if removed.iter().any(|&i| replace[i].is_some()) {
            continue;
        }
        lifted.push(format!(
            "{name}: LinearScan of {} steps along axis {} of `{}` ({})",
            chain.len(),
            scan.axis,
            graph.value_name(scan.x),
            match (scan.spelling, scan.reads.is_empty()) {
                (Some(w), true) => format!("write-back by {w}"),
                (Some(w), false) => format!("write-back by {w}, {} steps read from it", scan.reads.len()),
                (None, _) => format!("{} steps read from its output", scan.reads.len()),
            }
        ));
        // The scan goes where the first step was (its operands are defined before it, and every
        // reader of a step after it); the other steps and the write-back go.
        for &i in &removed {
            replace[i] = Some(Vec::new());
        }
        replace[chain[0]] = Some(scan.nodes(&mut g, &cx, &name));
    }
    if lifted.is_empty() {
        return None;
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(replace).flat_map(|(n, r)| r.unwrap_or_else(|| vec![n])).collect();
    Some((crate::dce::eliminate(&g), lifted))
}

/// The constant `v` repeats: itself, or the constant an `Expand` (the only output of its node,
/// `defs` as `fuse::producers` gives them) broadcasts — how exporters spell `zeros_like` and
/// `full_like(t)`.
pub(super) fn repeated_constant<'g>(
    g: &'g Graph,
    defs: &[Option<(usize, usize)>],
    v: ValueId,
) -> Option<&'g ConstTensor> {
    if let Some(c) = g.constant(v) {
        return Some(c);
    }
    let n = match defs.get(v.index()).copied().flatten() {
        Some((i, 0)) => &g.nodes[i],
        _ => return None,
    };
    match (&n.op, n.input(0)) {
        (Op::Expand, Some(src)) => g.constant(src),
        _ => None,
    }
}

/// The graph's producers, readers and shapes.
struct Cx<'g> {
    g: &'g Graph,
    infos: &'g [TensorInfo],
    defs: Vec<Option<(usize, usize)>>,
    readers: Vec<Vec<usize>>,
}

/// One step `h = Add(Mul(Gather(A, t), prev), Gather(X, t))`.
struct StepOf {
    a: ValueId,
    x: ValueId,
    /// The Gathers' axis (normalized) and index `t` (as written: may be negative).
    axis: usize,
    t: i64,
    prev: ValueId,
    h: ValueId,
    mul: usize,
}

/// A chain that lifts: its operands, how its steps were written back and where else they are read.
struct Scan {
    x: ValueId,
    a: ValueId,
    h0: Option<ValueId>,
    axis: usize,
    /// The buffer the steps were written back into, the write-back's last node and its spelling,
    /// when they were.
    y: Option<ValueId>,
    writeback: Option<usize>,
    spelling: Option<&'static str>,
    /// The steps read elsewhere than by the next step and the write-back (`h_t`, and `t` as
    /// written): they become `Gather`s of the scan's output.
    reads: Vec<(ValueId, i64)>,
    /// The last step, when the final state is its value (not in `reads`).
    h_last: Option<ValueId>,
}

impl<'g> Cx<'g> {
    fn new(g: &'g Graph, infos: &'g [TensorInfo]) -> Self {
        let readers = g.consumers().into_iter().map(|r| r.into_iter().map(NodeId::index).collect()).collect();
        Cx { g, infos, defs: super::fuse::producers(g), readers }
    }

    /// `axis` (negative from the back) of `v`'s rank, when in range.
    fn axis_of(&self, v: ValueId, axis: i64) -> Option<usize> {
        axis_index(axis, self.dims(v)?.len()).ok()
    }

    fn dims(&self, v: ValueId) -> Option<Vec<usize>> {
        self.infos.get(v.index()).and_then(|i| i.shape.as_known())
    }

    fn f32(&self, v: ValueId) -> bool {
        self.infos.get(v.index()).is_some_and(|i| i.dtype == DType::F32)
    }

    /// The node defining `v` (output 0) when it is `v`'s only definition.
    fn def(&self, v: ValueId) -> Option<&'g Node> {
        match self.defs[v.index()] {
            Some((i, 0)) => Some(&self.g.nodes[i]),
            _ => None,
        }
    }

    /// Whether `v` is read by exactly the nodes `by` (in any order) and is not a graph output.
    fn read_only_by(&self, v: ValueId, by: &[usize]) -> bool {
        let r = &self.readers[v.index()];
        !self.g.outputs.contains(&v) && r.len() == by.len() && by.iter().all(|b| r.contains(b))
    }

    /// The elements `v` repeats ([`repeated_constant`]).
    fn repeated(&self, v: ValueId) -> Option<Vec<f64>> {
        repeated_constant(self.g, &self.defs, v).map(ConstTensor::to_f64s)
    }

    /// A constant integer scalar (or one-element tensor of rank 0).
    fn scalar_index(&self, v: ValueId) -> Option<i64> {
        let c = self.g.constant(v)?;
        match (c.dims.as_slice(), c.to_i64s()?.as_slice()) {
            ([], &[t]) => Some(t),
            _ => None,
        }
    }

    /// `Gather(data, t, axis)` with a constant scalar `t`: data, axis (normalized), t.
    fn gather_step(&self, v: ValueId) -> Option<(ValueId, usize, i64)> {
        let n = self.def(v)?;
        let (Op::Gather(gt), [Some(data), Some(idx)]) = (&n.op, n.inputs.as_slice()) else { return None };
        Some((*data, self.axis_of(*data, gt.axis)?, self.scalar_index(*idx)?))
    }

    /// The step at node `i`, when it is one (module doc).
    fn step(&self, i: usize) -> Option<StepOf> {
        let n = &self.g.nodes[i];
        let (Op::Add, [Some(p), Some(q)], Some(h)) = (&n.op, n.inputs.as_slice(), n.output(0)) else {
            return None;
        };
        let as_step = |m: ValueId, xv: ValueId| -> Option<StepOf> {
            let (x, axis, t) = self.gather_step(xv)?;
            let (mul, _) = self.defs[m.index()]?;
            let mn = &self.g.nodes[mul];
            let (Op::Mul, [Some(u), Some(w)]) = (&mn.op, mn.inputs.as_slice()) else { return None };
            let (a, prev) = [(*u, *w), (*w, *u)].into_iter().find_map(|(av, prev)| {
                let (a, ax, ta) = self.gather_step(av)?;
                (ax == axis && ta == t).then_some((a, prev))
            })?;
            // One Mul per step, read by its Add only; every operand f32 and of one step's shape.
            let step_dims = self.dims(h)?;
            let same =
                [m, xv, prev].iter().all(|&v| self.dims(v).as_ref() == Some(&step_dims) && self.f32(v));
            (same && self.read_only_by(m, &[i]) && self.dims(a) == self.dims(x)).then_some(StepOf {
                a,
                x,
                axis,
                t,
                prev,
                h,
                mul,
            })
        };
        as_step(*p, *q).or_else(|| as_step(*q, *p))
    }

    /// The scan `chain` (step node indices, first to last) lifts to, when it does (module doc).
    fn lift(&self, chain: &[usize], steps: &[Option<StepOf>]) -> Option<Scan> {
        let s: Vec<&StepOf> = chain.iter().map(|&i| steps[i].as_ref()).collect::<Option<_>>()?;
        let first = s[0];
        let xd = self.dims(first.x)?;
        let len = xd[first.axis];
        if len < 2 || s.len() != len {
            return None;
        }
        let consistent = s.iter().enumerate().all(|(k, st)| {
            (st.a, st.x, st.axis) == (first.a, first.x, first.axis)
                && (st.t == k as i64 || st.t == k as i64 - len as i64)
        });
        if !consistent {
            return None;
        }
        // The write-back, when every step's h is read by an Unsqueeze along the axis that feeds it.
        let unsq: Option<Vec<usize>> = s
            .iter()
            .map(|st| self.readers[st.h.index()].iter().copied().find(|&r| self.unsqueeze_of(r, first.axis)))
            .collect();
        let wb = unsq
            .as_ref()
            .and_then(|u| {
                let vals: Vec<ValueId> =
                    u.iter().map(|&r| self.g.nodes[r].output(0)).collect::<Option<_>>()?;
                self.concat(&vals, first.axis).or_else(|| self.scatters(&vals, first.axis))
            })
            .filter(|&(y, _, _)| self.dims(y).as_ref() == Some(&xd) && self.f32(y));
        // Every other read of a step. The last step is the scan's final state, unless other
        // steps are read too: then it is read from the scan's output like them (which keeps the
        // steps alike for `reroll.rs`).
        let mut reads = Vec::new();
        for (k, st) in s.iter().enumerate() {
            if k + 1 == len && reads.is_empty() {
                break;
            }
            let next = |r: usize| s.get(k + 1).is_some_and(|n| n.mul == r);
            let own = |r: usize| next(r) || (wb.is_some() && unsq.as_ref().is_some_and(|u| u[k] == r));
            if self.g.outputs.contains(&st.h) || self.readers[st.h.index()].iter().any(|&r| !own(r)) {
                reads.push((st.h, st.t));
            }
        }
        let h0 = first.prev;
        let zero = self.repeated(h0).is_some_and(|c| c.iter().all(|&v| v == 0.0));
        Some(Scan {
            x: first.x,
            a: first.a,
            h0: (!zero).then_some(h0),
            axis: first.axis,
            y: wb.map(|w| w.0),
            writeback: wb.map(|w| w.1),
            spelling: wb.map(|w| w.2),
            h_last: (reads.is_empty()).then_some(s[len - 1].h),
            reads,
        })
    }

    /// Whether node `r` is `Unsqueeze(_, [axis])` (attribute or constant input).
    fn unsqueeze_of(&self, r: usize, axis: usize) -> bool {
        let n = &self.g.nodes[r];
        let Op::Unsqueeze(op::Unsqueeze { axes }) = &n.op else { return false };
        let axes = match (axes, n.input(1)) {
            (Some(a), _) => Some(a.clone()),
            (None, Some(v)) => self.g.constant(v).and_then(ConstTensor::to_i64s),
            (None, None) => None,
        };
        let Some(out) = n.output(0) else { return false };
        matches!(axes.as_deref(), Some(&[a]) if self.axis_of(out, a) == Some(axis))
    }

    /// `Concat(unsq..., axis)` reading each once, in order: its output and node.
    fn concat(&self, unsq: &[ValueId], axis: usize) -> Option<(ValueId, usize, &'static str)> {
        let &[c] = self.readers[unsq[0].index()].as_slice() else { return None };
        let n = &self.g.nodes[c];
        let Op::Concat(op::Concat { axis: ca }) = n.op else { return None };
        let y = n.output(0)?;
        let in_order = n.inputs.len() == unsq.len() && n.inputs.iter().zip(unsq).all(|(i, u)| *i == Some(*u));
        let private = unsq.iter().all(|&u| self.read_only_by(u, &[c]));
        (self.axis_of(y, ca) == Some(axis) && in_order && private).then_some((y, c, "Concat"))
    }

    /// A chain of `ScatterElements(buf, idx_t, unsq_t, axis)` (any order of t, `Identity` links
    /// allowed), each step written once: the chain's last value and node.
    fn scatters(&self, unsq: &[ValueId], axis: usize) -> Option<(ValueId, usize, &'static str)> {
        let len = unsq.len();
        let mut written = vec![false; len];
        // Start at step 0's scatter, walk back to the chain's first, then forward.
        let scatter_of = |u: ValueId| -> Option<usize> {
            let &[r] = self.readers[u.index()].as_slice() else { return None };
            let n = &self.g.nodes[r];
            let Op::ScatterElements(op::ScatterElements { axis: sa, reduction: ScatterReduction::None }) =
                n.op
            else {
                return None;
            };
            (self.axis_of(u, sa) == Some(axis) && n.input(2) == Some(u)).then_some(r)
        };
        let step_of: std::collections::HashMap<ValueId, usize> =
            unsq.iter().enumerate().map(|(k, &u)| (u, k)).collect();
        // Through Identity nodes: the value `v` is read as, when only by Identity chains.
        let through = |mut v: ValueId| -> (ValueId, Option<usize>) {
            loop {
                match *self.readers[v.index()].as_slice() {
                    [r] if matches!(self.g.nodes[r].op, Op::Identity) && !self.g.outputs.contains(&v) => {
                        match self.g.nodes[r].output(0) {
                            Some(o) => v = o,
                            None => return (v, None),
                        }
                    }
                    [r] if !self.g.outputs.contains(&v) => return (v, Some(r)),
                    _ => return (v, None),
                }
            }
        };
        let back = |v: ValueId| -> Option<ValueId> {
            let mut v = v;
            while let Some(n) = self.def(v)
                && matches!(n.op, Op::Identity)
            {
                v = n.input(0)?;
            }
            Some(v)
        };
        let mut node = scatter_of(unsq[0])?;
        // Walk back while the buffer comes from another scatter of this chain.
        for _ in 0..len {
            let buf = back(self.g.nodes[node].input(0)?)?;
            match self.def(buf) {
                Some(p)
                    if matches!(p.op, Op::ScatterElements(_))
                        && p.input(2).is_some_and(|u| step_of.contains_key(&u)) =>
                {
                    node = self.defs[buf.index()]?.0;
                }
                _ => break,
            }
        }
        let mut last = None;
        for _ in 0..len {
            let n = &self.g.nodes[node];
            let u = n.input(2)?;
            let &k = step_of.get(&u)?;
            if written[k] || scatter_of(u) != Some(node) {
                return None;
            }
            // The indices: of the update's shape, all k (or k - len).
            let idx = n.input(1)?;
            let all_k = self.repeated(idx)?.iter().all(|&i| i == k as f64 || i == k as f64 - len as f64);
            if self.dims(idx)? != self.dims(u)? || !all_k {
                return None;
            }
            written[k] = true;
            let out = n.output(0)?;
            if written.iter().all(|&w| w) {
                // The buffer: the last value of the Identity chain after the last scatter.
                let (y, _) = through(out);
                let def = self.defs[y.index()]?.0;
                last = Some((y, def, "ScatterElements"));
                break;
            }
            let (_, Some(r)) = through(out) else { return None };
            node = r;
        }
        last
    }
}

impl Scan {
    /// The nodes that compute the scan into `y` and `h_last`, named after `name`.
    fn nodes(&self, g: &mut Graph, cx: &Cx, name: &str) -> Vec<Node> {
        let xd = cx.dims(self.x).unwrap_or_default();
        let (p, l, q) = (
            xd[..self.axis].iter().product::<usize>(),
            xd[self.axis],
            xd[self.axis + 1..].iter().product::<usize>(),
        );
        let view = |g: &mut Graph, v: ValueId, dims: &[usize], tag: &str, out: Option<ValueId>| {
            reshape(g, v, dims, format!("{name}:scan:{tag}"), out)
        };
        let (view_x, x) = view(g, self.x, &[p, l, q], "x", None);
        let (view_a, a) = view(g, self.a, &[p, l, q], "a", None);
        let (view_h0, h0) = self.h0.map(|h| view(g, h, &[p, q], "h0", None)).unzip();
        let (ys, fin) =
            (g.add_value(format!("{name}:scan:y"), None), g.add_value(format!("{name}:scan:state"), None));
        let mut inputs = vec![Some(x), Some(a)];
        inputs.extend(h0.map(Some));
        let scan = Node {
            name: format!("{name}:scan"),
            op: Op::LinearScan,
            inputs,
            outputs: vec![Some(ys), Some(fin)],
        };
        let mut nodes = vec![view_x, view_a];
        nodes.extend(view_h0);
        nodes.push(scan);
        if let Some(h_last) = self.h_last {
            let hd = cx.dims(h_last).unwrap_or_default();
            nodes.push(view(g, fin, &hd, "final", Some(h_last)).0);
        }
        // Every step, in the write-back's buffer or (read only elsewhere) a buffer of its own.
        let full =
            self.y.or_else(|| (!self.reads.is_empty()).then(|| g.add_value(format!("{name}:scan:ys"), None)));
        if let Some(full) = full {
            nodes.push(view(g, ys, &xd, "out", Some(full)).0);
            for &(h, t) in &self.reads {
                let idx = g.initializer(&format!("{name}:scan:t{t}"), ConstTensor::scalar_i64(t));
                nodes.push(Node {
                    name: format!("{name}:scan:step{t}"),
                    op: Op::Gather(op::Gather { axis: self.axis as i64 }),
                    inputs: vec![Some(full), Some(idx)],
                    outputs: vec![Some(h)],
                });
            }
        }
        nodes
    }
}
