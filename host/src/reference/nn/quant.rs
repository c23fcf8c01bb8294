//! Reference quantization: `QuantizeLinear`, `DequantizeLinear`, `DynamicQuantizeLinear`, the
//! integer `MatMulInteger` / `ConvInteger` (int32 results) and the requantizing `QLinearMatMul` /
//! `QLinearConv`, to and from uint8 / int8 (int32 also for DequantizeLinear's input).
//!
//! Quantization divides and rounds in f32, as ONNX's reference does (`np.rint(x / scale)`, ties to
//! even), so integer results match it exactly; dequantization computes `(x - zero_point) * scale`
//! in f64 and rounds once to the scale's dtype.

use planner::op::Quantize;
use planner::{Coded, DType, RoundMode};

use super::operand::{OutBuf, View, axis, count, float_view, number_view, optional, required};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{floats_to_with, ints_to};
use crate::reference::strides::{next_index, strides};
use crate::tensor::{HostTensor, try_collect};

/// For each element of x (row-major), the offset of its scale / zero point: per tensor (one
/// element), per slice along `axis` (1-D of x's dim there), or per block of `block` elements along
/// `axis` (x's rank, `ceil(dim / block)` there).
fn param_offsets(
    node: &NodeCtx,
    x: &[usize],
    p: &[usize],
    attr_axis: i64,
    block: usize,
    what: &str,
) -> Result<impl Iterator<Item = usize> + use<>, HostError> {
    let n_p: usize = p.iter().product();
    let rank = x.len();
    // Per x dim: the parameter stride it walks, and the divisor of its index (the block size).
    let (walk, div): (Vec<usize>, Vec<usize>) = if n_p == 1 && block == 0 {
        (vec![0; rank], vec![1; rank])
    } else {
        let ax = axis(node, attr_axis, rank)?;
        if block == 0 {
            if p.len() != 1 || p[0] != x[ax] {
                return Err(node.err(format!(
                    "{what} of shape {p:?} is neither one value nor one per slice of axis {ax} of {x:?}"
                )));
            }
            (((0..rank).map(|d| usize::from(d == ax))).collect(), vec![1; rank])
        } else {
            let fits = p.len() == rank
                && (0..rank).all(|d| if d == ax { p[d] == x[d].div_ceil(block) } else { p[d] == x[d] });
            if !fits {
                return Err(node.err(format!("{what} of shape {p:?} does not hold one value per block of {block} along axis {ax} of {x:?}")));
            }
            (strides(p), (0..rank).map(|d| if d == ax { block } else { 1 }).collect())
        }
    };
    let shape = x.to_vec();
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; rank];
    Ok((0..n).map(move |_| {
        let at = idx.iter().zip(&walk).zip(&div).map(|((&i, &w), &d)| (i / d) * w).sum();
        next_index(&mut idx, &shape);
        at
    }))
}

