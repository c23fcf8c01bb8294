//! Lowering of the sampling and signal ops, f32, with the CPU reference's shape rules: GridSample
//! (`grid_sample_f32`, 1 to 3 spatial dims: X `(N, C, D...)`, grid `(N, O..., r)`), AffineGrid
//! (`affine_grid_f32`, which makes such grids), Col2Im (`col2im_f32`), and DFT and STFT
//! (`dft_f32`, `stft_f32`, direct summation).

use kernels_gpu::abi::{
    AffineGridParams, Col2ImParams, DftParams, GRID_MAX_RANK, GridSampleParams, KernelId, StftParams,
    grid_mode, grid_padding,
};

use super::lower::{Lowered, dims};
use super::movement::const_ints;
use super::{Arg, PlanOptions, PlannedValue};
use crate::graph::{Graph, Node, NodeId, ValueId};
use crate::op::{AffineGrid, Col2Im, Dft, GridSample, GridSampleMode, GridSamplePadding, Stft};
use crate::tensor_info::DType;

/// The launch of GridSample of `x` at `grid` into `y`.
pub(super) fn grid_sample(
    id: NodeId,
    label: String,
    a: &GridSample,
    (x, grid): (ValueId, ValueId),
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((xd, xt), (gd, gt)) = (dims(values, x)?, dims(values, grid)?);
    if (xt, gt) != (DType::F32, DType::F32) {
        return Err(format!("GridSample of {xt} at a {gt} grid: the kernel takes f32"));
    }
    let r = xd.len().saturating_sub(2);
    if r == 0 || gd.len() != r + 2 || gd[r + 1] != r || gd[0] != xd[0] {
        return Err(format!("X {xd:?} and grid {gd:?} do not fit (N, C, D...) / (N, O..., r)"));
    }
    if r > GRID_MAX_RANK {
        return Err(format!("GridSample over {r} spatial dims (the kernel takes up to {GRID_MAX_RANK})"));
    }
    if xd[2..].contains(&0) {
        return Err("GridSample of an empty input".into());
    }
    let mut size = [1u64; GRID_MAX_RANK];
    size[..r].iter_mut().zip(&xd[2..]).for_each(|(s, &d)| *s = d as u64);
    let p = GridSampleParams {
        n: xd[0] as u64,
        c: xd[1] as u64,
        points: gd[1..=r].iter().product::<usize>() as u64,
        size,
        rank: r as u32,
        mode: match a.mode {
            GridSampleMode::Nearest => grid_mode::NEAREST,
            GridSampleMode::Linear => grid_mode::LINEAR,
            GridSampleMode::Cubic => grid_mode::CUBIC,
        },
        padding: match a.padding_mode {
            GridSamplePadding::Zeros => grid_padding::ZEROS,
            GridSamplePadding::Border => grid_padding::BORDER,
            GridSamplePadding::Reflection => grid_padding::REFLECTION,
        },
        align_corners: a.align_corners as u32,
    };
    let work = p.n * p.c * p.points;
    let args = vec![Arg::Value(x), Arg::Value(grid), Arg::Value(y)];
    Ok(super::movement::step(id, label, KernelId::GridSampleF32, &p, work, o, args))
}

/// The launch of AffineGrid of `theta` `(N, r, r + 1)` into the grid `y` `(N, D..., r)` (its
/// shape, from the size input, is known at plan time).
pub(super) fn affine_grid(
    id: NodeId,
    label: String,
    a: &AffineGrid,
    theta: ValueId,
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let ((td, tt), (yd, _)) = (dims(values, theta)?, dims(values, y)?);
    if tt != DType::F32 {
        return Err(format!("AffineGrid of {tt}: the kernel takes f32"));
    }
    let &[n, r, cols] = td else { return Err(format!("theta {td:?} must be (N, r, r + 1)")) };
    if !(r == 2 || r == 3) || cols != r + 1 || yd.len() != r + 2 || yd[0] != n || yd[r + 1] != r {
        return Err(format!("theta {td:?} does not fit the grid {yd:?}"));
    }
    let mut spatial = [1u64; GRID_MAX_RANK];
    spatial[..r].iter_mut().zip(&yd[1..=r]).for_each(|(s, &d)| *s = d as u64);
    let p = AffineGridParams {
        n: n as u64,
        points: yd[1..=r].iter().product::<usize>() as u64,
        spatial,
        rank: r as u32,
        align_corners: a.align_corners as u32,
    };
    let work = p.n * p.points * r as u64;
    Ok(super::movement::step(
        id,
        label,
        KernelId::AffineGridF32,
        &p,
        work,
        o,
        vec![Arg::Value(theta), Arg::Value(y)],
    ))
}

