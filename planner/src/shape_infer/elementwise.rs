//! Elementwise operators: unary, binary, comparison, logical, variadic, `Where`, `Cast`, `Clip`.
//!
//! Broadcasting is NumPy's multidirectional rule, extended to symbols: `1` with `x` gives `x`; a
//! symbol with itself stays; a symbol with a known `n != 1` gives `n` (the symbol must be 1 or n);
//! two different symbols give a fresh symbol (either could be 1); two different known sizes other
//! than 1 are an error.

use super::Ctx;
use crate::error::PlanError;
use crate::op::Op;
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// Broadcasts `shapes` together; `fresh` supplies symbols for undecidable dims.
pub(crate) fn broadcast(shapes: &[&Shape], fresh: &mut dyn FnMut() -> Dim) -> Result<Shape, String> {
    let rank = shapes.iter().map(|s| s.rank()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let mut acc = Dim::Known(1);
        for s in shapes {
            let Some(pos) = (i + s.rank()).checked_sub(rank) else { continue };
            let d = &s.dims()[pos];
            acc = match (&acc, d) {
                (Dim::Known(1), _) => d.clone(),
                (_, Dim::Known(1)) => acc,
                (Dim::Known(a), Dim::Known(b)) if a == b => acc,
                (Dim::Known(a), Dim::Known(b)) => {
                    let list: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
                    return Err(format!("cannot broadcast {a} with {b} (shapes {})", list.join(", ")));
                }
                (Dim::Symbol(a), Dim::Symbol(b)) if a == b => acc,
                (Dim::Known(_), Dim::Symbol(_)) => acc,
                (Dim::Symbol(_), Dim::Known(_)) => d.clone(),
                (Dim::Symbol(_), Dim::Symbol(_)) => fresh(),
            };
        }
        out.push(acc);
    }
    Ok(Shape(out))
}

/// Broadcast of several inputs, with errors naming the node.
pub(crate) fn broadcast_infos(ctx: &mut Ctx, infos: &[&TensorInfo]) -> Result<Shape, PlanError> {
    let shapes: Vec<&Shape> = infos.iter().map(|t| &t.shape).collect();
    let syms = &mut *ctx.syms;
    broadcast(&shapes, &mut || syms.fresh()).map_err(|d| ctx.mismatch(d))
}

/// Same dtype and shape as input 0, any numeric dtype.
pub(crate) fn unary(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if matches!(x.dtype, DType::Bool | DType::String) {
        return Err(ctx.dtype(format!("needs a numeric input, got {}", x.dtype)));
    }
    Ok(vec![x.clone()])
}

/// `Identity`: any dtype.
pub(crate) fn identity(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    Ok(vec![ctx.input(0)?.clone()])
}

/// Same dtype and shape as input 0, which must be a float.
pub(crate) fn unary_float(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    Ok(vec![x.clone()])
}

/// `Not`: bool to bool.
pub(crate) fn not(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    require_bool(ctx, x)?;
    Ok(vec![x.clone()])
}

/// `IsNaN`, `IsInf`: float to bool, same shape.
pub(crate) fn is_test(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_float(x)?;
    Ok(vec![TensorInfo { dtype: DType::Bool, shape: x.shape.clone() }])
}

/// Arithmetic on two inputs of one dtype.
pub(crate) fn binary(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[a, b])?;
    if matches!(dtype, DType::Bool | DType::String) {
        return Err(ctx.dtype(format!("arithmetic on {dtype}")));
    }
    if let Op::Mod(m) = &ctx.node.op
        && dtype.is_float()
        && !m.fmod
    {
        return Err(ctx.attr("Mod on floats requires fmod = 1"));
    }
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype, shape }])
}

/// `Pow`: the exponent may have another numeric dtype; the result has the base's.
pub(crate) fn pow(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if [a.dtype, b.dtype].iter().any(|d| matches!(d, DType::Bool | DType::String)) {
        return Err(ctx.dtype(format!("Pow on {} and {}", a.dtype, b.dtype)));
    }
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype: a.dtype, shape }])
}

/// `BitShift`: unsigned integers.
pub(crate) fn bit_shift(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[a, b])?;
    if !matches!(dtype, DType::U8 | DType::U16 | DType::U32 | DType::U64) {
        return Err(ctx.dtype(format!("needs unsigned integers, got {dtype}")));
    }
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype, shape }])
}

/// `BitCast`: x's shape, as `to`, which must have x's bit width (no strings).
pub(crate) fn bit_cast(ctx: &mut Ctx, to: DType) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.dtype.bits().is_none() || x.dtype.bits() != to.bits() {
        return Err(ctx.dtype(format!("{} and {to} differ in width", x.dtype)));
    }
    Ok(vec![TensorInfo { dtype: to, shape: x.shape.clone() }])
}

/// `BitwiseAnd` / `Or` / `Xor`: two integer inputs of one dtype, broadcasting.
pub(crate) fn bitwise(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[a, b])?;
    if !dtype.is_int() {
        return Err(ctx.dtype(format!("needs integers, got {dtype}")));
    }
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype, shape }])
}

