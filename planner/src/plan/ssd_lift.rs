//! Mamba-2's chunked SSD, as transformers' `torch_forward` spells it (`ssd_minimal_discrete`
//! without the fused kernels), becomes the one `SSDScan` it computes (OPS.md "Mamba-2 SSD").
//!
//! The export computes, per chunk of `l` steps (`c` chunks, `xd = x·dt`, `ad = A·dt`, padded to
//! whole chunks and viewed as `[b, c, l, ...]`; `t` is `ad` as `[b, h, c, l]`):
//!
//! ```text
//! acs    = CumSum(t, -1)                          L  = exp(segsum(t))            [b,h,c,l,s]
//! G      = Σ_n C[b,c,l,h,n] B[b,c,s,h,n]          M  = G[b,c,l,s,h] L[b,h,c,l,s]
//! Ydiag  = Σ_s M[b,c,l,s,h] X[b,c,s,h,p]
//! decay  = exp(acs[..., -1:] - acs)               Bd = B[b,c,l,h,n] decay[b,h,c,l]
//! states = Σ_l Bd[b,c,l,h,n] X[b,c,l,h,p]         S  = Concat(0, states; axis 1) [b,c+1,h,p,n]
//! Dc     = exp(segsum(Pad(acs[..., -1], (1, 0)))) new = Σ_c Dc[b,h,z,c] S[b,c,h,p,n]
//! Yoff   = (Σ_n C[b,c,l,h,n] new[:, :-1][b,c,h,p,n]) exp(acs)[b,h,c,l]
//! y      = Ydiag + Yoff                                                          [b,c,l,h,p]
//! ```
//!
//! where `segsum(v)[.., i, j] = Σ_{j<k≤i} v[k]` (`-inf` above the diagonal) is spelled
//! `Where(mask, -inf, CumSum(Where(mask', 0, Expand(Unsqueeze(v, -1))), -2))`. Each contraction
//! is a `ReduceSum` of a `Mul` (or a `Mul` alone) of operands viewed through `Unsqueeze` and
//! `Transpose`; they are read as einsums over their operands' own axes (`Contraction`), so any
//! order of operands, views and summed unit axes matches, and every node between `y` and the
//! inputs is checked: op, axes, masks, pads, slices and shapes. `y` becomes
//! `Reshape(Pad(SSDScan(x, dt, A, B, C)))`: the scan over the unpadded steps, padded with zeros
//! as the chunked form's padded steps are (their `C` is zero), viewed as chunks. `B` and `C` are
//! read before transformers' `repeat_interleave` over the heads when they were repeated (the
//! scan's groups). When `dt` is transformers' `clamp(softplus(dt + dt_bias), lo, hi)` (torch's
//! softplus thresholded at 20: `Where(u > 20, u, Softplus(u))`), the scan takes that over
//! (`dt_softplus`, `dt_bias`, `dt_min`, `dt_max`). Anything else is left as it is and still runs,
//! unlifted.
//!
//! From 32 steps on `SSDScan` runs chunked on the GPU (`ssd_chunk_f32`, the same chunked form as
//! one kernel), below that recurrently; sequences longer than [`LONG`] lift only where that
//! kernel's blocks fill the device.
//!
//! It runs before `contract.rs`, which would rewrite the contractions into Einsums and the
//! decomposition into batched MatMuls and transposes (Mamba2's 56 steps a layer).

use std::collections::HashMap;

use kernels_gpu::abi::SSD_CHUNK_MIN_TILE;

use super::contract::reshape;
use super::reduce::axis_index;
use super::scan_lift::repeated_constant;
use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op, PadMode};
use crate::tensor_info::{DType, TensorInfo};

/// Sequences longer than this lift only where the chunked kernel fills the device, unless its
/// chunks run in spans (`PlanOptions::ssd_spans`, on by default: then it always lifts).
/// In one span `ssd_chunk_f32` runs its chunks in order, a block per `(b, h)` and at least
/// `SSD_CHUNK_MIN_TILE` (8) head channels: at batch 1 x 2048 (Mamba2, 4 layers, d 256, 64 blocks
/// on an H100's 132 multiprocessors) the lifted model took 2654 µs against the chunked form's
/// 2331, whose contractions run every chunk at once; at batch 4 x 2048 (256 blocks) 4607 against
/// 6427, and at 256 steps it wins from batch 1 (465 against 727; session 39, `benches/results/`).
pub(super) const LONG: usize = 512;

