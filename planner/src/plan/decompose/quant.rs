//! QuantizeLinear / DequantizeLinear (per tensor, per axis and blocked; f32 scales) as the
//! elementwise arithmetic ONNX defines them by, which the GPU's f32, cast and rounding kernels
//! compute (and the elementwise pass fuses): a QDQ model runs on the GPU in the float arithmetic
//! its spec gives, before any int8 GEMM takes the pattern over.
//! - `DequantizeLinear(x, s, z) = (f32(x) - f32(z)) * s`, x of any integer width or coded type
//!   (the GPU's Cast decodes float8 / float4 / int4 / int2 codes exactly).
//! - `QuantizeLinear(x, s, z) = cast(clip(round(x / s) + f32(z), lo, hi))`, `round` to nearest
//!   even, `[lo, hi]` the output type's range (8- and 16-bit integers, int4 / uint4 / int2 /
//!   uint2); to float8 / float4 it is `cast(x / s)` with the node's `saturate` (float4 adds its
//!   zero point first; float8's is 0).
//! - A QuantizeLinear to an 8-bit type read only by DequantizeLinears of the same scale and zero
//!   point (the activations of every QDQ model) is the pair's composition, computed in f32 without
//!   the integer between (exact: the integer is the f32 value `clip(...)` holds):
//!   `(clip(round(x / s) + f32(z), lo, hi) - f32(z)) * s`.
//! - A pair whose input already lies on its grid (dequantized with the same scale and zero point,
//!   then only moved: a Reshape, Transpose, Split...) gives that input back and goes
//!   ([`drop_identity_pairs`]).
//! - Blocked scales and zero points are repeated over their blocks (reshape, expand, reshape,
//!   slice) and are then the same arithmetic.
//! - Weights of the coded types (int4 / uint4 / int2 / uint2, float8, float4: one code per byte)
//!   that are only moved and then dequantized or cast to a float type are held as their codes in
//!   uint8, which the GPU's byte kernels move ([`retype_codes`]), and decoded where they are
//!   used: a gather from the table of the 256 codes' values ([`decode`], exact in f32). Weight-only
//!   quantized models (int4 blocked, float8) thus run on the GPU; codes that are not weights (an
//!   input) are decoded by the GPU's Cast.

use std::collections::BTreeMap;

use super::Expand;
use crate::coded::Coded;
use crate::constant::ConstTensor;
use crate::graph::{Definition, Graph, NodeId, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::{DType, TensorInfo};

/// The operands of one QuantizeLinear / DequantizeLinear the expansion covers: blocked scales,
/// scales other than f32 and integer types other than int8 / uint8 (and int32 for a dequantized
/// input) stay as they are, refused by name later.
pub(super) struct Quant<'a> {
    pub attrs: &'a op::Quantize,
    /// x, scale, zero point.
    pub ins: (ValueId, ValueId, Option<ValueId>),
    pub infos: &'a [TensorInfo],
    /// The coded type of a DequantizeLinear's x and zero point, held as their codes in uint8
    /// ([`retype_codes`]); `None` for the machine integer types.
    pub coded: Option<Coded>,
}

