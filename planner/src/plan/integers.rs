//! Values that hold small integers, and the products of them that TF32 computes exactly.
//!
//! A quantized model's GEMMs and convolutions multiply integers: `decompose::quant::scale_out`
//! computes them on the integers less their zero points (`|v| <= 255` for 8-bit types) and scales
//! the result after. TF32 holds every integer of magnitude up to 2^11 exactly, so for such operands
//! the TF32 entries' one product per term is what the exact (3xTF32) entries compute with their
//! three (the small parts are zero), accumulated in f32 the same way: the same result at a third of
//! the tensor-core work and, for a packed weight, half its bytes. An `exact` plan therefore runs
//! those products on the TF32 entries ([`super::PlanOptions::tf32_integer_products`]).
//!
//! [`small_integers`] proves it value by value, from the weights' data and the ops between: a value
//! is an integer of known magnitude when it is an integer weight, a float weight whose every element
//! is one, a cast of an integer, a clip of an integer (or a rounding) to integer bounds, a sum,
//! difference or product of integers, or a data movement of them.

use std::collections::{HashMap, HashSet};

use crate::graph::{Definition, Graph, NodeId, ValueId};
use crate::op::Op;
use crate::tensor_info::{DType, TensorInfo};

/// Largest magnitude up to which TF32 (10 explicit mantissa bits) holds every integer.
pub(super) const TF32_EXACT: f64 = 2048.0;

/// Deepest chain of ops [`small_integers`] follows back from a product's operand.
const MAX_DEPTH: usize = 64;

/// What is known of a value's elements.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Range {
    /// Not known to be integers (or NaN / infinite).
    Unknown,
    /// Integers (or NaN / infinities, which every path carries alike), of magnitude at most the
    /// bound when there is one.
    Integers(Option<f64>),
}

impl Range {
    fn bound(self) -> Option<f64> {
        match self {
            Range::Integers(b) => b,
            Range::Unknown => None,
        }
    }

    /// Integers of the two (their bounds combined by `f`).
    fn join(self, other: Range, f: impl Fn(f64, f64) -> f64) -> Range {
        match (self, other) {
            (Range::Integers(a), Range::Integers(b)) => Range::Integers(a.zip(b).map(|(a, b)| f(a, b))),
            _ => Range::Unknown,
        }
    }
}

/// The names of the values of `g` that the GEMMs (MatMul, Gemm) and convolutions read as
/// operands, and the values they are moved from, that hold integers of magnitude at most
/// [`TF32_EXACT`] (only names that are unique in `g`).
pub(super) fn small_integers(g: &Graph, infos: &[TensorInfo]) -> HashSet<String> {
    let mut walk = Walk { g, infos, defs: g.definitions(), memo: HashMap::new() };
    for node in &g.nodes {
        if matches!(node.op, Op::MatMul | Op::Gemm(_) | Op::Conv(_)) {
            for v in node.inputs.iter().take(2).flatten() {
                walk.range(*v, 0);
            }
        }
    }
    let mut count: HashMap<&str, usize> = HashMap::new();
    for v in &g.values {
        *count.entry(v.name.as_str()).or_default() += 1;
    }
    (walk.memo.iter())
        .filter(|(_, r)| r.bound().is_some_and(|b| b <= TF32_EXACT))
        .map(|(v, _)| g.values[v.index()].name.clone())
        .filter(|name| count.get(name.as_str()) == Some(&1))
        .collect()
}

struct Walk<'a> {
    g: &'a Graph,
    infos: &'a [TensorInfo],
    defs: Vec<Option<Definition>>,
    memo: HashMap<ValueId, Range>,
}