/// `graph` with every chunked SSD of the module doc lifted to an `SSDScan`, and how many; `None`
/// when there is none. Shapes are inferred here (only for a graph with a `CumSum`). With
/// `sm_count` (given when the scan runs in one span), an SSD of more than [`LONG`] steps lifts
/// only when its scan's blocks number at least the multiprocessors.
pub(super) fn run(graph: &Graph, sm_count: Option<u32>) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::CumSum(_))) {
        return None;
    }
    let infos = crate::shape_infer::infer(graph).ok()?;
    let cx = Cx { g: graph, infos: &infos, defs: super::fuse::producers(graph), sm_count };
    let found: Vec<(usize, Ssd)> = (0..graph.nodes.len()).filter_map(|i| cx.ssd(i).map(|s| (i, s))).collect();
    if found.is_empty() {
        return None;
    }
    let mut g = graph.clone();
    let mut replace: Vec<Option<Vec<Node>>> = vec![None; graph.nodes.len()];
    for (i, s) in &found {
        let name = graph.node_label(crate::graph::NodeId(*i as u32));
        replace[*i] = Some(s.nodes(&mut g, &name));
    }
    let nodes = std::mem::take(&mut g.nodes);
    g.nodes = nodes.into_iter().zip(replace).flat_map(|(n, r)| r.unwrap_or_else(|| vec![n])).collect();
    Some((crate::dce::eliminate(&g), found.len()))
}

/// `dt = Clip(softplus(raw + bias), min, max)` as the scan takes it (`dt_softplus` on).
struct DtChain {
    raw: ValueId,
    bias: ValueId,
    min: Option<f32>,
    max: Option<f32>,
}

/// A chunked SSD that lifts: its operands and the chunked output it computes.
struct Ssd {
    x: ValueId,
    dt: ValueId,
    /// How `dt` was computed from its projection, when the scan takes that over.
    chain: Option<DtChain>,
    a: ValueId,
    b: ValueId,
    c: ValueId,
    /// The steps padded by `pad` more and viewed as `chunks` (`[b, c, l, h, p]`).
    pad: usize,
    chunks: [usize; 5],
    y: ValueId,
}

impl Ssd {
    /// `y = Reshape(Pad(SSDScan(x, dt, A, B, C)))`.
    fn nodes(&self, g: &mut Graph, name: &str) -> Vec<Node> {
        let tag = |t: &str| format!("{name}:ssd:{t}");
        let ys = g.add_value(tag("y"), None);
        let (dt, attrs, bias) = match &self.chain {
            Some(c) => {
                let attrs =
                    op::SsdScan { dt_softplus: true, dt_min: c.min, dt_max: c.max, ..Default::default() };
                (c.raw, attrs, Some(c.bias))
            }
            None => (self.dt, op::SsdScan::default(), None),
        };
        let mut inputs: Vec<_> = [self.x, dt, self.a, self.b, self.c].into_iter().map(Some).collect();
        if bias.is_some() {
            inputs.extend([None, None, bias]);
        }
        let scan =
            Node { name: format!("{name}:ssd"), op: Op::SsdScan(attrs), inputs, outputs: vec![Some(ys)] };
        let mut nodes = vec![scan];
        let padded = if self.pad > 0 {
            let pads = g.const_i64(&tag("pads"), &[8], &[0, 0, 0, 0, 0, self.pad as i64, 0, 0]);
            let out = g.add_value(tag("padded"), None);
            let op = Op::Pad(op::Pad { mode: PadMode::Constant, pads: None, value: None });
            nodes.push(Node {
                name: tag("pad"),
                op,
                inputs: vec![Some(ys), Some(pads)],
                outputs: vec![Some(out)],
            });
            out
        } else {
            ys
        };
        nodes.push(reshape(g, padded, &self.chunks, tag("chunks"), Some(self.y)).0);
        nodes
    }
}

/// A product of two operands summed over some of its axes: each operand a value viewed through
/// `Unsqueeze` / `Transpose` (for each product axis, the operand's axis there, or none).
struct Contraction {
    operands: [(ValueId, Vec<Option<usize>>); 2],
    /// The product's dims and which of its axes are summed.
    dims: Vec<usize>,
    summed: Vec<bool>,
}

/// The graph's producers and shapes.
struct Cx<'g> {
    g: &'g Graph,
    infos: &'g [TensorInfo],
    defs: Vec<Option<(usize, usize)>>,
    /// The device's multiprocessors, for the [`LONG`] gate (none: every length lifts).
    sm_count: Option<u32>,
}