impl Quant<'_> {
    /// The shape `s` (or `z`) takes to broadcast against `x`: one value as a scalar, one per
    /// slice of `axis` as `[C, 1, ..., 1]`; `None` when neither fits.
    fn broadcast_dims(&self, p: ValueId) -> Option<Vec<i64>> {
        let x = self.infos[self.ins.0.index()].shape.as_known()?;
        let ps = self.infos[p.index()].shape.as_known()?;
        let n: usize = ps.iter().product();
        if n == 1 {
            return Some(Vec::new());
        }
        let rank = x.len() as i64;
        let axis = if self.attrs.axis < 0 { self.attrs.axis + rank } else { self.attrs.axis };
        if ps.len() != 1 || !(0..rank).contains(&axis) || x[axis as usize] != n {
            return None;
        }
        Some(std::iter::once(n as i64).chain((axis + 1..rank).map(|_| 1)).collect())
    }

    /// `p` reshaped to [`Self::broadcast_dims`].
    fn broadcast(&self, e: &mut Expand, p: ValueId) -> Option<ValueId> {
        let shape = e.i64s(&self.broadcast_dims(p)?);
        Some(e.op(Op::Reshape(op::Reshape::default()), &[p, shape]))
    }

    /// `p` (a scale or zero point of x's rank whose `axis` dim counts blocks of `block_size`)
    /// repeated along `axis` to x's shape: `[.., nb, ..]` reshaped to `[.., nb, 1, ..]`,
    /// expanded to `[.., nb, bs, ..]`, reshaped to `[.., nb·bs, ..]` and sliced to x's length.
    fn blocked(&self, e: &mut Expand, p: ValueId) -> Option<ValueId> {
        let (x, ps, a) = self.block_layout(p)?;
        let (bs, axis) = (self.attrs.block_size, a as i64);
        let nb = ps[a];
        let dims = |inner: &[usize]| -> Vec<i64> {
            ps[..a].iter().chain(inner).chain(&ps[a + 1..]).map(|&d| d as i64).collect()
        };
        let (one, full, flat) = (dims(&[nb, 1]), dims(&[nb, bs]), dims(&[nb * bs]));
        let one = e.i64s(&one);
        let u = e.op(Op::Reshape(op::Reshape::default()), &[p, one]);
        let full = e.i64s(&full);
        let ex = e.op(Op::Expand, &[u, full]);
        let flat = e.i64s(&flat);
        let r = e.op(Op::Reshape(op::Reshape::default()), &[ex, flat]);
        if nb * bs == x[a] {
            return Some(r);
        }
        let (starts, ends, axes) = (e.i64s(&[0]), e.i64s(&[x[a] as i64]), e.i64s(&[axis]));
        Some(e.op(Op::Slice(op::Slice::default()), &[r, starts, ends, axes]))
    }

    /// The scale and the zero point (if any) reshaped to broadcast against `x` (repeated over
    /// their blocks when blocked).
    fn broadcast_operands(&self, e: &mut Expand) -> Option<(ValueId, Option<ValueId>)> {
        let (_, s, z) = self.ins;
        if self.attrs.block_size > 0 {
            let zb = match z {
                Some(z) => Some(self.blocked(e, z)?),
                None => None,
            };
            return Some((self.blocked(e, s)?, zb));
        }
        let sb = self.broadcast(e, s)?;
        let zb = match z {
            Some(z) => Some(self.broadcast(e, z)?),
            None => None,
        };
        Some((sb, zb))
    }

    /// The QuantizeLinear's output type: its zero point's, else its `output_dtype` (uint8).
    fn target(&self) -> DType {
        self.ins.2.map_or(self.attrs.output_dtype.unwrap_or(DType::U8), |z| self.dtype(z))
    }

    /// x's shape, `p`'s and the blocked axis, when `p` (a blocked scale or zero point) holds one
    /// value per block of `block_size` along the axis and x's extent along the others.
    fn block_layout(&self, p: ValueId) -> Option<(Vec<usize>, Vec<usize>, usize)> {
        let x = self.infos[self.ins.0.index()].shape.as_known()?;
        let ps = self.infos[p.index()].shape.as_known()?;
        let (rank, bs) = (x.len() as i64, self.attrs.block_size);
        let axis = if self.attrs.axis < 0 { self.attrs.axis + rank } else { self.attrs.axis };
        if !(0..rank).contains(&axis) || ps.len() != x.len() || bs == 0 {
            return None;
        }
        let a = axis as usize;
        let fits = (0..x.len()).all(|d| ps[d] == if d == a { x[d].div_ceil(bs) } else { x[d] });
        fits.then_some((x, ps, a))
    }

    /// Whether `p` (the scale or the zero point) broadcasts against x: one value, one per slice
    /// of the axis, or (blocked) one per block.
    fn fits(&self, p: ValueId) -> bool {
        if self.attrs.block_size == 0 {
            self.broadcast_dims(p).is_some()
        } else {
            self.block_layout(p).is_some()
        }
    }

    /// True when the expansion covers this QuantizeLinear to an integer type (8- or 16-bit, or
    /// int4 / uint4 / int2 / uint2): the `clip(round(x / s) + z)` of the module docs, which a
    /// DequantizeLinear of the same scale and zero point may compose with.
    pub fn quantizable(&self) -> bool {
        int_bounds(self.target()).is_some() && self.quantizes()
    }

    /// True when a DequantizeLinear of the same scale and zero point composes with this
    /// QuantizeLinear ([`Self::fake_quantize`]): an 8-bit target, whose integers the composition
    /// may multiply before scaling (the 16-bit and narrower ones quantize and dequantize apart).
    pub fn composes(&self) -> bool {
        matches!(self.target(), DType::U8 | DType::I8) && self.quantizable()
    }

    /// True when x is f32, the scale f32 and both operands broadcast (per tensor, per axis or
    /// blocked).
    fn quantizes(&self) -> bool {
        let (x, s, z) = self.ins;
        self.dtype(x) == DType::F32
            && self.dtype(s) == DType::F32
            && self.fits(s)
            && z.is_none_or(|z| self.fits(z))
    }

    fn dtype(&self, v: ValueId) -> DType {
        self.infos[v.index()].dtype
    }

    /// DequantizeLinear into `out` (per tensor, per axis or blocked; x of a machine integer type
    /// or coded), and the dequantized value as [`Scaled`] when its integers may be multiplied
    /// before their scale (not blocked, not a float8 / float4 code); `None` when not covered.
    pub fn dequantize(&self, e: &mut Expand, out: Option<ValueId>) -> Option<Option<Scaled>> {
        let (x, s, z) = self.ins;
        let xt = self.dtype(x);
        let blocked = self.attrs.block_size > 0;
        // Machine integers and coded values (held as codes, or read as themselves: the GPU's Cast
        // decodes them) are dequantized; the 8-bit ones (and int32) may multiply as integers.
        let held = xt.is_int() || matches!(xt, DType::Coded(_));
        let small = matches!(xt, DType::U8 | DType::I8 | DType::I32)
            || matches!(xt, DType::Coded(c) if !c.is_float());
        if self.dtype(s) != DType::F32 || !held {
            return None;
        }
        // The spec's zero point has x's type; another is left to the refusal by name.
        if z.is_some_and(|z| self.dtype(z) != self.dtype(x)) {
            return None;
        }
        let (sb, zb) = self.broadcast_operands(e)?;
        let xf = self.to_f32(e, x);
        let centred = match zb {
            Some(zb) => {
                let zf = self.to_f32(e, zb);
                e.sub(xf, zf)
            }
            None => xf,
        };
        let y = e.op_into(Op::Mul, &[centred, sb], out);
        let integers = small && self.coded.is_none_or(|c| !c.is_float());
        Some(if blocked || !integers { None } else { self.scaled(y, centred, sb) })
    }

    /// `v` (x or its zero point) as f32: cast, or decoded from its codes ([`decode`]).
    fn to_f32(&self, e: &mut Expand, v: ValueId) -> ValueId {
        match self.coded {
            Some(c) => decode(e, v, c),
            None => e.cast(v, DType::F32),
        }
    }

    /// `y = centred * scale` as [`Scaled`].
    fn scaled(&self, y: ValueId, centred: ValueId, scale: ValueId) -> Option<Scaled> {
        Some(Scaled { y, centred, scale, scale_rank: self.broadcast_dims(self.ins.1)?.len() })
    }

    /// QuantizeLinear into `out`; false when not covered. To a float8 / float4 type it is
    /// `x / s` cast with the node's `saturate` (float4 adds its zero point first; float8's is 0
    /// and ignored, as ONNX's reference does).
    pub fn quantize(&self, e: &mut Expand, out: Option<ValueId>) -> bool {
        let to = self.target();
        if let DType::Coded(c) = to
            && c.is_float()
            && c != Coded::F8E8M0
            && self.quantizes()
        {
            let Some((sb, zb)) = self.broadcast_operands(e) else { return false };
            let q = e.div(self.ins.0, sb);
            let q = match zb {
                Some(zb) if c == Coded::F4E2M1 => {
                    let zf = e.cast(zb, DType::F32);
                    e.add(q, zf)
                }
                _ => q,
            };
            let cast =
                op::Cast { to, saturate: self.attrs.saturate, round_mode: crate::coded::RoundMode::Up };
            e.op_into(Op::Cast(cast), &[q], out);
            return true;
        }
        let Some((to, clipped, _)) = self.clipped(e) else { return false };
        e.op_into(Op::Cast(op::Cast::to(to)), &[clipped], out);
        true
    }

    /// The QuantizeLinear composed with a DequantizeLinear of the same scale and zero point,
    /// into `out`; `None` when not covered.
    pub fn fake_quantize(&self, e: &mut Expand, out: Option<ValueId>) -> Option<Scaled> {
        let (_, clipped, (sb, zf)) = self.clipped(e)?;
        let centred = match zf {
            Some(zf) => e.sub(clipped, zf),
            None => clipped,
        };
        let y = e.op_into(Op::Mul, &[centred, sb], out);
        self.scaled(y, centred, sb)
    }

    /// `clip(round(x / s) + f32(z), lo, hi)` in f32, with the output dtype and the broadcast
    /// scale and f32 zero point; `None` when not covered.
    fn clipped(&self, e: &mut Expand) -> Option<(DType, ValueId, (ValueId, Option<ValueId>))> {
        if !self.quantizable() {
            return None;
        }
        let (x, _, _) = self.ins;
        let to = self.target();
        let (sb, zb) = self.broadcast_operands(e)?;
        let q = e.div(x, sb);
        let zf = zb.map(|zb| e.cast(zb, DType::F32));
        let c = on_grid(e, q, zf, to)?;
        Some((to, c, (sb, zf)))
    }
}

