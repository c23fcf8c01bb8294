//! Ops that build new tensors or select by value: ONNX ConstantOfShape, Range, OneHot, Trilu,
//! TopK and NonZero. (Constant is a one-liner in the dispatch.)

use planner::ConstTensor;

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{Lanes, gather_elems, gather_iter, gather_or_fill};
use crate::reference::reduce::split_at_axis;
use crate::reference::strides::{self, count, dims, next_index};
use crate::tensor::HostTensor;

/// ONNX `ConstantOfShape`: a tensor of the shape given by a 1-D integer input (empty = scalar),
/// every element equal to the one-element `value` (whose dtype is the output dtype).
pub fn constant_of_shape(
    ctx: &NodeCtx,
    shape: &HostTensor,
    value: &ConstTensor,
) -> Result<HostTensor, HostError> {
    let out = dims(ctx, shape, "shape")?;
    let v = HostTensor::from_const(value)?;
    if v.len() != 1 {
        return Err(ctx.err(format!("value must hold one element, got {}", v.len())));
    }
    let n = count(ctx, &out)?;
    gather_iter(&v, n, std::iter::repeat_n(0, n), out)
}

/// ONNX `Range`: `start + i * delta` for `i` in `0..max(ceil((limit - start) / delta), 0)`, as a
/// 1-D tensor of the inputs' dtype (floats computed in f64, rounded once).
pub fn range(
    ctx: &NodeCtx,
    start: &HostTensor,
    limit: &HostTensor,
    delta: &HostTensor,
) -> Result<HostTensor, HostError> {
    let one = |t: &HostTensor, what: &str| -> Result<Lanes, HostError> {
        if t.len() != 1 {
            return Err(ctx.err(format!("{what} must be a scalar, got shape {:?}", t.shape())));
        }
        Lanes::of(t)
    };
    let lanes = match (one(start, "start")?, one(limit, "limit")?, one(delta, "delta")?) {
        (Lanes::I(s), Lanes::I(l), Lanes::I(d)) => {
            let (s, l, d) = (s[0] as i128, l[0] as i128, d[0] as i128);
            if d == 0 {
                return Err(ctx.err("delta may not be 0"));
            }
            let (span, step) = if d > 0 { (l - s, d) } else { (s - l, -d) };
            let n = (span.max(0) as u128).div_ceil(step as u128) as i128;
            ctx.check_elems(usize::try_from(n).unwrap_or(usize::MAX), "range")?;
            Lanes::I((0..n).map(|i| (s + i * d) as i64).collect())
        }
        (s, l, d) => {
            let (s, l, d) = (s.to_f64s()[0], l.to_f64s()[0], d.to_f64s()[0]);
            let n = ((l - s) / d).ceil();
            // A NaN bound or step has no length (max(NaN, 0) would silently give an empty range).
            if d == 0.0 || !n.is_finite() || n > u32::MAX as f64 {
                return Err(ctx.err(format!("range {s}..{l} step {d} is not finite")));
            }
            let n = n.max(0.0) as usize;
            ctx.check_elems(n, "range")?;
            Lanes::F((0..n).map(|i| s + i as f64 * d).collect())
        }
    };
    let n = lanes.len();
    lanes.into_tensor(start.dtype(), vec![n])
}

/// ONNX `OneHot`: a new axis of size `depth` at `axis`; `values = [off, on]` gives the output
/// dtype. Negative indices count from `depth`; indices out of range give an all-off row.
pub fn one_hot(
    ctx: &NodeCtx,
    indices: &HostTensor,
    depth: &HostTensor,
    values: &HostTensor,
    axis: i64,
) -> Result<HostTensor, HostError> {
    let depth = strides::scalar_f64(ctx, depth, "depth")?.trunc();
    if depth.is_nan() || !(1.0..1e15).contains(&depth) {
        return Err(ctx.err(format!("depth must be positive, got {depth}")));
    }
    let depth = depth as usize;
    if values.len() != 2 {
        return Err(ctx.err(format!("values must hold [off, on], got {} elements", values.len())));
    }
    let rank = indices.shape().len();
    let axis = strides::axis(ctx, axis, rank + 1)?;
    let idx = Lanes::of(indices)?.to_f64s();
    let (outer, inner) = (
        indices.shape()[..axis].iter().product::<usize>(),
        indices.shape()[axis..].iter().product::<usize>(),
    );
    let mut shape = indices.shape().to_vec();
    shape.insert(axis, depth);
    let mut src = crate::tensor::try_with_capacity(ctx.count(&shape)?, "a working buffer")?;
    for o in 0..outer {
        for d in 0..depth {
            for i in 0..inner {
                let k = idx[o * inner + i].trunc() as i64;
                let k = if k < 0 { k + depth as i64 } else { k };
                src.push(if k == d as i64 { 1 } else { 0 });
            }
        }
    }
    gather_elems(values, &src, shape)
}

