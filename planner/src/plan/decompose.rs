//! Operators the GPU runs as a few simpler ones (as an ONNX function body would define them):
//! Einsum (the batched MatMuls, reductions and transposes it reduces to, `einsum.rs`); the
//! training optimizers (Adagrad, Adam, Momentum), BatchNormalization in training mode,
//! Binarizer and ArrayFeatureExtractor; and Attention's bool `attn_mask`, which becomes the
//! additive mask it stands for (`Where(mask, 0, -inf)`), the form the attention kernels read;
//! MaxUnpool (a scatter into zeros); ReduceMax / ReduceMin of bools (over f32 0 / 1); Pow of an
//! f32 and an int64 (through f32); TreeEnsemble (its attributes packed into one f64 table, the
//! node's input 1, that its kernel walks); and a MatMul whose batch dims broadcast both ways (its operands
//! expanded to the common batch shape first); FlexAttention (its score and probability modifiers
//! inlined between a batched `Q Kᵀ`, a softmax and `· V`, the grouped K / V heads repeated). Each becomes elementwise ops, reductions and gathers
//! that have kernels (and that the elementwise pass then fuses), computing the reference's
//! formulas in f32. Runs on a bound graph before shape inference; a node whose operands are not
//! f32 (or whose shapes are unknown) stays as it is, and is refused later by name. QuantizeLinear /
//! DequantizeLinear (per tensor and per axis, 8-bit; DequantizeLinear also blocked, and of weights
//! of the coded types, decoded from their codes by a table) become their defining arithmetic
//! (`quant.rs`).

use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{self, MomentumMode, Op};
use crate::shape_infer;
use crate::tensor_info::{DType, TensorInfo};

mod einsum;
mod parts;
pub(super) mod quant;

use parts::{batch_norm_training, flex_attention, mutual_batch, optimizer, tree_tables, unpooled_dims};

/// Appends the nodes of one expansion, named after the node it replaces.
pub(super) struct Expand<'g> {
    g: &'g mut Graph,
    name: String,
    n: usize,
}

impl Expand<'_> {
    fn fresh(&mut self) -> String {
        self.n += 1;
        format!("{}:decomposed:{}", self.name, self.n)
    }

    /// `op(inputs)` into `out`, or into a fresh value.
    fn op_into(&mut self, op: Op, inputs: &[ValueId], out: Option<ValueId>) -> ValueId {
        let name = self.fresh();
        let y = out.unwrap_or_else(|| self.g.add_value(format!("{name}:0"), None));
        self.g.add_node(Node {
            name,
            op,
            inputs: inputs.iter().map(|&v| Some(v)).collect(),
            outputs: vec![Some(y)],
        });
        y
    }

    fn op(&mut self, op: Op, inputs: &[ValueId]) -> ValueId {
        self.op_into(op, inputs, None)
    }

    /// `v` cast to `to`.
    fn cast(&mut self, v: ValueId, to: DType) -> ValueId {
        self.op(Op::Cast(op::Cast::to(to)), &[v])
    }

    fn f32(&mut self, v: f32) -> ValueId {
        let name = self.fresh();
        self.g.initializer(&name, ConstTensor::from_f32(&[], &[v]).expect("a scalar"))
    }

    /// A scalar (`[]`) i64 constant.
    fn i64_scalar(&mut self, v: i64) -> ValueId {
        let name = self.fresh();
        self.g.const_i64(&name, &[], &[v])
    }

    fn i64s(&mut self, v: &[i64]) -> ValueId {
        let name = self.fresh();
        self.g.const_i64(&name, &[v.len()], v)
    }

    fn add(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Add, &[a, b])
    }
    fn sub(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Sub, &[a, b])
    }
    fn mul(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Mul, &[a, b])
    }
    fn div(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op(Op::Div, &[a, b])
    }
    fn sqrt(&mut self, a: ValueId) -> ValueId {
        self.op(Op::Sqrt, &[a])
    }
    /// `k * x`, or `x` itself when `k` is 1.
    fn scale(&mut self, k: f32, x: ValueId) -> ValueId {
        if k == 1.0 {
            return x;
        }
        let k = self.f32(k);
        self.mul(k, x)
    }
    /// `norm * x + g` (the optimizers' regularized gradient), `g` when `norm` is 0.
    fn regularized(&mut self, norm: f32, x: ValueId, g: ValueId) -> ValueId {
        if norm == 0.0 {
            return g;
        }
        let nx = self.scale(norm, x);
        self.add(nx, g)
    }
}

/// Whether every value of `vs` is uint8 or int8.
fn eight_bit(infos: &[TensorInfo], vs: &[ValueId]) -> bool {
    vs.iter().all(|v| matches!(infos[v.index()].dtype, DType::U8 | DType::I8))
}

