//! Shape-changing operators: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Expand,
//! Tile, Shape, Size, ConstantOfShape, Range, DepthToSpace, SpaceToDepth.
//!
//! Shape inputs are read through their tracked `PartialValue` (constants, or symbolic shape
//! arithmetic). An element nobody can know becomes a fresh symbol; a rank nobody can know makes the
//! node `Unsupported` rather than guessed.

use super::dims::Product;
use super::elementwise::broadcast_infos;
use super::{Ctx, SymInt};
use crate::error::PlanError;
use crate::op::Split;
use crate::tensor_info::{DType, Dim, Shape, TensorInfo};

/// The product of `dims` as one dim: known, a lone symbol, or fresh.
pub(crate) fn product_dim(ctx: &mut Ctx, dims: &[Dim]) -> Dim {
    match Product::of(dims).and_then(|p| p.as_dim()) {
        Some(d) => d,
        None => ctx.fresh(),
    }
}

/// Elements of a 1-D shape-like input: tracked elements, or `None`s when only the length is known.
fn shape_elems(ctx: &Ctx, i: usize, what: &str) -> Result<Vec<Option<SymInt>>, PlanError> {
    let t = ctx.input(i)?;
    if !t.dtype.is_int() || t.rank() != 1 {
        return Err(ctx.mismatch(format!("{what} must be a 1-D integer tensor, got {t}")));
    }
    if let Some(e) = ctx.sym_ints(i) {
        return Ok(e);
    }
    match t.shape.dims()[0] {
        Dim::Known(n) => Ok(vec![None; n]),
        Dim::Symbol(_) => Err(ctx.unsupported()),
    }
}

/// `Reshape` with `0` (copy) and `-1` (infer) entries.
pub(crate) fn reshape(ctx: &mut Ctx, allowzero: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let elems = shape_elems(ctx, 1, "shape")?;
    let mut dims: Vec<Option<Dim>> = Vec::with_capacity(elems.len());
    let mut minus_one = false;
    for (i, e) in elems.iter().enumerate() {
        dims.push(match e {
            Some(SymInt::Int(-1)) if minus_one => return Err(ctx.attr("shape has more than one -1")),
            Some(SymInt::Int(-1)) => {
                minus_one = true;
                None
            }
            Some(SymInt::Int(0)) if !allowzero => match x.shape.dims().get(i) {
                Some(d) => Some(d.clone()),
                None => {
                    return Err(ctx.mismatch(format!("shape entry {i} is 0 but input {x} has no dim {i}")));
                }
            },
            Some(SymInt::Int(n)) if *n >= 0 => Some(Dim::Known(*n as usize)),
            Some(SymInt::Int(n)) => return Err(ctx.attr(format!("invalid shape entry {n}"))),
            Some(SymInt::Sym(s)) => Some(Dim::Symbol(s.clone())),
            None => None,
        });
    }
    let unknown = dims.iter().filter(|d| d.is_none()).count();
    let total = Product::of(x.shape.dims());
    let known_part: Vec<Dim> = dims.iter().flatten().cloned().collect();
    let part = Product::of(&known_part);
    if unknown == 1 {
        let solved = match (&total, &part) {
            (Some(t), Some(p)) => t.quotient(p),
            _ => None,
        };
        if let (None, Some(t), Some(p)) = (&solved, x.shape.known_elems(), Shape(known_part).known_elems())
            && (p == 0 || t % p != 0)
        {
            return Err(ctx.mismatch(format!("cannot reshape {x} ({t} elements) to a multiple of {p}")));
        }
        let d = solved.unwrap_or_else(|| ctx.fresh());
        dims.iter_mut().filter(|d| d.is_none()).for_each(|slot| *slot = Some(d.clone()));
    } else if let (0, Some(t), Some(p)) = (unknown, &total, &part)
        && t.provably_differs(p)
    {
        return Err(ctx.mismatch(format!("cannot reshape {x} to {}", show(&dims))));
    }
    let dims = dims.into_iter().map(|d| d.unwrap_or_else(|| ctx.fresh())).collect();
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

fn show(dims: &[Option<Dim>]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.as_ref().map_or("?".into(), |d| d.to_string())).collect();
    format!("[{}]", parts.join(","))
}