/// ONNX `Trilu`: keeps elements of the last two dims with `j - i >= k` (upper) or `j - i <= k`
/// (lower), zeroing the rest.
pub fn trilu(ctx: &NodeCtx, x: &HostTensor, k: i64, upper: bool) -> Result<HostTensor, HostError> {
    let r = x.shape().len();
    if r < 2 {
        return Err(ctx.err(format!("expects rank >= 2, got shape {:?}", x.shape())));
    }
    let mut idx = vec![0usize; r];
    let mut src = crate::tensor::try_with_capacity(x.len(), "a working buffer")?;
    for o in 0..x.len() {
        let diff = idx[r - 1] as i64 - idx[r - 2] as i64;
        let keep = if upper { diff >= k } else { diff <= k };
        src.push(keep.then_some(o));
        next_index(&mut idx, x.shape());
    }
    let zero = Lanes::I(vec![0]).into_tensor(x.dtype(), vec![])?;
    gather_or_fill(x, &src, &zero, x.shape().to_vec())
}

/// ONNX `TopK`: the `k` largest (or smallest) elements along `axis` and their I64 indices. Output
/// is always sorted (allowed when `sorted = 0`); equal values keep index order; NaN ranks above
/// every number.
pub fn top_k(
    ctx: &NodeCtx,
    x: &HostTensor,
    k: i64,
    axis: i64,
    largest: bool,
) -> Result<Vec<HostTensor>, HostError> {
    let axis = strides::axis(ctx, axis, x.shape().len())?;
    let (outer, len, inner) = split_at_axis(x.shape(), axis);
    let k = usize::try_from(k)
        .ok()
        .filter(|&k| k <= len)
        .ok_or_else(|| ctx.err(format!("k = {k} is outside 0..={len}")))?;
    let v = Lanes::of(x)?;
    let key = |p: usize, q: usize| if largest { v.cmp_at(q, p) } else { v.cmp_at(p, q) };
    let mut src = crate::tensor::try_with_capacity(outer * k * inner, "a working buffer")?;
    let mut positions = vec![0i64; outer * k * inner];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * len + j) * inner + i;
            let mut order: Vec<usize> = (0..len).collect();
            order.sort_by(|&p, &q| key(at(p), at(q)).then(p.cmp(&q)));
            for (r, &j) in order.iter().take(k).enumerate() {
                positions[(o * k + r) * inner + i] = j as i64;
            }
        }
    }
    for o in 0..outer {
        for r in 0..k {
            for i in 0..inner {
                src.push((o * len + positions[(o * k + r) * inner + i] as usize) * inner + i);
            }
        }
    }
    let mut shape = x.shape().to_vec();
    shape[axis] = k;
    let values = gather_elems(x, &src, shape.clone())?;
    Ok(vec![values, HostTensor::new(shape, positions)?])
}

/// ONNX `NonZero`: the multi-indices of non-zero elements in row-major order, as `[rank, count]`
/// I64 (a scalar is treated as 1-D, as numpy does).
pub fn non_zero(x: &HostTensor) -> Result<HostTensor, HostError> {
    let shape: Vec<usize> = if x.shape().is_empty() { vec![1] } else { x.shape().to_vec() };
    let v = Lanes::of(x)?.to_f64s();
    let mut hits: Vec<Vec<usize>> = Vec::new();
    let mut idx = vec![0usize; shape.len()];
    for &e in &v {
        if e != 0.0 {
            hits.push(idx.clone());
        }
        next_index(&mut idx, &shape);
    }
    let mut out = crate::tensor::try_with_capacity(shape.len() * hits.len(), "a working buffer")?;
    for d in 0..shape.len() {
        out.extend(hits.iter().map(|h| h[d] as i64));
    }
    HostTensor::new(vec![shape.len(), hits.len()], out)
}

/// ONNX `EyeLike`: ones where `column - row == k`, zeros elsewhere, shaped like the 2-D `x`, in
/// the `dtype` attribute's type (or x's).
pub fn eye_like(
    ctx: &NodeCtx,
    x: &HostTensor,
    attrs: &planner::op::EyeLike,
) -> Result<HostTensor, HostError> {
    let &[_, cols] = x.shape() else {
        return Err(ctx.err(format!("EyeLike takes a 2-D input, got shape {:?}", x.shape())));
    };
    let n = count(ctx, x.shape())?;
    let ones = (0..n).map(|i| i64::from((i % cols) as i64 - (i / cols) as i64 == attrs.k));
    HostTensor::new(
        x.shape().to_vec(),
        crate::reference::lanes::ints_to(attrs.dtype.unwrap_or(x.dtype()), n, ones)?,
    )
}

