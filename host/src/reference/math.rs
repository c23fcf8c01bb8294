//! Elementwise arithmetic with ONNX multidirectional (NumPy) broadcasting: Add, Sub, Mul, Div, Pow,
//! Mod, BitShift, the variadic Max/Min/Sum/Mean, PRelu and Clip.
//!
//! Floats are computed in f64 and rounded once to the output dtype; integers are computed in i64
//! with wrapping arithmetic and wrapped to their width, which equals wrapping arithmetic at that
//! width. Integer division or modulus by zero is an error naming the node.

use planner::DType;
use planner::op::{Bitwise, ShiftDirection};

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{Lanes, floats_to, ints_to};
use crate::reference::strides::{broadcast_all, broadcast_map, broadcast_offsets};
use crate::tensor::HostTensor;

/// All `inputs` broadcast to their common shape: the shape, then each input's elements expanded to
/// it. Fails when the shapes do not broadcast.
pub fn broadcast_lanes(ctx: &NodeCtx, inputs: &[&HostTensor]) -> Result<(Vec<usize>, Vec<Lanes>), HostError> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
    let out = broadcast_all(ctx, &shapes)?;
    let lanes = inputs
        .iter()
        .map(|t| Ok(Lanes::of(t)?.take(&broadcast_map(t.shape(), &out))))
        .collect::<Result<_, HostError>>()?;
    Ok((out, lanes))
}

/// Applies a binary op elementwise to two broadcast operands of one dtype: `f` on floats, `i` on
/// integers (an `Err` detail aborts with a node error). The result has the operands' dtype.
pub fn zip2(
    ctx: &NodeCtx,
    a: &HostTensor,
    b: &HostTensor,
    f: impl Fn(f64, f64) -> f64,
    i: impl Fn(i64, i64) -> Result<i64, String>,
) -> Result<HostTensor, HostError> {
    crate::reference::strides::same_dtype(ctx, a, b)?;
    zip_n(ctx, &[a, b], f, i)
}

/// Folds any number of broadcast operands of one dtype left to right with `f` / `i`.
fn zip_n(
    ctx: &NodeCtx,
    inputs: &[&HostTensor],
    f: impl Fn(f64, f64) -> f64,
    i: impl Fn(i64, i64) -> Result<i64, String>,
) -> Result<HostTensor, HostError> {
    let Some(first) = inputs.first() else {
        return Err(ctx.err("needs at least one input"));
    };
    for t in inputs {
        crate::reference::strides::same_dtype(ctx, first, t)?;
    }
    if let [a, b] = inputs {
        return zip_streamed(ctx, a, b, f, i);
    }
    let (shape, lanes) = broadcast_lanes(ctx, inputs)?;
    let mut acc = lanes[0].clone();
    for next in &lanes[1..] {
        acc = match (acc, next) {
            (Lanes::F(x), Lanes::F(y)) => Lanes::F(x.iter().zip(y).map(|(&p, &q)| f(p, q)).collect()),
            (Lanes::I(x), Lanes::I(y)) => {
                let r: Result<Vec<i64>, String> = x.iter().zip(y).map(|(&p, &q)| i(p, q)).collect();
                Lanes::I(r.map_err(|d| ctx.err(d))?)
            }
            _ => return Err(ctx.err("operands mix float and integer lanes")),
        };
    }
    acc.into_tensor(first.dtype(), shape)
}

/// [`zip_n`] of two operands element by element, reading each through its broadcast offsets:
/// nothing but the output is allocated.
fn zip_streamed(
    ctx: &NodeCtx,
    a: &HostTensor,
    b: &HostTensor,
    f: impl Fn(f64, f64) -> f64,
    i: impl Fn(i64, i64) -> Result<i64, String>,
) -> Result<HostTensor, HostError> {
    let shape = broadcast_all(ctx, &[a.shape(), b.shape()])?;
    let n = ctx.count(&shape)?;
    let pairs = broadcast_offsets(a.shape(), &shape).zip(broadcast_offsets(b.shape(), &shape));
    let (x, y) = (a.data(), b.data());
    let data = if a.dtype().is_float() {
        floats_to(a.dtype(), n, pairs.map(|(p, q)| f(x.float_at(p), y.float_at(q))))?
    } else {
        let mut failed = None;
        let values = pairs.map(|(p, q)| {
            i(x.int_at(p), y.int_at(q)).unwrap_or_else(|d| {
                failed.get_or_insert(d);
                0
            })
        });
        let data = ints_to(a.dtype(), n, values)?;
        if let Some(d) = failed {
            return Err(ctx.err(d));
        }
        data
    };
    HostTensor::new(shape, data)
}

