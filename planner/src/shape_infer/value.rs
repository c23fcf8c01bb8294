//! Element-wise tracking of small integer tensors (shape values) through shape arithmetic.
//!
//! A `PartialValue` knows each element as an integer, a symbol (the size some `Dim::Symbol` stands
//! for, always >= 0), or nothing. Only integer/bool tensors with at most `MAX_TRACKED_ELEMS` elements
//! are tracked. Arithmetic on symbols is exact or gives up (`None`); it never guesses.

use super::Ctx;
use crate::constant::ConstTensor;
use crate::op::{Mod, Op};
use crate::tensor_info::{DType, Dim, TensorInfo};

/// Largest tensor whose elements are tracked.
pub const MAX_TRACKED_ELEMS: usize = 4096;

/// One tracked element: a known integer, or the (non-negative) size named by a symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymInt {
    /// A known value.
    Int(i64),
    /// The size of a symbolic dim.
    Sym(String),
}

impl SymInt {
    /// The element as a dim, if it is a valid size.
    pub fn to_dim(&self) -> Option<Dim> {
        match self {
            SymInt::Int(v) => usize::try_from(*v).ok().map(Dim::Known),
            SymInt::Sym(s) => Some(Dim::Symbol(s.clone())),
        }
    }

    /// A dim as an element.
    pub fn from_dim(d: &Dim) -> Option<SymInt> {
        match d {
            Dim::Known(n) => i64::try_from(*n).ok().map(SymInt::Int),
            Dim::Symbol(s) => Some(SymInt::Sym(s.clone())),
        }
    }
}

/// Tracked contents of a small integer tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialValue {
    /// Element type.
    pub dtype: DType,
    /// Dims (known: untracked otherwise).
    pub dims: Vec<usize>,
    /// Elements in row-major order; `None` where unknown.
    pub elems: Vec<Option<SymInt>>,
}

impl PartialValue {
    /// Tracks a constant, if it is a small integer or bool tensor.
    pub fn from_const(c: &ConstTensor) -> Option<Self> {
        if c.elems() > MAX_TRACKED_ELEMS {
            return None;
        }
        let ints = c.to_i64s()?;
        // (uint64 past i64::MAX would read as negative: not tracked.)
        if c.dtype == DType::U64 && ints.iter().any(|&v| v < 0) {
            return None;
        }
        Some(PartialValue {
            dtype: c.dtype,
            dims: c.dims.clone(),
            elems: ints.into_iter().map(|v| Some(SymInt::Int(v))).collect(),
        })
    }

    /// Every element, when all are known integers.
    pub fn ints(&self) -> Option<Vec<i64>> {
        self.elems.iter().map(|e| if let Some(SymInt::Int(v)) = e { Some(*v) } else { None }).collect()
    }

    /// The constant this value amounts to, when every element is known.
    pub fn to_const(&self) -> Option<ConstTensor> {
        ConstTensor::from_i64s_as(self.dtype, &self.dims, &self.ints()?).ok()
    }
}

/// Tracked contents of every output of the node in `ctx`, given the inferred output infos.
pub(crate) fn eval(ctx: &Ctx, outs: &[TensorInfo]) -> Vec<Option<PartialValue>> {
    if matches!(ctx.node.op, Op::Split(_)) {
        return split(ctx, outs);
    }
    let Some(out) = outs.first() else { return Vec::new() };
    let tracked = (out.dtype.is_int() || out.dtype == DType::Bool)
        && out.shape.known_elems().is_some_and(|n| n <= MAX_TRACKED_ELEMS);
    if !tracked {
        return Vec::new();
    }
    let Some(dims) = out.shape.as_known() else { return Vec::new() };
    let elems = eval_elems(ctx, out, &dims);
    match elems {
        Some(elems) if elems.len() == dims.iter().product::<usize>() => {
            vec![Some(PartialValue { dtype: out.dtype, dims, elems })]
        }
        _ => Vec::new(),
    }
}

/// The pieces of a tracked 1-D value split into outputs of known length (shape operands split
/// into their dims, as expanded ONNX functions do).
fn split(ctx: &Ctx, outs: &[TensorInfo]) -> Vec<Option<PartialValue>> {
    let Some(x) = ctx.value(0).filter(|x| x.dims.len() == 1) else { return Vec::new() };
    let mut start = 0usize;
    let mut pieces = Vec::with_capacity(outs.len());
    for out in outs {
        let Some(dims) = out.shape.as_known().filter(|d| d.len() == 1) else { return Vec::new() };
        let Some(elems) = x.elems.get(start..start + dims[0]) else { return Vec::new() };
        pieces.push(Some(PartialValue { dtype: x.dtype, dims: dims.clone(), elems: elems.to_vec() }));
        start += dims[0];
    }
    pieces
}

