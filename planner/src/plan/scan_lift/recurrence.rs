//! Unrolled elementwise recurrences become one ONNX `Scan`. An exporter that traces a Python loop
//! over time with several carried states writes each step out; transformers' RWKV-4 WKV loop
//! (`rwkv_linear_attention_cpu`) carries a numerator, a denominator and a running maximum:
//!
//! ```text
//! for t in range(L):
//!     k, v = key[:, t], value[:, t]
//!     q = max(max_state, k + u);  out[:, t] = (e^(max_state-q) num + e^(k+u-q) v) / (e^(max_state-q) den + e^(k+u-q))
//!     q = max(max_state + w, k);  num = e^(max_state+w-q) num + e^(k-q) v;  den = ...;  max_state = q
//! ```
//!
//! a dozen launches a step on the GPU, 5,000 steps for four layers at sequence 64. This pass finds
//! the per-step values stacked along an axis (the write-back chains and `Concat`s `scan_lift.rs`
//! knows) and walks their producers in lockstep over the steps, as `reroll.rs` does, with one
//! more kind of lockstep: a carried state, a value that is read at step `t` and computed by step
//! `t - 1` (its step-0 value comes from outside: the initial state). Every lockstep is then
//! - shared: the same value at every step (a constant or a weight);
//! - a step read: `Gather(S, t, axis)` at step `t` of one `S` whose axis has the loop's length;
//! - a state: an initial value at step 0, and at step `t >= 1` the value a lockstep computes at
//!   step `t - 1` (its update);
//! - an op: the same operator and attributes at every step, its operands locksteps.
//!
//! Each step's value is checked against that description (a lockstep met again with more steps
//! known is checked for those steps), so the lifted loop computes exactly what the unrolled steps
//! did. A state's update after the last step, when the graph computes it and reads it after the
//! loop (transformers' RWKV with `use_cache` returns its three states), is found as the node of
//! the update's op reading the last step's operands and becomes the Scan's final state. When the steps are all elementwise f32 ops the whole loop becomes
//! `Scan(states' initial values, shared tensors (carried unchanged), step-read tensors)` with the
//! body one step, the stacked values its scan output, and the write-back's buffer that output.
//! It runs as one `scan_program_f32` launch, or on `wkv4_f32` when the step is RWKV-4's WKV
//! (`scan_program.rs`). A loop whose values are read
//! anywhere else, a body with another op, or more operands than the kernel takes stays unrolled
//! and still runs.

use std::collections::HashMap;

use super::Cx;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::{DType, TensorInfo};

/// Lane values a run may visit in lockstep in all (a bound on time and memory on hostile graphs).
const BUDGET: usize = 1 << 24;

/// `graph` (of shapes `infos`) with every unrolled elementwise recurrence lifted to a `Scan`
/// (module doc), and one line per loop; `None` when there is none. Shapes must be known.
pub(in crate::plan) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, Vec<String>)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::Gather(_))) {
        return None;
    }
    let cx = Cx::new(graph, infos);
    let mut g = graph.clone();
    let mut budget = BUDGET;
    let mut lifted = Vec::new();
    let mut replace: Vec<Option<Vec<Node>>> = vec![None; graph.nodes.len()];
    for stack in cx.stacks() {
        if replace[stack.last].is_some() {
            continue;
        }
        let mut w = Walk {
            cx: &cx,
            len: stack.xs.len(),
            pos: Vec::new(),
            memo: HashMap::new(),
            pending: Vec::new(),
            budget: &mut budget,
            depth: 0,
        };
        let Some(root) = w.lift(&stack.xs) else { continue };
        let name = graph.node_label(NodeId(stack.last as u32));
        let Some((node, line, finals)) = w.scan(root, &stack, &name) else { continue };
        if finals.iter().any(|&f| replace[f].is_some()) {
            continue;
        }
        lifted.push(line);
        replace[stack.last] = Some(vec![node]);
        // The last steps' state updates read after the loop: now the Scan's final states.
        for f in finals {
            replace[f] = Some(Vec::new());
        }
    }
    if lifted.is_empty() {
        return None;
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(replace).flat_map(|(n, r)| r.unwrap_or_else(|| vec![n])).collect();
    Some((crate::dce::eliminate(&g), lifted))
}