/// ONNX `MelWeightMatrix`: `[dft_length / 2 + 1, num_mel_bins]` triangular filters whose
/// corners are `num_mel_bins + 2` points spaced evenly on the mel scale
/// (`2595 log10(1 + f / 700)`) from `lower_edge_hertz` over `upper_edge_hertz`, each mapped to the
/// spectrum bin `floor((dft_length + 1) f / sample_rate)`, in the precisions ONNX's reference
/// computes them in (the bins are floors, so a corner's precision decides which bin it lands in).
pub fn mel_weight_matrix(
    ctx: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    attrs: &planner::op::MelWeightMatrix,
) -> Result<HostTensor, HostError> {
    let input = |slot: usize, what: &str| {
        inputs.get(slot).copied().flatten().ok_or_else(|| ctx.err(format!("{what} is missing")))
    };
    let int = |slot, what| strides::int_scalar(ctx, input(slot, what)?, what);
    let float = |slot: usize, what: &str| -> Result<f32, HostError> {
        let t = input(slot, what)?;
        if t.len() != 1 || !t.dtype().is_float() {
            return Err(ctx.err(format!("{what} must be a float scalar")));
        }
        Ok(t.data().float_at(0) as f32)
    };
    let (mels, dft, rate) = (int(0, "num_mel_bins")?, int(1, "dft_length")?, int(2, "sample_rate")?);
    let (lo, hi) = (float(3, "lower_edge_hertz")?, float(4, "upper_edge_hertz")?);
    if mels < 0 || dft < 0 || rate <= 0 {
        return Err(ctx.err(format!(
            "num_mel_bins {mels} and dft_length {dft} must be non-negative, sample_rate {rate} positive"
        )));
    }
    let (mels, bins) = (mels as usize, dft as usize / 2 + 1);
    let n = count(ctx, &[bins, mels])?;
    // numpy's promotions: log1p and the product in f32, the division by ln 10 in f64.
    let mel = |f: f32| f64::from(2595.0f32 * (f / 700.0).ln_1p()) / std::f64::consts::LN_10;
    let (lo_mel, hi_mel) = (mel(lo), mel(hi));
    let step = (hi_mel - lo_mel) / (mels + 2) as f64;
    let corners: Vec<i64> = (0..mels + 2)
        .map(|i| {
            let m = i as f64 * step + lo_mel;
            let hz = 700.0 * (m / 2595.0 * std::f64::consts::LN_10).exp_m1();
            ((dft + 1) as f64 * hz / rate as f64).floor() as i64
        })
        .collect();
    let mut out = crate::tensor::try_filled(n, 0.0f64, "the mel weight matrix")?;
    let mut set = |j: i64, i: usize, v: f64| -> Result<(), HostError> {
        match usize::try_from(j).ok().filter(|&j| j < bins) {
            Some(j) => {
                out[j * mels + i] = v;
                Ok(())
            }
            None => Err(ctx.err(format!("mel bin {i} reaches spectrum bin {j}, outside 0..{bins}"))),
        }
    };
    for i in 0..mels {
        let (left, centre, right) = (corners[i], corners[i + 1], corners[i + 2]);
        if centre == left {
            set(centre, i, 1.0)?;
        } else {
            for j in left..=centre {
                set(j, i, (j - left) as f64 / (centre - left) as f64)?;
            }
        }
        for j in centre..right {
            set(j, i, (right - j) as f64 / (right - centre) as f64)?;
        }
    }
    let data = crate::reference::lanes::floats_to(attrs.output_dtype, n, out.into_iter())?;
    HostTensor::new(vec![bins, mels], data)
}

/// ONNX `HannWindow` / `HammingWindow` / `BlackmanWindow`: `size` values of the window over
/// `N = size` (periodic) or `size − 1` (symmetric) intervals, computed in f64.
pub fn signal_window(
    ctx: &NodeCtx,
    size: &HostTensor,
    attrs: &planner::op::SignalWindow,
) -> Result<HostTensor, HostError> {
    use planner::op::WindowKind;
    use std::f64::consts::PI;
    let n = strides::int_scalar(ctx, size, "size")?;
    let n = usize::try_from(n).map_err(|_| ctx.err(format!("size {n} is negative")))?;
    count(ctx, &[n])?;
    let intervals = if attrs.periodic { n as f64 } else { n.saturating_sub(1) as f64 };
    let value = |i: usize| {
        let t = if intervals == 0.0 { 0.0 } else { 2.0 * PI * i as f64 / intervals };
        match attrs.kind {
            WindowKind::Hann => 0.5 - 0.5 * t.cos(),
            WindowKind::Hamming => 25.0 / 46.0 - 21.0 / 46.0 * t.cos(),
            WindowKind::Blackman => 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos(),
        }
    };
    let data = crate::reference::lanes::floats_to(attrs.output_dtype, n, (0..n).map(value))?;
    HostTensor::new(vec![n], data)
}