/// `Flatten` at `axis` (which may equal the rank).
pub(crate) fn flatten(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let axis = if axis == x.rank() as i64 { x.rank() } else { ctx.axis(axis, x.rank())? };
    let outer = product_dim(ctx, &x.shape.dims()[..axis]);
    let inner = product_dim(ctx, &x.shape.dims()[axis..]);
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(vec![outer, inner]) }])
}

/// Axes from a legacy attribute or constant input 1; `Ok(None)` when input 1 is absent.
fn axes_of(ctx: &Ctx, attr: Option<Vec<i64>>) -> Result<Option<Vec<i64>>, PlanError> {
    if attr.is_some() {
        return Ok(attr);
    }
    if ctx.opt(1).is_none() {
        return Ok(None);
    }
    ctx.ints(1).map(Some).ok_or_else(|| ctx.unsupported())
}

/// `Squeeze`: removes the given size-1 axes, or every known size-1 dim when none are given
/// (symbolic dims are assumed not to be 1 then).
pub(crate) fn squeeze(ctx: &mut Ctx, attr: Option<Vec<i64>>) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let axes = match axes_of(ctx, attr)? {
        Some(a) => ctx.axes(&a, x.rank())?,
        None => (0..x.rank()).filter(|&i| x.shape.dims()[i] == Dim::Known(1)).collect(),
    };
    for &a in &axes {
        if let Dim::Known(n) = x.shape.dims()[a]
            && n != 1
        {
            return Err(ctx.mismatch(format!("cannot squeeze axis {a} of size {n}")));
        }
    }
    let dims = x.shape.dims().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone());
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims.collect()) }])
}

/// `Unsqueeze`: inserts size-1 dims at the given output axes.
pub(crate) fn unsqueeze(ctx: &mut Ctx, attr: Option<Vec<i64>>) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let Some(axes) = axes_of(ctx, attr)? else {
        return Err(ctx.input(1).err().unwrap_or_else(|| ctx.unsupported()));
    };
    let rank = x.rank() + axes.len();
    let axes = ctx.axes(&axes, rank)?;
    let mut src = x.shape.dims().iter();
    let dims = (0..rank).map(|i| if axes.contains(&i) { Some(Dim::Known(1)) } else { src.next().cloned() });
    let dims: Option<Vec<Dim>> = dims.collect();
    let dims = dims.ok_or_else(|| ctx.mismatch("axes out of range"))?;
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// `Transpose` (default: reversed axes).
pub(crate) fn transpose(ctx: &mut Ctx, t: &crate::op::Transpose) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let perm = t.axes(x.rank());
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..x.rank()).collect::<Vec<_>>() {
        return Err(ctx.attr(format!("perm {perm:?} is not a permutation of rank {}", x.rank())));
    }
    let dims = perm.iter().map(|&p| x.shape.dims()[p].clone()).collect();
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// `Concat` along `axis`.
pub(crate) fn concat(ctx: &mut Ctx, axis: i64) -> Result<Vec<TensorInfo>, PlanError> {
    let ins = ctx.all_inputs();
    let dtype = ctx.same_dtype(&ins)?;
    let first = ins[0];
    let axis = ctx.axis(axis, first.rank())?;
    let mut dims = first.shape.0.clone();
    let mut along: Vec<Dim> = Vec::new();
    for t in &ins {
        if t.rank() != first.rank() {
            return Err(ctx.mismatch(format!("inputs {first} and {t} differ in rank")));
        }
        for (i, d) in t.shape.dims().iter().enumerate() {
            if i == axis {
                along.push(d.clone());
            } else {
                dims[i] = ctx.unify(&dims[i], d, &format!("dim {i} of {first} and {t}"))?;
            }
        }
    }
    let sum: Option<usize> = along.iter().map(Dim::known).sum();
    let nonzero: Vec<&Dim> = along.iter().filter(|d| d.known() != Some(0)).collect();
    dims[axis] = match (sum, nonzero.as_slice()) {
        (Some(s), _) => Dim::Known(s),
        (None, [one]) => (*one).clone(),
        (None, _) => ctx.fresh(),
    };
    Ok(vec![TensorInfo { dtype, shape: Shape(dims) }])
}

