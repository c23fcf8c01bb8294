//! Elementwise launches: f32 binary ops with NumPy broadcasting and unary ops.
//!
//! The launch parameters come from `planner::plan::binary_params` (the same function the planner
//! lowers graphs with): the broadcast collapsed into the fewest dimensions, and the kernels'
//! contiguous, vectorised path whenever the operands need no broadcasting at all.

use kernels_gpu::abi::{BinaryOp, MAX_RANK, UnaryOp, UnaryParams};
use planner::plan::{GRID_STRIDE_THREADS as THREADS, binary_params, capped_grid};

use crate::device::{Context, DeviceTensor, KernelArg, LaunchShape, params_bytes};
use crate::error::HostError;
use crate::shape::broadcast_shape;

/// `y = op(a, b)` with NumPy broadcasting; `y` must already have the broadcast shape.
pub fn binary(
    ctx: &Context,
    op: BinaryOp,
    a: &DeviceTensor,
    b: &DeviceTensor,
    y: &mut DeviceTensor,
) -> Result<(), HostError> {
    let out = broadcast_shape(a.shape(), b.shape()).ok_or_else(|| HostError::Broadcast {
        op: format!("{op:?}"),
        lhs: a.shape().to_vec(),
        rhs: b.shape().to_vec(),
    })?;
    if y.shape() != out.as_slice() {
        return Err(HostError::ShapeMismatch {
            what: format!("{op:?} output"),
            expected: out,
            got: y.shape().to_vec(),
        });
    }
    let p = binary_params(a.shape(), b.shape(), &out).ok_or_else(|| HostError::RankTooHigh {
        op: format!("{op:?}"),
        rank: out.len(),
        max: MAX_RANK,
    })?;
    if p.elems == 0 {
        return Ok(());
    }
    let work = if p.rank == 0 { p.elems.div_ceil(4) } else { p.elems };
    let args = [
        KernelArg::Params(params_bytes(&p)),
        KernelArg::Ptr(a.device_ptr(ctx)),
        KernelArg::Ptr(b.device_ptr(ctx)),
        KernelArg::Ptr(y.device_ptr(ctx)),
    ];
    // SAFETY: binary kernels take (BinaryParams, *const f32, *const f32, *mut f32); `y` holds the
    // broadcast shape's `elems` elements and the strides come from `a`'s and `b`'s own shapes, so
    // every offset is inside its operand; `y` is a distinct allocation (it is borrowed mutably).
    unsafe { ctx.launch(op.kernel(), grid(ctx, work), &args) }
}

/// `y = op(x)`; `y` must have `x`'s shape.
pub fn unary(ctx: &Context, op: UnaryOp, x: &DeviceTensor, y: &mut DeviceTensor) -> Result<(), HostError> {
    if x.shape() != y.shape() {
        return Err(HostError::ShapeMismatch {
            what: format!("{op:?} output"),
            expected: x.shape().to_vec(),
            got: y.shape().to_vec(),
        });
    }
    let p = UnaryParams { elems: x.len() as u64, alpha: op.alpha(), _pad: 0 };
    if p.elems == 0 {
        return Ok(());
    }
    let args = [
        KernelArg::Params(params_bytes(&p)),
        KernelArg::Ptr(x.device_ptr(ctx)),
        KernelArg::Ptr(y.device_ptr(ctx)),
    ];
    // SAFETY: unary kernels take (UnaryParams, *const f32, *mut f32); both tensors hold `elems`
    // elements and are distinct allocations.
    unsafe { ctx.launch(op.kernel(), grid(ctx, p.elems.div_ceil(4)), &args) }
}

/// A 1-D launch covering `work` items, capped at a few resident waves (the kernels grid-stride).
fn grid(ctx: &Context, work: u64) -> LaunchShape {
    let [blocks, ..] = capped_grid(ctx.info().sm_count, work.div_ceil(THREADS as u64));
    LaunchShape::linear(blocks, THREADS)
}
