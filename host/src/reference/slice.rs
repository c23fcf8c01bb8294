//! Region ops: ONNX Slice, Split, Concat, Pad (constant/reflect/edge/wrap), DepthToSpace and
//! SpaceToDepth, plus the stacking and per-axis slicing that Loop and Scan use. Each builds, per
//! output element, the offset it copies from (or a fill) and copies losslessly.

use planner::op::{DepthToSpaceMode, PadMode};

use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{gather_elems, gather_iter, gather_or_fill};
use crate::reference::reduce::split_at_axis;
use crate::reference::strides::{self, count, next_index, ravel, same_dtype, unravel};
use crate::tensor::{HostTensor, TensorData};

/// ONNX `Slice`: per listed axis, `start:end:step` with negative values counting from the back
/// and clamping to the dim (`[0, dim]` for positive steps, `[-1, dim-1]` for negative ones).
pub fn slice(
    ctx: &NodeCtx,
    x: &HostTensor,
    starts: &[i64],
    ends: &[i64],
    axes: Option<&[i64]>,
    steps: Option<&[i64]>,
) -> Result<HostTensor, HostError> {
    let rank = x.shape().len();
    let default_axes: Vec<i64> = (0..starts.len() as i64).collect();
    let axes = strides::axes(ctx, axes.unwrap_or(&default_axes), rank)?;
    let ones = vec![1i64; starts.len()];
    let steps = steps.unwrap_or(&ones);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.err("starts, ends, axes and steps must have the same length"));
    }
    // Per axis: first index and step; all axes default to the full range.
    let mut first: Vec<i64> = vec![0; rank];
    let mut step: Vec<i64> = vec![1; rank];
    let mut out_shape = x.shape().to_vec();
    for (j, &a) in axes.iter().enumerate() {
        let dim = x.shape()[a] as i64;
        let s = steps[j];
        if s == 0 {
            return Err(ctx.err("slice step may not be 0"));
        }
        let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (lo, hi) = if s > 0 { (0, dim) } else { (-1, dim - 1) };
        let (b, e) = (norm(starts[j]).clamp(lo, hi), norm(ends[j]).clamp(lo, hi));
        let (span, stride) = if s > 0 { (e - b, s) } else { (b - e, -s) };
        let len = (span.max(0) as u64).div_ceil(stride as u64);
        first[a] = b;
        step[a] = s;
        out_shape[a] = len as usize;
    }
    let in_strides = strides::strides(x.shape());
    let n = count(ctx, &out_shape)?;
    // Element offset = base + Σ idx[d] · step[d] · stride[d] (steps may be negative).
    let base: i64 = (0..rank).map(|d| first[d] * in_strides[d] as i64).sum();
    let walk: Vec<i64> = (0..rank).map(|d| step[d] * in_strides[d] as i64).collect();
    let mut idx = vec![0usize; rank];
    let shape = out_shape.clone();
    let src = (0..n).map(move |_| {
        let at = base + idx.iter().zip(&walk).map(|(&i, &w)| i as i64 * w).sum::<i64>();
        next_index(&mut idx, &shape);
        at as usize
    });
    gather_iter(x, n, src, out_shape)
}

/// ONNX `Concat` along `axis`: inputs agree on every other dim and on dtype.
pub fn concat(ctx: &NodeCtx, parts: &[&HostTensor], axis: i64) -> Result<HostTensor, HostError> {
    let Some(first) = parts.first() else {
        return Err(ctx.err("needs at least one input"));
    };
    let rank = first.shape().len();
    let axis = strides::axis(ctx, axis, rank)?;
    for p in parts {
        same_dtype(ctx, first, p)?;
        let agree =
            p.shape().len() == rank && (0..rank).all(|d| d == axis || p.shape()[d] == first.shape()[d]);
        if !agree {
            return Err(ctx.err(format!(
                "cannot concatenate shapes {:?} and {:?} on axis {axis}",
                first.shape(),
                p.shape()
            )));
        }
    }
    let (outer, _, inner) = split_at_axis(first.shape(), axis);
    let total: usize = parts.iter().map(|p| p.shape()[axis]).sum();
    let mut shape = first.shape().to_vec();
    shape[axis] = total;
    count(ctx, &shape)?;
    let runs: Vec<usize> = parts.iter().map(|p| p.shape()[axis] * inner).collect();
    let data: Vec<&TensorData> = parts.iter().map(|p| p.data()).collect();
    HostTensor::new(shape, TensorData::concat_runs(&data, outer, &runs)?)
}