/// `Split` into `node.outputs.len()` parts (sizes from attribute, input 1, or an even split).
pub(crate) fn split(ctx: &mut Ctx, s: &Split) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(s.axis, x.rank())?;
    let n = s.num_outputs.unwrap_or(ctx.node.outputs.len());
    if n == 0 || (s.num_outputs.is_some() && n != ctx.node.outputs.len()) {
        return Err(ctx.arity(format!("num_outputs {n} vs {} outputs", ctx.node.outputs.len())));
    }
    let sizes = match (&s.split, ctx.opt(1)) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(_)) => Some(ctx.ints(1).ok_or_else(|| ctx.unsupported())?),
        (None, None) => None,
    };
    let d = x.shape.dims()[axis].clone();
    let parts: Vec<Dim> = match (sizes, &d) {
        (Some(v), _) => {
            if v.len() != n || v.iter().any(|&p| p < 0) {
                return Err(ctx.attr(format!("split sizes {v:?} for {n} outputs")));
            }
            if let Dim::Known(total) = d
                && v.iter().try_fold(0i64, |a, &p| a.checked_add(p)) != Some(total as i64)
            {
                return Err(ctx.mismatch(format!("split sizes {v:?} do not sum to {total}")));
            }
            v.iter().map(|&p| Dim::Known(p as usize)).collect()
        }
        (None, Dim::Known(total)) => {
            let chunk = total.div_ceil(n);
            if s.num_outputs.is_none() && total % n != 0 {
                return Err(ctx.mismatch(format!("{total} does not split evenly into {n}")));
            }
            (0..n).map(|i| Dim::Known(chunk.min(total.saturating_sub(i * chunk)))).collect()
        }
        (None, Dim::Symbol(_)) if n == 1 => vec![d.clone()],
        (None, Dim::Symbol(_)) => ctx.fresh_dims(n),
    };
    Ok(parts
        .into_iter()
        .map(|p| {
            let mut dims = x.shape.0.clone();
            dims[axis] = p;
            TensorInfo { dtype: x.dtype, shape: Shape(dims) }
        })
        .collect())
}

/// `Expand`: broadcast of the input with the target shape.
pub(crate) fn expand(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let mut target = Vec::new();
    for e in shape_elems(ctx, 1, "shape")? {
        target.push(match e {
            Some(e) => e.to_dim().ok_or_else(|| ctx.attr(format!("invalid shape entry {e:?}")))?,
            None => ctx.fresh(),
        });
    }
    let target = TensorInfo { dtype: x.dtype, shape: Shape(target) };
    let shape = broadcast_infos(ctx, &[x, &target])?;
    Ok(vec![TensorInfo { dtype: x.dtype, shape }])
}

/// `Tile`: each dim times its repeat count.
pub(crate) fn tile(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    let reps = shape_elems(ctx, 1, "repeats")?;
    if reps.len() != x.rank() {
        return Err(ctx.mismatch(format!("{} repeats for input {x}", reps.len())));
    }
    let mut dims = Vec::with_capacity(x.rank());
    for (d, r) in x.shape.dims().iter().zip(reps) {
        dims.push(match (d, r) {
            (Dim::Known(a), Some(SymInt::Int(b))) if b >= 0 => {
                Dim::Known(a.checked_mul(b as usize).ok_or_else(|| ctx.mismatch("tiled size overflows"))?)
            }
            (_, Some(SymInt::Int(1))) => d.clone(),
            (Dim::Known(1), Some(SymInt::Sym(s))) => Dim::Symbol(s),
            (_, Some(SymInt::Int(b))) if b < 0 => return Err(ctx.attr(format!("negative repeat {b}"))),
            _ => ctx.fresh(),
        });
    }
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// `Shape`: 1-D `I64` of the (clamped) dim range.
pub(crate) fn shape(ctx: &mut Ctx, start: i64, end: Option<i64>) -> Result<Vec<TensorInfo>, PlanError> {
    let r = ctx.input(0)?.rank() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r);
    let (s, e) = (clamp(start), clamp(end.unwrap_or(r)));
    Ok(vec![TensorInfo::new(DType::I64, [(e - s).max(0) as usize])])
}