/// ONNX `QuantizeLinear`: `clamp(rint(x / scale) + zero_point)` to an integer type (8, 16, 4 or
/// 2 bits); `x / scale` rounded once to a float8 / float4 type (saturating as `saturate` says;
/// float8 takes no zero point other than 0, float4 adds it).
pub fn quantize_linear(
    node: &NodeCtx,
    attrs: &Quantize,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = float_view(node, required(node, inputs, 0, "x")?, "x")?;
    let scale = float_view(node, required(node, inputs, 1, "y_scale")?, "y_scale")?;
    let dtype = optional(inputs, 2).map_or(attrs.output_dtype.unwrap_or(DType::U8), |z| z.dtype());
    let quantized = matches!(dtype, DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::Coded(_));
    if !quantized || dtype == DType::Coded(Coded::F8E8M0) {
        return Err(node.err(format!(
            "quantizing to {dtype} (ONNX quantizes to 8-, 16-, 4- and 2-bit integers, float8 and float4)"
        )));
    }
    let scales = param_offsets(node, x.shape, scale.shape, attrs.axis, attrs.block_size, "y_scale")?;
    // The zero point (when given) with its offsets, which walk x as the scale's do.
    let mut zero = match optional(inputs, 2) {
        Some(z) => {
            // One value each is per-tensor whatever its rank ([] and [1] both occur in exports).
            let one = |s: &[usize]| s.iter().product::<usize>() == 1 && s.len() <= 1;
            if z.shape() != scale.shape && !(one(z.shape()) && one(scale.shape)) {
                return Err(node.err(format!(
                    "y_zero_point {:?} differs from y_scale {:?}",
                    z.shape(),
                    scale.shape
                )));
            }
            let at = param_offsets(node, x.shape, z.shape(), attrs.axis, attrs.block_size, "y_zero_point")?;
            Some((z.data(), at))
        }
        None => None,
    };
    let n = count(node, x.shape)?;
    let data = if let Some((lo, hi)) = dtype.int_range() {
        let values = scales.enumerate().map(|(i, s)| {
            let q = (x.at(i) as f32 / scale.at(s) as f32).round_ties_even() as f64;
            let z = zero.as_mut().and_then(|(d, at)| at.next().map(|o| d.int_at(o))).unwrap_or(0);
            (q + z as f64).clamp(lo as f64, hi as f64) as i64
        });
        ints_to(dtype, n, values)?
    } else {
        // float8 ignores its (zero) zero point as ONNX's reference does; float4 adds it.
        let adds_zero = dtype == DType::Coded(Coded::F4E2M1);
        let values = scales.enumerate().map(|(i, s)| {
            let q = (x.at(i) as f32 / scale.at(s) as f32) as f64;
            let z = zero.as_mut().and_then(|(d, at)| at.next().map(|o| d.float_at(o))).unwrap_or(0.0);
            if adds_zero { q + z } else { q }
        });
        floats_to_with(dtype, n, values, attrs.saturate, RoundMode::Up)?
    };
    Ok(vec![HostTensor::new(x.shape.to_vec(), data)?])
}

/// ONNX `DequantizeLinear`: `(x - zero_point) * scale`, in the scale's dtype.
pub fn dequantize_linear(
    node: &NodeCtx,
    attrs: &Quantize,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = number_view(node, required(node, inputs, 0, "x")?, "x")?;
    let scale = float_view(node, required(node, inputs, 1, "x_scale")?, "x_scale")?;
    let scales = param_offsets(node, x.shape, scale.shape, attrs.axis, attrs.block_size, "x_scale")?;
    let mut zero = match optional(inputs, 2) {
        Some(z) => {
            if z.dtype() != x.dtype {
                return Err(node.err(format!("x_zero_point is {}, x is {}", z.dtype(), x.dtype)));
            }
            let at = param_offsets(node, x.shape, z.shape(), attrs.axis, attrs.block_size, "x_zero_point")?;
            Some((z.data(), at))
        }
        None => None,
    };
    let mut y = OutBuf::new(node, scale.dtype, x.shape.to_vec())?;
    for (i, s) in scales.enumerate() {
        let z = zero.as_mut().and_then(|(d, at)| at.next().map(|o| d.float_at(o))).unwrap_or(0.0);
        y.set(i, (x.at(i) - z) * scale.at(s));
    }
    Ok(vec![y.finish(node)?])
}

/// ONNX `DynamicQuantizeLinear`: uint8 with `scale = (max(0, max x) - min(0, min x)) / 255` and
/// `zero_point = saturate(rint(-min(0, min x) / scale))`, computed in f32 as ONNX's reference does.
pub fn dynamic_quantize_linear(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let xt = required(node, inputs, 0, "x")?;
    let x = xt.f32s("x").map_err(|_| node.err(format!("x must be float32, got {}", xt.dtype())))?;
    let lo = x.iter().copied().fold(0f32, f32::min);
    let hi = x.iter().copied().fold(0f32, f32::max);
    let scale = (hi - lo) / 255.0;
    let zero = if scale == 0.0 { 0.0 } else { (0.0 - lo / scale).round_ties_even().clamp(0.0, 255.0) };
    let q =
        |v: f32| if scale == 0.0 { zero } else { ((v / scale).round_ties_even() + zero).clamp(0.0, 255.0) };
    let n = count(node, xt.shape())?;
    let y = ints_to(DType::U8, n, x.iter().map(|&v| q(v) as i64))?;
    Ok(vec![
        HostTensor::new(xt.shape().to_vec(), y)?,
        HostTensor::new(vec![], vec![scale])?,
        HostTensor::new(vec![], vec![zero as u8])?,
    ])
}

