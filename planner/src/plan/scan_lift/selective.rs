//! transformers' Mamba selective scan, unrolled (its slow path's `for i in range(L)`), as the one
//! `SelectiveScan` it computes (OPS.md, `selective_scan_ref` without D, z or a delta bias):
//!
//! ```text
//! dA  = Exp(Mul(A4, Δ4))                 A4 = A [D, N] as [1?, D, 1, N], Δ4 = Δ [B, D, L] as [B, D, L, 1]
//! dBu = Mul(Mul(Δ4, B4), U4)             B4 = Bm [B, L, N] as [B, 1, L, N], U4 = u [B, D, L] as [B, D, L, 1]
//! h_t = Gather(dA, t, 2) ⊙ h_{t-1} + Gather(dBu, t, 2)      (from zero)
//! y_t = Gather(MatMul(h_t, Unsqueeze(Gather(Cm, t, 1), -1)), 0, -1)
//! y   = Concat(Unsqueeze(y_0, -1), ..., Unsqueeze(y_{L-1}, -1), -1)      [B, D, L]
//! ```
//!
//! (either operand order of each Mul). The generic lift (the chain as a `LinearScan`, the readout
//! rolled into one batched MatMul by `reroll.rs`) computes the same, but materializes `dA`,
//! `dBu` and every state, `[B, D, L, N]` each, and reads them back: at batch 8 that was three
//! quarters of the model's time on the H200. The `SelectiveScan` kernel forms them per step in
//! registers. Anything that differs (a state read elsewhere, a D skip inside the steps, other
//! shapes) falls back to the generic lift.

use super::{Cx, StepOf};
use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::plan::contract::reshape;

/// What the steps of one chain compute, when they are the selective scan (module doc).
pub(super) struct Selective {
    u4: ValueId,
    delta4: ValueId,
    a4: ValueId,
    b4: ValueId,
    cm: ValueId,
    /// The stacked readout (the `Concat`) and its node.
    y: ValueId,
    concat: usize,
    /// `[B, D, L, N]`.
    dims: [usize; 4],
}

