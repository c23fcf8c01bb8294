//! RMS normalizations spelled out as elementwise ops and a mean become the `RMSNormalization`
//! they are (one row kernel instead of four to six launches and their round trips through
//! memory). Transformers' `LlamaRMSNorm`, `GemmaRMSNorm`, `MambaRMSNorm` (and their relatives)
//! compute `x * rsqrt(mean(x², -1, keepdim) + eps) * w`; exporters write that as
//!
//! ```text
//! v = Add(ReduceMean(Pow(x, 2) | Mul(x, x), trailing axes, keepdims), eps)
//! y = Mul(x, Reciprocal(Sqrt(v)) | Pow(v, -0.5) | Div(1, Sqrt(v)))  or  Div(x, Sqrt(v))
//! ```
//!
//! (operands of the Muls and the Add in either order), optionally followed by `Mul(y, scale)`
//! with `scale` broadcasting over the normalized (trailing) dims only, directly or through a
//! Reshape that keeps the normalized dims (a grouped norm of one group viewed back to its rows,
//! as transformers' `MambaRMSNormGated` writes it). That becomes
//! `RMSNormalization(x, scale, axis = first reduced axis, epsilon = eps)`, with a ones scale when
//! there is none. Intermediates read elsewhere stay computed for their other readers (dead-node
//! elimination removes the rest). f32 only, shapes known.

use super::reduce::axis_index;
use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::{DType, TensorInfo};

/// `graph` (of shapes `infos`) with every spelled-out RMS normalization replaced (module doc),
/// and how many there were; `None` when there is none.
pub(super) fn run(graph: &Graph, infos: &[TensorInfo]) -> Option<(Graph, usize)> {
    if !graph.nodes.iter().any(|n| matches!(n.op, Op::ReduceMean(_))) {
        return None;
    }
    let cx = Cx {
        g: graph,
        infos,
        defs: super::fuse::producers(graph),
        readers: super::fuse::reader_counts(graph),
    };
    let mut g = graph.clone();
    let mut replaced = vec![false; graph.nodes.len()];
    let mut count = 0;
    for (i, n) in graph.nodes.iter().enumerate() {
        let Some((x, axis, eps)) = cx.normalized(n) else { continue };
        let Some(y) = n.output(0) else { continue };
        // A following Mul by a scale over the normalized dims (the only reader of y, or of a
        // Reshape of y that keeps the normalized dims: a grouped norm's view back) is absorbed;
        // without one, the scale is ones.
        let (at, scale, out) = match cx.scale_of(y, axis) {
            Some(Scaled { mul, scale, out, reshape: None }) if !replaced[mul] => (mul, scale, out),
            // Through a Reshape: the norm stays where it is (its scale defined before it) and
            // writes y; the Reshape reads it as before, and the Mul becomes an Identity of the
            // Reshape's output.
            Some(Scaled { mul, scale, out, reshape: Some(r) })
                if !replaced[mul] && !replaced[i] && cx.defined_before(scale, i) =>
            {
                let Some(viewed) = graph.nodes[r].output(0) else { continue };
                g.nodes[mul] = Node {
                    name: graph.nodes[mul].name.clone(),
                    op: Op::Identity,
                    inputs: vec![Some(viewed)],
                    outputs: vec![Some(out)],
                };
                replaced[mul] = true;
                (i, scale, y)
            }
            _ if replaced[i] => continue,
            _ => {
                let Some(dims) = cx.dims(x) else { continue };
                let norm = &dims[axis..];
                let Ok(t) = crate::ConstTensor::from_f32(norm, &vec![1.0f32; norm.iter().product()]) else {
                    continue;
                };
                let v = g.add_value(format!("{}:rms:ones", n.name), Some(t.info()));
                g.initializers.insert(v, t);
                (i, v, y)
            }
        };
        let attrs = op::RmsNormalization { axis: axis as i64, epsilon: eps, ..Default::default() };
        g.nodes[at] = Node {
            name: graph.nodes[at].name.clone(),
            op: Op::RmsNormalization(attrs),
            inputs: vec![Some(x), Some(scale)],
            outputs: vec![Some(out)],
        };
        replaced[at] = true;
        count += 1;
    }
    (count > 0).then(|| (crate::dce::eliminate(&g), count))
}