/// The integer `v` as f32, less its zero point `z` (shaped to broadcast) when there is one.
fn less_zero(e: &mut Expand, v: ValueId, z: Option<ValueId>) -> ValueId {
    let vf = e.cast(v, DType::F32);
    match z {
        Some(z) => {
            let zf = e.cast(z, DType::F32);
            e.sub(vf, zf)
        }
        None => vf,
    }
}

/// `v` (one value, or `n`) reshaped to `[n, 1, ..., 1]` of `rank` dims: one value per row or
/// output map, broadcast against an operand of that rank; one value stays as it is.
fn leading(e: &mut Expand, infos: &[TensorInfo], v: ValueId, n: usize, rank: usize) -> ValueId {
    if infos[v.index()].shape.as_known().is_some_and(|d| d.iter().product::<usize>() == 1) {
        return v;
    }
    let dims: Vec<i64> = std::iter::once(n as i64).chain((1..rank).map(|_| 1)).collect();
    let shape = e.i64s(&dims);
    e.op(Op::Reshape(op::Reshape::default()), &[v, shape])
}

/// QLinearMatMul's and QLinearConv's requantization of the integer product `acc` into `out`, as
/// the reference computes it: the operands' scales multiplied and divided by y's in f32, then
/// `clip(round(acc · multiplier) + y_zero_point)` cast to the zero point's type (uint8 / int8).
/// False (nothing added) for other scale or output types.
fn requantize(
    e: &mut Expand,
    infos: &[TensorInfo],
    acc: ValueId,
    (s1, s2): (ValueId, ValueId),
    (sy, zy): (ValueId, ValueId),
    out: Option<ValueId>,
) -> bool {
    let to = infos[zy.index()].dtype;
    let f32s = [s1, s2, sy].iter().all(|v| infos[v.index()].dtype == DType::F32);
    if !f32s || !matches!(to, DType::U8 | DType::I8) {
        return false;
    }
    let scale = e.mul(s1, s2);
    let multiplier = e.div(scale, sy);
    let scaled = e.mul(acc, multiplier);
    let zf = e.cast(zy, DType::F32);
    let c = quant::on_grid(e, scaled, Some(zf), to).expect("8-bit types have bounds");
    e.op_into(Op::Cast(op::Cast::to(to)), &[c], out);
    true
}

/// `graph` with the operators this module covers replaced by simpler ones; `None` when it has none
/// to replace.
pub(crate) fn run(graph: &Graph) -> Result<Option<Graph>, PlanError> {
    let covered = |n: &Node| {
        matches!(
            n.op,
            Op::Adagrad(_)
                | Op::Adam(_)
                | Op::Momentum(_)
                | Op::Binarizer(_)
                | Op::ArrayFeatureExtractor
                | Op::BatchNormalization(op::BatchNormalization { training_mode: true, .. })
        ) || (matches!(n.op, Op::Attention(_)) && (n.input(3).is_some() || n.input(6).is_some()))
            || matches!(
                n.op,
                Op::MaxUnpool(_)
                    | Op::ReduceMax(_)
                    | Op::ReduceMin(_)
                    | Op::Pow
                    | Op::MatMul
                    | Op::FlexAttention(_)
                    | Op::TreeEnsemble(_)
                    | Op::Einsum(_)
                    | Op::QuantizeLinear(_)
                    | Op::DequantizeLinear(_)
                    | Op::Clip(_)
                    | Op::EyeLike(_)
                    | Op::MatMulInteger
                    | Op::QLinearMatMul
                    | Op::ConvInteger(_)
                    | Op::QLinearConv(_)
                    | Op::DynamicQuantizeLinear
                    | Op::SignalWindow(_)
            )
    };
    let coded_weights = graph.initializers.values().any(|c| matches!(c.dtype, DType::Coded(_)));
    if !graph.nodes.iter().any(|n| covered(n) || coded_weights && matches!(n.op, Op::Cast(_))) {
        return Ok(None);
    }
    // Quantize -> dequantize pairs that give back their input go first (quant.rs).
    if let Some(g) = quant::drop_identity_pairs(graph) {
        return Ok(Some(run(&g)?.unwrap_or(g)));
    }
    // Coded weights only moved and decoded are held as their codes (quant.rs); should a decode
    // of them stay unexpanded, the graph is expanded without that.
    if coded_weights
        && let Some((retyped, codes)) = quant::retype_codes(graph, &shape_infer::infer(graph)?)
        && let Some(g) = expand(&retyped, &codes, |n| covered(n) || matches!(n.op, Op::Cast(_)))?
    {
        return Ok(Some(g));
    }
    expand(graph, &Default::default(), covered)
}