/// `clip(round(v) + zero, lo, hi)` in f32 (`round` to nearest even), `[lo, hi]` integer type
/// `to`'s range ([`int_bounds`]): `v` quantized onto `to`'s grid, still in f32; `None` for
/// another type.
pub(super) fn on_grid(e: &mut Expand, v: ValueId, zero: Option<ValueId>, to: DType) -> Option<ValueId> {
    let (lo, hi) = int_bounds(to)?;
    let r = e.op(Op::Round, &[v]);
    let shifted = match zero {
        Some(z) => e.add(r, z),
        None => r,
    };
    let (lo, hi) = (e.f32(lo), e.f32(hi));
    Some(e.op(Op::Clip(op::Clip::default()), &[shifted, lo, hi]))
}

/// The bounds a QuantizeLinear to integer type `to` clips to; `None` for the other types.
pub(super) fn int_bounds(to: DType) -> Option<(f32, f32)> {
    let quantized = matches!(to, DType::U8 | DType::I8 | DType::U16 | DType::I16)
        || matches!(to, DType::Coded(c) if !c.is_float());
    let (lo, hi) = to.int_range().filter(|_| quantized)?;
    Some((lo as f32, hi as f32))
}

/// A dequantized value as its expansion computes it, `y = centred * scale`: `centred` the integer
/// less its zero point (an integer held in f32: within ±255 for 8-bit types), `scale` broadcast
/// to `y` with `scale_rank` dims (0: one scale; else one per slice of the quantization axis,
/// followed by `scale_rank - 1` unit dims).
#[derive(Debug, Clone, Copy)]
pub(super) struct Scaled {
    pub y: ValueId,
    pub centred: ValueId,
    pub scale: ValueId,
    pub scale_rank: usize,
}