fn eval_elems(ctx: &Ctx, out: &TensorInfo, dims: &[usize]) -> Option<Vec<Option<SymInt>>> {
    let v = |i: usize| ctx.value(i);
    let n: usize = dims.iter().product();
    Some(match &ctx.node.op {
        Op::Constant(c) => PartialValue::from_const(&c.value)?.elems,
        Op::Shape(_) => {
            // The output dims already encode start/end; recover the slice from the input.
            let shape = ctx.opt(0)?.shape.dims();
            let start = start_of_shape_slice(ctx, shape.len())?;
            shape.get(start..start + n)?.iter().map(SymInt::from_dim).collect()
        }
        Op::Size => {
            let shape = &ctx.opt(0)?.shape;
            match shape.known_elems() {
                Some(k) => vec![Some(SymInt::Int(i64::try_from(k).ok()?))],
                None => {
                    let syms: Vec<&Dim> = shape.dims().iter().filter(|d| d.known() != Some(1)).collect();
                    match syms.as_slice() {
                        [Dim::Symbol(s)] => vec![Some(SymInt::Sym(s.clone()))],
                        _ => vec![None],
                    }
                }
            }
        }
        Op::Identity
        | Op::Dropout(_)
        | Op::Reshape(_)
        | Op::Flatten(_)
        | Op::Squeeze(_)
        | Op::Unsqueeze(_) => v(0)?.elems.clone(),
        Op::Cast(_) | Op::CastLike(_) => {
            let src = v(0)?;
            src.elems.iter().map(|e| cast_elem(e.as_ref(), src.dtype, out.dtype)).collect()
        }
        Op::Concat(_) => {
            let mut all = Vec::with_capacity(n);
            for i in 0..ctx.n_inputs() {
                let p = v(i)?;
                if p.dims.len() != 1 {
                    return None;
                }
                all.extend(p.elems.iter().cloned());
            }
            all
        }
        Op::Gather(g) => {
            let data = v(0)?;
            if data.dims.len() != 1 || (g.axis != 0 && g.axis != -1) {
                return None;
            }
            let len = data.elems.len() as i64;
            let mut picked = Vec::new();
            for i in v(1)?.ints()? {
                let j = if i < 0 { i + len } else { i };
                picked.push(data.elems.get(usize::try_from(j).ok()?)?.clone());
            }
            picked
        }
        Op::Slice(s) => {
            let data = v(0)?;
            if data.dims.len() != 1 {
                return None;
            }
            let len = data.elems.len() as i64;
            let (start, end) = match (&s.starts, &s.ends) {
                (Some(a), Some(b)) => (a.clone(), b.clone()),
                _ => (v(1)?.ints()?, v(2)?.ints()?),
            };
            let step = if ctx.opt(4).is_some() { v(4)?.ints()? } else { vec![1] };
            let (&[start], &[end], &[step]) = (start.as_slice(), end.as_slice(), step.as_slice()) else {
                return None;
            };
            let (first, count) = super::dims::slice_range(len, start, end, step)?;
            (0..count)
                .map(|k| data.elems.get(usize::try_from(first + k as i64 * step).ok()?).cloned())
                .collect::<Option<_>>()?
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Mod(_) | Op::Equal | Op::Less | Op::Greater => {
            binary(ctx, v(0)?, v(1)?, n)?
        }
        Op::And | Op::Or | Op::Xor => binary(ctx, v(0)?, v(1)?, n)?,
        Op::LessOrEqual | Op::GreaterOrEqual | Op::Max | Op::Min if ctx.n_inputs() == 2 => {
            binary(ctx, v(0)?, v(1)?, n)?
        }
        Op::Neg => v(0)?.elems.iter().map(|e| int(e).and_then(i64::checked_neg).map(SymInt::Int)).collect(),
        Op::Abs => v(0)?
            .elems
            .iter()
            .map(|e| match e {
                Some(SymInt::Int(x)) => x.checked_abs().map(SymInt::Int),
                other => other.clone(),
            })
            .collect(),
        Op::Not => v(0)?.elems.iter().map(|e| int(e).map(|x| SymInt::Int(i64::from(x == 0)))).collect(),
        Op::Where => {
            let (c, x, y) = (v(0)?, v(1)?, v(2)?);
            (0..n)
                .map(|i| match int(bcast(&c.elems, i)?) {
                    Some(0) => bcast(&y.elems, i).cloned().flatten(),
                    Some(_) => bcast(&x.elems, i).cloned().flatten(),
                    None => None,
                })
                .collect()
        }
        Op::ConstantOfShape(c) => {
            let fill = c.value.to_i64s()?.first().copied()?;
            vec![Some(SymInt::Int(fill)); n]
        }
        Op::Range => {
            let (start, delta) = (v(0)?.ints()?.first().copied()?, v(2)?.ints()?.first().copied()?);
            (0..n).map(|k| start.checked_add(delta.checked_mul(k as i64)?).map(SymInt::Int)).collect()
        }
        _ => return None,
    })
}

fn start_of_shape_slice(ctx: &Ctx, rank: usize) -> Option<usize> {
    let Op::Shape(s) = &ctx.node.op else { return None };
    let r = rank as i64;
    let start = if s.start < 0 { s.start + r } else { s.start };
    usize::try_from(start.clamp(0, r)).ok()
}

fn int(e: &Option<SymInt>) -> Option<i64> {
    match e {
        Some(SymInt::Int(v)) => Some(*v),
        _ => None,
    }
}

/// Element `i` of a value broadcast to a rank <= 1 output (a one-element input repeats).
fn bcast(elems: &[Option<SymInt>], i: usize) -> Option<&Option<SymInt>> {
    if elems.len() == 1 { elems.first() } else { elems.get(i) }
}

fn cast_elem(e: Option<&SymInt>, from: DType, to: DType) -> Option<SymInt> {
    match (e?, to) {
        (SymInt::Int(v), DType::Bool) => Some(SymInt::Int(i64::from(*v != 0))),
        // An integer is tracked through a cast to an integer type only where it survives it
        // unchanged (no wrap at the narrower width, no negative uint64).
        (SymInt::Int(v), to) if to.is_int() => {
            let c = ConstTensor::from_i64s_as(to, &[1], &[*v]).ok()?;
            (c.to_i64s()? == [*v] && !(to == DType::U64 && *v < 0)).then_some(SymInt::Int(*v))
        }
        (SymInt::Int(v), _) => Some(SymInt::Int(*v)),
        (SymInt::Sym(s), DType::I64 | DType::I32) if from != DType::Bool => Some(SymInt::Sym(s.clone())),
        (SymInt::Sym(_), _) => None,
    }
}

fn binary(ctx: &Ctx, a: &PartialValue, b: &PartialValue, n: usize) -> Option<Vec<Option<SymInt>>> {
    if a.dims.len() > 1 || b.dims.len() > 1 {
        return None;
    }
    Some(
        (0..n)
            .map(|i| elem_op(&ctx.node.op, bcast(&a.elems, i)?.as_ref()?, bcast(&b.elems, i)?.as_ref()?))
            .collect(),
    )
}

/// One element of a binary op; exact on symbols or `None`.
fn elem_op(op: &Op, a: &SymInt, b: &SymInt) -> Option<SymInt> {
    use SymInt::{Int, Sym};
    let bool_ = |x: bool| Some(Int(i64::from(x)));
    match (op, a, b) {
        (Op::Add, Int(x), Int(y)) => x.checked_add(*y).map(Int),
        (Op::Add, Sym(s), Int(0)) | (Op::Add, Int(0), Sym(s)) => Some(Sym(s.clone())),
        (Op::Sub, Int(x), Int(y)) => x.checked_sub(*y).map(Int),
        (Op::Sub, Sym(s), Int(0)) => Some(Sym(s.clone())),
        (Op::Sub, Sym(s), Sym(t)) if s == t => Some(Int(0)),
        (Op::Mul, Int(x), Int(y)) => x.checked_mul(*y).map(Int),
        (Op::Mul, Sym(s), Int(1)) | (Op::Mul, Int(1), Sym(s)) => Some(Sym(s.clone())),
        (Op::Mul, _, Int(0)) | (Op::Mul, Int(0), _) => Some(Int(0)),
        (Op::Div, Int(x), Int(y)) => x.checked_div(*y).map(Int),
        (Op::Div, Sym(s), Int(1)) => Some(Sym(s.clone())),
        (Op::Mod(Mod { fmod: true }), Int(x), Int(y)) => x.checked_rem(*y).map(Int),
        (Op::Mod(Mod { fmod: false }), Int(x), Int(y)) => {
            let r = x.checked_rem(*y)?;
            Some(Int(if r != 0 && (r < 0) != (*y < 0) { r + y } else { r }))
        }
        (Op::Max, Int(x), Int(y)) => Some(Int(*x.max(y))),
        (Op::Max, Sym(s), Int(k)) | (Op::Max, Int(k), Sym(s)) if *k <= 0 => Some(Sym(s.clone())),
        (Op::Min, Int(x), Int(y)) => Some(Int(*x.min(y))),
        (Op::Min, Sym(_), Int(k)) | (Op::Min, Int(k), Sym(_)) if *k <= 0 => Some(Int(*k)),
        (Op::Max | Op::Min, Sym(s), Sym(t)) if s == t => Some(Sym(s.clone())),
        (Op::Equal, Int(x), Int(y)) => bool_(x == y),
        (Op::Equal, Sym(s), Sym(t)) if s == t => bool_(true),
        (Op::Equal, Sym(_), Int(k)) | (Op::Equal, Int(k), Sym(_)) if *k < 0 => bool_(false),
        (Op::And, Int(x), Int(y)) => bool_(*x != 0 && *y != 0),
        (Op::Or, Int(x), Int(y)) => bool_(*x != 0 || *y != 0),
        (Op::Xor, Int(x), Int(y)) => bool_((*x != 0) != (*y != 0)),
        (Op::Less, Int(x), Int(y)) => bool_(x < y),
        (Op::Greater, Int(x), Int(y)) => bool_(x > y),
        (Op::LessOrEqual, Int(x), Int(y)) => bool_(x <= y),
        (Op::GreaterOrEqual, Int(x), Int(y)) => bool_(x >= y),
        _ => None,
    }
}