/// A scale Mul after a normalization ([`Cx::scale_of`]).
struct Scaled {
    /// The Mul's node index.
    mul: usize,
    /// The scale.
    scale: ValueId,
    /// The Mul's output.
    out: ValueId,
    /// The Reshape between the normalization and the Mul, if any.
    reshape: Option<usize>,
}

struct Cx<'g> {
    g: &'g Graph,
    infos: &'g [TensorInfo],
    defs: Vec<Option<(usize, usize)>>,
    readers: Vec<usize>,
}

impl<'g> Cx<'g> {
    fn dims(&self, v: ValueId) -> Option<Vec<usize>> {
        self.infos.get(v.index()).and_then(|i| i.shape.as_known())
    }

    fn def(&self, v: ValueId) -> Option<&'g Node> {
        match self.defs[v.index()] {
            Some((i, 0)) => Some(&self.g.nodes[i]),
            _ => None,
        }
    }

    /// The one value of a constant scalar or one-element tensor.
    fn scalar(&self, v: ValueId) -> Option<f64> {
        let c = self.g.constant(v)?;
        match c.to_f64s().as_slice() {
            &[s] => Some(s),
            _ => None,
        }
    }

    /// The node defining `v` as `op(p, q)` with `p` matching `want` (either operand order): the
    /// other operand.
    fn other_operand(&self, n: &Node, want: impl Fn(ValueId) -> bool) -> Option<ValueId> {
        match n.inputs.as_slice() {
            [Some(p), Some(q)] if want(*p) => Some(*q),
            [Some(p), Some(q)] if want(*q) => Some(*p),
            _ => None,
        }
    }

    /// `n` is `x · rsqrt(mean(x²) + eps)` (module doc): x, the first normalized axis, eps.
    fn normalized(&self, n: &Node) -> Option<(ValueId, usize, f32)> {
        let f32_of = |v: ValueId| self.infos.get(v.index()).is_some_and(|i| i.dtype == DType::F32);
        let (x, v) = match (&n.op, n.inputs.as_slice()) {
            (Op::Mul, [Some(p), Some(q)]) => {
                [(*p, *q), (*q, *p)].into_iter().find_map(|(x, r)| Some((x, self.rsqrt_arg(r)?)))?
            }
            (Op::Div, [Some(x), Some(s)]) => {
                let sn = self.def(*s).filter(|m| matches!(m.op, Op::Sqrt))?;
                (*x, sn.input(0)?)
            }
            _ => return None,
        };
        let (axis, eps) = self.mean_square_plus_eps(v, x)?;
        (f32_of(x) && self.dims(n.output(0)?) == self.dims(x)).then_some((x, axis, eps))
    }

    /// `r = 1 / sqrt(v)` as `Reciprocal(Sqrt(v))`, `Pow(v, -0.5)` or `Div(1, Sqrt(v))`: v.
    fn rsqrt_arg(&self, r: ValueId) -> Option<ValueId> {
        let n = self.def(r)?;
        let sqrt_arg = |s: ValueId| self.def(s).filter(|m| matches!(m.op, Op::Sqrt)).and_then(|m| m.input(0));
        match (&n.op, n.inputs.as_slice()) {
            (Op::Reciprocal, [Some(s)]) => sqrt_arg(*s),
            (Op::Pow, [Some(v), Some(e)]) if self.scalar(*e) == Some(-0.5) => Some(*v),
            (Op::Div, [Some(one), Some(s)]) if self.scalar(*one) == Some(1.0) => sqrt_arg(*s),
            _ => None,
        }
    }

    /// `v = mean(x², trailing axes, keepdims) + eps`: the first reduced axis and eps.
    fn mean_square_plus_eps(&self, v: ValueId, x: ValueId) -> Option<(usize, f32)> {
        let add = self.def(v)?;
        if !matches!(add.op, Op::Add) {
            return None;
        }
        let mut found = None;
        for (m, e) in [(add.input(0)?, add.input(1)?), (add.input(1)?, add.input(0)?)] {
            if let (Some(mean), Some(eps)) = (self.def(m), self.scalar(e))
                && let Op::ReduceMean(r) = &mean.op
            {
                found = Some((mean, r, eps));
                break;
            }
        }
        let (mean, r, eps) = found?;
        if !r.keepdims {
            return None;
        }
        let sq = self.def(mean.input(0)?)?;
        let squares_x = match (&sq.op, sq.inputs.as_slice()) {
            (Op::Pow, [Some(b), Some(e)]) => *b == x && self.scalar(*e) == Some(2.0),
            (Op::Mul, [Some(p), Some(q)]) => *p == x && *q == x,
            _ => false,
        };
        if !squares_x {
            return None;
        }
        let rank = self.dims(x)?.len();
        let axes = match (&r.axes, mean.input(1)) {
            (Some(a), _) => a.clone(),
            (None, Some(a)) => self.g.constant(a)?.to_i64s()?,
            (None, None) => return None,
        };
        let mut axes: Vec<usize> = axes.iter().map(|&a| axis_index(a, rank).ok()).collect::<Option<_>>()?;
        axes.sort_unstable();
        axes.dedup();
        let first = *axes.first()?;
        // The trailing axes, each once.
        (axes.iter().enumerate().all(|(k, &a)| a == first + k) && axes.last() == Some(&(rank - 1)))
            .then_some((first, eps as f32))
    }

    /// Whether `v` is available before node `i`: a graph input, an initializer, or the output
    /// of an earlier node.
    fn defined_before(&self, v: ValueId, i: usize) -> bool {
        self.defs[v.index()].is_none_or(|(d, _)| d < i)
    }

    /// The one reader of `v` (not a graph output): its index and node.
    fn only_reader(&self, v: ValueId) -> Option<(usize, &'g Node)> {
        if self.readers[v.index()] != 1 || self.g.outputs.contains(&v) {
            return None;
        }
        self.g.nodes.iter().enumerate().find(|(_, m)| m.uses().contains(&v))
    }

    /// `y`'s one reader when it is `Mul(y, scale)` with `scale` broadcasting over the dims from
    /// `axis` only, or a Reshape of `y` that keeps those dims (and so the rows) whose one reader
    /// is such a Mul (transformers' grouped `MambaRMSNormGated` with one group views the rows
    /// back before scaling them).
    fn scale_of(&self, y: ValueId, axis: usize) -> Option<Scaled> {
        let yd = self.dims(y)?;
        let (mut j, mut m) = self.only_reader(y)?;
        let (mut read, mut reshape, mut lead_axis) = (y, None, axis);
        if matches!(m.op, Op::Reshape(_)) && m.input(0) == Some(y) {
            let rd = self.dims(m.output(0)?)?;
            let normalized = &yd[axis..];
            let keeps = rd.len() >= normalized.len()
                && rd.ends_with(normalized)
                && rd[..rd.len() - normalized.len()].iter().product::<usize>()
                    == yd[..axis].iter().product::<usize>();
            if !keeps {
                return None;
            }
            (read, reshape, lead_axis) = (m.output(0)?, Some(j), rd.len() - normalized.len());
            (j, m) = self.only_reader(read)?;
        }
        if !matches!(m.op, Op::Mul) {
            return None;
        }
        let s = self.other_operand(m, |v| v == read)?;
        let (rd, sd, od) = (self.dims(read)?, self.dims(s)?, self.dims(m.output(0)?)?);
        // The scale's dims are a suffix of the normalized dims, leading 1s allowed, and not of a
        // higher rank (RMSNormalization broadcasts the scale over X[axis..] only).
        let lead = sd.iter().position(|&d| d != 1).unwrap_or(sd.len());
        let f32_scale = self.infos.get(s.index()).is_some_and(|i| i.dtype == DType::F32);
        let fits = sd.len() <= rd.len() - lead_axis && rd[lead_axis..].ends_with(&sd[lead..]);
        (od == rd && fits && f32_scale).then_some(Scaled { mul: j, scale: s, out: m.output(0)?, reshape })
    }
}