/// ONNX `Add`: `a + b`.
pub fn add(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    zip2(ctx, a, b, |x, y| x + y, |x, y| Ok(x.wrapping_add(y)))
}

/// ONNX `Sub`: `a - b`.
pub fn sub(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    zip2(ctx, a, b, |x, y| x - y, |x, y| Ok(x.wrapping_sub(y)))
}

/// ONNX `Mul`: `a * b`.
pub fn mul(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    zip2(ctx, a, b, |x, y| x * y, |x, y| Ok(x.wrapping_mul(y)))
}

/// ONNX `Div`: `a / b`; integer division truncates toward zero.
pub fn div(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    zip2(
        ctx,
        a,
        b,
        |x, y| x / y,
        |x, y| if y == 0 { Err("integer division by zero".into()) } else { Ok(x.wrapping_div(y)) },
    )
}

/// ONNX `Mod`: with `fmod`, C `fmod` (result has the sign of the dividend; required for floats);
/// without, integer modulus with the sign of the divisor (Python `%`).
pub fn modulo(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor, fmod: bool) -> Result<HostTensor, HostError> {
    if !fmod && a.dtype().is_float() {
        return Err(ctx.err("fmod must be 1 for floating-point inputs"));
    }
    let int_mod = move |x: i64, y: i64| -> Result<i64, String> {
        if y == 0 {
            return Err("integer modulus by zero".into());
        }
        let r = x.wrapping_rem(y);
        Ok(if !fmod && r != 0 && ((r < 0) != (y < 0)) { r + y } else { r })
    };
    zip2(ctx, a, b, |x, y| x % y, int_mod)
}