/// The launch of DFT node `id` (input `x`, `dft_length` and `axis` constants when given) into `y`.
pub(super) fn dft(
    g: &Graph,
    id: NodeId,
    label: String,
    a: &Dft,
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (n, x, xd, yd) = f32_operand(g, id, y, values, "DFT")?;
    let constant = |slot: usize, what: &str| scalar(g, n.input(slot), what);
    let r = xd.len();
    let comps = xd.last().copied().unwrap_or(0);
    if r < 2 || !(comps == 1 || comps == 2) {
        return Err(format!("input {xd:?} must end in 1 or 2 components"));
    }
    let axis = match a.axis {
        Some(ax) => ax,
        None => constant(2, "axis")?.unwrap_or(-2),
    };
    let ax = usize::try_from(if axis < 0 { axis + r as i64 } else { axis }).ok().filter(|&ax| ax < r - 1);
    let ax = ax.ok_or_else(|| format!("axis {axis} out of range or the component axis"))?;
    let m = xd[ax];
    let half_inverse = a.inverse && a.onesided;
    let len = match constant(1, "dft_length")? {
        Some(l) => {
            usize::try_from(l).ok().filter(|&l| l > 0).ok_or(format!("dft_length {l} must be positive"))?
        }
        None if half_inverse => 2 * m.saturating_sub(1),
        None => m,
    };
    let out_len = if a.onesided && !a.inverse { len / 2 + 1 } else { len };
    let out_comps = if half_inverse { 1 } else { 2 };
    let mut want = xd.to_vec();
    (want[ax], want[r - 1]) = (out_len, out_comps);
    if yd != want.as_slice() || len == 0 {
        return Err(format!("output {yd:?} is not the expected {want:?}"));
    }
    let p = DftParams {
        outer: xd[..ax].iter().product::<usize>() as u64,
        m: m as u64,
        inner: xd[ax + 1..r - 1].iter().product::<usize>() as u64,
        n: len as u64,
        out_len: out_len as u64,
        comps: comps as u32,
        out_comps: out_comps as u32,
        inverse: a.inverse as u32,
        half_inverse: half_inverse as u32,
    };
    let work = p.outer * p.out_len * p.inner;
    Ok(super::movement::step(id, label, KernelId::DftF32, &p, work, o, vec![Arg::Value(x), Arg::Value(y)]))
}

/// The first element of the integer constant `v` (`None` when absent); a run-time value is an
/// error (graph inputs are specialized by the session).
fn scalar(g: &Graph, v: Option<ValueId>, what: &str) -> Result<Option<i64>, String> {
    Ok(v.map(|v| const_ints(g, v, what)).transpose()?.and_then(|c| c.first().copied()))
}

/// The launch of STFT node `id` (signal, frame_step, window?, frame_length?) into `y`.
pub(super) fn stft(
    g: &Graph,
    id: NodeId,
    label: String,
    a: &Stft,
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (n, x, xd, yd) = f32_operand(g, id, y, values, "STFT")?;
    let &[batch, len, comps] = xd else { return Err(format!("signal {xd:?} must be (B, L, 1 or 2)")) };
    if !(comps == 1 || comps == 2) {
        return Err(format!("signal {xd:?} must end in 1 or 2 components"));
    }
    let step = scalar(g, n.input(1), "frame_step")?.ok_or("frame_step is required")?;
    let step =
        usize::try_from(step).ok().filter(|&s| s > 0).ok_or(format!("frame_step {step} must be positive"))?;
    let window = n.input(2);
    let window_len = match window {
        Some(w) => {
            let (wd, wt) = dims(values, w)?;
            if wt != DType::F32 || wd.len() != 1 {
                return Err(format!("window {wd:?} {wt} must be 1-D f32"));
            }
            Some(wd[0])
        }
        None => None,
    };
    let frame = match (scalar(g, n.input(3), "frame_length")?, window_len) {
        (Some(f), _) => {
            usize::try_from(f).ok().filter(|&f| f > 0).ok_or(format!("frame_length {f} must be positive"))?
        }
        (None, Some(w)) => w,
        (None, None) => len,
    };
    if window_len.is_some_and(|w| w != frame) || frame > len || frame == 0 {
        return Err(format!(
            "frame length {frame} does not fit the window {window_len:?} or the signal {len}"
        ));
    }
    let frames = 1 + (len - frame) / step;
    let bins = if a.onesided { frame / 2 + 1 } else { frame };
    if yd != [batch, frames, bins, 2] {
        return Err(format!("output {yd:?} is not ({batch}, {frames}, {bins}, 2)"));
    }
    let p = StftParams {
        batch: batch as u64,
        len: len as u64,
        frames: frames as u64,
        frame: frame as u64,
        step: step as u64,
        bins: bins as u64,
        comps: comps as u32,
        windowed: window.is_some() as u32,
    };
    let work = p.batch * p.frames * p.bins;
    let args = vec![Arg::Value(x), window.map_or(Arg::Null, Arg::Value), Arg::Value(y)];
    Ok(super::movement::step(id, label, KernelId::StftF32, &p, work, o, args))
}