/// Per-step values stacked along `axis` into `y`, whose defining node is `last`.
pub(super) struct Stack {
    xs: Vec<ValueId>,
    axis: usize,
    y: ValueId,
    last: usize,
    spelling: &'static str,
}

impl Cx<'_> {
    /// Every stack of per-step values: `Concat`s of step `Unsqueeze`s and write-back chains of
    /// `ScatterElements` (`Cx::concat`, `Cx::scatters`), of three steps or more.
    fn stacks(&self) -> Vec<Stack> {
        let mut out = Vec::new();
        let unsq_axis = |u: ValueId, axis: usize| -> Option<ValueId> {
            let (r, _) = self.defs[u.index()]?;
            self.unsqueeze_of(r, axis).then(|| self.g.nodes[r].input(0)).flatten()
        };
        for (i, n) in self.g.nodes.iter().enumerate() {
            match &n.op {
                Op::Concat(op::Concat { axis }) if n.inputs.len() >= 3 => {
                    let Some(us) = n.inputs.iter().copied().collect::<Option<Vec<_>>>() else { continue };
                    let Some(ax) = n.output(0).and_then(|y| self.axis_of(y, *axis)) else { continue };
                    let Some(xs) = us.iter().map(|&u| unsq_axis(u, ax)).collect::<Option<Vec<_>>>() else {
                        continue;
                    };
                    if let Some((y, last, spelling)) = self.concat(&us, ax) {
                        out.push(Stack { xs, axis: ax, y, last, spelling });
                    }
                }
                Op::ScatterElements(op::ScatterElements { axis, reduction: op::ScatterReduction::None }) => {
                    if let Some(s) = self.scatter_stack(i, *axis, &unsq_axis) {
                        out.push(s);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The write-back chain that starts at scatter node `i` (its buffer is not another scatter's).
    /// The Identity links exporters put between scatters are gone by now (`noop.rs` runs first).
    fn scatter_stack(
        &self,
        i: usize,
        axis: i64,
        unsq_axis: &dyn Fn(ValueId, usize) -> Option<ValueId>,
    ) -> Option<Stack> {
        let n = &self.g.nodes[i];
        let (buf, u) = (n.input(0)?, n.input(2)?);
        let ax = self.axis_of(u, axis)?;
        if self.def(buf).is_some_and(|d| matches!(d.op, Op::ScatterElements(_))) {
            return None; // not the chain's first
        }
        let len = *self.dims(buf)?.get(ax)?;
        if len < 3 {
            return None;
        }
        let mut us = vec![None; len];
        let mut node = i;
        for _ in 0..len {
            let n = &self.g.nodes[node];
            let u = n.input(2)?;
            let k = *self.repeated(n.input(1)?)?.first()?;
            let k = if k < 0.0 { k + len as f64 } else { k };
            if !(0.0..len as f64).contains(&k) || k.fract() != 0.0 || us[k as usize].is_some() {
                return None;
            }
            us[k as usize] = Some(u);
            // The next scatter: the only reader.
            let v = n.output(0)?;
            if let &[r] = self.readers[v.index()].as_slice()
                && matches!(self.g.nodes[r].op, Op::ScatterElements(_))
                && self.g.nodes[r].input(0) == Some(v)
            {
                node = r;
            }
            if us.iter().all(Option::is_some) {
                break;
            }
        }
        let us: Vec<ValueId> = us.into_iter().collect::<Option<_>>()?;
        let xs = us.iter().map(|&u| unsq_axis(u, ax)).collect::<Option<Vec<_>>>()?;
        let (y, last, spelling) = self.scatters(&us, ax)?;
        Some(Stack { xs, axis: ax, y, last, spelling })
    }
}

/// What a lockstep is (module doc).
#[derive(Clone, Debug)]
enum Kind {
    Shared(ValueId),
    Step {
        src: ValueId,
        axis: usize,
    },
    /// `update`: the lockstep whose step `t - 1` value this one is at step `t >= 1`.
    State {
        init: ValueId,
        update: usize,
    },
    /// The same op at every step (`node`: step 0's), its operands.
    Op {
        node: usize,
        inputs: Vec<Option<usize>>,
    },
}

/// One lockstep: its value at each step (`None`: not known, a step whose value the graph
/// does not hold), and its kind.
struct Pos {
    lanes: Vec<Option<ValueId>>,
    kind: Kind,
}

/// One stack's lockstep walk.
struct Walk<'c, 'g> {
    cx: &'c Cx<'g>,
    len: usize,
    pos: Vec<Pos>,
    /// Locksteps by their values at steps 0 and 1.
    memo: HashMap<(ValueId, Option<ValueId>), usize>,
    /// Steps of a lockstep met again with a value not yet checked: checked at the end.
    pending: Vec<(usize, usize, ValueId)>,
    budget: &'c mut usize,
    /// Current recursion depth of `visit` and `fill` (bounded by `reroll::MAX_DEPTH`).
    depth: usize,
}

impl Walk<'_, '_> {
    /// The lockstep of the stacked values `xs`, every step checked; `None` when they are not one
    /// recurrence of the kinds above with at least one state.
    fn lift(&mut self, xs: &[ValueId]) -> Option<usize> {
        let lanes: Vec<Option<ValueId>> = xs.iter().copied().map(Some).collect();
        let root = self.visit(&lanes)?;
        while let Some((p, t, v)) = self.pending.pop() {
            if !self.fill(p, t, v) {
                return None;
            }
        }
        if !self.pos.iter().any(|p| matches!(p.kind, Kind::State { .. })) {
            return None;
        }
        self.complete_last();
        Some(root)
    }

    /// Finds the last step's values of the op locksteps the walk did not reach there (the state
    /// updates after the last output, which only a final state reads): the node of the same op
    /// reading the last step's operands, where the graph has one.
    fn complete_last(&mut self) {
        let cx = self.cx;
        let t = self.len - 1;
        let value_at = |w: &Self, q: usize| -> Option<ValueId> {
            match w.pos[q].kind {
                Kind::Shared(x) => Some(x),
                Kind::Step { src, axis } => cx.readers[src.index()]
                    .iter()
                    .filter_map(|&r| cx.g.nodes[r].output(0))
                    .find(|&v| w.is_step(v, src, axis, t)),
                Kind::State { update, .. } => w.pos[update].lanes[t - 1],
                Kind::Op { .. } => w.pos[q].lanes[t],
            }
        };
        // Operands before their users: repeat while a lockstep gains its last value.
        for _ in 0..self.pos.len() {
            let mut progress = false;
            for p in 0..self.pos.len() {
                let Kind::Op { node, ref inputs } = self.pos[p].kind else { continue };
                if self.pos[p].lanes[t].is_some() {
                    continue;
                }
                let ins: Option<Vec<Option<ValueId>>> = inputs
                    .iter()
                    .map(|q| q.map(|q| value_at(self, q).map(Some)).unwrap_or(Some(None)))
                    .collect();
                let Some(ins) = ins else { continue };
                let Some(&first) = ins.iter().flatten().next() else { continue };
                let op = &cx.g.nodes[node].op;
                let found = cx.readers[first.index()]
                    .iter()
                    .map(|&r| &cx.g.nodes[r])
                    .find(|n| n.op == *op && n.inputs == ins);
                if let Some(v) = found.and_then(|n| n.output(0)) {
                    self.pos[p].lanes[t] = Some(v);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
    }

    /// The lockstep of `lanes` (step 0 known; from step 1 on some may be unknown).
    fn visit(&mut self, lanes: &[Option<ValueId>]) -> Option<usize> {
        if self.depth >= super::super::reroll::MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let p = self.visit_at(lanes);
        self.depth -= 1;
        p
    }

    fn visit_at(&mut self, lanes: &[Option<ValueId>]) -> Option<usize> {
        *self.budget = self.budget.checked_sub(lanes.len())?;
        let v0 = lanes[0]?;
        let key = (v0, lanes[1]);
        if let Some(&p) = self.memo.get(&key) {
            for (t, v) in lanes.iter().enumerate() {
                match (self.pos[p].lanes[t], *v) {
                    (Some(a), Some(b)) if a != b => return None,
                    (None, Some(b)) => self.pending.push((p, t, b)),
                    _ => {}
                }
            }
            return Some(p);
        }
        let present: Vec<(usize, ValueId)> =
            lanes.iter().enumerate().filter_map(|(t, v)| v.map(|v| (t, v))).collect();
        let cx = self.cx;
        let kind = if present.iter().all(|&(_, v)| v == v0) {
            Kind::Shared(v0)
        } else if let Some((src, axis, _)) = cx.gather_step(v0)
            && cx.dims(src)?.get(axis) == Some(&self.len)
            && present.iter().all(|&(t, v)| self.is_step(v, src, axis, t))
        {
            Kind::Step { src, axis }
        } else {
            let def = |v: ValueId| cx.defs[v.index()].filter(|&(_, slot)| slot == 0).map(|(n, _)| n);
            let op_of = |v: ValueId| def(v).map(|n| (&cx.g.nodes[n].op, cx.g.nodes[n].inputs.len()));
            let uniform = |from: usize| {
                let first = op_of(present.get(from)?.1)?;
                present[from..].iter().all(|&(_, v)| op_of(v) == Some(first)).then_some(first)
            };
            if uniform(0).is_some() {
                let node = def(v0)?;
                let p = self.push(lanes, key, Kind::Op { node, inputs: Vec::new() });
                let arity = cx.g.nodes[node].inputs.len();
                let mut inputs = Vec::with_capacity(arity);
                for i in 0..arity {
                    let ins: Vec<Option<ValueId>> = lanes
                        .iter()
                        .map(|v| v.and_then(|v| cx.g.nodes[def(v)?].inputs.get(i).copied().flatten()))
                        .collect();
                    // An operand absent at one step is absent at all.
                    let absent = ins
                        .iter()
                        .zip(lanes)
                        .filter(|(_, l)| l.is_some())
                        .filter(|(i, _)| i.is_none())
                        .count();
                    inputs.push(match absent {
                        0 => Some(self.visit(&ins)?),
                        n if n == present.len() => None,
                        _ => return None,
                    });
                }
                self.pos[p].kind = Kind::Op { node, inputs };
                return Some(p);
            }
            // A state: step 0 from outside, the other steps one op computed a step earlier.
            uniform(1)?;
            if present.first()?.0 != 0 || present.get(1)?.0 != 1 {
                return None;
            }
            let p = self.push(lanes, key, Kind::State { init: v0, update: usize::MAX });
            let mut shifted: Vec<Option<ValueId>> = lanes[1..].to_vec();
            shifted.push(None);
            let update = self.visit(&shifted)?;
            self.pos[p].kind = Kind::State { init: v0, update };
            return Some(p);
        };
        Some(self.push(lanes, key, kind))
    }

    fn push(&mut self, lanes: &[Option<ValueId>], key: (ValueId, Option<ValueId>), kind: Kind) -> usize {
        self.pos.push(Pos { lanes: lanes.to_vec(), kind });
        self.memo.insert(key, self.pos.len() - 1);
        self.pos.len() - 1
    }

    /// Whether `v` is `Gather(src, t, axis)` (or `t - len`).
    fn is_step(&self, v: ValueId, src: ValueId, axis: usize, t: usize) -> bool {
        self.cx.gather_step(v).is_some_and(|(s, a, i)| {
            s == src && a == axis && (i == t as i64 || i == t as i64 - self.len as i64)
        })
    }

    /// Checks that `v` is lockstep `p`'s value at step `t`, and records it.
    fn fill(&mut self, p: usize, t: usize, v: ValueId) -> bool {
        if let Some(known) = self.pos[p].lanes[t] {
            return known == v;
        }
        if self.depth >= super::super::reroll::MAX_DEPTH {
            return false;
        }
        self.depth += 1;
        let ok = self.fill_at(p, t, v);
        self.depth -= 1;
        ok
    }

    fn fill_at(&mut self, p: usize, t: usize, v: ValueId) -> bool {
        let Some(b) = self.budget.checked_sub(1) else { return false };
        *self.budget = b;
        self.pos[p].lanes[t] = Some(v);
        let cx = self.cx;
        match self.pos[p].kind.clone() {
            Kind::Shared(x) => x == v,
            Kind::Step { src, axis } => self.is_step(v, src, axis, t),
            Kind::State { init, update } => {
                if t == 0 {
                    v == init
                } else {
                    self.fill(update, t - 1, v)
                }
            }
            Kind::Op { node, inputs } => {
                let Some((d, 0)) = cx.defs[v.index()] else { return false };
                let (n, first) = (&cx.g.nodes[d], &cx.g.nodes[node]);
                if n.op != first.op || n.inputs.len() != first.inputs.len() {
                    return false;
                }
                inputs.iter().zip(&n.inputs).all(|(q, x)| match (q, x) {
                    (Some(q), Some(x)) => self.fill(*q, t, *x),
                    (None, None) => true,
                    _ => false,
                })
            }
        }
    }

    /// The `Scan` of the walk rooted at lockstep `root` for `stack`, named after `name`, emitted
    /// into `g`, and its line; `None` when it does not fit (f32 elementwise ops only, nothing read
    /// outside the loop, the scan kernel's limits).
    fn scan(&self, root: usize, stack: &Stack, name: &str) -> Option<(Node, String, Vec<usize>)> {
        let cx = self.cx;
        // The nodes of the loop: those of every step of every op lockstep, and the stack's
        // Unsqueezes; nothing else may read their values.
        let mut own = std::collections::HashSet::new();
        for p in &self.pos {
            if let Kind::Op { .. } = p.kind {
                for v in p.lanes.iter().flatten() {
                    own.insert(cx.defs[v.index()]?.0);
                }
            }
        }
        for &x in &stack.xs {
            for &r in &cx.readers[x.index()] {
                if cx.unsqueeze_of(r, stack.axis) {
                    own.insert(r);
                }
            }
        }
        // A state's value after the last step, where the graph computes it and reads it after
        // the loop (a returned state): the Scan's final state instead.
        let outside =
            |v: ValueId| cx.g.outputs.contains(&v) || cx.readers[v.index()].iter().any(|r| !own.contains(r));
        let final_of = |p: &Pos| match p.kind {
            Kind::State { update, .. } if matches!(self.pos[update].kind, Kind::Op { .. }) => {
                self.pos[update].lanes[self.len - 1].filter(|&v| outside(v))
            }
            _ => None,
        };
        let finals: Vec<ValueId> = self.pos.iter().filter_map(final_of).collect();
        for p in &self.pos {
            if let Kind::Op { node, .. } = p.kind {
                let n = &cx.g.nodes[node];
                let elementwise =
                    matches!(n.op, Op::Identity) || super::super::fuse::ew_node(cx.g, n).is_some();
                if !elementwise || n.outputs.len() != 1 {
                    return None;
                }
                for v in p.lanes.iter().flatten() {
                    if (outside(*v) && !finals.contains(v)) || !cx.f32(*v) {
                        return None;
                    }
                }
            }
        }
        // The body: one value per lockstep (a scalar f32 constant as an initializer).
        let mut body = Graph::new();
        let mut val: Vec<Option<ValueId>> = vec![None; self.pos.len()];
        let (mut states, mut shared, mut steps) = (Vec::new(), Vec::new(), Vec::new());
        let info = |dims: &[usize]| Some(TensorInfo::new(DType::F32, dims.iter().copied()));
        for (k, p) in self.pos.iter().enumerate() {
            match &p.kind {
                Kind::State { init, .. } => {
                    let d = cx.dims(*init)?;
                    let b = body.add_value(format!("state{k}"), info(&d));
                    states.push((k, *init, b, d));
                    val[k] = Some(b);
                }
                Kind::Shared(x) => {
                    let c = cx.g.constant(*x).filter(|c| c.elems() == 1 && c.dtype == DType::F32);
                    let b = body.add_value(
                        format!("shared{k}"),
                        c.map_or_else(|| info(&cx.dims(*x).unwrap_or_default()), |c| info(&c.dims)),
                    );
                    match c {
                        Some(c) => {
                            body.initializers.insert(b, c.clone());
                        }
                        None => {
                            if !cx.f32(*x) {
                                return None;
                            }
                            shared.push((*x, b, cx.dims(*x)?));
                        }
                    }
                    val[k] = Some(b);
                }
                Kind::Step { src, axis } => {
                    if !cx.f32(*src) {
                        return None;
                    }
                    let mut d = cx.dims(*src)?;
                    d.remove(*axis);
                    let b = match steps.iter().find(|(s, a, _, _)| (s, a) == (src, axis)) {
                        Some(&(_, _, b, _)) => b,
                        None => {
                            let b = body.add_value(format!("step{k}"), info(&d));
                            steps.push((*src, *axis, b, cx.dims(*src)?));
                            b
                        }
                    };
                    val[k] = Some(b);
                }
                Kind::Op { .. } => val[k] = Some(body.add_value(format!("v{k}"), None)),
            }
        }
        if states.iter().any(|(_, init, _, _)| !cx.f32(*init)) {
            return None;
        }
        for (k, p) in self.pos.iter().enumerate() {
            if let Kind::Op { node, inputs } = &p.kind {
                let n = &cx.g.nodes[*node];
                body.nodes.push(Node {
                    name: format!("{name}:step:{k}"),
                    op: n.op.clone(),
                    inputs: inputs.iter().map(|i| i.and_then(|i| val[i])).collect(),
                    outputs: vec![val[k]],
                });
            }
        }
        body.inputs = states
            .iter()
            .map(|s| s.2)
            .chain(shared.iter().map(|s| s.1))
            .chain(steps.iter().map(|s| s.2))
            .collect();
        let updates = states.iter().map(|&(k, ..)| match self.pos[k].kind {
            Kind::State { update, .. } => val[update],
            _ => None,
        });
        body.outputs =
            updates.chain(shared.iter().map(|s| Some(s.1))).chain([val[root]]).collect::<Option<_>>()?;
        let carried = states.len() + shared.len();
        let scan = op::Scan {
            body: Box::new(body),
            num_scan_inputs: steps.len(),
            scan_input_axes: steps.iter().map(|s| s.1 as i64).collect(),
            scan_input_directions: vec![0; steps.len()],
            scan_output_axes: vec![stack.axis as i64],
            scan_output_directions: vec![0],
        };
        let mut in_dims: Vec<Vec<usize>> = states.iter().map(|s| s.3.clone()).collect();
        in_dims.extend(shared.iter().map(|s| s.2.clone()));
        in_dims.extend(steps.iter().map(|s| s.3.clone()));
        // Final states first (one per carried state, the shared ones' unread), then the stack.
        let mut outputs: Vec<Option<ValueId>> =
            states.iter().map(|&(k, ..)| final_of(&self.pos[k])).collect();
        outputs.resize(carried, None);
        outputs.push(Some(stack.y));
        let mut out_dims = Vec::with_capacity(outputs.len());
        for v in &outputs {
            out_dims.push(match v {
                Some(v) => Some(cx.dims(*v)?),
                None => None,
            });
        }
        super::super::scan_program::check(&scan, &in_dims, &out_dims).ok()?;
        let ops = scan.body.nodes.len();
        let mut inputs: Vec<Option<ValueId>> = states.iter().map(|s| Some(s.1)).collect();
        inputs.extend(shared.iter().map(|s| Some(s.0)));
        inputs.extend(steps.iter().map(|s| Some(s.0)));
        let returned = if finals.is_empty() {
            String::new()
        } else {
            format!(", {} final states returned", finals.len())
        };
        let line = format!(
            "{name}: Scan of {} steps, {} carried states, {ops} elementwise ops a step (an unrolled recurrence, its steps written back by {}, into `{}`{returned})",
            self.len,
            states.len(),
            stack.spelling,
            cx.g.value_name(stack.y)
        );
        let removed = finals.iter().map(|v| cx.defs[v.index()].map(|d| d.0)).collect::<Option<_>>()?;
        Some((Node { name: format!("{name}:scan"), op: Op::Scan(scan), inputs, outputs }, line, removed))
    }
}