/// `Size`: scalar `I64`.
pub(crate) fn size(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    ctx.input(0)?;
    Ok(vec![TensorInfo::scalar(DType::I64)])
}

/// `ConstantOfShape`: the shape input's elements become dims.
pub(crate) fn constant_of_shape(
    ctx: &mut Ctx,
    dtype: DType,
    value_elems: usize,
) -> Result<Vec<TensorInfo>, PlanError> {
    if value_elems != 1 {
        return Err(ctx.attr(format!("value must have one element, has {value_elems}")));
    }
    let mut dims = Vec::new();
    for e in shape_elems(ctx, 0, "shape")? {
        dims.push(match e {
            Some(e) => e.to_dim().ok_or_else(|| ctx.attr(format!("invalid shape entry {e:?}")))?,
            None => ctx.fresh(),
        });
    }
    Ok(vec![TensorInfo { dtype, shape: Shape(dims) }])
}

/// `Range`: 1-D of length `max(ceil((limit - start) / delta), 0)`.
pub(crate) fn range(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let (s, l, d) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let dtype = ctx.same_dtype(&[s, l, d])?;
    for t in [s, l, d] {
        if t.shape.known_elems() != Some(1) {
            return Err(ctx.mismatch(format!("start, limit and delta must be scalars, got {t}")));
        }
    }
    let scalar = |i: usize| -> Option<f64> {
        match ctx.ints(i).as_deref() {
            Some(&[v]) => Some(v as f64),
            _ => ctx.constant(i).and_then(|c| c.to_f64s().first().copied()),
        }
    };
    let len = match (scalar(0), scalar(1), scalar(2)) {
        (Some(_), Some(_), Some(0.0)) => return Err(ctx.attr("delta is 0")),
        (Some(start), Some(limit), Some(delta)) => {
            let len = ((limit - start) / delta).ceil().max(0.0);
            if !len.is_finite() || len > f64::from(u32::MAX) {
                return Err(ctx.attr(format!("range [{start}, {limit}) by {delta} is not a finite size")));
            }
            Dim::Known(len as usize)
        }
        _ => ctx.fresh(),
    };
    Ok(vec![TensorInfo { dtype, shape: Shape(vec![len]) }])
}

/// `DepthToSpace`: `(N, C, H, W) -> (N, C/b^2, H*b, W*b)`.
pub(crate) fn depth_to_space(ctx: &mut Ctx, b: usize) -> Result<Vec<TensorInfo>, PlanError> {
    block_move(ctx, b, false)
}

/// `SpaceToDepth`: `(N, C, H, W) -> (N, C*b^2, H/b, W/b)`.
pub(crate) fn space_to_depth(ctx: &mut Ctx, b: usize) -> Result<Vec<TensorInfo>, PlanError> {
    block_move(ctx, b, true)
}

fn block_move(ctx: &mut Ctx, b: usize, to_depth: bool) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    ctx.require_rank(x, 4, "input")?;
    let b2 = b.checked_mul(b).filter(|&v| v > 0).ok_or_else(|| ctx.attr(format!("invalid blocksize {b}")))?;
    let xd = x.shape.dims();
    let mut scale = |d: &Dim, mul: usize, div: usize| -> Result<Dim, PlanError> {
        match d {
            Dim::Known(n) => match n.checked_mul(mul) {
                Some(m) if m.is_multiple_of(div) => Ok(Dim::Known(m / div)),
                Some(_) => Err(ctx.mismatch(format!("{n} is not divisible by {div}"))),
                None => Err(ctx.mismatch("size overflows")),
            },
            s if mul == div => Ok(s.clone()),
            _ => Ok(ctx.fresh()),
        }
    };
    let dims = if to_depth {
        vec![xd[0].clone(), scale(&xd[1], b2, 1)?, scale(&xd[2], 1, b)?, scale(&xd[3], 1, b)?]
    } else {
        vec![xd[0].clone(), scale(&xd[1], 1, b2)?, scale(&xd[2], b, 1)?, scale(&xd[3], b, 1)?]
    };
    Ok(vec![TensorInfo { dtype: x.dtype, shape: Shape(dims) }])
}