impl Walk<'_> {
    fn range(&mut self, v: ValueId, depth: usize) -> Range {
        if let Some(&r) = self.memo.get(&v) {
            return r;
        }
        let r = if depth > MAX_DEPTH { Range::Unknown } else { self.compute(v, depth) };
        self.memo.insert(v, r);
        r
    }

    fn compute(&mut self, v: ValueId, depth: usize) -> Range {
        let dtype = self.infos.get(v.index()).map(|i| i.dtype);
        match self.defs.get(v.index()).copied().flatten() {
            Some(Definition::Initializer) if !self.g.inputs.contains(&v) => {
                self.g.initializers.get(&v).map_or(Range::Unknown, |c| {
                    let values = c.to_f64s();
                    let integral = values.iter().all(|x| x.is_finite() && x.fract() == 0.0);
                    if integral {
                        Range::Integers(Some(values.iter().fold(0.0, |m: f64, x| m.max(x.abs()))))
                    } else {
                        Range::Unknown
                    }
                })
            }
            Some(Definition::Node { node, .. }) => self.node(node, depth),
            // A graph input (or a weight a caller may override): integers of its type, if any.
            _ => type_range(dtype),
        }
    }

    /// The range of the outputs of `id`.
    fn node(&mut self, id: NodeId, depth: usize) -> Range {
        let g = self.g;
        let node = &g.nodes[id.index()];
        let input = |k: usize, w: &mut Self| match node.inputs.get(k).copied().flatten() {
            Some(x) => w.range(x, depth + 1),
            None => Range::Unknown,
        };
        let all = |w: &mut Self, ks: &[usize]| {
            let rs: Vec<Range> = ks
                .iter()
                .map(|&k| match node.inputs.get(k).copied().flatten() {
                    Some(x) => w.range(x, depth + 1),
                    None => Range::Integers(Some(0.0)),
                })
                .collect();
            rs.into_iter().reduce(|a, b| a.join(b, f64::max)).unwrap_or(Range::Unknown)
        };
        match &node.op {
            // Data movement: the same elements (or some of them), or their magnitudes.
            op if super::decompose::quant::moves_values(op) => input(0, self),
            Op::GatherElements(_)
            | Op::GatherNd(_)
            | Op::ReduceMax(_)
            | Op::ReduceMin(_)
            | Op::Relu
            | Op::Abs
            | Op::Neg => input(0, self),
            Op::Concat(_) | Op::Max | Op::Min => all(self, &(0..node.inputs.len()).collect::<Vec<_>>()),
            Op::Where => all(self, &[1, 2]),
            Op::Pad(_) => all(self, &[0, 2]),
            Op::Add | Op::Sub => input(0, self).join(input(1, self), |a, b| a + b),
            Op::Mul => input(0, self).join(input(1, self), |a, b| a * b),
            // Rounded: integers of no known bound, until a clip gives one.
            Op::Round | Op::Floor | Op::Ceil => Range::Integers(None),
            Op::Clip(c) => match input(0, self) {
                Range::Integers(b) => {
                    // Each bound: absent, or an integral constant (a bound read at run time, or
                    // a fraction, can put a non-integer in the result).
                    let bound = |k: usize, attr: Option<f32>| match node.inputs.get(k).copied().flatten() {
                        Some(v) => self.constant(Some(v)).map(Some),
                        None => Some(attr.map(f64::from)),
                    };
                    match (bound(1, c.min), bound(2, c.max)) {
                        (Some(lo), Some(hi)) if [lo, hi].iter().flatten().all(|v| v.fract() == 0.0) => {
                            match (lo, hi) {
                                (Some(lo), Some(hi)) => {
                                    let clipped = lo.abs().max(hi.abs());
                                    Range::Integers(Some(b.map_or(clipped, |b| b.min(clipped))))
                                }
                                _ => Range::Integers(b),
                            }
                        }
                        _ => Range::Unknown,
                    }
                }
                Range::Unknown => Range::Unknown,
            },
            Op::Cast(c) => {
                let from = self.infos.get(node.inputs.first().copied().flatten().map_or(0, |x| x.index()));
                let source = match from.map(|i| i.dtype) {
                    Some(d) if d.is_int() || d == DType::Bool => {
                        input(0, self).join(type_range(Some(d)), f64::min)
                    }
                    _ => input(0, self),
                };
                // Kept only where the target type holds every integer of the bound.
                match (source.bound(), exact_integers(c.to)) {
                    (Some(b), Some(limit)) if b <= limit => source,
                    _ => Range::Unknown,
                }
            }
            _ => Range::Unknown,
        }
    }

    /// The value of a one-element constant `v`.
    fn constant(&self, v: Option<ValueId>) -> Option<f64> {
        let c = self.g.initializers.get(&v?)?;
        (c.elems() == 1).then(|| c.to_f64s()[0])
    }
}

/// Integers of `dtype`'s range (with bools as 0 and 1); unknown for the other types.
fn type_range(dtype: Option<DType>) -> Range {
    let bound = match dtype {
        Some(DType::Bool) => 1.0,
        Some(DType::I8) => 128.0,
        Some(DType::U8) => 255.0,
        Some(DType::I16) => 32768.0,
        Some(DType::U16) => 65535.0,
        Some(d) if d.is_int() => return Range::Integers(None),
        _ => return Range::Unknown,
    };
    Range::Integers(Some(bound))
}

/// Largest magnitude up to which `dtype` holds every integer (`None`: unknown type).
fn exact_integers(dtype: DType) -> Option<f64> {
    Some(match dtype {
        DType::F64 => 9007199254740992.0,
        DType::F32 => 16777216.0,
        DType::F16 => 2048.0,
        DType::BF16 => 256.0,
        d if d.is_int() => f64::INFINITY,
        _ => return None,
    })
}