/// `MatMul(a, b)` (or `Gemm(a, b, c)`, `Conv(x, w, bias)`) of two dequantized operands computed
/// as `MatMul(a_int, b_int) * s_a * s_b` (`+ beta c`; `Conv(x_int, w_int) * s_x * s_w + bias`)
/// where the scales do not vary along the contraction (A's per tensor or per row; B's per
/// tensor, per column or batch, or per output column of a transposed Gemm B; X's per tensor, W's
/// per tensor or per output channel): the product of integers held in f32 is exact (each below
/// 2^11, so exact in TF32 on the tensor cores too) and so is its sum while it stays below 2^24,
/// as the integer GEMM of ONNX Runtime's QDQ kernels computes it (centred int8 products reach
/// 2^14 and uint8 ones 2^16, so a contraction past 1,024 or 256 terms of extreme values can
/// round: then it is as close as f32 accumulation gets, not exact). The dequantized form would
/// round every product and partial sum of values that are not integers: on a fake-quantized
/// model those differences move values across the next quantizer's rounding boundaries and
/// cascade. On the CPU the scaled form matches ONNX Runtime's default session on GPT-2 int8 (2 of
/// 65,536 outputs more than one quantum apart), and on the GPU it is bit-identical to ONNX
/// Runtime CPU (H100, session 31), once the session's constant folding leaves the weights'
/// DequantizeLinear to this pass (`host::fold_constants`). Returns the nodes that
/// replace `node` (into `e`); `None` when it does not apply.
pub(super) fn scale_out(
    e: &mut Expand,
    op: &Op,
    (a, b, c): (&Scaled, &Scaled, Option<ValueId>),
    ranks: (usize, usize),
    out: Option<ValueId>,
) -> Option<ValueId> {
    let (ra, rb) = ranks;
    let t = match op {
        // A's scale must not vary along k (its last axis: a one-dim scale per slice of it), B's
        // along k either (its second to last axis: a scale of two dims, `[K, 1]`).
        Op::MatMul if ra >= 2 && rb >= 2 && a.scale_rank != 1 && b.scale_rank != 2 && c.is_none() => {
            e.op(Op::MatMul, &[a.centred, b.centred])
        }
        // Gemm: A's scale per tensor, B's per tensor or per output column (B `[K, N]` per slice
        // of axis 1, or transposed, `[N, K]`, per slice of axis 0: its scale `[N, 1]`, read as
        // `[N]`); C added after the scaling, times beta.
        Op::Gemm(g)
            if a.scale_rank == 0
                && (b.scale_rank == 0
                    || (b.scale_rank == 1 && !g.trans_b)
                    || (b.scale_rank == 2 && g.trans_b)) =>
        {
            let attrs = op::Gemm { beta: 1.0, ..g.clone() };
            e.op(Op::Gemm(attrs), &[a.centred, b.centred])
        }
        // Conv: X's scale per tensor, W's (`[M, C/G, k...]`) per tensor or per output channel
        // (axis 0: a scale of W's rank); the bias added after the scaling.
        Op::Conv(_) if rb >= 3 && a.scale_rank == 0 && (b.scale_rank == 0 || b.scale_rank == rb) => {
            e.op(op.clone(), &[a.centred, b.centred])
        }
        _ => return None,
    };
    // A per-channel scale (or bias) of a Conv as the result's channels read it: `[M, 1, ...]`
    // with one unit dim per spatial dim.
    let per_channel = |e: &mut Expand, v: ValueId| {
        let dims: Vec<i64> = std::iter::once(-1).chain((2..rb).map(|_| 1)).collect();
        let shape = e.i64s(&dims);
        e.op(Op::Reshape(op::Reshape::default()), &[v, shape])
    };
    // B's scale as the result's columns read it (a transposed Gemm B's `[N, 1]` as `[N]`).
    let b_scale = match op {
        Op::Gemm(_) if b.scale_rank == 2 => {
            let flat = e.i64s(&[-1]);
            e.op(Op::Reshape(op::Reshape::default()), &[b.scale, flat])
        }
        Op::Conv(_) if b.scale_rank == rb => per_channel(e, b.scale),
        _ => b.scale,
    };
    let u = e.op(Op::Mul, &[t, a.scale]);
    Some(match (op, c) {
        (Op::Gemm(g), Some(c)) => {
            let v = e.op(Op::Mul, &[u, b_scale]);
            let bc = e.scale(g.beta, c);
            e.op_into(Op::Add, &[v, bc], out)
        }
        (Op::Conv(_), Some(c)) => {
            let v = e.op(Op::Mul, &[u, b_scale]);
            let bias = per_channel(e, c);
            e.op_into(Op::Add, &[v, bias], out)
        }
        _ => e.op_into(Op::Mul, &[u, b_scale], out),
    })
}

