//! Reductions: the ten ONNX `Reduce*` ops (axes from the legacy attribute or input 1, `keepdims`,
//! `noop_with_empty_axes`), ArgMax/ArgMin (`select_last_index`) and CumSum (`exclusive`,
//! `reverse`).
//!
//! Floats accumulate in f64 and round once. Integers accumulate exactly with wrapping (Sum, Prod,
//! Max, Min, L1, SumSquare); Mean truncates; L2, LogSum and LogSumExp go through f64 and truncate.
//! Over an empty set each reduction yields its identity (ONNX opset 18): 0 for sums, 1 for Prod,
//! the dtype's lowest value (-inf) for Max, its highest (+inf) for Min, -inf for LogSum and
//! LogSumExp, NaN for Mean.

use std::cmp::Ordering;

use planner::DType;
use planner::op::{ArgReduce, Reduce};

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{Lanes, floats_to};
use crate::reference::strides::{self, axes, count, ints};
use crate::tensor::HostTensor;

/// Which `Reduce*` op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// `ReduceSum`: Σx.
    Sum,
    /// `ReduceMean`: Σx / n.
    Mean,
    /// `ReduceMax` (NaN propagates).
    Max,
    /// `ReduceMin` (NaN propagates).
    Min,
    /// `ReduceProd`: Πx.
    Prod,
    /// `ReduceL1`: Σ|x|.
    L1,
    /// `ReduceL2`: sqrt(Σx²).
    L2,
    /// `ReduceLogSum`: ln(Σx).
    LogSum,
    /// `ReduceLogSumExp`: ln(Σ exp(x)), computed with the maximum factored out.
    LogSumExp,
    /// `ReduceSumSquare`: Σx².
    SumSquare,
}

/// ONNX `Reduce*`. With no axes (absent or empty), every axis is reduced unless
/// `noop_with_empty_axes`, in which case each element is reduced on its own (the identity for
/// Sum/Mean/Max/Min/Prod/LogSumExp, |x| for L1/L2, x² for SumSquare, ln x for LogSum).
pub fn reduce(
    ctx: &NodeCtx,
    x: &HostTensor,
    axes_input: Option<&HostTensor>,
    attrs: &Reduce,
    kind: Reduction,
) -> Result<HostTensor, HostError> {
    let rank = x.shape().len();
    let listed = match (&attrs.axes, axes_input) {
        (Some(a), _) => a.clone(),
        (None, Some(t)) => ints(ctx, t, "axes")?,
        (None, None) => Vec::new(),
    };
    let reduced: Vec<usize> = if listed.is_empty() {
        if attrs.noop_with_empty_axes { Vec::new() } else { (0..rank).collect() }
    } else {
        axes(ctx, &listed, rank)?
    };
    let kept_shape: Vec<usize> =
        x.shape().iter().enumerate().map(|(d, &n)| if reduced.contains(&d) { 1 } else { n }).collect();
    let groups = count(ctx, &kept_shape)?;
    // A group's members: its base (the offset of its first element, one per output element, in
    // output order) plus each offset of the reduced sub-block, in increasing order.
    let in_strides = strides::strides(x.shape());
    let mut sorted = reduced.clone();
    sorted.sort_unstable();
    let red_shape: Vec<usize> = sorted.iter().map(|&d| x.shape()[d]).collect();
    let red_strides: Vec<usize> = sorted.iter().map(|&d| in_strides[d]).collect();
    let block: Vec<usize> = strides::strided_offsets(&red_shape, red_strides).collect();
    let kept_walk: Vec<usize> =
        (0..rank).map(|d| if reduced.contains(&d) { 0 } else { in_strides[d] }).collect();
    let bases = strides::strided_offsets(&kept_shape, kept_walk);
    let out_shape: Vec<usize> = if attrs.keepdims {
        kept_shape
    } else {
        x.shape().iter().enumerate().filter(|(d, _)| !reduced.contains(d)).map(|(_, &n)| n).collect()
    };
    if x.dtype().is_float() {
        // Read in place: nothing widened beyond the group in hand.
        let d = x.data();
        let values = bases.map(|b| reduce_f64(kind, block.iter().map(move |&o| d.float_at(b + o))));
        return HostTensor::new(out_shape, floats_to(x.dtype(), groups, values)?);
    }
    let bases: Vec<usize> = bases.collect();
    let Lanes::I(v) = Lanes::of(x)? else {
        return Err(ctx.err(format!("internal: {} read as float lanes", x.dtype())));
    };
    reduce_ints(kind, x.dtype(), &v, &bases, &block).into_tensor(x.dtype(), out_shape)
}