/// The GEMM (MatMul, Gemm, FusedGemm) and Conv nodes of the fused graph `g` whose two operands
/// (A and B as the GEMM reads them, through the transposes it walks; X and W) are named in `small`
/// ([`small_integers`]) and f32; not a GEMM that normalizes A as it loads it (`norms`: its A is
/// the normalization's input).
pub(super) fn products(
    g: &Graph,
    values: &[super::PlannedValue],
    perms: &super::fuse::OperandPerms,
    norms: &super::norm_gemm::NormGemms,
    small: &HashSet<String>,
) -> HashSet<NodeId> {
    let named = |v: ValueId| {
        values.get(v.index()).is_some_and(|pv| pv.dtype == DType::F32 && small.contains(&pv.name))
    };
    if small.is_empty() {
        return HashSet::new();
    }
    (0..g.nodes.len() as u32)
        .map(NodeId)
        .filter(|&id| {
            let node = &g.nodes[id.index()];
            let operands = match node.op {
                Op::Gemm(_) | Op::MatMul | Op::FusedGemm(_)
                    if node.output(0).is_some_and(|o| !norms.contains_key(&o)) =>
                {
                    super::gemm::gemm_of(g, id, values, perms).ok().map(|(_, a, b, _)| (a, b))
                }
                Op::Conv(_) | Op::FusedConv(_) => node.input(0).zip(node.input(1)),
                _ => None,
            };
            operands.is_some_and(|(a, b)| named(a) && named(b))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConstTensor;
    use crate::op::{Cast, Clip};
    use crate::tensor_info::Dim;

    /// Each candidate operand of a MatMul, and whether it is proven a small integer.
    #[test]
    fn integers_are_proven_through_casts_clips_sums_and_moves_and_nothing_else() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [8, 8].map(Dim::Known));
        let c = |g: &mut Graph, name: &str, v: f32| {
            g.initializer(name, ConstTensor::from_f32(&[], &[v]).unwrap())
        };
        let (s, z, lo, hi, half) = (
            c(&mut g, "s", 0.02),
            c(&mut g, "z", 128.0),
            c(&mut g, "lo", 0.0),
            c(&mut g, "hi", 255.0),
            c(&mut g, "half", 0.5),
        );
        let q: Vec<i64> = (0..64).map(|i| i * 4 - 128).collect();
        let wq = g.initializer("wq", ConstTensor::from_i64s_as(DType::I8, &[8, 8], &q).unwrap());
        let big =
            g.initializer("big", ConstTensor::from_i64s_as(DType::I16, &[8, 8], &vec![30000; 64]).unwrap());
        let ints = g.initializer("ints", ConstTensor::from_f32(&[8, 8], &[-7.0; 64]).unwrap());
        let fracs = g.initializer("fracs", ConstTensor::from_f32(&[8, 8], &[0.25; 64]).unwrap());
        let to = |t: DType| Op::Cast(Cast::to(t));
        // The weight's integers less a zero point, transposed: |v| <= 255.
        let wc = g.op1(to(DType::F32), &[wq]);
        let wc = g.op1(Op::Sub, &[wc, z]);
        let wt = g.op1(Op::Transpose(Default::default()), &[wc]);
        // A quantization's integers less the zero point: clip(round(x / s) + z, 0, 255) - z.
        let r = g.op1(Op::Div, &[x, s]);
        let r = g.op1(Op::Round, &[r]);
        let r = g.op1(Op::Add, &[r, z]);
        let clipped = g.op1(Op::Clip(Clip::default()), &[r, lo, hi]);
        let centred = g.op1(Op::Sub, &[clipped, z]);
        // Not: a scaled value, a rounding without a clip, wide integers, f16 of a large bound,
        // fractions.
        let scaled = g.op1(Op::Mul, &[centred, half]);
        let rounded = g.op1(Op::Round, &[x]);
        let wide = g.op1(to(DType::F32), &[big]);
        let wide16 = g.op1(Op::Mul, &[ints, ints]); // 49, fine in f32 ...
        let wide16 = g.op1(Op::Mul, &[wide16, wide16]); // ... 2401: past TF32's reach
        let in_f16 = g.op1(to(DType::F16), &[wide16]);
        // A clip to a fractional bound, or to one read at run time.
        let half_clipped = g.op1(Op::Clip(Clip::default()), &[centred, half, hi]);
        let at_run = g.input("bound", DType::F32, Vec::<Dim>::new());
        let run_clipped = g.op1(Op::Clip(Clip::default()), &[centred, lo, at_run]);
        let mut expect = Vec::new();
        for (v, small) in [
            (wt, true),
            (wc, true),
            (centred, true),
            (ints, true),
            (scaled, false),
            (rounded, false),
            (wide, false),
            (wide16, false),
            (in_f16, false),
            (half_clipped, false),
            (run_clipped, false),
            (fracs, false),
            (x, false),
        ] {
            let y = g.op1(Op::MatMul, &[v, v]);
            g.output(y);
            expect.push((g.values[v.index()].name.clone(), small));
        }
        let infos = crate::shape_infer::infer(&g).unwrap();
        let found = small_integers(&g, &infos);
        for (name, small) in expect {
            assert_eq!(found.contains(&name), small, "{name}: {found:?}");
        }
    }
}