/// ONNX `Pow`: `a ^ b` with the dtype of `a`; `b` may have another numeric dtype. Integer bases
/// with integer exponents use exact wrapping powers (a negative exponent gives the truncated
/// `1 / a^|b|`); other integer cases compute in f64 and truncate.
pub fn pow(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, HostError> {
    let (shape, lanes) = broadcast_lanes(ctx, &[a, b])?;
    let out = match (&lanes[0], &lanes[1]) {
        (Lanes::I(x), Lanes::I(y)) => {
            Lanes::I(x.iter().zip(y).map(|(&p, &q)| kernels_gpu::math::int_pow(p, q)).collect())
        }
        (x, y) => Lanes::F(x.to_f64s().iter().zip(y.to_f64s()).map(|(&p, q)| p.powf(q)).collect()),
    };
    out.into_tensor(a.dtype(), shape)
}

/// ONNX `BitShift` on unsigned integers: shifting by the width or more gives 0.
pub fn bit_shift(
    ctx: &NodeCtx,
    a: &HostTensor,
    b: &HostTensor,
    dir: ShiftDirection,
) -> Result<HostTensor, HostError> {
    let width = match a.dtype() {
        d @ (DType::U8 | DType::U16 | DType::U32 | DType::U64) => 8 * d.size_bytes() as i64,
        d => return Err(ctx.err(format!("BitShift takes unsigned integers, got {d}"))),
    };
    // The lanes hold uint64 below 2^63, so a right shift is logical; a left shift wraps when
    // the result is written back at the width.
    let shift = move |x: i64, y: i64| -> Result<i64, String> {
        Ok(match dir {
            _ if !(0..width).contains(&y) => 0,
            ShiftDirection::Left => ((x as u64) << y) as i64,
            ShiftDirection::Right => x >> y,
        })
    };
    zip2(ctx, a, b, |_, _| f64::NAN, shift)
}

/// ONNX `BitwiseAnd` / `BitwiseOr` / `BitwiseXor` on integers (two's complement at their width).
pub fn bitwise(ctx: &NodeCtx, a: &HostTensor, b: &HostTensor, op: Bitwise) -> Result<HostTensor, HostError> {
    if !a.dtype().is_int() {
        return Err(ctx.err(format!("needs integers, got {}", a.dtype())));
    }
    let f = move |x: i64, y: i64| -> Result<i64, String> {
        Ok(match op {
            Bitwise::And => x & y,
            Bitwise::Or => x | y,
            Bitwise::Xor => x ^ y,
        })
    };
    zip2(ctx, a, b, |_, _| f64::NAN, f)
}

/// ONNX `Max` (variadic, broadcasting): NaN propagates.
pub fn max(ctx: &NodeCtx, inputs: &[&HostTensor]) -> Result<HostTensor, HostError> {
    zip_n(ctx, inputs, |x, y| if x.is_nan() || y.is_nan() { f64::NAN } else { x.max(y) }, |x, y| Ok(x.max(y)))
}

/// ONNX `Min` (variadic, broadcasting): NaN propagates.
pub fn min(ctx: &NodeCtx, inputs: &[&HostTensor]) -> Result<HostTensor, HostError> {
    zip_n(ctx, inputs, |x, y| if x.is_nan() || y.is_nan() { f64::NAN } else { x.min(y) }, |x, y| Ok(x.min(y)))
}

/// ONNX `Sum` (variadic, broadcasting), accumulated in f64 for floats.
pub fn sum(ctx: &NodeCtx, inputs: &[&HostTensor]) -> Result<HostTensor, HostError> {
    zip_n(ctx, inputs, |x, y| x + y, |x, y| Ok(x.wrapping_add(y)))
}

/// ONNX `Mean` (variadic, broadcasting): the f64 sum divided by the input count, rounded once.
pub fn mean(ctx: &NodeCtx, inputs: &[&HostTensor]) -> Result<HostTensor, HostError> {
    let (shape, lanes) = broadcast_lanes(ctx, inputs)?;
    let Some(first) = inputs.first() else {
        return Err(ctx.err("needs at least one input"));
    };
    let n = shape.iter().product::<usize>();
    let mut acc = vec![0f64; n];
    for l in &lanes {
        for (a, x) in acc.iter_mut().zip(l.to_f64s()) {
            *a += x;
        }
    }
    let k = inputs.len() as f64;
    Lanes::F(acc.into_iter().map(|s| s / k).collect()).into_tensor(first.dtype(), shape)
}

/// ONNX `PRelu`: `x < 0 ? slope * x : x`, with `slope` broadcastable to `x` (output has x's shape).
pub fn prelu(ctx: &NodeCtx, x: &HostTensor, slope: &HostTensor) -> Result<HostTensor, HostError> {
    let y = zip2(
        ctx,
        x,
        slope,
        |v, s| if v < 0.0 { s * v } else { v },
        |v, s| Ok(if v < 0 { s.wrapping_mul(v) } else { v }),
    )?;
    if y.shape() != x.shape() {
        return Err(ctx.err(format!(
            "slope shape {:?} does not broadcast to X shape {:?}",
            slope.shape(),
            x.shape()
        )));
    }
    Ok(y)
}

/// ONNX `Clip`: `Min(max, Max(x, min))` with optional one-element bounds (so `lo > hi` gives `hi`),
/// as numpy's `clip`, which the ONNX reference implementation calls: a NaN in `x` or in a bound
/// gives NaN, and a float tie gives the bound (`clip(-0.0, 0.0, _)` is `+0.0`).
pub fn clip(
    ctx: &NodeCtx,
    x: &HostTensor,
    lo: Option<&HostTensor>,
    hi: Option<&HostTensor>,
) -> Result<HostTensor, HostError> {
    let bound = |t: Option<&HostTensor>, what: &str| -> Result<Option<Lanes>, HostError> {
        match t {
            Some(t) if t.len() != 1 => Err(ctx.err(format!("{what} must hold one element, got {}", t.len()))),
            Some(t) => Ok(Some(Lanes::of(t)?)),
            None => Ok(None),
        }
    };
    let (lo, hi) = (bound(lo, "min")?, bound(hi, "max")?);
    let lanes = match Lanes::of(x)? {
        Lanes::F(v) => {
            let (lo, hi) = (lo.map(|l| l.to_f64s()[0]), hi.map(|h| h.to_f64s()[0]));
            // numpy's `_NPY_MAX` / `_NPY_MIN`: NaN if either is NaN, else the second on a tie.
            let nan = |a: f64, b: f64| a.is_nan() || b.is_nan();
            let max = |a: f64, b: f64| {
                if nan(a, b) {
                    f64::NAN
                } else if a > b {
                    a
                } else {
                    b
                }
            };
            let min = |a: f64, b: f64| {
                if nan(a, b) {
                    f64::NAN
                } else if a < b {
                    a
                } else {
                    b
                }
            };
            Lanes::F(
                v.into_iter()
                    .map(|e| lo.map_or(e, |l| max(e, l)))
                    .map(|e| hi.map_or(e, |h| min(e, h)))
                    .collect(),
            )
        }
        Lanes::I(v) => {
            let as_int = |b: Option<Lanes>| match b {
                Some(Lanes::I(b)) => Some(b[0]),
                Some(Lanes::F(b)) => Some(b[0] as i64),
                None => None,
            };
            let (lo, hi) = (as_int(lo), as_int(hi));
            Lanes::I(
                v.into_iter()
                    .map(|e| lo.map_or(e, |l| e.max(l)))
                    .map(|e| hi.map_or(e, |h| e.min(h)))
                    .collect(),
            )
        }
    };
    lanes.into_tensor(x.dtype(), x.shape().to_vec())
}