/// One float reduction over `xs`, in f64.
fn reduce_f64(kind: Reduction, xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = xs.clone().count();
    let has_nan = xs.clone().any(f64::is_nan);
    let nan_or = |v: f64| if has_nan { f64::NAN } else { v };
    match kind {
        Reduction::Sum => xs.sum(),
        Reduction::Mean => xs.sum::<f64>() / n as f64,
        Reduction::Max => nan_or(xs.fold(f64::NEG_INFINITY, f64::max)),
        Reduction::Min => nan_or(xs.fold(f64::INFINITY, f64::min)),
        Reduction::Prod => xs.product(),
        Reduction::L1 => xs.map(f64::abs).sum(),
        Reduction::L2 => xs.map(|x| x * x).sum::<f64>().sqrt(),
        Reduction::LogSum => xs.sum::<f64>().ln(),
        Reduction::LogSumExp => {
            let m = nan_or(xs.clone().fold(f64::NEG_INFINITY, f64::max));
            if m.is_finite() {
                m + xs.map(|x| (x - m).exp()).sum::<f64>().ln()
            } else {
                xs.map(f64::exp).sum::<f64>().ln()
            }
        }
        Reduction::SumSquare => xs.map(|x| x * x).sum(),
    }
}

/// Integer reductions: exact where the result is an integer, via f64 otherwise.
fn reduce_ints(kind: Reduction, dtype: DType, v: &[i64], bases: &[usize], block: &[usize]) -> Lanes {
    let members: Vec<_> = bases.iter().map(|&b| block.iter().map(move |&o| b + o)).collect();
    let (lowest, highest) = dtype.int_range().unwrap_or((i64::MIN, i64::MAX));
    let exact = |f: &dyn Fn(&mut dyn Iterator<Item = i64>) -> i64| {
        Lanes::I(members.iter().map(|m| f(&mut m.clone().map(|i| v[i]))).collect())
    };
    match kind {
        Reduction::Sum => exact(&|xs| xs.fold(0, i64::wrapping_add)),
        Reduction::Prod => exact(&|xs| xs.fold(1, i64::wrapping_mul)),
        Reduction::Max => exact(&|xs| xs.fold(lowest, i64::max)),
        Reduction::Min if dtype == DType::U64 => {
            // u64::MAX when empty (its bits are -1 in the lanes); the values are below 2^63.
            exact(&|xs| xs.reduce(i64::min).unwrap_or(-1))
        }
        Reduction::Min => exact(&|xs| xs.fold(highest, i64::min)),
        Reduction::L1 => exact(&|xs| xs.fold(0, |a, x| a.wrapping_add(x.wrapping_abs()))),
        Reduction::SumSquare => exact(&|xs| xs.fold(0, |a, x| a.wrapping_add(x.wrapping_mul(x)))),
        // (uint64 sums wrap at 2^64 and divide unsigned; the lanes hold the same bits.)
        Reduction::Mean if dtype == DType::U64 => Lanes::I(
            members
                .iter()
                .map(|m| {
                    let s = m.clone().fold(0u64, |a, i| a.wrapping_add(v[i] as u64));
                    if block.is_empty() { 0 } else { (s / block.len() as u64) as i64 }
                })
                .collect(),
        ),
        Reduction::Mean => Lanes::I(
            members
                .iter()
                .map(|m| {
                    let s = m.clone().fold(0i64, |a, i| a.wrapping_add(v[i]));
                    if block.is_empty() { 0 } else { s / block.len() as i64 }
                })
                .collect(),
        ),
        Reduction::L2 | Reduction::LogSum | Reduction::LogSumExp => {
            Lanes::F(members.iter().map(|m| reduce_f64(kind, m.clone().map(|i| v[i] as f64))).collect())
        }
    }
}