/// Fails unless every `(operand, name)` is uint8 or int8.
fn eight_bit(node: &NodeCtx, operands: &[(&View, &str)]) -> Result<(), HostError> {
    match operands.iter().find(|(t, _)| !matches!(t.dtype, DType::U8 | DType::I8)) {
        Some((t, what)) => Err(node.err(format!("{what} must be uint8 or int8, got {}", t.dtype))),
        None => Ok(()),
    }
}

/// Element `i` of a per-index parameter, or its one value.
fn per(v: &[f64], i: usize) -> f64 {
    v[if v.len() == 1 { 0 } else { i % v.len() }]
}

/// The zero point of an integer operand `what` at slot `slot`: one value, or `per` values (one per
/// row of A, column of B, output channel of w); 0 when omitted.
fn zero_point(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    operand: &View,
    per: usize,
    what: &str,
) -> Result<Vec<f64>, HostError> {
    let Some(z) = optional(inputs, slot) else { return Ok(vec![0.0]) };
    if z.dtype() != operand.dtype {
        return Err(node.err(format!("{what} is {}, its operand is {}", z.dtype(), operand.dtype)));
    }
    if z.len() != 1 && (z.shape().len() != 1 || z.len() != per) {
        return Err(node.err(format!("{what} of shape {:?}: one value or {per}", z.shape())));
    }
    Ok((0..z.len()).map(|i| z.data().float_at(i)).collect())
}

/// `t` less its zero point (element `i` takes `per(zero, group(i))`), as an f64 tensor (exact:
/// |value| < 2^9).
fn less_zero(t: &View, zero: &[f64], group: impl Fn(usize) -> usize) -> Result<HostTensor, HostError> {
    let len: usize = t.shape.iter().product();
    let data =
        try_collect(len, "an operand less its zero point", (0..len).map(|i| t.at(i) - per(zero, group(i))))?;
    HostTensor::new(t.shape.to_vec(), data)
}

/// An exactly integral f64 result as int32.
fn int32(y: &HostTensor) -> Result<HostTensor, HostError> {
    let out: Vec<i32> = y.data().to_f64s().iter().map(|&v| v.round() as i32).collect();
    HostTensor::new(y.shape().to_vec(), out)
}

/// `(A - a_zero_point) @ (B - b_zero_point)` of A (input `ia`) and B (input `ib`) with their zero
/// points at `za` / `zb`, exactly, as an f64 tensor of MatMul's shape.
fn integer_product(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    (ia, za): (usize, usize),
    (ib, zb): (usize, usize),
) -> Result<HostTensor, HostError> {
    let a = number_view(node, required(node, inputs, ia, "A")?, "A")?;
    let b = number_view(node, required(node, inputs, ib, "B")?, "B")?;
    eight_bit(node, &[(&a, "A"), (&b, "B")])?;
    let m = if a.shape.len() >= 2 { a.shape[a.shape.len() - 2] } else { 1 };
    let n = if b.shape.len() >= 2 { b.shape[b.shape.len() - 1] } else { 1 };
    let za = zero_point(node, inputs, za, &a, m, "a_zero_point")?;
    let zb = zero_point(node, inputs, zb, &b, n, "b_zero_point")?;
    // A's zero points go by row, B's by column.
    let (a_cols, b_cols) =
        (a.shape.last().copied().unwrap_or(1).max(1), b.shape.last().copied().unwrap_or(1).max(1));
    let a64 = less_zero(&a, &za, |i| i / a_cols)?;
    let b64 = less_zero(&b, &zb, |i| i % b_cols)?;
    Ok(super::matmul(node, &(), &[Some(&a64), Some(&b64)])?.remove(0))
}

/// ONNX `MatMulInteger`: `(A - a_zero_point) @ (B - b_zero_point)` in int32, NumPy `matmul`
/// shapes (A's zero point per row, B's per column, or one each).
pub fn matmul_integer(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    Ok(vec![int32(&integer_product(node, inputs, (0, 2), (1, 3))?)?])
}

/// `v` rounded to the float `dtype` (the precision ONNX's reference multiplies scales in).
fn rounded(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v,
    }
}