impl<'g> Cx<'g> {
    fn dims(&self, v: ValueId) -> Option<Vec<usize>> {
        self.infos.get(v.index()).and_then(|i| i.shape.as_known())
    }

    fn f32(&self, v: ValueId) -> bool {
        self.infos.get(v.index()).is_some_and(|i| i.dtype == DType::F32)
    }

    /// The node defining `v` (its only output's first slot).
    fn def(&self, v: ValueId) -> Option<&'g Node> {
        match self.defs.get(v.index()).copied().flatten() {
            Some((i, 0)) => Some(&self.g.nodes[i]),
            _ => None,
        }
    }

    /// Input `slot` of `n`.
    fn arg(n: &Node, slot: usize) -> Option<ValueId> {
        n.inputs.get(slot).copied().flatten()
    }

    /// A constant operand's integers (an absent operand: `None`).
    fn ints(&self, v: Option<ValueId>) -> Option<Vec<i64>> {
        self.g.constant(v?)?.to_i64s()
    }

    /// The one value every element of `v` has: a constant's, or that of a constant `Expand`ed.
    fn uniform(&self, v: ValueId) -> Option<f64> {
        let all = repeated_constant(self.g, &self.defs, v)?.to_f64s();
        let first = *all.first()?;
        all.iter().all(|&x| x == first || (x.is_nan() && first.is_nan())).then_some(first)
    }

    /// `v`'s base value before its `Unsqueeze` / `Transpose` views, and for each of `v`'s axes
    /// the base's axis there (none: an inserted unit axis).
    fn view(&self, v: ValueId) -> Option<(ValueId, Vec<Option<usize>>)> {
        let rank = self.dims(v)?.len();
        let Some(n) = self.def(v) else { return Some((v, (0..rank).map(Some).collect())) };
        match &n.op {
            Op::Unsqueeze(u) => {
                let axes = match &u.axes {
                    Some(a) => a.clone(),
                    None => self.ints(Self::arg(n, 1))?,
                };
                let inserted: Vec<usize> =
                    axes.iter().map(|&a| axis_index(a, rank).ok()).collect::<Option<_>>()?;
                let (base, inner) = self.view(Self::arg(n, 0)?)?;
                let mut next = inner.into_iter();
                let mut map = Vec::with_capacity(rank);
                for i in 0..rank {
                    map.push(if inserted.contains(&i) { None } else { next.next()? });
                }
                next.next().is_none().then_some((base, map))
            }
            Op::Transpose(t) => {
                let perm = t.perm.clone().unwrap_or_else(|| (0..rank).rev().collect());
                let (base, inner) = self.view(Self::arg(n, 0)?)?;
                (perm.len() == rank && inner.len() == rank)
                    .then(|| (base, perm.iter().map(|&p| inner.get(p).copied().flatten()).collect()))
            }
            _ => Some((v, (0..rank).map(Some).collect())),
        }
    }

    /// `v` as `ReduceSum(Mul(a, b), axes)` (`keepdims` 0), `Mul(a, b)` or a two-operand
    /// `Einsum`.
    fn contraction(&self, v: ValueId) -> Option<Contraction> {
        let n = self.def(v)?;
        let (product, summed_axes) = match &n.op {
            Op::Einsum(e) => return self.einsum_node(n, &e.equation),
            Op::ReduceSum(r) if !r.keepdims => {
                let axes = match &r.axes {
                    Some(a) => a.clone(),
                    None => self.ints(Self::arg(n, 1))?,
                };
                (Self::arg(n, 0)?, axes)
            }
            Op::Mul => (v, Vec::new()),
            _ => return None,
        };
        let mul = self.def(product).filter(|m| matches!(m.op, Op::Mul))?;
        let dims = self.dims(product)?;
        let rank = dims.len();
        let mut summed = vec![false; rank];
        for a in summed_axes {
            summed[axis_index(a, rank).ok()?] = true;
        }
        let operand = |slot| {
            let (base, map) = self.view(Self::arg(mul, slot)?)?;
            (map.len() == rank).then_some((base, map))
        };
        Some(Contraction { operands: [operand(0)?, operand(1)?], dims, summed })
    }

    /// An explicit two-operand `Einsum` (no ellipsis, no repeated letter in an operand) as a
    /// contraction: its product's axes are the output's letters, then the summed ones.
    fn einsum_node(&self, n: &Node, equation: &str) -> Option<Contraction> {
        let equation: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (ins, out) = equation.split_once("->")?;
        let specs: Vec<&str> = ins.split(',').collect();
        let unique = |s: &str| s.chars().enumerate().all(|(i, c)| !s.chars().skip(i + 1).any(|d| d == c));
        if specs.len() != 2 || equation.contains('.') || !unique(out) || !specs.iter().all(|s| unique(s)) {
            return None;
        }
        let mut letters: Vec<char> = out.chars().collect();
        for c in specs.iter().flat_map(|s| s.chars()) {
            if !letters.contains(&c) {
                letters.push(c);
            }
        }
        let mut dims = vec![None; letters.len()];
        let mut operands = Vec::with_capacity(2);
        for (k, spec) in specs.iter().enumerate() {
            let v = Self::arg(n, k)?;
            let (base, vmap) = self.view(v)?;
            let vd = self.dims(v)?;
            if vd.len() != spec.len() {
                return None;
            }
            let mut map = vec![None; letters.len()];
            for (pos, c) in spec.chars().enumerate() {
                let i = letters.iter().position(|&l| l == c)?;
                if *dims[i].get_or_insert(vd[pos]) != vd[pos] {
                    return None;
                }
                map[i] = vmap[pos];
            }
            operands.push((base, map));
        }
        let dims: Option<Vec<usize>> = dims.into_iter().collect();
        let summed = (0..letters.len()).map(|i| i >= out.chars().count()).collect();
        let [a, b]: [(ValueId, Vec<Option<usize>>); 2] = operands.try_into().ok()?;
        Some(Contraction { operands: [a, b], dims: dims?, summed })
    }

    /// The two operands of the contraction `v` as the einsum `specs -> out` (letters: the
    /// operands' axes, in order), in the order of `specs`.
    fn einsum(&self, v: ValueId, specs: [&str; 2], out: &str) -> Option<[ValueId; 2]> {
        let c = self.contraction(v)?;
        [[0, 1], [1, 0]].into_iter().find_map(|order| {
            let mut axis_of: HashMap<char, usize> = HashMap::new();
            for (spec, &k) in specs.iter().zip(&order) {
                let (base, map) = &c.operands[k];
                let dims = self.dims(*base)?;
                if spec.len() != dims.len() {
                    return None;
                }
                for (j, letter) in spec.chars().enumerate() {
                    // Each of the operand's axes lies at one product axis, of its size.
                    let mut at = map.iter().enumerate().filter(|(_, m)| **m == Some(j)).map(|(i, _)| i);
                    let (Some(i), None) = (at.next(), at.next()) else { return None };
                    if dims[j] != c.dims[i] || *axis_of.entry(letter).or_insert(i) != i {
                        return None;
                    }
                }
            }
            let mut axes: Vec<usize> = axis_of.values().copied().collect();
            axes.sort_unstable();
            axes.dedup();
            if axes.len() != axis_of.len() {
                return None; // two letters at one axis
            }
            let want: Option<Vec<usize>> = out.chars().map(|l| axis_of.get(&l).copied()).collect();
            let kept: Vec<usize> = (0..c.dims.len()).filter(|&i| !c.summed[i]).collect();
            (want? == kept).then(|| [c.operands[order[0]].0, c.operands[order[1]].0])
        })
    }

    /// The input of the unary op `op` defining `v`.
    fn unary(&self, v: ValueId, op: fn(&Op) -> bool) -> Option<ValueId> {
        self.def(v).filter(|n| op(&n.op)).and_then(|n| Self::arg(n, 0))
    }

    /// A boolean matrix over the last two axes of `v` (rows, columns, row-major): a constant,
    /// `Not`, `Trilu` (k constant) or the `Expand` of a constant scalar.
    fn mask(&self, v: ValueId) -> Option<(usize, usize, Vec<bool>)> {
        let dims = self.dims(v)?;
        let &[.., rows, cols] = dims.as_slice() else { return None };
        if dims[..dims.len() - 2].iter().any(|&d| d != 1) {
            return None;
        }
        if let Some(c) = self.g.constant(v) {
            return Some((rows, cols, c.to_f64s().iter().map(|&x| x != 0.0).collect()));
        }
        let n = self.def(v)?;
        match &n.op {
            Op::Not => {
                let (r, c, m) = self.mask(Self::arg(n, 0)?)?;
                Some((r, c, m.into_iter().map(|b| !b).collect()))
            }
            Op::Trilu(t) => {
                let (r, c, m) = self.mask(Self::arg(n, 0)?)?;
                let k = match Self::arg(n, 1) {
                    Some(k) => *self.ints(Some(k))?.first()?,
                    None => 0,
                };
                let keep = |i: usize, j: usize| {
                    let d = j as i64 - i as i64;
                    if t.upper { d >= k } else { d <= k }
                };
                Some((r, c, m.iter().enumerate().map(|(e, &b)| b && keep(e / c, e % c)).collect()))
            }
            Op::Expand => {
                let x = self.uniform(v)?;
                Some((rows, cols, vec![x != 0.0; rows * cols]))
            }
            _ => None,
        }
    }

    /// `Where(mask, fill, data)` (or `Where(mask', data, fill)`) filling exactly the positions
    /// `fill_at(i, j)` of its last two axes with the constant `fill`: `data`.
    fn masked(&self, v: ValueId, fill: f64, fill_at: fn(usize, usize) -> bool) -> Option<ValueId> {
        let n = self.def(v).filter(|n| matches!(n.op, Op::Where))?;
        let (cond, a, b) = (Self::arg(n, 0)?, Self::arg(n, 1)?, Self::arg(n, 2)?);
        let same = |x: f64| x == fill;
        let (data, filled_when) = match (self.uniform(a), self.uniform(b)) {
            (Some(x), _) if same(x) => (b, true),
            (_, Some(x)) if same(x) => (a, false),
            _ => return None,
        };
        let (rows, cols, m) = self.mask(cond)?;
        let ok = m.iter().enumerate().all(|(e, &c)| (c == filled_when) == fill_at(e / cols, e % cols));
        let data_dims = self.dims(data)?;
        (ok && data_dims.len() >= 2 && data_dims[data_dims.len() - 2..] == [rows, cols]).then_some(data)
    }

    /// `v = exp(segsum(t))` (module doc): `t`.
    fn exp_segsum(&self, v: ValueId) -> Option<ValueId> {
        let s = self.unary(v, |o| matches!(o, Op::Exp))?;
        let cs = self.masked(s, f64::NEG_INFINITY, |i, j| j > i)?;
        let n = self.def(cs).filter(|n| matches!(&n.op, Op::CumSum(c) if !c.exclusive && !c.reverse))?;
        let rank = self.dims(cs)?.len() as i64;
        let axis = *self.ints(Self::arg(n, 1))?.first()?;
        if axis != rank - 2 && axis != -2 {
            return None;
        }
        let e = self.masked(Self::arg(n, 0)?, 0.0, |i, j| j >= i)?;
        let expand = self.def(e).filter(|n| matches!(n.op, Op::Expand))?;
        let u = self.def(Self::arg(expand, 0)?).filter(|n| matches!(n.op, Op::Unsqueeze(_)))?;
        let t = Self::arg(u, 0)?;
        let (td, ud, ed) = (self.dims(t)?, self.dims(Self::arg(expand, 0)?)?, self.dims(e)?);
        let axes = match &u.op {
            Op::Unsqueeze(op::Unsqueeze { axes: Some(a) }) => a.clone(),
            _ => self.ints(Self::arg(u, 1))?,
        };
        let last = *td.last()?;
        let at_end = axes == [-1] || axes == [td.len() as i64];
        (at_end && ud == [td.as_slice(), &[1]].concat() && ed == [td.as_slice(), &[last]].concat())
            .then_some(t)
    }

    /// `v = Pad(w, pads)` padding with zeros (constant mode, no `axes`): `(w, pads)`.
    fn zero_padded(&self, v: ValueId) -> Option<(ValueId, Vec<i64>)> {
        let p = self
            .def(v)
            .filter(|n| matches!(&n.op, Op::Pad(pd) if pd.mode == PadMode::Constant && pd.pads.is_none()))?;
        let zero_fill = Self::arg(p, 2).is_none_or(|f| self.uniform(f) == Some(0.0));
        (zero_fill && Self::arg(p, 3).is_none()).then_some((Self::arg(p, 0)?, self.ints(Self::arg(p, 1))?))
    }

    /// `v = Reshape(Pad(w))` (the Pad optional) with `w` of dims `[b, L, rest..]` padded at the
    /// end of axis 1 by `pad` and viewed as `[b, c, l, rest..]`: `(w, pad)`.
    fn chunked(&self, v: ValueId, c: usize, l: usize) -> Option<(ValueId, usize)> {
        let r = self.def(v).filter(|n| matches!(n.op, Op::Reshape(_)))?;
        let inner = Self::arg(r, 0)?;
        let (w, pad) = match self.def(inner).filter(|n| matches!(n.op, Op::Pad(_))) {
            Some(_) => {
                let (w, pads) = self.zero_padded(inner)?;
                let rank = self.dims(w)?.len();
                let only_end_of_axis_1 = pads.len() == 2 * rank
                    && pads.iter().enumerate().all(|(i, &x)| i == rank + 1 || x == 0)
                    && pads[rank + 1] >= 0;
                if !only_end_of_axis_1 {
                    return None;
                }
                (w, pads[rank + 1] as usize)
            }
            None => (inner, 0),
        };
        let (wd, vd) = (self.dims(w)?, self.dims(v)?);
        let ok = wd.len() >= 2
            && wd[1] + pad == c * l
            && vd == [&[wd[0], c, l][..], &wd[2..]].concat()
            && self.f32(w);
        ok.then_some((w, pad))
    }

    /// `Slice(v, start, end, axis)` with step 1: `v`, when it takes `[lo, hi)` of that axis.
    fn sliced(&self, s: ValueId, axis: usize, lo: usize, hi: usize) -> Option<ValueId> {
        let n = self.def(s).filter(|n| matches!(&n.op, Op::Slice(sl) if sl.starts.is_none()))?;
        let v = Self::arg(n, 0)?;
        let vd = self.dims(v)?;
        let len = *vd.get(axis)? as i64;
        let norm = |x: i64| if x < 0 { (x + len).max(0) } else { x.min(len) };
        let (starts, ends) = (self.ints(Self::arg(n, 1))?, self.ints(Self::arg(n, 2))?);
        let axes = match Self::arg(n, 3) {
            Some(a) => self.ints(Some(a))?,
            None => (0..vd.len() as i64).collect(),
        };
        let steps = match Self::arg(n, 4) {
            Some(s) => self.ints(Some(s))?,
            None => vec![1; axes.len()],
        };
        let [start, end, ax, step] = [&starts, &ends, &axes, &steps].map(|x| x.first().copied());
        let ax = axis_index(ax?, vd.len()).ok()?;
        let one = starts.len() == 1 && ends.len() == 1 && axes.len() == 1 && steps.len() == 1;
        (one && ax == axis && step == Some(1) && norm(start?) == lo as i64 && norm(end?) == hi as i64)
            .then_some(v)
    }

    /// `v = Mul(u, w)` with `u` of dims `du` and `w` a view of `of` with `map`: `u`.
    fn scaled(&self, v: ValueId, of: ValueId, map: &[Option<usize>]) -> Option<ValueId> {
        let n = self.def(v).filter(|n| matches!(n.op, Op::Mul))?;
        let (a, b) = (Self::arg(n, 0)?, Self::arg(n, 1)?);
        [(a, b), (b, a)].into_iter().find_map(|(u, w)| {
            let (base, m) = self.view(w)?;
            (base == of && m == map && self.dims(u)? == self.dims(v)?).then_some(u)
        })
    }

    /// B or C `[b, L, h, n]` as the `[b, L, G, n]` transformers' `repeat_interleave` over the
    /// heads read (`Reshape(Expand(Unsqueeze(v, 3)))`), with G; else itself with `G = h`.
    fn groups(&self, v: ValueId) -> Option<(ValueId, usize)> {
        let dims = self.dims(v)?;
        let &[b, l, h, n] = dims.as_slice() else { return None };
        let grouped = || {
            let r = self.def(v).filter(|r| matches!(r.op, Op::Reshape(_)))?;
            let e = self.def(Self::arg(r, 0)?).filter(|e| matches!(e.op, Op::Expand))?;
            let ed = self.dims(e.outputs.first().copied().flatten()?)?;
            let (base, map) = self.view(Self::arg(e, 0)?)?;
            let &[_, _, g, per, _] = ed.as_slice() else { return None };
            let ok = g * per == h
                && ed == [b, l, g, per, n]
                && self.dims(base)? == [b, l, g, n]
                && map == [Some(0), Some(1), Some(2), None, Some(3)];
            ok.then_some((base, g))
        };
        Some(grouped().unwrap_or((v, h)))
    }

    /// `dt` as transformers computes it from its projection `raw`: `Clip(softplus(raw + bias),
    /// lo, hi)` (the Clip optional), its softplus `Softplus(u)` or torch's thresholded
    /// `Where(u > t, u, Softplus(u))` with `t >= 20` (where `softplus(u) = u` in f32), `bias` of
    /// dims `[h]`: the scan's `dt`, `dt_bias`, `dt_min` and `dt_max` (none past ±inf).
    fn dt_chain(&self, dt: ValueId, h: usize) -> Option<DtChain> {
        let (v, lo, hi) = match self.def(dt) {
            Some(n) if matches!(n.op, Op::Clip(_)) => {
                let Op::Clip(c) = &n.op else { return None };
                let bound = |attr: Option<f32>, slot: usize| -> Option<Option<f32>> {
                    match (attr, Self::arg(n, slot)) {
                        (Some(a), None) => Some(Some(a)),
                        (None, Some(v)) => Some(Some(self.uniform(v)? as f32)),
                        (None, None) => Some(None),
                        (Some(_), Some(_)) => None,
                    }
                };
                let finite = |b: Option<f32>| b.filter(|x| x.is_finite());
                (Self::arg(n, 0)?, finite(bound(c.min, 1)?), finite(bound(c.max, 2)?))
            }
            _ => (dt, None, None),
        };
        let u = self.softplus_of(v)?;
        let add = self.def(u).filter(|n| matches!(n.op, Op::Add))?;
        let (p, q) = (Self::arg(add, 0)?, Self::arg(add, 1)?);
        let ud = self.dims(u)?;
        let (raw, bias) = [(p, q), (q, p)]
            .into_iter()
            .find(|&(raw, bias)| self.dims(bias) == Some(vec![h]) && self.dims(raw).as_ref() == Some(&ud))?;
        (self.f32(raw) && self.f32(bias)).then_some(DtChain { raw, bias, min: lo, max: hi })
    }

    /// `v = softplus(u)`, as `Softplus(u)` or `Where(Greater(u, t), u, Softplus(u))`, `t >= 20`:
    /// `u`.
    fn softplus_of(&self, v: ValueId) -> Option<ValueId> {
        if let Some(u) = self.unary(v, |o| matches!(o, Op::Softplus)) {
            return Some(u);
        }
        let w = self.def(v).filter(|n| matches!(n.op, Op::Where))?;
        let (cond, then, other) = (Self::arg(w, 0)?, Self::arg(w, 1)?, Self::arg(w, 2)?);
        let gt = self.def(cond).filter(|n| matches!(n.op, Op::Greater))?;
        let u = Self::arg(gt, 0)?;
        let threshold = self.uniform(Self::arg(gt, 1)?)?;
        (threshold >= 20.0 && then == u && self.unary(other, |o| matches!(o, Op::Softplus)) == Some(u))
            .then_some(u)
    }

    /// The chunked SSD whose output `y = Ydiag + Yoff` node `i` computes (module doc).
    fn ssd(&self, i: usize) -> Option<Ssd> {
        let n = &self.g.nodes[i];
        if !matches!(n.op, Op::Add) {
            return None;
        }
        let y = n.outputs.first().copied().flatten()?;
        let yd = self.dims(y)?;
        let &[bs, c, l, h, p] = yd.as_slice() else { return None };
        let (u, w) = (Self::arg(n, 0)?, Self::arg(n, 1)?);
        [(u, w), (w, u)].into_iter().find_map(|(ydiag, yoff)| self.ssd_of(ydiag, yoff, y, [bs, c, l, h, p]))
    }

    fn ssd_of(&self, ydiag: ValueId, yoff: ValueId, y: ValueId, yd: [usize; 5]) -> Option<Ssd> {
        let [bs, c, l, h, p] = yd;
        // Ydiag = Σ_s M X, M = G L, G = Σ_n C B, L = exp(segsum(t)).
        let [m, xc] = self.einsum(ydiag, ["bclsh", "bcshp"], "bclhp")?;
        let [gm, lm] = self.einsum(m, ["bclsh", "bhcls"], "bclsh")?;
        let [cc, bc] = self.einsum(gm, ["bclhn", "bcshn"], "bclsh")?;
        let t = self.exp_segsum(lm)?;
        // Yoff = (Σ_n C new[:, :-1]) exp(acs), acs = CumSum(t, -1).
        let [cs, eo] = self.einsum(yoff, ["bclhp", "bhcl"], "bclhp")?;
        let acs = self.unary(eo, |o| matches!(o, Op::Exp))?;
        let cum = self.def(acs).filter(|n| matches!(&n.op, Op::CumSum(s) if !s.exclusive && !s.reverse))?;
        let axis = *self.ints(Self::arg(cum, 1))?.first()?;
        if Self::arg(cum, 0)? != t || !(axis == -1 || axis == 3) || self.dims(t)? != [bs, h, c, l] {
            return None;
        }
        let [cc2, st] = self.einsum(cs, ["bclhn", "bchpn"], "bclhp")?;
        let new = self.sliced(st, 1, 0, c)?;
        let [dc, scat] = self.einsum(new, ["bhzc", "bchpn"], "bzhpn")?;
        // Dc = exp(segsum(Pad(acs[..., -1], (1, 0)))).
        let totals = self.exp_segsum(dc)?;
        let (chunk_totals, pads) = self.zero_padded(totals)?;
        if pads != [0, 0, 1, 0, 0, 0] {
            return None;
        }
        let last = self
            .def(chunk_totals)
            .filter(|n| matches!(&n.op, Op::Gather(g) if g.axis == 3 || g.axis == -1))?;
        let index = *self.ints(Self::arg(last, 1))?.first()?;
        let scalar_index = self.dims(Self::arg(last, 1)?)?.is_empty();
        if Self::arg(last, 0)? != acs || !scalar_index || !(index == -1 || index == l as i64 - 1) {
            return None;
        }
        // S = Concat(0, states), states = Σ_l Bd X, Bd = B exp(acs[..., -1:] - acs).
        let cat = self
            .def(scat)
            .filter(|n| matches!(&n.op, Op::Concat(k) if k.axis == 1) && n.inputs.len() == 2)?;
        let (zero, states) = (Self::arg(cat, 0)?, Self::arg(cat, 1)?);
        if self.uniform(zero) != Some(0.0) || self.dims(zero)?.get(1) != Some(&1) {
            return None;
        }
        let [bd, xc2] = self.einsum(states, ["bclhn", "bclhp"], "bchpn")?;
        let [bc2, ds] = self.einsum(bd, ["bclhn", "bhcl"], "bclhn")?;
        let sub = self.def(self.unary(ds, |o| matches!(o, Op::Exp))?).filter(|n| matches!(n.op, Op::Sub))?;
        if Self::arg(sub, 1)? != acs || self.sliced(Self::arg(sub, 0)?, 3, l - 1, l)? != acs {
            return None;
        }
        if cc2 != cc || bc2 != bc || xc2 != xc {
            return None;
        }
        // The chunks: X = chunks(x·dt), B, C = chunks(B, C), t = chunks(A·dt) as [b, h, c, l].
        let (xd, pad_x) = self.chunked(xc, c, l)?;
        let (bh, pad_b) = self.chunked(bc, c, l)?;
        let (ch, pad_c) = self.chunked(cc, c, l)?;
        let (tb, map) = self.view(t)?;
        if map != [Some(0), Some(3), Some(1), Some(2)] {
            return None;
        }
        let (ad, pad_a) = self.chunked(tb, c, l)?;
        let len = self.dims(xd)?[1];
        if [pad_b, pad_c, pad_a] != [pad_x; 3] || len + pad_x != c * l {
            return None;
        }
        if let (Some(sms), &[b, _, h, p]) = (self.sm_count, self.dims(xd)?.as_slice())
            && len > LONG
            && b * h * p.div_ceil(SSD_CHUNK_MIN_TILE as usize) < sms as usize
        {
            return None;
        }
        // x·dt = Mul(x, Unsqueeze(dt, -1)), A·dt = Mul(A, dt).
        let mul = self.def(ad).filter(|n| matches!(n.op, Op::Mul))?;
        let (m0, m1) = (Self::arg(mul, 0)?, Self::arg(mul, 1)?);
        let (a, dt) = [(m0, m1), (m1, m0)]
            .into_iter()
            .find(|&(a, dt)| self.dims(a) == Some(vec![h]) && self.dims(dt) == Some(vec![bs, len, h]))?;
        let x = self.scaled(xd, dt, &[Some(0), Some(1), Some(2), None])?;
        // B and C in their groups when both were repeated alike, else both per head.
        let ((b, gb), (cm, gc)) = (self.groups(bh)?, self.groups(ch)?);
        let (b, cm) = if gb == gc { (b, cm) } else { (bh, ch) };
        let f32s = [x, dt, a, b, cm].iter().all(|&v| self.f32(v));
        (f32s && self.dims(x)? == [bs, len, h, p]).then_some(Ssd {
            x,
            dt,
            chain: self.dt_chain(dt, h),
            a,
            b,
            c: cm,
            pad: pad_x,
            chunks: [bs, c, l, h, p],
            y,
        })
    }
}

#[cfg(test)]
#[path = "ssd_lift_tests.rs"]
mod tests;