/// `BitwiseNot`: an integer input, unchanged in dtype and shape.
pub(crate) fn bitwise_not(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if !x.dtype.is_int() {
        return Err(ctx.dtype(format!("needs integers, got {}", x.dtype)));
    }
    Ok(vec![x.clone()])
}

/// `Max`, `Min`, `Sum`, `Mean`: one or more inputs of one dtype.
pub(crate) fn variadic(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let ins = ctx.all_inputs();
    let dtype = ctx.same_dtype(&ins)?;
    if matches!(dtype, DType::Bool | DType::String) {
        return Err(ctx.dtype(format!("needs numeric inputs, got {dtype}")));
    }
    let shape = broadcast_infos(ctx, &ins)?;
    Ok(vec![TensorInfo { dtype, shape }])
}

/// Comparisons: same dtype in, bool out (strings: Equal only).
pub(crate) fn compare(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dtype = ctx.same_dtype(&[a, b])?;
    if dtype == DType::String && !matches!(ctx.node.op, Op::Equal) {
        return Err(ctx.dtype("strings compare for equality only"));
    }
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype: DType::Bool, shape }])
}

/// `And`, `Or`, `Xor`: bool in, bool out.
pub(crate) fn logical(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    require_bool(ctx, a)?;
    require_bool(ctx, b)?;
    let shape = broadcast_infos(ctx, &[a, b])?;
    Ok(vec![TensorInfo { dtype: DType::Bool, shape }])
}

/// `Where(cond, x, y)`: three-way broadcast.
pub(crate) fn where_(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (c, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    require_bool(ctx, c)?;
    let dtype = ctx.same_dtype(&[x, y])?;
    let shape = broadcast_infos(ctx, &[c, x, y])?;
    Ok(vec![TensorInfo { dtype, shape }])
}

/// `PRelu`: the slope broadcasts to X (unidirectionally).
pub(crate) fn prelu(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, slope) = (ctx.input(0)?, ctx.input(1)?);
    ctx.same_dtype(&[x, slope])?;
    unidirectional(ctx, slope, x, "slope")?;
    Ok(vec![x.clone()])
}

/// `Clip`: optional scalar bounds of the input's dtype.
pub(crate) fn clip(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    for i in 1..3 {
        if let Some(b) = ctx.opt(i) {
            ctx.same_dtype(&[x, b])?;
            if b.shape.known_elems() != Some(1) && b.rank() != 0 {
                return Err(ctx.mismatch(format!("bound {i} must be a scalar, got {b}")));
            }
        }
    }
    Ok(vec![x.clone()])
}

/// `Cast`.
pub(crate) fn cast(ctx: &mut Ctx, to: DType) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    Ok(vec![TensorInfo { dtype: to, shape: x.shape.clone() }])
}

/// `CastLike`.
pub(crate) fn cast_like(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (x, like) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![TensorInfo { dtype: like.dtype, shape: x.shape.clone() }])
}

/// `Dropout`: identity, plus a bool mask of the same shape.
pub(crate) fn dropout(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    Ok(vec![x.clone(), TensorInfo { dtype: DType::Bool, shape: x.shape.clone() }])
}

/// `small` must broadcast to `big` without changing `big`'s shape.
pub(crate) fn unidirectional(
    ctx: &Ctx,
    small: &TensorInfo,
    big: &TensorInfo,
    what: &str,
) -> Result<(), PlanError> {
    let fail = || ctx.mismatch(format!("{what} {small} does not broadcast to {big}"));
    if small.rank() > big.rank() {
        return Err(fail());
    }
    let offset = big.rank() - small.rank();
    for (i, d) in small.shape.dims().iter().enumerate() {
        match (d, &big.shape.dims()[offset + i]) {
            (Dim::Known(1), _) => {}
            (Dim::Known(a), Dim::Known(b)) if a != b => return Err(fail()),
            _ => {}
        }
    }
    Ok(())
}

fn require_bool(ctx: &Ctx, t: &TensorInfo) -> Result<(), PlanError> {
    if t.dtype == DType::Bool { Ok(()) } else { Err(ctx.dtype(format!("needs bool, got {}", t.dtype))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(dims: &[&str]) -> Shape {
        Shape(
            dims.iter()
                .map(|d| d.parse::<usize>().map(Dim::Known).unwrap_or_else(|_| Dim::from(*d)))
                .collect(),
        )
    }

    fn bc(a: &[&str], b: &[&str]) -> Result<Shape, String> {
        let mut n = 0;
        broadcast(&[&s(a), &s(b)], &mut || {
            n += 1;
            Dim::Symbol(format!("f{n}"))
        })
    }

    #[test]
    fn broadcast_rules() {
        assert_eq!(bc(&["2", "1", "4"], &["3", "1"]), Ok(s(&["2", "3", "4"])));
        assert_eq!(bc(&["b", "4"], &["1", "4"]), Ok(s(&["b", "4"])));
        assert_eq!(bc(&["b", "4"], &["b", "1"]), Ok(s(&["b", "4"])));
        assert_eq!(bc(&["b"], &["5"]), Ok(s(&["5"])));
        assert_eq!(bc(&["b"], &["c"]), Ok(s(&["f1"])));
        assert_eq!(bc(&[], &["c", "2"]), Ok(s(&["c", "2"])));
        assert!(bc(&["3"], &["4"]).is_err());
    }
}
