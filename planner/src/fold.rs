//! Constant folding of shape subgraphs, `If` nodes of constant condition inlined, then dead-node
//! elimination.
//!
//! A node is folded when all its outputs are known before running: small integer results that shape
//! inference tracked completely (`Shape -> Gather -> Unsqueeze -> Concat` on static dims, i64
//! arithmetic, Slice, Cast, ...), `Constant`, and `ConstantOfShape` / `Range` / `Cast` / reshape-like
//! ops whose inputs are constants and whose result has at most `MAX_FOLD_ELEMS` elements. Folded
//! outputs become initializers; the nodes then die in `dce::eliminate`. Floating-point arithmetic is
//! never folded, so folding cannot change numerics.

use std::collections::BTreeMap;

use crate::constant::ConstTensor;
use crate::dce;
use crate::error::PlanError;
use crate::graph::{Graph, Node, ValueId};
use crate::op::Op;
use crate::shape_infer::{self, Inference};
use crate::tensor_info::{DType, TensorInfo};
use crate::validate;

/// Largest tensor (in elements) that folding materializes.
pub const MAX_FOLD_ELEMS: usize = 1 << 16;

/// Rounds of folding and If inlining [`run`] makes at most (nested constant Ifs unfold one level a
/// round).
const MAX_ROUNDS: usize = 8;

/// Folds constants, replaces each `If` whose condition became a constant by its taken branch (and
/// folds again), and removes dead nodes; the result is validated.
pub fn run(g: &Graph) -> Result<Graph, PlanError> {
    // Each round: the Ifs whose condition is a constant by now become their branches (the shapes
    // those compute may be what inference needs to get through the graph), then folding. What one
    // round folds feeds the next one's analysis (a Split of a constant, then what its pieces
    // shape): repeat while Ifs unfold or nodes fold. A graph with nothing to fold takes one round.
    let mut out = g.clone();
    for _ in 0..MAX_ROUNDS {
        let before = out.nodes.len();
        let inlined = inline::constant_ifs(&out);
        let changed = inlined.is_some();
        let next = inlined.unwrap_or(out);
        if changed {
            validate::graph(&next)?;
        }
        out = dce::eliminate(&constants(&next)?);
        if !changed && out.nodes.len() == before {
            break;
        }
    }
    validate::graph(&out)?;
    Ok(out)
}

/// Replaces every foldable node's outputs by initializers (the nodes stay, now dead).
pub fn constants(g: &Graph) -> Result<Graph, PlanError> {
    let inference = shape_infer::analyse(g)?;
    let mut consts: BTreeMap<ValueId, ConstTensor> = g.initializers.clone();
    let mut folded_nodes = Vec::new();
    for id in validate::topo_order(g)? {
        let node = &g.nodes[id.index()];
        let Some(values) = fold_node(node, &inference, &consts) else { continue };
        for (v, t) in node.outputs.iter().zip(values) {
            if let Some(v) = v {
                consts.insert(*v, t);
            }
        }
        folded_nodes.push(id);
    }
    let mut out = g.clone();
    for id in folded_nodes {
        let node = &mut out.nodes[id.index()];
        for v in node.outputs.iter_mut() {
            if let Some(id) = v.take()
                && let Some(t) = consts.get(&id)
            {
                out.initializers.insert(id, t.clone());
            }
        }
    }
    // Folded nodes now define nothing; drop them so the graph stays valid even without `dce`.
    out.nodes.retain(|n| n.outputs.iter().any(Option::is_some) || n.outputs.is_empty());
    Ok(out)
}

/// The constant value of every output slot of `node`, if all of them are known.
fn fold_node(
    node: &Node,
    inf: &Inference,
    consts: &BTreeMap<ValueId, ConstTensor>,
) -> Option<Vec<ConstTensor>> {
    if !node.op.subgraphs().is_empty() || node.outputs.iter().all(Option::is_none) {
        return None;
    }
    if let Op::Split(sp) = &node.op
        && let Some(parts) = split_constant(node, sp.axis, inf, consts)
    {
        return Some(parts);
    }
    let mut out = Vec::with_capacity(node.outputs.len());
    for (slot, v) in node.outputs.iter().enumerate() {
        let Some(v) = v else {
            // An unused optional output: only single-output folds are attempted.
            if slot == 0 {
                return None;
            }
            continue;
        };
        let info = inf.info(*v)?;
        let tracked = inf.values.get(v.index()).cloned().flatten().and_then(|p| p.to_const());
        let t = match tracked {
            Some(t) => t,
            None if slot == 0 => fold_from_constants(node, info, consts)?,
            None => return None,
        };
        out.push(t);
    }
    Some(out)
}