/// The QuantizeLinear → DequantizeLinear pairs to compose: each DequantizeLinear whose input is
/// a QuantizeLinear's output that only DequantizeLinears of the same scale and zero point read
/// (and that is no graph output), mapped to that QuantizeLinear.
pub(super) fn pairs(g: &Graph) -> BTreeMap<NodeId, NodeId> {
    let consumers = g.consumers();
    let mut out = BTreeMap::new();
    for (i, q) in g.nodes.iter().enumerate() {
        let (Op::QuantizeLinear(qa), Some(y)) = (&q.op, q.output(0)) else { continue };
        if g.outputs.contains(&y) || q.input(1).is_none() {
            continue;
        }
        let readers = &consumers[y.index()];
        let same = |n: &NodeId| {
            let d = &g.nodes[n.index()];
            matches!(&d.op, Op::DequantizeLinear(da) if da.axis == qa.axis && da.block_size == qa.block_size)
                && d.input(0) == Some(y)
                && d.input(1) == q.input(1)
                && d.input(2) == q.input(2)
        };
        if readers.is_empty() || !readers.iter().all(same) {
            continue;
        }
        for &r in readers {
            out.insert(r, NodeId(i as u32));
        }
    }
    out
}

/// Ops whose outputs hold only values of their first input (moved, selected or repeated): a value
/// on a quantization grid stays on it through them.
pub(in crate::plan) fn moves_values(op: &Op) -> bool {
    matches!(
        op,
        Op::Identity
            | Op::Reshape(_)
            | Op::Flatten(_)
            | Op::Squeeze(_)
            | Op::Unsqueeze(_)
            | Op::Transpose(_)
            | Op::Split(_)
            | Op::Slice(_)
            | Op::Gather(_)
            | Op::Expand
            | Op::Tile
            | Op::DepthToSpace(_)
            | Op::SpaceToDepth(_)
    )
}