/// [`run`]'s expansions of the nodes `covered` selects, `codes` the values holding codes of a
/// coded type in uint8 (`quant::retype_codes`); `None` when nothing is expanded, or when a node
/// other than a data move that reads such codes was not expanded (it would read the codes as
/// numbers).
fn expand(
    graph: &Graph,
    codes: &std::collections::BTreeMap<ValueId, crate::coded::Coded>,
    covered: impl Fn(&Node) -> bool,
) -> Result<Option<Graph>, PlanError> {
    let infos = shape_infer::infer(graph)?;
    let f32_in = |n: &Node, slots: std::ops::Range<usize>| {
        slots.into_iter().all(|s| n.input(s).is_some_and(|v| infos[v.index()].dtype == DType::F32))
    };
    // QuantizeLinear -> DequantizeLinear pairs computed as one f32 composition (quant.rs).
    let paired = quant::pairs(graph);
    let quant_of = |n: NodeId| {
        let node = &graph.nodes[n.index()];
        let Op::QuantizeLinear(q) = &node.op else { return None };
        let (x, s) = (node.input(0)?, node.input(1)?);
        Some(quant::Quant { attrs: q, ins: (x, s, node.input(2)), infos: &infos, coded: None })
    };
    let composed: std::collections::BTreeSet<NodeId> =
        paired.values().copied().filter(|&q| quant_of(q).is_some_and(|q| q.composes())).collect();
    let mut g = graph.clone();
    let mut replaced = std::collections::BTreeSet::new();
    // Dequantized values by output (quant.rs), for the MatMuls that read two of them.
    let mut scaled: std::collections::BTreeMap<ValueId, quant::Scaled> = std::collections::BTreeMap::new();
    // Nodes rewritten in place (an operand replaced or added), not replaced.
    let mut touched = false;
    for (i, node) in graph.nodes.iter().enumerate() {
        // (Attention's and the quantizers' optional inputs may be omitted; the others' are all
        // required here.)
        let optional = matches!(
            node.op,
            Op::Attention(_)
                | Op::QuantizeLinear(_)
                | Op::DequantizeLinear(_)
                | Op::Clip(_)
                | Op::MatMulInteger
        );
        if !covered(node) || (!optional && node.inputs.iter().any(Option::is_none)) {
            continue;
        }
        let mut e = Expand { g: &mut g, name: graph.node_label(NodeId(i as u32)), n: 0 };
        let ins: Vec<ValueId> = node.inputs.iter().flatten().copied().collect();
        let outs = &node.outputs;
        let done = match &node.op {
            Op::Adagrad(a) if f32_in(node, 2..ins.len()) && f32_in(node, 0..1) => {
                optimizer(&mut e, &ins, outs, 3, |e, r, t, v, out| {
                    let (x, g, h) = (v[0], v[1], v[2]);
                    // r' = R / (1 + T decay)
                    let tf = e.cast(t, DType::F32);
                    let td = e.scale(a.decay_factor, tf);
                    let one = e.f32(1.0);
                    let den = e.add(one, td);
                    let rate = e.div(r, den);
                    let g = e.regularized(a.norm_coefficient, x, g);
                    let g2 = e.mul(g, g);
                    let h2 = e.op_into(Op::Add, &[h, g2], out[1]);
                    let sq = e.sqrt(h2);
                    let eps = e.f32(a.epsilon);
                    let den = e.add(sq, eps);
                    let rg = e.mul(rate, g);
                    let step = e.div(rg, den);
                    e.op_into(Op::Sub, &[x, step], out[0]);
                })
            }
            Op::Adam(a) if f32_in(node, 2..ins.len()) && f32_in(node, 0..1) => {
                optimizer(&mut e, &ins, outs, 4, |e, r, t, v, out| {
                    let (x, g, m, h) = (v[0], v[1], v[2], v[3]);
                    // r' = R sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R.
                    let tf = e.cast(t, DType::F32);
                    let (alpha, beta, one) = (e.f32(a.alpha), e.f32(a.beta), e.f32(1.0));
                    let at = e.op(Op::Pow, &[alpha, tf]);
                    let bt = e.op(Op::Pow, &[beta, tf]);
                    let num = e.sub(one, bt);
                    let num = e.sqrt(num);
                    let den = e.sub(one, at);
                    let rn = e.mul(r, num);
                    let decayed = e.div(rn, den);
                    let zero = e.i64_scalar(0);
                    let positive = e.op(Op::Greater, &[t, zero]);
                    let rate = e.op(Op::Where, &[positive, decayed, r]);
                    let g = e.regularized(a.norm_coefficient, x, g);
                    let am = e.scale(a.alpha, m);
                    let bg = e.scale(1.0 - a.alpha, g);
                    let m2 = e.op_into(Op::Add, &[am, bg], out[1]);
                    let bh = e.scale(a.beta, h);
                    let g2 = e.mul(g, g);
                    let cg = e.scale(1.0 - a.beta, g2);
                    let h2 = e.op_into(Op::Add, &[bh, cg], out[2]);
                    let sq = e.sqrt(h2);
                    let eps = e.f32(a.epsilon);
                    let den = e.add(sq, eps);
                    let ratio = e.div(m2, den);
                    let step = e.mul(rate, ratio);
                    let xs = e.sub(x, step);
                    let post = e.f32(1.0 - a.norm_coefficient_post);
                    e.op_into(Op::Mul, &[post, xs], out[0]);
                })
            }
            Op::Momentum(a) if f32_in(node, 2..ins.len()) && f32_in(node, 0..1) => {
                optimizer(&mut e, &ins, outs, 3, |e, r, t, v, out| {
                    let (x, g, m) = (v[0], v[1], v[2]);
                    // beta' = beta when T > 0, else 1.
                    let zero = e.i64_scalar(0);
                    let positive = e.op(Op::Greater, &[t, zero]);
                    let (beta, one) = (e.f32(a.beta), e.f32(1.0));
                    let beta = e.op(Op::Where, &[positive, beta, one]);
                    let g = e.regularized(a.norm_coefficient, x, g);
                    let am = e.scale(a.alpha, m);
                    let bg = e.mul(beta, g);
                    let m2 = e.op_into(Op::Add, &[am, bg], out[1]);
                    let dir = match a.mode {
                        MomentumMode::Standard => m2,
                        MomentumMode::Nesterov => {
                            let am2 = e.scale(a.alpha, m2);
                            e.add(g, am2)
                        }
                    };
                    let step = e.mul(r, dir);
                    e.op_into(Op::Sub, &[x, step], out[0]);
                })
            }
            Op::Einsum(eq) if f32_in(node, 0..ins.len()) => {
                let known: Option<Vec<Vec<usize>>> =
                    ins.iter().map(|v| infos[v.index()].shape.as_known()).collect();
                let Some(dims) = known else { continue };
                einsum::einsum(&mut e, &eq.equation, &ins, &dims, node.output(0))
            }
            Op::Binarizer(b) if f32_in(node, 0..1) => {
                let t = e.f32(b.threshold);
                let above = e.op(Op::Greater, &[ins[0], t]);
                let (one, zero) = (e.f32(1.0), e.f32(0.0));
                e.op_into(Op::Where, &[above, one, zero], node.output(0));
                true
            }
            Op::ArrayFeatureExtractor => {
                let Some(rank) = infos[ins[0].index()].shape.as_known().map(|d| d.len()) else { continue };
                if rank == 0 {
                    continue;
                }
                let flat = e.i64s(&[-1]);
                let idx = e.op(Op::Reshape(Default::default()), &[ins[1], flat]);
                if rank == 1 {
                    let picked = e.op(Op::Gather(op::Gather { axis: -1 }), &[ins[0], idx]);
                    let axes = e.i64s(&[0]);
                    e.op_into(Op::Unsqueeze(Default::default()), &[picked, axes], node.output(0));
                } else {
                    e.op_into(Op::Gather(op::Gather { axis: -1 }), &[ins[0], idx], node.output(0));
                }
                true
            }
            Op::Attention(_) => {
                let mut mask = node.input(3);
                if let Some(m) = mask.filter(|m| infos[m.index()].dtype == DType::Bool) {
                    let (zero, masked) = (e.f32(0.0), e.f32(f32::NEG_INFINITY));
                    mask = Some(e.op(Op::Where, &[m, zero, masked]));
                }
                // nonpad_kv_seqlen: keys from each batch entry's length on are masked, an additive
                // (B, 1, 1, keys) mask added to the attn_mask.
                let keys = |v: Option<ValueId>, axis: usize| {
                    v.and_then(|v| infos[v.index()].shape.as_known()).and_then(|d| d.get(axis).copied())
                };
                let k = node.input(1);
                let k_seq = keys(k, if keys(k, 3).is_some() { 2 } else { 1 });
                let past = node.input(4).map_or(Some(0), |p| keys(Some(p), 2));
                let lens = node.input(6).filter(|l| infos[l.index()].dtype == DType::I64);
                // A mask narrower than the keys: the reference masks the keys past it.
                let total = k_seq.zip(past).map(|(s, p)| s + p);
                if let (Some(m), Some(total)) = (mask, total)
                    && let Some(md) = infos.get(m.index()).and_then(|i| i.shape.as_known())
                    && md.last().is_some_and(|&l| l < total)
                {
                    let mut pads = vec![0i64; 2 * md.len()];
                    pads[2 * md.len() - 1] = (total - md[md.len() - 1]) as i64;
                    let pads = e.i64s(&pads);
                    let fill = e.f32(f32::NEG_INFINITY);
                    let pad = op::Pad { mode: op::PadMode::Constant, pads: None, value: None };
                    mask = Some(e.op(Op::Pad(pad), &[m, pads, fill]));
                }
                if let (Some(lens), Some(s), Some(p)) = (lens, k_seq, past) {
                    let total = (s + p) as i64;
                    let name = e.fresh();
                    let positions =
                        e.g.const_i64(&name, &[1, total as usize], &(0..total).collect::<Vec<_>>());
                    let axes = e.i64s(&[1]);
                    let column = e.op(Op::Unsqueeze(Default::default()), &[lens, axes]);
                    let kept = e.op(Op::Less, &[positions, column]);
                    let (zero, masked) = (e.f32(0.0), e.f32(f32::NEG_INFINITY));
                    let pad = e.op(Op::Where, &[kept, zero, masked]);
                    let shape = e.i64s(&[-1, 1, 1, total]);
                    let pad = e.op(Op::Reshape(Default::default()), &[pad, shape]);
                    mask = Some(match mask {
                        Some(m) => e.add(m, pad),
                        None => pad,
                    });
                    e.g.nodes[i].inputs[6] = None;
                    touched = true;
                }
                if mask != node.input(3) {
                    touched = true;
                    let n = &mut e.g.nodes[i];
                    if n.inputs.len() < 4 {
                        n.inputs.resize(4, None);
                    }
                    n.inputs[3] = mask;
                }
                false
            }
            Op::ReduceMax(_) | Op::ReduceMin(_) if infos[ins[0].index()].dtype == DType::Bool => {
                let x = e.cast(ins[0], DType::F32);
                let mut operands = vec![x];
                operands.extend(&ins[1..]);
                let r = e.op(node.op.clone(), &operands);
                e.op_into(Op::Cast(op::Cast::to(DType::Bool)), &[r], node.output(0));
                true
            }
            // Clip of integers: Max and Min (the integer kernels'), each bound where given.
            Op::Clip(c)
                if c.min.is_none()
                    && c.max.is_none()
                    && node.input(0).is_some_and(|x| infos[x.index()].dtype.is_int()) =>
            {
                let x = ins[0];
                match (node.input(1), node.input(2)) {
                    (Some(lo), Some(hi)) => {
                        let m = e.op(Op::Max, &[x, lo]);
                        e.op_into(Op::Min, &[m, hi], node.output(0))
                    }
                    (Some(lo), None) => e.op_into(Op::Max, &[x, lo], node.output(0)),
                    (None, Some(hi)) => e.op_into(Op::Min, &[x, hi], node.output(0)),
                    (None, None) => e.op_into(Op::Identity, &[x], node.output(0)),
                };
                true
            }
            // EyeLike: the row index plus k equal to the column index, cast to the output type.
            Op::EyeLike(a) => {
                let Some(&[r, c]) = infos[ins[0].index()].shape.as_known().as_deref() else { continue };
                let to = a.dtype.unwrap_or(infos[ins[0].index()].dtype);
                let (rn, cn) = (e.fresh(), e.fresh());
                let rows: Vec<i64> = (0..r as i64).map(|i| i + a.k).collect();
                let cols: Vec<i64> = (0..c as i64).collect();
                let rows = e.g.const_i64(&rn, &[r, 1], &rows);
                let cols = e.g.const_i64(&cn, &[1, c], &cols);
                let eq = e.op(Op::Equal, &[rows, cols]);
                e.op_into(Op::Cast(op::Cast::to(to)), &[eq], node.output(0));
                true
            }
            // MatMulInteger and QLinearMatMul as the f32 product of the operands less their zero
            // points (A's one per row, B's one per column; integers: exact, and on the TF32
            // entries, `integers.rs`), then in int32 or requantized.
            Op::MatMulInteger | Op::QLinearMatMul => {
                let q = matches!(node.op, Op::QLinearMatMul);
                let (a, b) = (ins[0], if q { ins[3] } else { ins[1] });
                let (za, zb) =
                    if q { (node.input(2), node.input(5)) } else { (node.input(2), node.input(3)) };
                let Some(ad) = infos[a.index()].shape.as_known() else { continue };
                if !eight_bit(&infos, &[a, b]) {
                    continue;
                }
                let m = if ad.len() >= 2 { ad[ad.len() - 2] } else { 1 };
                let rows =
                    |e: &mut Expand, v: ValueId| if ad.len() < 2 { v } else { leading(e, &infos, v, m, 2) };
                let za = za.map(|z| rows(&mut e, z));
                let (af, bf) = (less_zero(&mut e, a, za), less_zero(&mut e, b, zb));
                let acc = e.op(Op::MatMul, &[af, bf]);
                if q {
                    let sa = rows(&mut e, ins[1]);
                    requantize(&mut e, &infos, acc, (sa, ins[4]), (ins[6], ins[7]), node.output(0))
                } else {
                    e.op_into(Op::Cast(op::Cast::to(DType::I32)), &[acc], node.output(0));
                    true
                }
            }
            // ConvInteger and QLinearConv as the f32 Conv of the operands less their zero points (w's
            // one per output map), plus the bias, then in int32 or requantized as QLinearMatMul.
            Op::ConvInteger(attrs) | Op::QLinearConv(attrs) => {
                let q = matches!(node.op, Op::QLinearConv(_));
                let (x, w) = (ins[0], if q { ins[3] } else { ins[1] });
                let (zx, zw) =
                    if q { (node.input(2), node.input(5)) } else { (node.input(2), node.input(3)) };
                let Some(wd) = infos[w.index()].shape.as_known() else { continue };
                if !eight_bit(&infos, &[x, w]) || wd.len() < 3 {
                    continue;
                }
                // [M, 1, ..., 1]: one value per output map, against w (and, one dim fewer, the output).
                let zw = zw.map(|z| leading(&mut e, &infos, z, wd[0], wd.len()));
                let (xf, wf) = (less_zero(&mut e, x, zx), less_zero(&mut e, w, zw));
                let mut operands = vec![xf, wf];
                if let Some(b) = node.input(8).filter(|_| q) {
                    operands.push(less_zero(&mut e, b, None));
                }
                let acc = e.op(Op::Conv(attrs.clone()), &operands);
                if q {
                    let sw = leading(&mut e, &infos, ins[4], wd[0], wd.len() - 1);
                    requantize(&mut e, &infos, acc, (ins[1], sw), (ins[6], ins[7]), node.output(0))
                } else {
                    e.op_into(Op::Cast(op::Cast::to(DType::I32)), &[acc], node.output(0));
                    true
                }
            }
            // DynamicQuantizeLinear in f32 as the reference computes it: the range widened to
            // hold 0, its scale over 255 levels, the zero point and the values rounded to even
            // and saturated to uint8 (an all-zero x: 0 / 0 is NaN, which casts to 0 as the
            // reference's zero scale gives).
            Op::DynamicQuantizeLinear if infos[ins[0].index()].dtype == DType::F32 => {
                let x = ins[0];
                let all = op::Reduce { axes: None, keepdims: false, noop_with_empty_axes: false };
                let mn = e.op(Op::ReduceMin(all.clone()), &[x]);
                let mx = e.op(Op::ReduceMax(all), &[x]);
                let zero = e.f32(0.0);
                let lo = e.op(Op::Min, &[mn, zero]);
                let hi = e.op(Op::Max, &[mx, zero]);
                let range = e.sub(hi, lo);
                let levels = e.f32(255.0);
                let scale = e.div(range, levels);
                let lo_s = e.div(lo, scale);
                let neg = e.sub(zero, lo_s);
                let q = e.div(x, scale);
                let zp = quant::on_grid(&mut e, neg, None, DType::U8).expect("uint8 has bounds");
                let y = quant::on_grid(&mut e, q, Some(zp), DType::U8).expect("uint8 has bounds");
                e.op_into(Op::Cast(op::Cast::to(DType::U8)), &[y], node.output(0));
                e.op_into(Op::Identity, &[scale], node.output(1));
                e.op_into(Op::Cast(op::Cast::to(DType::U8)), &[zp], node.output(2));
                true
            }
            // Hann / Hamming / Blackman windows: the angles 2πi/N of the size (a constant once the
            // plan is specialized on it) as an f32 table, their cosines on the device.
            Op::SignalWindow(w) => {
                let Some(n) =
                    graph.constant(ins[0]).and_then(|c| c.to_i64s()).and_then(|v| v.first().copied())
                else {
                    continue;
                };
                let Ok(n) = usize::try_from(n) else { continue };
                if n == 0 {
                    continue;
                }
                let intervals = if w.periodic { n as f64 } else { (n - 1) as f64 };
                let angle = |k: f64, i: usize| {
                    if intervals == 0.0 {
                        0.0
                    } else {
                        (k * std::f64::consts::PI * i as f64 / intervals) as f32
                    }
                };
                let table = |e: &mut Expand, k: f64| {
                    let name = e.fresh();
                    let v: Vec<f32> = (0..n).map(|i| angle(k, i)).collect();
                    let t = e.g.initializer(&name, ConstTensor::from_f32(&[n], &v).expect("a table"));
                    e.op(Op::Cos, &[t])
                };
                let c = table(&mut e, 2.0);
                let (a0, a1) = match w.kind {
                    op::WindowKind::Hann => (0.5, 0.5),
                    op::WindowKind::Hamming => (25.0 / 46.0, 21.0 / 46.0),
                    op::WindowKind::Blackman => (0.42, 0.5),
                };
                let (a0, a1) = (e.f32(a0 as f32), e.f32(a1 as f32));
                let scaled = e.mul(a1, c);
                let mut v = e.sub(a0, scaled);
                if w.kind == op::WindowKind::Blackman {
                    let c2 = table(&mut e, 4.0);
                    let a2 = e.f32(0.08);
                    let s2 = e.mul(a2, c2);
                    v = e.add(v, s2);
                }
                let to = if w.output_dtype == DType::F32 {
                    Op::Identity
                } else {
                    Op::Cast(op::Cast::to(w.output_dtype))
                };
                e.op_into(to, &[v], node.output(0));
                true
            }
            Op::Pow if ins.len() == 2 => {
                let (tx, ty) = (infos[ins[0].index()].dtype, infos[ins[1].index()].dtype);
                // A float base to an integer exponent (of any width) takes it as f32; an integer
                // base to a float exponent computes in f32 and truncates back.
                match (tx, ty) {
                    (DType::F32, y) if y.is_int() => {
                        let y = e.cast(ins[1], DType::F32);
                        e.op_into(Op::Pow, &[ins[0], y], node.output(0));
                        true
                    }
                    (x, DType::F32) if x.is_int() => {
                        let xf = e.cast(ins[0], DType::F32);
                        let p = e.op(Op::Pow, &[xf, ins[1]]);
                        e.op_into(Op::Cast(op::Cast::to(x)), &[p], node.output(0));
                        true
                    }
                    _ => false,
                }
            }
            Op::MatMul if ins.len() == 2 => {
                let (Some(a), Some(b)) =
                    (infos[ins[0].index()].shape.as_known(), infos[ins[1].index()].shape.as_known())
                else {
                    continue;
                };
                let Some(batch) = mutual_batch(&a, &b) else { continue };
                let mut operands = Vec::new();
                for (v, d) in [(ins[0], &a), (ins[1], &b)] {
                    let mut full: Vec<i64> = batch.iter().map(|&n| n as i64).collect();
                    full.extend(d[d.len() - 2..].iter().map(|&n| n as i64));
                    let shape = e.i64s(&full);
                    operands.push(e.op(Op::Expand, &[v, shape]));
                }
                e.op_into(Op::MatMul, &operands, node.output(0));
                true
            }
            Op::MaxUnpool(u) if f32_in(node, 0..1) => {
                let Some(xd) = infos[ins[0].index()].shape.as_known() else { continue };
                let Some(unpooled) = unpooled_dims(u, &xd) else { continue };
                let target = match ins.get(2) {
                    Some(&v) => match graph.initializers.get(&v).and_then(|c| c.to_i64s()) {
                        Some(t)
                            if t.len() == unpooled.len()
                                && t.iter().zip(&unpooled).all(|(&o, &u)| o >= u as i64) =>
                        {
                            t
                        }
                        _ => continue,
                    },
                    None => unpooled.iter().map(|&d| d as i64).collect(),
                };
                let n: usize = unpooled.iter().product();
                let zero = e.f32(0.0);
                let len = e.i64s(&[n as i64]);
                let zeros = e.op(Op::Expand, &[zero, len]);
                let flat = e.i64s(&[-1]);
                let xs = e.op(Op::Reshape(Default::default()), &[ins[0], flat]);
                let is = e.op(Op::Reshape(Default::default()), &[ins[1], flat]);
                let scatter = op::ScatterElements { axis: 0, ..Default::default() };
                let y = e.op(Op::ScatterElements(scatter), &[zeros, is, xs]);
                let shape = e.i64s(&unpooled.iter().map(|&d| d as i64).collect::<Vec<_>>());
                let out = node.output(0);
                if target.iter().zip(&unpooled).all(|(&t, &u)| t == u as i64) {
                    e.op_into(Op::Reshape(Default::default()), &[y, shape], out);
                } else {
                    // A larger output shape: the same multi-index, zeros after (end padding).
                    let shaped = e.op(Op::Reshape(Default::default()), &[y, shape]);
                    let mut pads = vec![0i64; unpooled.len()];
                    pads.extend(target.iter().zip(&unpooled).map(|(&t, &u)| t - u as i64));
                    let pads = e.i64s(&pads);
                    let pad = op::Pad { mode: op::PadMode::Constant, pads: None, value: None };
                    e.op_into(Op::Pad(pad), &[shaped, pads], out);
                }
                true
            }
            Op::TreeEnsemble(t) if node.inputs.len() == 1 => {
                let name = e.fresh();
                let table = tree_tables(t);
                let Ok(c) = ConstTensor::from_f64s(DType::F64, &[table.len()], &table) else { continue };
                let tables = e.g.initializer(&name, c);
                e.g.nodes[i].inputs.push(Some(tables));
                touched = true;
                false
            }
            // The pair's QuantizeLinear goes (its DequantizeLinears compute it), ...
            Op::QuantizeLinear(_) if composed.contains(&NodeId(i as u32)) => true,
            // ... and they compute the composition.
            Op::DequantizeLinear(_)
                if paired.get(&NodeId(i as u32)).is_some_and(|q| composed.contains(q)) =>
            {
                let q = paired[&NodeId(i as u32)];
                match quant_of(q).and_then(|quant| quant.fake_quantize(&mut e, node.output(0))) {
                    Some(s) => {
                        scaled.insert(s.y, s);
                        true
                    }
                    None => false,
                }
            }
            // (A zero point held as codes of another type than x's is left to the refusal.)
            Op::QuantizeLinear(q) | Op::DequantizeLinear(q)
                if node.input(0).is_some()
                    && node.input(1).is_some()
                    && node.input(2).is_none_or(|z| codes.get(&z) == codes.get(&ins[0])) =>
            {
                let (x, s) = (ins[0], ins[1]);
                let coded = codes.get(&x).copied();
                let quant = quant::Quant { attrs: q, ins: (x, s, node.input(2)), infos: &infos, coded };
                if matches!(node.op, Op::QuantizeLinear(_)) {
                    quant.quantize(&mut e, node.output(0))
                } else {
                    match quant.dequantize(&mut e, node.output(0)) {
                        Some(Some(s)) => {
                            scaled.insert(s.y, s);
                            true
                        }
                        Some(None) => true,
                        None => false,
                    }
                }
            }
            // A cast of codes to a float type: their values, from the table.
            Op::Cast(c) if codes.contains_key(&ins[0]) && quant::decodes(node, 0) => {
                let values = quant::decode(&mut e, ins[0], codes[&ins[0]]);
                let to = if c.to == DType::F32 { Op::Identity } else { Op::Cast(op::Cast::to(c.to)) };
                e.op_into(to, &[values], node.output(0));
                true
            }
            Op::FlexAttention(fa) if f32_in(node, 0..3) => {
                let shape = |v: ValueId| infos[v.index()].shape.as_known();
                let (Some(q), Some(k), Some(v)) = (shape(ins[0]), shape(ins[1]), shape(ins[2])) else {
                    continue;
                };
                flex_attention(&mut e, fa, (&ins, &q, &k, &v), node.output(0))
            }
            Op::BatchNormalization(bn) if f32_in(node, 0..5) => {
                let Some(rank) = infos[ins[0].index()].shape.as_known().map(|d| d.len()) else { continue };
                if rank < 2 {
                    continue;
                }
                batch_norm_training(&mut e, bn, &ins, outs, rank);
                true
            }
            _ => false,
        };
        if done {
            replaced.insert(i);
        }
    }
    // A per-tensor dequantized value only moved (a Reshape, a Transpose, a Split...: what is left
    // where `quant::drop_identity_pairs` dropped a pair after the move) is still `centred *
    // scale`: the same move of its integers, scaled. The MatMuls reading it then multiply
    // integers too (the moves of `centred` no MatMul reads are dropped below).
    let mut moved = false;
    if !scaled.is_empty()
        && let Ok(order) = crate::validate::topo_order(graph)
    {
        for id in order {
            let node = &graph.nodes[id.index()];
            let Some(src) = node.input(0).and_then(|x| scaled.get(&x)).copied() else { continue };
            if src.scale_rank != 0 || !quant::moves_values(&node.op) {
                continue;
            }
            let name = format!("{}:integers", graph.node_label(id));
            let outs: Vec<Option<ValueId>> = (node.outputs.iter().enumerate())
                .map(|(k, o)| o.map(|_| g.add_value(format!("{name}:{k}"), None)))
                .collect();
            let mut inputs = node.inputs.clone();
            inputs[0] = Some(src.centred);
            g.add_node(Node { name, op: node.op.clone(), inputs, outputs: outs.clone() });
            for (o, c) in node.outputs.iter().zip(&outs) {
                if let (Some(y), Some(centred)) = (o, c) {
                    scaled.insert(*y, quant::Scaled { y: *y, centred: *centred, ..src });
                }
            }
            moved = true;
        }
    }
    // MatMuls (Gemms, Convs) of two dequantized operands multiply their integers and scale the
    // result (`quant::scale_out`).
    let mut scaled_out = false;
    for (i, node) in graph.nodes.iter().enumerate() {
        if !matches!(node.op, Op::MatMul | Op::Gemm(_) | Op::Conv(_)) || replaced.contains(&i) {
            continue;
        }
        let (Some(a), Some(b)) = (node.input(0), node.input(1)) else { continue };
        let (Some(sa), Some(sb)) = (scaled.get(&a), scaled.get(&b)) else { continue };
        let rank = |v: ValueId| infos[v.index()].shape.as_known().map_or(0, |d| d.len());
        let mut e = Expand { g: &mut g, name: graph.node_label(NodeId(i as u32)), n: 0 };
        let operands = (sa, sb, node.input(2));
        if quant::scale_out(&mut e, &node.op, operands, (rank(a), rank(b)), node.output(0)).is_some() {
            replaced.insert(i);
            scaled_out = true;
        }
    }
    // The replaced nodes go; the expansions define their outputs.
    let mut kept = Vec::with_capacity(g.nodes.len());
    for (i, n) in g.nodes.into_iter().enumerate() {
        if !replaced.contains(&i) {
            kept.push(n);
        }
    }
    if replaced.is_empty() && !touched && !moved {
        return Ok(None);
    }
    // Codes read as numbers by a node left as it is: not this expansion.
    let misread = (graph.nodes.iter().enumerate()).filter(|(i, _)| !replaced.contains(i)).any(|(_, n)| {
        !quant::moves_values(&n.op) && n.inputs.iter().flatten().any(|v| codes.contains_key(v))
    });
    if misread {
        return Ok(None);
    }
    g.nodes = kept;
    // A composed QuantizeLinear's integer output is defined by nothing now: drop it.
    let g = if composed.is_empty() && !scaled_out && !moved { g } else { crate::dce::eliminate(&g) };
    crate::validate::graph(&g)?;
    Ok(Some(g))
}