/// The outputs of a Split of a constant (each output's dims known, every output present): the
/// pieces along `axis` in order.
fn split_constant(
    node: &Node,
    axis: i64,
    inf: &Inference,
    consts: &BTreeMap<ValueId, ConstTensor>,
) -> Option<Vec<ConstTensor>> {
    let x = consts.get(&node.input(0)?)?;
    let rank = x.dims.len() as i64;
    let a = usize::try_from(if axis < 0 { axis + rank } else { axis }).ok().filter(|&a| a < x.dims.len())?;
    if x.bytes.len() > MAX_FOLD_ELEMS * 8 {
        return None;
    }
    let es = x.dtype.size_bytes();
    let (outer, len, inner): (usize, usize, usize) =
        (x.dims[..a].iter().product(), x.dims[a], x.dims[a + 1..].iter().product());
    let mut start = 0usize;
    let mut out = Vec::with_capacity(node.outputs.len());
    for v in &node.outputs {
        let dims = inf.info((*v)?)?.shape.as_known()?;
        let e = *dims.get(a)?;
        if start + e > len {
            return None;
        }
        let mut bytes = Vec::with_capacity(outer * e * inner * es);
        for o in 0..outer {
            let from = (o * len + start) * inner * es;
            bytes.extend_from_slice(x.bytes.get(from..from + e * inner * es)?);
        }
        out.push(ConstTensor::new(x.dtype, dims, bytes).ok()?);
        start += e;
    }
    (start == len).then_some(out)
}

/// Folds ops of any dtype whose inputs are all constants.
fn fold_from_constants(
    node: &Node,
    info: &TensorInfo,
    consts: &BTreeMap<ValueId, ConstTensor>,
) -> Option<ConstTensor> {
    let dims = info.shape.as_known()?;
    let elems = info.shape.known_elems()?;
    if elems > MAX_FOLD_ELEMS {
        return None;
    }
    let input = |i: usize| node.input(i).and_then(|v| consts.get(&v));
    match &node.op {
        Op::Constant(c) => Some(c.value.clone()),
        Op::ConstantOfShape(c) => {
            let fill = c.value.bytes.clone();
            ConstTensor::new(c.value.dtype, dims, fill.repeat(elems)).ok()
        }
        Op::Identity | Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => {
            // Every input (data and shape/axes) must be constant, or the op is not foldable yet.
            for i in 0..node.inputs.len() {
                if node.input(i).is_some() && input(i).is_none() {
                    return None;
                }
            }
            input(0)?.reshaped(dims).ok()
        }
        Op::Cast(_) | Op::CastLike(_) => {
            let x = input(0)?;
            // Casts that read or write a coded type (saturate / round_mode matter) or read uint64
            // past i64::MAX are left to the kernels / reference.
            let coded = |d: DType| matches!(d, DType::Coded(_) | DType::String);
            if coded(x.dtype)
                || coded(info.dtype)
                || (x.dtype == DType::U64 && x.to_i64s()?.iter().any(|&v| v < 0))
            {
                return None;
            }
            match x.to_i64s() {
                Some(ints) if !x.dtype.is_float() => ConstTensor::from_i64s_as(info.dtype, &dims, &ints).ok(),
                _ => ConstTensor::from_f64s(info.dtype, &dims, &x.to_f64s()).ok(),
            }
        }
        Op::Equal | Op::Less | Op::Greater | Op::LessOrEqual | Op::GreaterOrEqual => {
            // Comparisons of constants of one shape, or against a one-element constant (a branch
            // condition computed from folded shapes). Integers compare exactly; floats as f64.
            let (a, b) = (input(0)?, input(1)?);
            let at = |c: &ConstTensor, k: usize| -> Option<f64> {
                let i = if c.elems() == 1 { 0 } else { k };
                match c.to_i64s() {
                    Some(v) if !c.dtype.is_float() => v.get(i).map(|&x| x as f64),
                    _ => c.to_f64s().get(i).copied(),
                }
            };
            if (a.elems() != elems && a.elems() != 1) || (b.elems() != elems && b.elems() != 1) {
                return None;
            }
            let ints = !a.dtype.is_float() && !b.dtype.is_float();
            if ints && (a.to_i64s()?.iter().chain(&b.to_i64s()?)).any(|x| x.unsigned_abs() > 1 << 53) {
                return None;
            }
            let bits = (0..elems)
                .map(|k| {
                    let (x, y) = (at(a, k)?, at(b, k)?);
                    Some(match &node.op {
                        Op::Equal => x == y,
                        Op::Less => x < y,
                        Op::Greater => x > y,
                        Op::LessOrEqual => x <= y,
                        _ => x >= y,
                    } as u8)
                })
                .collect::<Option<Vec<u8>>>()?;
            ConstTensor::new(crate::tensor_info::DType::Bool, dims, bits).ok()
        }
        Op::Range => {
            let scalar = |i: usize| input(i).and_then(|c| c.to_f64s().first().copied());
            let (start, delta) = (scalar(0)?, scalar(2)?);
            scalar(1)?;
            let values: Vec<f64> = (0..elems).map(|k| start + delta * k as f64).collect();
            ConstTensor::from_f64s(info.dtype, &dims, &values).ok()
        }
        _ => None,
    }
}

pub(crate) mod inline;

#[cfg(test)]
mod tests;
