//! An `SSDScan`'s skip and gate, when the export spells them after the scan, folded into its `D`
//! and `z` inputs. transformers' Mamba-2 (`torch_forward`) writes, around the scan the SSD lift
//! recovers (`x` the scan's own input `[b, l, h, p]`, every `view` a `Reshape`):
//!
//! ```text
//! y1 = view(y) + D[h, 1] * x          // D per head ([h, p]: per channel)
//! y2 = view(y1) * (z * Sigmoid(z))    // the gate (SiLU) before MambaRMSNormGated's norm
//! ```
//!
//! which the scan computes itself (`y + D x`, then `· silu(z)`): the two elementwise launches and
//! their round trips go, and the gated RMSNorm reads the scan's output. Either part folds alone
//! (the skip only when the gate is absent or does not match; the gate only when there is no
//! skip or it folded). Each intermediate must be read only on the way (`x` and `z` may be read
//! elsewhere); the views must keep the scan's element order, and the folded node's output, now
//! a view of the scan's, keeps its value id. A scan that already has `D` or `z` is left alone.

use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::{DType, TensorInfo};

/// `graph` (of shapes `infos`) with each `SSDScan`'s skip and gate folded in (module doc), and how
/// many scans took either; `None` when none did.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::SsdScan(_))) {
        return None;
    }
    let cx = Cx {
        g: graph,
        infos,
        readers: super::fuse::reader_counts(graph),
        defs: super::fuse::producers(graph),
        consumers: graph.consumers(),
    };
    let mut g = graph.clone();
    // Per node of `graph`: what replaces it (the scan, after its z view; a folded node, as a view).
    let mut replace: Vec<Option<Vec<Node>>> = vec![None; graph.nodes.len()];
    let mut count = 0;
    for i in 0..graph.nodes.len() {
        if let Some(fold) = cx.fold(&mut g, i) {
            for (node, with) in fold {
                replace[node] = Some(with);
            }
            count += 1;
        }
    }
    if count == 0 {
        return None;
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(replace).flat_map(|(n, r)| r.unwrap_or_else(|| vec![n])).collect();
    Some((crate::dce::eliminate(&g), count))
}

/// The graph, its shapes, who reads and who writes each value.
struct Cx<'g> {
    g: &'g Graph,
    infos: &'g [TensorInfo],
    readers: Vec<usize>,
    defs: Vec<Option<(usize, usize)>>,
    consumers: Vec<Vec<crate::graph::NodeId>>,
}