/// `(outer, len, inner)` sizes around `axis` of `shape`.
pub fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

/// ONNX `ArgMax` (`max = true`) and `ArgMin`: the I64 index of the first extreme element along
/// `axis` (the last one with `select_last_index`). NaN counts as the extreme, as in numpy.
pub fn arg_reduce(
    ctx: &NodeCtx,
    x: &HostTensor,
    attrs: &ArgReduce,
    max: bool,
) -> Result<HostTensor, HostError> {
    // A scalar has no axis to reduce along (ONNX's axis is in [-r, r - 1] for r >= 1).
    let axis = strides::axis(ctx, attrs.axis, x.shape().len())?;
    let shape = x.shape().to_vec();
    let (outer, len, inner) = split_at_axis(&shape, axis);
    if len == 0 {
        return Err(ctx.err("cannot take ArgMax/ArgMin over an empty axis"));
    }
    let v = Lanes::of(x)?;
    let want = if max { Ordering::Greater } else { Ordering::Less };
    let mut out = crate::tensor::try_with_capacity(outer * inner, "a working buffer")?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            let mut best = 0usize;
            for k in 1..len {
                let (c, b) = (at(k), at(best));
                let ord = v.cmp_at(c, b);
                let better = !v.is_nan_at(b) && (v.is_nan_at(c) || ord == want);
                if better || (attrs.select_last_index && ord == Ordering::Equal) {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    let mut out_shape = shape;
    if attrs.keepdims {
        out_shape[axis] = 1;
    } else {
        out_shape.remove(axis);
    }
    if x.shape().is_empty() {
        out_shape.clear();
    }
    Lanes::I(out).into_tensor(DType::I64, out_shape)
}

/// ONNX `CumSum` along the axis given by a one-element integer tensor; `exclusive` leaves out the
/// current element, `reverse` sums from the end. Floats keep an f64 running sum.
pub fn cumsum(
    ctx: &NodeCtx,
    x: &HostTensor,
    axis: &HostTensor,
    exclusive: bool,
    reverse: bool,
) -> Result<HostTensor, HostError> {
    cumulative(ctx, x, axis, exclusive, reverse, false)
}

/// ONNX `CumProd` (opset 26): [`cumsum`] with products (an exclusive product starts at 1).
pub fn cumprod(
    ctx: &NodeCtx,
    x: &HostTensor,
    axis: &HostTensor,
    exclusive: bool,
    reverse: bool,
) -> Result<HostTensor, HostError> {
    cumulative(ctx, x, axis, exclusive, reverse, true)
}

/// Running sums (or products, `product`) along `axis`.
fn cumulative(
    ctx: &NodeCtx,
    x: &HostTensor,
    axis: &HostTensor,
    exclusive: bool,
    reverse: bool,
    product: bool,
) -> Result<HostTensor, HostError> {
    let a = strides::int_scalar(ctx, axis, "axis")?;
    let axis = strides::axis(ctx, a, x.shape().len())?;
    let (outer, len, inner) = split_at_axis(x.shape(), axis);
    let order: Vec<usize> = if reverse { (0..len).rev().collect() } else { (0..len).collect() };
    let lanes = Lanes::of(x)?;
    let mut out = lanes.clone();
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * len + k) * inner + i;
            match (&lanes, &mut out) {
                (Lanes::F(src), Lanes::F(dst)) => {
                    let mut acc = if product { 1f64 } else { 0f64 };
                    for &k in &order {
                        let before = acc;
                        acc = if product { acc * src[at(k)] } else { acc + src[at(k)] };
                        dst[at(k)] = if exclusive { before } else { acc };
                    }
                }
                (Lanes::I(src), Lanes::I(dst)) => {
                    let mut acc = i64::from(product);
                    for &k in &order {
                        let before = acc;
                        acc =
                            if product { acc.wrapping_mul(src[at(k)]) } else { acc.wrapping_add(src[at(k)]) };
                        dst[at(k)] = if exclusive { before } else { acc };
                    }
                }
                _ => return Err(ctx.err("internal: lanes changed kind")),
            }
        }
    }
    out.into_tensor(x.dtype(), x.shape().to_vec())
}