/// The QuantizeLinear -> DequantizeLinear pairs that give back their input bit for bit, as ONNX
/// Runtime's QDQ clean-up drops them: the pair's input comes, through ops that only move or
/// select values ([`moves_values`]), from a DequantizeLinear of the same per-tensor scale and
/// zero point, so each value is already `(q - z) * s` for an integer `q` in the type's range.
/// Quantizing it divides by `s` (within two ulps of the integer `q - z`, far below the half
/// that `round` tolerates at `|q - z| <= 255`) and gives `q` back; dequantizing recomputes the
/// same product. `quantize_static` writes such a pair after every data-movement op (the
/// output's range is its input's), and each costs a pass over the tensor. Returns the graph with
/// every reader of such a pair's DequantizeLinear reading the pair's input instead and the pair
/// removed; `None` when there is none. Pairs whose values leave the graph (a graph output, a
/// subgraph's capture) stay.
pub(super) fn drop_identity_pairs(g: &Graph) -> Option<Graph> {
    let consumers = g.consumers();
    let defs = g.definitions();
    let producer = |v: ValueId| match defs.get(v.index()).copied().flatten() {
        Some(Definition::Node { node, .. }) => Some(&g.nodes[node.index()]),
        _ => None,
    };
    // One value of a constant (not an input's default), as its dtype and bytes.
    let scalar = |v: ValueId| {
        let c = g.initializers.get(&v).filter(|_| !g.defaults.contains_key(&v))?;
        (c.dims.iter().product::<usize>() == 1).then_some((c.dtype, &c.bytes[..]))
    };
    let same = |a: ValueId, b: ValueId| a == b || scalar(a).is_some_and(|x| scalar(b) == Some(x));
    // The (scale, zero point) of the DequantizeLinear whose values `v` holds, through the ops
    // that move them.
    let grid = |mut v: ValueId| {
        for _ in 0..g.nodes.len() {
            let n = producer(v)?;
            match &n.op {
                Op::DequantizeLinear(q) if q.block_size == 0 => {
                    let (s, z) = (n.input(1)?, n.input(2)?);
                    let int8 = scalar(z).is_some_and(|(t, _)| matches!(t, DType::U8 | DType::I8));
                    // An f32 scale that is a positive normal number: the division lands within
                    // two ulps of the integer (a zero, infinite or NaN scale gives no integer back).
                    let scale = scalar(s).and_then(|(t, b)| {
                        let v = f32::from_le_bytes(b.try_into().ok()?);
                        (t == DType::F32 && v.is_normal() && v > 0.0).then_some(())
                    });
                    return (int8 && scale.is_some()).then_some((s, z));
                }
                op if moves_values(op) => v = n.input(0)?,
                _ => return None,
            }
        }
        None
    };
    let mut replace: BTreeMap<ValueId, ValueId> = BTreeMap::new();
    let mut dropped = std::collections::BTreeSet::new();
    for (i, q) in g.nodes.iter().enumerate() {
        let (Op::QuantizeLinear(qa), Some(x), Some(s), Some(z), Some(y)) =
            (&q.op, q.input(0), q.input(1), q.input(2), q.output(0))
        else {
            continue;
        };
        if qa.block_size != 0 || g.outputs.contains(&y) {
            continue;
        }
        let Some((gs, gz)) = grid(x) else { continue };
        if !same(gs, s) || !same(gz, z) {
            continue;
        }
        let readers = &consumers[y.index()];
        let identity = |r: &NodeId| {
            let d = &g.nodes[r.index()];
            matches!(&d.op, Op::DequantizeLinear(da) if da.block_size == 0)
                && d.input(0) == Some(y)
                && d.input(1).is_some_and(|ds| same(ds, s))
                && d.input(2).is_some_and(|dz| same(dz, z))
                && d.output(0).is_some_and(|o| {
                    !g.outputs.contains(&o)
                        && consumers[o.index()].iter().all(|c| g.nodes[c.index()].op.subgraphs().is_empty())
                })
        };
        if readers.is_empty() || !readers.iter().all(identity) {
            continue;
        }
        for r in readers {
            let d = &g.nodes[r.index()];
            replace.insert(d.output(0).expect("checked"), x);
            dropped.insert(r.index());
        }
        dropped.insert(i);
    }
    if dropped.is_empty() {
        return None;
    }
    // A pair's input may itself be a dropped pair's output: follow the replacements to the end.
    let resolve = |mut v: ValueId| {
        while let Some(&w) = replace.get(&v) {
            v = w;
        }
        v
    };
    let mut out = g.clone();
    out.nodes = Vec::with_capacity(g.nodes.len() - dropped.len());
    for (i, n) in g.nodes.iter().enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        let mut n = n.clone();
        for v in n.inputs.iter_mut().flatten() {
            *v = resolve(*v);
        }
        out.nodes.push(n);
    }
    // The dropped pairs' values are defined by nothing now: drop them.
    Some(crate::dce::eliminate(&out))
}