impl Cx<'_> {
    /// Known dims of an f32 value.
    fn dims(&self, v: ValueId) -> Option<Vec<usize>> {
        let info = self.infos.get(v.index()).filter(|i| i.dtype == DType::F32)?;
        Some(info.shape.as_known()?.to_vec())
    }

    /// The node writing `v`.
    fn def(&self, v: ValueId) -> Option<&Node> {
        let (node, _) = self.defs.get(v.index()).copied().flatten()?;
        Some(&self.g.nodes[node])
    }

    /// Whether `v` is read by exactly one node input and is not a graph output.
    fn private(&self, v: ValueId) -> bool {
        self.readers[v.index()] == 1 && !self.g.outputs.contains(&v)
    }

    /// `v` followed through `Reshape`s that only it reads on the way: the last value, and the node
    /// reading it (`None` when it is read by more than one, or is a graph output).
    fn through_views(&self, mut v: ValueId) -> (ValueId, Option<usize>) {
        loop {
            if !self.private(v) {
                return (v, None);
            }
            let reader = self.consumers[v.index()][0].index();
            let n = &self.g.nodes[reader];
            match (&n.op, n.output(0)) {
                (Op::Reshape(_), Some(out)) if n.inputs.first() == Some(&Some(v)) => v = out,
                _ => return (v, Some(reader)),
            }
        }
    }

    /// Whether `v` is `x` or a `Reshape` chain of it with `x`'s dims (element for element `x`).
    fn is_view_of(&self, v: ValueId, x: ValueId) -> bool {
        let mut u = v;
        for _ in 0..8 {
            if u == x {
                return self.dims(v) == self.dims(x);
            }
            match self.def(u) {
                Some(n) if matches!(n.op, Op::Reshape(_)) => match n.inputs.first().copied().flatten() {
                    Some(i) => u = i,
                    None => return false,
                },
                _ => return false,
            }
        }
        false
    }

    /// The operand of binary node `n` (an op `is`) other than `v`, when `n` reads `v` and only
    /// `n` reads the other.
    fn other_operand(&self, n: &Node, is: fn(&Op) -> bool, v: ValueId) -> Option<ValueId> {
        if !is(&n.op) || n.inputs.len() != 2 || !n.inputs.contains(&Some(v)) {
            return None;
        }
        let other = if n.inputs[0] == Some(v) { n.inputs[1]? } else { n.inputs[0]? };
        self.private(other).then_some(other)
    }

    /// `y2 = Mul(y1, z * Sigmoid(z))` in either order, with `z` of `y1`'s dims: `z`.
    fn gate(&self, mul: &Node, y1: ValueId) -> Option<ValueId> {
        let other = self.other_operand(mul, |o| matches!(o, Op::Mul), y1)?;
        let silu = self.def(other)?;
        if !matches!(silu.op, Op::Mul) || silu.inputs.len() != 2 {
            return None;
        }
        for (z, s) in [(silu.inputs[0]?, silu.inputs[1]?), (silu.inputs[1]?, silu.inputs[0]?)] {
            let sig = self.def(s);
            if sig.is_some_and(|n| matches!(n.op, Op::Sigmoid) && n.inputs == [Some(z)])
                && self.private(s)
                && self.dims(z).is_some()
                && self.dims(z) == self.dims(y1)
            {
                return Some(z);
            }
        }
        None
    }

    /// `y1 = Add(y, Mul(D, x'))` in any order, `x'` a view of `x` with `y`'s dims `[b, l, h, p]`:
    /// `D` as the scan takes it (`(h)` or `(h p)`), reshaped from the constant.
    fn skip(&self, add: &Node, y: ValueId, x: ValueId) -> Option<crate::constant::ConstTensor> {
        let other = self.other_operand(add, |o| matches!(o, Op::Add), y)?;
        let dims = self.dims(y)?;
        let &[_, _, h, p] = dims.as_slice() else { return None };
        let mul = self.def(other)?;
        if !matches!(mul.op, Op::Mul) || mul.inputs.len() != 2 || self.dims(other)? != dims {
            return None;
        }
        for (d, xv) in [(mul.inputs[0]?, mul.inputs[1]?), (mul.inputs[1]?, mul.inputs[0]?)] {
            let Some(c) = self.g.constant(d).filter(|c| c.dtype == DType::F32 && c.dims.len() <= 4) else {
                continue;
            };
            if !self.is_view_of(xv, x) {
                continue;
            }
            // D's dims right-aligned against [b, l, h, p]: 1 but for h, and p or 1.
            let mut dd = vec![1; 4 - c.dims.len()];
            dd.extend(&c.dims);
            let per = match dd.as_slice() {
                [1, 1, hh, 1] if *hh == h => h,
                [1, 1, hh, pp] if *hh == h && *pp == p => h * p,
                _ => continue,
            };
            return c.reshaped(vec![per]).ok();
        }
        None
    }

    /// The fold of the skip and gate after node `i` (an `SSDScan` without D and z): the nodes of
    /// `self.g` to replace and what with; new values and constants go into `g`. `None` when
    /// neither folds.
    fn fold(&self, g: &mut Graph, i: usize) -> Option<Vec<(usize, Vec<Node>)>> {
        let n = &self.g.nodes[i];
        let absent = |slot: usize| n.inputs.get(slot).copied().flatten().is_none();
        if !matches!(n.op, Op::SsdScan(_)) || !absent(5) || !absent(6) {
            return None;
        }
        let (x, y) = (n.inputs.first().copied().flatten()?, n.output(0)?);
        let xd = self.dims(x)?;
        // The skip: view(y) + D x.
        let (end, reader) = self.through_views(y);
        let mut skip = None;
        let mut last = (end, reader);
        if let Some(r) = reader
            && self.dims(end).as_ref() == Some(&xd)
            && let Some(c) = self.skip(&self.g.nodes[r], end, x)
            && let Some(out) = self.g.nodes[r].output(0)
        {
            skip = Some((c, r, end));
            last = self.through_views(out);
        }
        // The gate: view(y1) * silu(z), z defined before the scan (its view goes right before it).
        let gate = last.1.and_then(|r| {
            let z = self.gate(&self.g.nodes[r], last.0)?;
            self.defined_before(z, i).then_some((r, z, last.0))
        });
        if skip.is_none() && gate.is_none() {
            return None;
        }
        let name = n.name.clone();
        let mut inputs = n.inputs.clone();
        inputs.resize(inputs.len().max(7), None);
        let mut out = Vec::new();
        // A folded node becomes a view of the value it read from the scan (`Reshape` to its own
        // dims), so its output keeps its id and readers.
        let mut as_view = |g: &mut Graph, node: usize, from: ValueId, tag: &str| -> Option<()> {
            let old = &self.g.nodes[node];
            let dims = self.dims(old.output(0)?)?;
            let shape: Vec<i64> = dims.iter().map(|&s| s as i64).collect();
            let sv = g.const_i64(&format!("{name}:{tag}:shape"), &[shape.len()], &shape);
            let op = Op::Reshape(op::Reshape { allowzero: false });
            let view = Node {
                name: old.name.clone(),
                op,
                inputs: vec![Some(from), Some(sv)],
                outputs: old.outputs.clone(),
            };
            out.push((node, vec![view]));
            Some(())
        };
        if let Some((c, node, from)) = skip {
            let dv = g.add_value(format!("{name}:D"), Some(c.info()));
            g.initializers.insert(dv, c);
            inputs[5] = Some(dv);
            as_view(g, node, from, "skip")?;
        }
        let mut scan = Vec::new();
        if let Some((node, z, from)) = gate {
            let shape: Vec<i64> = xd.iter().map(|&s| s as i64).collect();
            let sv = g.const_i64(&format!("{name}:z:shape"), &[4], &shape);
            let zv = g.add_value(format!("{name}:z"), None);
            scan.push(Node {
                name: format!("{name}:z"),
                op: Op::Reshape(op::Reshape { allowzero: false }),
                inputs: vec![Some(z), Some(sv)],
                outputs: vec![Some(zv)],
            });
            inputs[6] = Some(zv);
            as_view(g, node, from, "gate")?;
        }
        // Trailing absent inputs are dropped again.
        while inputs.last() == Some(&None) {
            inputs.pop();
        }
        scan.push(Node { inputs, ..n.clone() });
        out.push((i, scan));
        Some(out)
    }

    /// Whether `v` is a graph input, an initializer or written by a node before node `i`.
    fn defined_before(&self, v: ValueId, i: usize) -> bool {
        self.defs[v.index()].is_none_or(|(node, _)| node < i)
    }
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::constant::ConstTensor;
    use crate::graph::{Graph, ValueId};
    use crate::op::{self, Op};
    use crate::tensor_info::{DType, Dim};

    /// An `SSDScan` (b 1, l 6, h 2, p 3, n 4) followed by `view(y) + D x` and
    /// `view(y1) · z σ(z)`; with `shared`, the scan's output is also a graph output.
    fn graph(shared: bool) -> (Graph, ValueId) {
        let mut g = Graph::new();
        let input = |g: &mut Graph, name: &str, dims: &[usize]| {
            g.input(name, DType::F32, dims.iter().map(|&d| Dim::Known(d)))
        };
        let x = input(&mut g, "x", &[1, 6, 2, 3]);
        let dt = input(&mut g, "dt", &[1, 6, 2]);
        let a = input(&mut g, "A", &[2]);
        let bm = input(&mut g, "B", &[1, 6, 1, 4]);
        let cm = input(&mut g, "C", &[1, 6, 1, 4]);
        let z = input(&mut g, "z", &[1, 6, 6]);
        let y = g.op1(Op::SsdScan(op::SsdScan::default()), &[x, dt, a, bm, cm]);
        let d = g.initializer("D", ConstTensor::from_f32(&[2, 1], &[0.5, -2.0]).unwrap());
        let dx = g.op1(Op::Mul, &[d, x]);
        let shape = g.const_i64("flat", &[3], &[1, 6, 6]);
        let y1 = g.op1(Op::Add, &[y, dx]);
        let flat = g.op1(Op::Reshape(op::Reshape { allowzero: false }), &[y1, shape]);
        let sig = g.op1(Op::Sigmoid, &[z]);
        let silu = g.op1(Op::Mul, &[z, sig]);
        let out = g.op1(Op::Mul, &[flat, silu]);
        g.output(out);
        if shared {
            g.output(y);
        }
        (g, out)
    }

    #[test]
    fn the_skip_and_gate_fold_into_the_scan_unless_read_elsewhere() {
        let (g, out) = graph(false);
        let infos = crate::shape_infer::infer(&g).unwrap();
        let (folded, n) = run(&g, &infos).expect("folds");
        assert_eq!(n, 1);
        let scan = folded.nodes.iter().find(|n| matches!(n.op, Op::SsdScan(_))).unwrap();
        let d = scan.inputs[5].and_then(|v| folded.constant(v)).expect("D is a constant");
        assert_eq!((d.dims.as_slice(), d.to_f64s()), (&[2][..], vec![0.5, -2.0]));
        assert!(scan.inputs[6].is_some(), "z");
        assert!(!folded.nodes.iter().any(|n| matches!(n.op, Op::Sigmoid | Op::Add | Op::Mul)));
        let name = |g: &Graph, v: ValueId| g.values[v.index()].name.clone();
        assert_eq!(folded.outputs.iter().map(|&v| name(&folded, v)).collect::<Vec<_>>(), [name(&g, out)]);
        // A scan output read elsewhere keeps both (they would change what it reads).
        let (g, _) = graph(true);
        let infos = crate::shape_infer::infer(&g).unwrap();
        assert!(run(&g, &infos).is_none());
    }
}