/// The float scale at slot `slot`, one value or `per` (one per row, column or output channel):
/// its dtype and values.
fn per_scale(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    per: usize,
    what: &str,
) -> Result<(DType, Vec<f64>), HostError> {
    let (dtype, v) = scale_values(node, inputs, slot, what)?;
    if v.len() != 1 && v.len() != per {
        return Err(node.err(format!("{what} holds {} values: one, or {per}", v.len())));
    }
    Ok((dtype, v))
}

/// The float scale at slot `slot`: its dtype and values.
fn scale_values(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    what: &str,
) -> Result<(DType, Vec<f64>), HostError> {
    let t = float_view(node, required(node, inputs, slot, what)?, what)?;
    Ok((t.dtype, (0..t.shape.iter().product::<usize>()).map(|i| t.at(i)).collect()))
}

/// Requantization of an integer result to y: `y_scale` (slot 6) and `y_zero_point` (slot 7), one
/// value each, the operands' scales multiplied in `scale_dtype`.
struct Requantize {
    dtype: DType,
    range: (f64, f64),
    zero: f64,
    y_scale: f64,
    scale_dtype: DType,
}

impl Requantize {
    fn of(node: &NodeCtx, inputs: &[Option<&HostTensor>], scale_dtype: DType) -> Result<Self, HostError> {
        let (_, sy) = scale_values(node, inputs, 6, "y_scale")?;
        let zy = required(node, inputs, 7, "y_zero_point")?;
        if zy.len() != 1 || sy.len() != 1 {
            return Err(node.err("y_scale and y_zero_point must hold one value each"));
        }
        let dtype = zy.dtype();
        let Some((lo, hi)) = dtype.int_range().filter(|_| matches!(dtype, DType::U8 | DType::I8)) else {
            return Err(node.err(format!("y_zero_point must be uint8 or int8, got {dtype}")));
        };
        Ok(Requantize {
            dtype,
            range: (lo as f64, hi as f64),
            zero: zy.data().float_at(0),
            y_scale: sy[0],
            scale_dtype,
        })
    }

    /// `saturate(rint(acc · scale / y_scale) + y_zero_point)`, `scale` being the product of the
    /// operands' scales.
    fn apply(&self, acc: f64, scale: f64) -> i64 {
        let dt = self.scale_dtype;
        let multiplier = rounded(dt, rounded(dt, scale) / self.y_scale);
        ((acc * multiplier).round_ties_even() + self.zero).clamp(self.range.0, self.range.1) as i64
    }

    /// The integer result `acc` requantized, the operands' scale product of element `i` given by
    /// `scale`.
    fn tensor(&self, acc: &HostTensor, scale: impl Fn(usize) -> f64) -> Result<HostTensor, HostError> {
        let v = acc.data().to_f64s();
        let values = v.iter().enumerate().map(|(i, &a)| self.apply(a, scale(i)));
        HostTensor::new(acc.shape().to_vec(), ints_to(self.dtype, v.len(), values)?)
    }
}

/// ONNX `QLinearMatMul`: the integer product of `a` and `b` (less their zero points), times
/// `a_scale · b_scale / y_scale` (per row of a, per column of b, or one each; multiplied in the
/// scales' dtype), rounded to even, plus `y_zero_point`, saturated to its type.
pub fn qlinear_matmul(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let c = integer_product(node, inputs, (0, 2), (3, 5))?;
    // M and N from the operands (a 1-D A has one row, a 1-D B one column).
    let (a, b) = (required(node, inputs, 0, "a")?.shape(), required(node, inputs, 3, "b")?.shape());
    let m = if a.len() >= 2 { a[a.len() - 2] } else { 1 };
    let n = if b.len() >= 2 { b[b.len() - 1] } else { 1 };
    let (dt, sa) = per_scale(node, inputs, 1, m, "a_scale")?;
    let (_, sb) = per_scale(node, inputs, 4, n, "b_scale")?;
    let y = Requantize::of(node, inputs, dt)?;
    let (m, n) = (m.max(1), n.max(1));
    Ok(vec![y.tensor(&c, |i| per(&sa, (i / n) % m) * per(&sb, i % n))?])
}