/// The values of the codes `codes` (uint8, one code of `c` per element) as f32: a gather from
/// the table of the 256 bytes' values (`Coded::decode`, exact in f32), indexed by the codes.
pub(super) fn decode(e: &mut Expand, codes: ValueId, c: Coded) -> ValueId {
    let values: Vec<f64> = (0..=255u8).map(|b| c.decode(b)).collect();
    let name = e.fresh();
    let table =
        e.g.initializer(&name, ConstTensor::from_f64s(DType::F32, &[256], &values).expect("256 values"));
    let index = e.cast(codes, DType::I64);
    e.op(Op::Gather(op::Gather { axis: 0 }), &[table, index])
}

/// Whether `node` decodes its input `slot` (a value of a coded type): a Cast from it to a float
/// type, or a DequantizeLinear of it (x or the zero point).
pub(super) fn decodes(node: &crate::graph::Node, slot: usize) -> bool {
    match &node.op {
        Op::Cast(c) => slot == 0 && c.to.is_float() && !matches!(c.to, DType::Coded(_)),
        Op::DequantizeLinear(_) => slot == 0 || slot == 2,
        _ => false,
    }
}

/// Weights of a coded type (int4 / uint4 / int2 / uint2, float8, float4: held one code per byte)
/// that are only moved ([`moves_values`]) and decoded (cast to a float type, dequantized), held
/// as their codes in uint8 instead, which the GPU's byte kernels move: returns the graph and the
/// coded type of every value that now holds codes (the weights and their moves), for
/// [`decode`]; `None` when no weight qualifies.
pub(super) fn retype_codes(g: &Graph, infos: &[TensorInfo]) -> Option<(Graph, BTreeMap<ValueId, Coded>)> {
    let mut readers: Vec<Vec<(NodeId, usize)>> = vec![Vec::new(); g.values.len()];
    for (i, node) in g.nodes.iter().enumerate() {
        for (slot, v) in node.inputs.iter().enumerate() {
            if let Some(v) = v {
                readers[v.index()].push((NodeId(i as u32), slot));
            }
        }
    }
    let mut out = g.clone();
    let mut codes = BTreeMap::new();
    for (&w, c) in &g.initializers {
        let DType::Coded(coded) = c.dtype else { continue };
        if g.inputs.contains(&w) {
            continue;
        }
        // Every value the weight's codes reach, through moves only, ends in decodes.
        let mut reached = vec![w];
        let mut ok = true;
        let mut k = 0;
        while ok && k < reached.len() {
            let v = reached[k];
            k += 1;
            ok &= !g.outputs.contains(&v);
            for &(n, slot) in &readers[v.index()] {
                let node = &g.nodes[n.index()];
                if decodes(node, slot) {
                    continue;
                }
                if slot == 0 && moves_values(&node.op) {
                    reached.extend(node.outputs.iter().flatten().copied());
                } else {
                    ok = false;
                }
            }
        }
        if !ok || reached.iter().any(|v| infos[v.index()].dtype != c.dtype) {
            continue;
        }
        let held = ConstTensor::new(DType::U8, c.dims.clone(), c.bytes.clone()).ok()?;
        out.initializers.insert(w, held);
        for v in reached {
            codes.insert(v, coded);
            if let Some(info) = out.values[v.index()].info.as_mut() {
                info.dtype = DType::U8;
            }
        }
    }
    (!codes.is_empty()).then_some((out, codes))
}
