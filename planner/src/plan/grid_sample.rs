//! Lowering of ONNX GridSample (`grid_sample_f32`): f32, 1 to 3 spatial dims, the reference's
//! shape rules (X `(N, C, D...)`, grid `(N, O..., r)`); of AffineGrid (`affine_grid_f32`),
//! which makes such grids; and of DFT (`dft_f32`, direct summation).

use kernels_gpu::abi::{
    AffineGridParams, DftParams, GRID_MAX_RANK, GridSampleParams, KernelId, grid_mode, grid_padding,
};

use super::lower::{Lowered, dims};
use super::{Arg, PlanOptions, PlannedValue};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{AffineGrid, Dft, GridSample, GridSampleMode, GridSamplePadding};
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
    let n = &g.nodes[id.index()];
    let x = n.input(0).ok_or("missing input")?;
    let ((xd, xt), (yd, _)) = (dims(values, x)?, dims(values, y)?);
    if xt != DType::F32 {
        return Err(format!("DFT of {xt}: the kernel takes f32"));
    }
    let constant = |slot: usize, what: &str| -> Result<Option<i64>, String> {
        match n.input(slot) {
            None => Ok(None),
            Some(v) => match g.constant(v).and_then(|c| c.to_i64s()) {
                Some(c) => Ok(c.first().copied()),
                None => Err(format!("a run-time {what}")),
            },
        }
    };
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