/// `x - x_zero_point` (input `ix`, zero point `izx`: one value) and `w - w_zero_point` (input
/// `iw`, zero point `izw`: one value or one per output channel), as f64 tensors (exact).
fn conv_operands(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    (ix, izx): (usize, usize),
    (iw, izw): (usize, usize),
) -> Result<(HostTensor, HostTensor), HostError> {
    let x = number_view(node, required(node, inputs, ix, "x")?, "x")?;
    let w = number_view(node, required(node, inputs, iw, "w")?, "w")?;
    eight_bit(node, &[(&x, "x"), (&w, "w")])?;
    let maps = w.shape.first().copied().unwrap_or(1);
    let zx = zero_point(node, inputs, izx, &x, 1, "x_zero_point")?;
    let zw = zero_point(node, inputs, izw, &w, maps, "w_zero_point")?;
    let per_map = w.shape.iter().skip(1).product::<usize>().max(1);
    Ok((less_zero(&x, &zx, |i| i)?, less_zero(&w, &zw, |i| i / per_map)?))
}

/// ONNX `ConvInteger`: Conv of `x - x_zero_point` and `w - w_zero_point` (one value, or one per
/// output channel), in int32.
pub fn conv_integer(
    node: &NodeCtx,
    attrs: &planner::op::Conv,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (x, w) = conv_operands(node, inputs, (0, 2), (1, 3))?;
    Ok(vec![int32(&super::conv(node, attrs, &[Some(&x), Some(&w), None])?.remove(0))?])
}