/// The launch of Col2Im node `id` (input, image_shape, block_shape; the shapes constants) into `y`.
pub(super) fn col2im(
    g: &Graph,
    id: NodeId,
    label: String,
    a: &Col2Im,
    y: ValueId,
    values: &[PlannedValue],
    o: &PlanOptions,
) -> Lowered {
    let (n, x, xd, yd) = f32_operand(g, id, y, values, "Col2Im")?;
    let block: Vec<u64> = match n.input(2).and_then(|v| g.constant(v)).and_then(|c| c.to_i64s()) {
        Some(b) if b.iter().all(|&v| v > 0) => b.into_iter().map(|v| v as u64).collect(),
        _ => return Err("block_shape must be a constant of positive sizes".into()),
    };
    let r = block.len();
    let &[batch, ck, l] = xd else { return Err(format!("input {xd:?} must be (N, C*prod(block), L)")) };
    if r == 0 || r > GRID_MAX_RANK || yd.len() != r + 2 {
        return Err(format!("Col2Im over {r} spatial dims (the kernel takes 1 to {GRID_MAX_RANK})"));
    }
    let list = |v: &[usize], default: usize, len: usize, what: &str| match v.len() {
        0 => Ok(vec![default as u64; len]),
        k if k == len => Ok(v.iter().map(|&x| x as u64).collect::<Vec<u64>>()),
        _ => Err(format!("{what} {v:?} must have {len} entries")),
    };
    let (dil, stride, pads) = (
        list(&a.dilations, 1, r, "dilations")?,
        list(&a.strides, 1, r, "strides")?,
        list(&a.pads, 0, 2 * r, "pads")?,
    );
    let kprod: u64 = block.iter().product();
    if stride.contains(&0) || dil.contains(&0) || !(ck as u64).is_multiple_of(kprod) {
        return Err(format!("block_shape {block:?} does not fit the input {xd:?}"));
    }
    let image: Vec<u64> = yd[2..].iter().map(|&d| d as u64).collect();
    let grid: Vec<u64> = (0..r)
        .map(|d| {
            let span = image[d] + pads[d] + pads[d + r];
            let need = dil[d] * (block[d] - 1) + 1;
            if span < need { 0 } else { (span - need) / stride[d] + 1 }
        })
        .collect();
    if grid.iter().product::<u64>() != l as u64 || yd[..2] != [batch, ck / kprod as usize] {
        return Err(format!("input {xd:?} is not the {grid:?} sliding blocks of the output {yd:?}"));
    }
    let arr = |v: &[u64]| -> [u64; GRID_MAX_RANK] { std::array::from_fn(|d| v.get(d).copied().unwrap_or(1)) };
    let p = Col2ImParams {
        n: batch as u64,
        c: ck as u64 / kprod,
        l: l as u64,
        kprod,
        image: arr(&image),
        block: arr(&block),
        grid: arr(&grid),
        stride: arr(&stride),
        dilation: arr(&dil),
        pad_begin: std::array::from_fn(|d| if d < r { pads[d] } else { 0 }),
        rank: r as u32,
        _pad: 0,
    };
    let work: u64 = p.n * p.c * image.iter().product::<u64>();
    Ok(super::movement::step(id, label, KernelId::Col2ImF32, &p, work, o, vec![Arg::Value(x), Arg::Value(y)]))
}

/// A node, its input 0, and the dims of that input and of the output.
type Operand<'a> = (&'a Node, ValueId, &'a [usize], &'a [usize]);

/// Node `id`, its input 0 (f32, else an error naming `op`) and the dims of that input and of `y`.
fn f32_operand<'a>(
    g: &'a Graph,
    id: NodeId,
    y: ValueId,
    values: &'a [PlannedValue],
    op: &str,
) -> Result<Operand<'a>, String> {
    let n = &g.nodes[id.index()];
    let x = n.input(0).ok_or("missing input")?;
    let ((xd, xt), (yd, _)) = (dims(values, x)?, dims(values, y)?);
    if xt != DType::F32 {
        return Err(format!("{op} of {xt}: the kernel takes f32"));
    }
    Ok((n, x, xd, yd))
}