/// `EyeLike`: the input's 2-D shape, in the `dtype` attribute's type (or the input's).
pub(crate) fn eye_like(ctx: &mut Ctx, e: &crate::op::EyeLike) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if x.rank() != 2 {
        return Err(ctx.mismatch(format!("EyeLike takes a 2-D input, got {x}")));
    }
    Ok(vec![TensorInfo { dtype: e.dtype.unwrap_or(x.dtype), shape: x.shape.clone() }])
}

/// `HannWindow` / `HammingWindow` / `BlackmanWindow`: 1-D, of the size input 0 holds.
/// `TfIdfVectorizer`: integer rows `[C]` or `[B, C]` -> f32 `[W]` or `[B, W]`, `W` one past the
/// largest `ngram_indexes` entry.
pub(crate) fn tf_idf_vectorizer(
    ctx: &mut Ctx,
    t: &crate::op::TfIdfVectorizer,
) -> Result<Vec<TensorInfo>, PlanError> {
    let x = ctx.input(0)?;
    if !matches!(x.dtype, DType::I32 | DType::I64) || !(1..=2).contains(&x.rank()) {
        return Err(ctx.mismatch(format!("input must be int32 / int64 [C] or [B, C], got {x}")));
    }
    let width = t.width().ok_or_else(|| ctx.attr("ngram_indexes out of range"))?;
    let mut shape = x.shape.0[..x.rank() - 1].to_vec();
    shape.push(Dim::Known(width));
    Ok(vec![TensorInfo { dtype: DType::F32, shape: Shape(shape) }])
}

/// `MelWeightMatrix`: `[dft_length / 2 + 1, num_mel_bins]` of `dtype`, from the two integer
/// scalars when known.
pub(crate) fn mel_weight_matrix(ctx: &mut Ctx, dtype: DType) -> Result<Vec<TensorInfo>, PlanError> {
    for (slot, what) in [(0, "num_mel_bins"), (1, "dft_length"), (2, "sample_rate")] {
        let t = ctx.input(slot)?;
        if !t.dtype.is_int() || t.shape.known_elems() != Some(1) {
            return Err(ctx.mismatch(format!("{what} must be an integer scalar, got {t}")));
        }
    }
    for (slot, what) in [(3, "lower_edge_hertz"), (4, "upper_edge_hertz")] {
        let t = ctx.input(slot)?;
        if !t.dtype.is_float() || t.shape.known_elems() != Some(1) {
            return Err(ctx.mismatch(format!("{what} must be a float scalar, got {t}")));
        }
    }
    let mut dim = |slot: usize, f: fn(i64) -> i64| match ctx.ints(slot).as_deref() {
        Some(&[n]) if n >= 0 => Ok(Dim::Known(f(n) as usize)),
        Some(&[n]) => Err(ctx.attr(format!("input {slot} is {n}, negative"))),
        _ => Ok(ctx.fresh()),
    };
    let bins = dim(1, |n| n / 2 + 1)?;
    let mels = dim(0, |n| n)?;
    Ok(vec![TensorInfo { dtype, shape: Shape(vec![bins, mels]) }])
}

pub(crate) fn signal_window(ctx: &mut Ctx, dtype: DType) -> Result<Vec<TensorInfo>, PlanError> {
    let size = ctx.input(0)?;
    if !size.dtype.is_int() || size.shape.known_elems() != Some(1) {
        return Err(ctx.mismatch(format!("size must be an integer scalar, got {size}")));
    }
    let len = match ctx.ints(0).as_deref() {
        Some(&[n]) => Dim::Known(usize::try_from(n).map_err(|_| ctx.attr(format!("size {n} is negative")))?),
        _ => ctx.fresh(),
    };
    Ok(vec![TensorInfo { dtype, shape: Shape(vec![len]) }])
}