/// ONNX `QLinearConv`: the integer Conv of x and w less their zero points plus the int32 bias,
/// times `x_scale · w_scale / y_scale` (w_scale one value or one per output channel; multiplied
/// in the scales' dtype), rounded to even, plus `y_zero_point`, saturated to its type.
pub fn qlinear_conv(
    node: &NodeCtx,
    attrs: &planner::op::Conv,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let (x, w) = conv_operands(node, inputs, (0, 2), (3, 5))?;
    let bias = match optional(inputs, 8) {
        Some(b) if b.dtype() != DType::I32 => {
            return Err(node.err(format!("B must be int32, got {}", b.dtype())));
        }
        Some(b) => Some(HostTensor::new(b.shape().to_vec(), b.data().to_f64s())?),
        None => None,
    };
    let acc = super::conv(node, attrs, &[Some(&x), Some(&w), bias.as_ref()])?.remove(0);
    let shape = acc.shape();
    let maps = shape.get(1).copied().unwrap_or(1).max(1);
    let (dt, sx) = scale_values(node, inputs, 1, "x_scale")?;
    if sx.len() != 1 {
        return Err(node.err("x_scale must hold one value"));
    }
    let (_, sw) = per_scale(node, inputs, 4, maps, "w_scale")?;
    let y = Requantize::of(node, inputs, dt)?;
    let plane = shape.iter().skip(2).product::<usize>().max(1);
    Ok(vec![y.tensor(&acc, |i| sx[0] * per(&sw, (i / plane) % maps))?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, t32, vals};

    fn u8s(shape: &[usize], v: &[u8]) -> HostTensor {
        HostTensor::new(shape.to_vec(), v.to_vec()).unwrap()
    }

    fn i8s(shape: &[usize], v: &[i8]) -> HostTensor {
        HostTensor::new(shape.to_vec(), v.to_vec()).unwrap()
    }

    #[test]
    fn per_axis_quantization_rounds_ties_to_even_and_saturates() {
        // x [2, 3]; scales per column (axis 1); int8 zero points.
        let x = t32(&[2, 3], &[1.0, 2.5, -300.0, 0.5, 3.0, 300.0]);
        let scale = t32(&[3], &[1.0, 1.0, 2.0]);
        let zp = i8s(&[3], &[0, 1, -1]);
        let q = Quantize::default();
        let y = quantize_linear(&node("QuantizeLinear"), &q, &[Some(&x), Some(&scale), Some(&zp)]).unwrap();
        assert_eq!(y[0].dtype(), DType::I8);
        // 2.5 -> 2 (+1 = 3); -300 / 2 -> -150 -> -151 saturates to -128; 0.5 -> 0; 300 / 2 - 1 -> 127.
        assert_eq!(vals(&y[0]), vec![1.0, 3.0, -128.0, 0.0, 4.0, 127.0]);
        // Dequantized back with the same parameters.
        let back = dequantize_linear(&node("DequantizeLinear"), &q, &[Some(&y[0]), Some(&scale), Some(&zp)])
            .unwrap();
        assert_eq!(back[0].dtype(), DType::F32);
        assert_eq!(vals(&back[0]), vec![1.0, 2.0, -254.0, 0.0, 3.0, 256.0]);
    }

    #[test]
    fn blocked_scales_cover_blocks_along_the_axis() {
        // x [1, 5], blocks of 2 along axis 1: scales [1, 3] (the last block holds one element).
        let x = t32(&[1, 5], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        let scale = t32(&[1, 3], &[2.0, 4.0, 10.0]);
        let q = Quantize { axis: 1, block_size: 2, output_dtype: None, saturate: true };
        let y = quantize_linear(&node("QuantizeLinear"), &q, &[Some(&x), Some(&scale), None]).unwrap();
        assert_eq!(y[0].dtype(), DType::U8);
        assert_eq!(vals(&y[0]), vec![1.0, 2.0, 2.0, 2.0, 1.0]);
        let wrong = t32(&[1, 2], &[1.0, 1.0]);
        let e = quantize_linear(&node("QuantizeLinear"), &q, &[Some(&x), Some(&wrong), None]).unwrap_err();
        assert!(e.to_string().contains("per block of 2"), "{e}");
    }

    #[test]
    fn dynamic_quantization_spans_zero() {
        let x = t32(&[4], &[-1.0, 0.0, 1.0, 2.0]);
        let y = dynamic_quantize_linear(&node("DynamicQuantizeLinear"), &(), &[Some(&x)]).unwrap();
        let scale = 3.0f32 / 255.0;
        assert_eq!(vals(&y[1]), vec![scale as f64]);
        assert_eq!(vals(&y[2]), vec![85.0]); // rint(1 / scale) = 85
        assert_eq!(vals(&y[0]), vec![0.0, 85.0, 170.0, 255.0]);
    }

    #[test]
    fn scales_of_the_wrong_length_are_refused_not_indexed() {
        // a [2, 2] @ b [2, 2]: a_scale must be one value or one per row (2); an empty one was read
        // modulo its length (a division by zero).
        let (a, za) = (u8s(&[2, 2], &[1, 2, 3, 4]), u8s(&[], &[0]));
        let one = t32(&[], &[1.0]);
        let empty = t32(&[0], &[]);
        let three = t32(&[3], &[1.0, 1.0, 1.0]);
        for bad in [&empty, &three] {
            let inputs =
                [Some(&a), Some(bad), Some(&za), Some(&a), Some(&one), Some(&za), Some(&one), Some(&za)];
            let e = qlinear_matmul(&node("QLinearMatMul"), &(), &inputs).unwrap_err();
            assert!(e.to_string().contains("a_scale holds"), "{e}");
        }
        let inputs =
            [Some(&a), Some(&one), Some(&za), Some(&a), Some(&one), Some(&za), Some(&one), Some(&za)];
        let y = qlinear_matmul(&node("QLinearMatMul"), &(), &inputs).unwrap();
        assert_eq!(vals(&y[0]), vec![7.0, 10.0, 15.0, 22.0]);
    }

    #[test]
    fn integer_matmul_subtracts_per_row_and_per_column_zero_points() {
        let a = u8s(&[2, 2], &[10, 20, 30, 40]);
        let b = u8s(&[2, 2], &[1, 2, 3, 4]);
        let za = u8s(&[2], &[10, 30]); // rows become [0, 10] and [0, 10]
        let zb = u8s(&[2], &[1, 2]); // columns become [0, 2] and [0, 2]
        let y =
            matmul_integer(&node("MatMulInteger"), &(), &[Some(&a), Some(&b), Some(&za), Some(&zb)]).unwrap();
        assert_eq!(y[0].dtype(), DType::I32);
        assert_eq!(vals(&y[0]), vec![20.0, 20.0, 20.0, 20.0]);
        let bad = u8s(&[3], &[0, 0, 0]);
        assert!(
            matmul_integer(&node("MatMulInteger"), &(), &[Some(&a), Some(&b), Some(&bad), None]).is_err()
        );
    }
}