/// `parts` (all of one shape) stacked along a new axis `axis` of the output.
pub fn stack(ctx: &NodeCtx, parts: &[HostTensor], axis: usize) -> Result<HostTensor, HostError> {
    let mut views = crate::tensor::try_with_capacity(parts.len(), "a working buffer")?;
    for p in parts {
        let mut shape = p.shape().to_vec();
        shape.insert(axis.min(shape.len()), 1);
        views.push(crate::reference::shape::with_shape(ctx, p, shape)?);
    }
    concat(ctx, &views.iter().collect::<Vec<_>>(), axis as i64)
}

/// The slice of `x` at position `k` of `axis`, with that axis removed.
pub fn index_axis(ctx: &NodeCtx, x: &HostTensor, axis: usize, k: usize) -> Result<HostTensor, HostError> {
    let (outer, len, inner) = split_at_axis(x.shape(), axis);
    if k >= len {
        return Err(ctx.err(format!("position {k} is outside axis {axis} of shape {:?}", x.shape())));
    }
    let src: Vec<usize> =
        (0..outer).flat_map(|o| (0..inner).map(move |i| (o * len + k) * inner + i)).collect();
    let mut shape = x.shape().to_vec();
    shape.remove(axis);
    gather_elems(x, &src, shape)
}

/// ONNX `Split` along `axis` into `sizes` if given, else into `parts` chunks of `ceil(dim / parts)`
/// (the last one smaller, as in opset 18).
pub fn split(
    ctx: &NodeCtx,
    x: &HostTensor,
    axis: i64,
    sizes: Option<Vec<i64>>,
    parts: usize,
) -> Result<Vec<HostTensor>, HostError> {
    let axis = strides::axis(ctx, axis, x.shape().len())?;
    let dim = x.shape()[axis];
    let sizes: Vec<usize> = match sizes {
        Some(s) => s
            .iter()
            .map(|&v| usize::try_from(v).map_err(|_| ctx.err(format!("negative split size {v}"))))
            .collect::<Result<_, _>>()?,
        None if parts == 0 => return Err(ctx.err("Split needs at least one output")),
        None => {
            let chunk = dim.div_ceil(parts);
            (0..parts).map(|i| chunk.min(dim.saturating_sub(i * chunk))).collect()
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(ctx.err(format!("split sizes {sizes:?} do not add up to dim {dim}")));
    }
    let (outer, _, inner) = split_at_axis(x.shape(), axis);
    let mut out = crate::tensor::try_with_capacity(sizes.len(), "a working buffer")?;
    let mut begin = 0;
    for &s in &sizes {
        let src: Vec<usize> = (0..outer)
            .flat_map(|o| {
                (begin..begin + s).flat_map(move |k| (0..inner).map(move |i| (o * dim + k) * inner + i))
            })
            .collect();
        let mut shape = x.shape().to_vec();
        shape[axis] = s;
        out.push(gather_elems(x, &src, shape)?);
        begin += s;
    }
    Ok(out)
}

/// ONNX `Pad`: `pads` holds begins then ends for `axes` (default all). Negative pads crop first;
/// positive pads then fill with `value` (constant), mirror without the edge (reflect), repeat the
/// edge (edge) or wrap around (wrap), over the cropped data.
pub fn pad(
    ctx: &NodeCtx,
    x: &HostTensor,
    pads: &[i64],
    value: &HostTensor,
    axes: Option<Vec<i64>>,
    mode: PadMode,
) -> Result<HostTensor, HostError> {
    let rank = x.shape().len();
    let axes = strides::axes(ctx, &axes.unwrap_or_else(|| (0..rank as i64).collect()), rank)?;
    if pads.len() != 2 * axes.len() {
        return Err(ctx.err(format!("pads has {} entries for {} axes", pads.len(), axes.len())));
    }
    let (mut begin, mut end) = (vec![0i64; rank], vec![0i64; rank]);
    for (j, &a) in axes.iter().enumerate() {
        (begin[a], end[a]) = (pads[j], pads[j + axes.len()]);
    }
    let mut lo = vec![0usize; rank];
    let mut kept = vec![0usize; rank];
    let mut out_shape = vec![0usize; rank];
    for d in 0..rank {
        let dim = x.shape()[d] as i64;
        let too_big = || ctx.err(format!("pads {pads:?} overflow axis {d}"));
        let k = dim
            .checked_add(begin[d].min(0))
            .and_then(|v| v.checked_add(end[d].min(0)))
            .ok_or_else(too_big)?;
        if k < 0 {
            return Err(ctx.err(format!("pads crop more than axis {d} holds")));
        }
        if k == 0 && mode != PadMode::Constant && (begin[d] > 0 || end[d] > 0) {
            return Err(ctx.err(format!("cannot {mode:?}-pad the empty axis {d}")));
        }
        (lo[d], kept[d]) = ((-begin[d].min(0)) as usize, k as usize);
        let total =
            k.checked_add(begin[d].max(0)).and_then(|v| v.checked_add(end[d].max(0))).ok_or_else(too_big)?;
        out_shape[d] = total as usize;
    }
    let in_strides = strides::strides(x.shape());
    let n = count(ctx, &out_shape)?;
    let mut src = crate::tensor::try_with_capacity(n, "a working buffer")?;
    for o in 0..n {
        let idx = unravel(o, &out_shape);
        let mut at = Some(0usize);
        for d in 0..rank {
            let c = idx[d] as i64 - begin[d].max(0);
            let k = kept[d] as i64;
            let c = match mode {
                _ if (0..k).contains(&c) => Some(c),
                PadMode::Constant => None,
                PadMode::Edge => Some(c.clamp(0, k - 1)),
                PadMode::Wrap => Some(c.rem_euclid(k)),
                PadMode::Reflect if k == 1 => Some(0),
                PadMode::Reflect => {
                    let m = c.rem_euclid(2 * (k - 1));
                    Some(if m < k { m } else { 2 * (k - 1) - m })
                }
            };
            at = match (at, c) {
                (Some(a), Some(c)) => Some(a + (lo[d] + c as usize) * in_strides[d]),
                _ => None,
            };
        }
        src.push(at);
    }
    let fill = crate::reference::lanes::cast(value, x.dtype(), true, planner::RoundMode::Up)?;
    gather_or_fill(x, &src, &fill, out_shape)
}

/// ONNX `DepthToSpace` on `[N, C, H, W]`: DCR reads channel `(i*b + j) * C' + c`, CRD reads
/// `c*b*b + i*b + j`, for output `[N, C', H*b, W*b]` at `(n, c, h*b + i, w*b + j)`.
pub fn depth_to_space(
    ctx: &NodeCtx,
    x: &HostTensor,
    b: usize,
    mode: DepthToSpaceMode,
) -> Result<HostTensor, HostError> {
    let &[n, c, h, w] = x.shape() else {
        return Err(ctx.err(format!("expects a 4-D input, got shape {:?}", x.shape())));
    };
    if b == 0 || !c.is_multiple_of(b * b) {
        return Err(ctx.err(format!("channels {c} are not divisible by blocksize² ({b}²)")));
    }
    let co = c / (b * b);
    let out_shape = vec![n, co, h * b, w * b];
    let s = strides::strides(x.shape());
    let mut src = crate::tensor::try_with_capacity(x.len(), "a working buffer")?;
    let mut idx = vec![0usize; 4];
    for _ in 0..x.len() {
        let [nn, cc, hh, ww] = [idx[0], idx[1], idx[2], idx[3]];
        let (i, j) = (hh % b, ww % b);
        let ci = match mode {
            DepthToSpaceMode::Dcr => (i * b + j) * co + cc,
            DepthToSpaceMode::Crd => cc * b * b + i * b + j,
        };
        src.push(ravel(&[nn, ci, hh / b, ww / b], &s));
        next_index(&mut idx, &out_shape);
    }
    gather_elems(x, &src, out_shape)
}

/// ONNX `SpaceToDepth` on `[N, C, H, W]`: output `[N, C*b*b, H/b, W/b]`, channel `(i*b + j)*C + c`
/// at `(h, w)` reads `(n, c, h*b + i, w*b + j)`.
pub fn space_to_depth(ctx: &NodeCtx, x: &HostTensor, b: usize) -> Result<HostTensor, HostError> {
    let &[n, c, h, w] = x.shape() else {
        return Err(ctx.err(format!("expects a 4-D input, got shape {:?}", x.shape())));
    };
    if b == 0 || !h.is_multiple_of(b) || !w.is_multiple_of(b) {
        return Err(ctx.err(format!("spatial dims {h}x{w} are not divisible by blocksize {b}")));
    }
    let out_shape = vec![n, c * b * b, h / b, w / b];
    let s = strides::strides(x.shape());
    let mut src = crate::tensor::try_with_capacity(x.len(), "a working buffer")?;
    let mut idx = vec![0usize; 4];
    for _ in 0..x.len() {
        let [nn, co, hh, ww] = [idx[0], idx[1], idx[2], idx[3]];
        let (block, cc) = (co / c, co % c);
        let (i, j) = (block / b, block % b);
        src.push(ravel(&[nn, cc, hh * b + i, ww * b + j], &s));
        next_index(&mut idx, &out_shape);
    }
    gather_elems(x, &src, out_shape)
}
