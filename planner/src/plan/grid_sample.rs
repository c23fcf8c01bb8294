//! Lowering of ONNX GridSample (`grid_sample_f32`): f32, 1 to 3 spatial dims, the reference's
//! shape rules (X `(N, C, D...)`, grid `(N, O..., r)`).

use kernels_gpu::abi::{GRID_MAX_RANK, GridSampleParams, KernelId, grid_mode, grid_padding};

use super::lower::{Lowered, dims};
use super::{Arg, PlanOptions, PlannedValue};
use crate::graph::{NodeId, ValueId};
use crate::op::{GridSample, GridSampleMode, GridSamplePadding};
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