impl Cx<'_> {
    /// The chain `chain` (step nodes, first to last) as a selective scan, when it is one.
    pub(super) fn selective(&self, chain: &[usize], steps: &[Option<StepOf>]) -> Option<Selective> {
        let s: Vec<&StepOf> = chain.iter().map(|&i| steps[i].as_ref()).collect::<Option<_>>()?;
        let first = s[0];
        let xd = self.dims(first.x)?;
        let (&[b, d, l, n], 2) = (xd.as_slice(), first.axis) else { return None };
        let zero = self.repeated(first.prev).is_some_and(|c| c.iter().all(|&v| v == 0.0));
        let in_order = s.iter().enumerate().all(|(k, st)| {
            (st.a, st.x, st.axis) == (first.a, first.x, 2)
                && (st.t == k as i64 || st.t == k as i64 - l as i64)
        });
        if !zero || s.len() != l || l < 2 || !in_order {
            return None;
        }
        // Each state read by the next step and one readout MatMul, nothing else.
        let mut stacked = Vec::with_capacity(l);
        let mut cm = None;
        for (k, st) in s.iter().enumerate() {
            let mm = self.readers[st.h.index()]
                .iter()
                .copied()
                .find(|&r| matches!(self.g.nodes[r].op, Op::MatMul))?;
            let mut own = vec![mm];
            own.extend(s.get(k + 1).map(|nx| nx.mul));
            if !self.read_only_by(st.h, &own) {
                return None;
            }
            let (u, c) = self.readout(mm, st.h, k, l)?;
            if *cm.get_or_insert(c) != c {
                return None;
            }
            stacked.push(u);
        }
        let cm = cm?;
        let (y, concat, _) = self.concat(&stacked, 2)?;
        if self.dims(cm)? != [b, l, n] || self.dims(y)? != [b, d, l] {
            return None;
        }
        // The step operands: dA = exp(A ⊗ Δ), dBu = Δ ⊗ Bm ⊗ u, each read only by the steps.
        let (a4, delta4) = self.decay(first.a, [b, d, l, n])?;
        let (u4, b4) = self.input(first.x, delta4, [b, d, l, n])?;
        let gathers_only = |v: ValueId| {
            self.readers[v.index()].iter().all(|&r| matches!(self.g.nodes[r].op, Op::Gather(_)))
                && !self.g.outputs.contains(&v)
        };
        (gathers_only(first.a) && gathers_only(first.x) && self.f32(cm)).then_some(Selective {
            u4,
            delta4,
            a4,
            b4,
            cm,
            y,
            concat,
            dims: [b, d, l, n],
        })
    }

    /// Step `k`'s readout from state `h` at MatMul node `mm`:
    /// `Unsqueeze(Gather(MatMul(h, Unsqueeze(Gather(Cm, t, 1), -1)), 0, -1), -1)`, each value read
    /// once: the Unsqueeze's output (to be stacked) and `Cm`.
    fn readout(&self, mm: usize, h: ValueId, k: usize, l: usize) -> Option<(ValueId, ValueId)> {
        let m = &self.g.nodes[mm];
        let (Some(hv), Some(w), Some(out)) = (m.input(0), m.input(1), m.output(0)) else { return None };
        let wn = self.def(w)?;
        let (Op::Unsqueeze(_), Some(ct)) = (&wn.op, wn.input(0)) else { return None };
        let (cm, axis, t) = self.gather_step(ct)?;
        let col = self.dims(w)?;
        let step_ok = axis == 1 && (t == k as i64 || t == k as i64 - l as i64);
        if hv != h || col.len() != 3 || col[2] != 1 || !step_ok {
            return None;
        }
        // [B, D, 1] -> Gather(0, last axis) -> [B, D] -> Unsqueeze(-1) -> [B, D, 1].
        let &[g] = self.readers[out.index()].as_slice() else { return None };
        let gn = &self.g.nodes[g];
        let Op::Gather(op::Gather { axis }) = gn.op else { return None };
        let idx = self.scalar_index(gn.input(1)?)?;
        let r = gn.output(0)?;
        if self.axis_of(out, axis) != Some(2) || !(idx == 0 || idx == -1) || self.g.outputs.contains(&out) {
            return None;
        }
        let &[un] = self.readers[r.index()].as_slice() else { return None };
        let u = self.g.nodes[un].output(0)?;
        (self.unsqueeze_of(un, 2) && !self.g.outputs.contains(&r)).then_some((u, cm))
    }

    /// `a = Exp(Mul(A4, Δ4))` (either order): A4 (`[1, D, 1, N]`, leading unit dims optional) and Δ4
    /// (`[B, D, L, 1]`).
    fn decay(&self, a: ValueId, [b, d, l, n]: [usize; 4]) -> Option<(ValueId, ValueId)> {
        let e = self.def(a)?;
        let (Op::Exp, Some(m)) = (&e.op, e.input(0)) else { return None };
        let mn = self.def(m)?;
        let (Op::Mul, [Some(p), Some(q)]) = (&mn.op, mn.inputs.as_slice()) else { return None };
        // A broadcast as `[1, D, 1, N]` (leading unit dims may be missing).
        let is_a = |v: ValueId| {
            self.dims(v).is_some_and(|dd| {
                dd.len() <= 4 && std::iter::repeat_n(1, 4 - dd.len()).chain(dd).eq([1, d, 1, n])
            }) && self.f32(v)
        };
        let is_delta = |v: ValueId| self.dims(v).as_deref() == Some(&[b, d, l, 1][..]) && self.f32(v);
        [(*p, *q), (*q, *p)].into_iter().find(|&(x, y)| is_a(x) && is_delta(y))
    }

    /// `x = Mul(Mul(Δ4, B4), U4)` in any grouping and order, Δ4 the decay's own: U4 (`[B, D, L, 1]`)
    /// and B4 (`[B, 1, L, N]`).
    fn input(&self, x: ValueId, delta4: ValueId, [b, d, l, n]: [usize; 4]) -> Option<(ValueId, ValueId)> {
        let mul = |v: ValueId| -> Option<(ValueId, ValueId)> {
            let m = self.def(v)?;
            match (&m.op, m.inputs.as_slice()) {
                (Op::Mul, [Some(p), Some(q)]) => Some((*p, *q)),
                _ => None,
            }
        };
        let (p, q) = mul(x)?;
        let mut factors = Vec::new();
        for (inner, other) in [(p, q), (q, p)] {
            if let Some((r, s)) = mul(inner)
                && self.read_only_by(inner, &[self.defs[x.index()]?.0])
            {
                factors = vec![r, s, other];
                break;
            }
        }
        let pos = factors.iter().position(|&f| f == delta4)?;
        factors.remove(pos);
        let is_b = |v: ValueId| self.dims(v).as_deref() == Some(&[b, 1, l, n][..]) && self.f32(v);
        let is_u = |v: ValueId| self.dims(v).as_deref() == Some(&[b, d, l, 1][..]) && self.f32(v);
        match *factors.as_slice() {
            [f, g] if is_u(f) && is_b(g) => Some((f, g)),
            [f, g] if is_u(g) && is_b(f) => Some((g, f)),
            _ => None,
        }
    }
}

impl Selective {
    /// The nodes computing the readout into the stacked `y` by one `SelectiveScan`, named after
    /// `name`: views of u, Δ, A and the transposed B and C, then the scan.
    pub(super) fn nodes(&self, g: &mut Graph, name: &str) -> Vec<Node> {
        let [b, d, l, n] = self.dims;
        let tag = |t: &str| format!("{name}:selective:{t}");
        let (u_view, u) = reshape(g, self.u4, &[b, d, l], tag("u"), None);
        let (delta_view, delta) = reshape(g, self.delta4, &[b, d, l], tag("delta"), None);
        let (a_view, a) = reshape(g, self.a4, &[d, n], tag("A"), None);
        let (b_view, bm) = reshape(g, self.b4, &[b, l, n], tag("B"), None);
        let transpose = |g: &mut Graph, v: ValueId, t: &str| {
            let out = g.add_value(tag(t), None);
            let op = Op::Transpose(op::Transpose { perm: Some(vec![0, 2, 1]) });
            (Node { name: tag(t), op, inputs: vec![Some(v)], outputs: vec![Some(out)] }, out)
        };
        let (b_t, bt) = transpose(g, bm, "Bt");
        let (c_t, ct) = transpose(g, self.cm, "Ct");
        let scan = Node {
            name: format!("{name}:selective"),
            op: Op::SelectiveScan(op::SelectiveScan { delta_softplus: false }),
            inputs: vec![Some(u), Some(delta), Some(a), Some(bt), Some(ct)],
            outputs: vec![Some(self.y)],
        };
        vec![u_view, delta_view, a_view, b_view, b_t, c_t, scan]
    }

    /// The stacked readout the scan computes.
    pub(super) fn output(&self) -> ValueId {
        self.y
    }

    /// The node the scan replaces (the readout's `Concat`; the scan goes where it was).
    pub(super) fn anchor(&self) -> usize {
        self.concat
    }
}
