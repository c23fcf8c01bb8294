//! Elementwise launches: f32 binary ops with NumPy broadcasting and unary ops.
//!
//! The host collapses the broadcast into the fewest dimensions (adjacent dimensions merge when every
//! operand walks them contiguously) and uses the kernels' contiguous, vectorised path whenever the
//! operands need no broadcasting at all.

use kernels_gpu::abi::{BinaryOp, BinaryParams, MAX_RANK, UnaryOp, UnaryParams};

use crate::device::{Context, DeviceTensor, KernelArg, LaunchShape, params_bytes};
use crate::error::HostError;
use crate::shape::{broadcast_shape, broadcast_strides};

/// Threads per block of the elementwise kernels.
const THREADS: u32 = 256;
/// Resident blocks per multiprocessor the grid is capped at (the kernels grid-stride beyond it).
const BLOCKS_PER_SM: u32 = 16;

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
    let p = binary_params(&format!("{op:?}"), a.shape(), b.shape(), &out)?;
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
    let cap = (ctx.info().sm_count * BLOCKS_PER_SM).max(1) as u64;
    let blocks = work.div_ceil(THREADS as u64).clamp(1, cap);
    LaunchShape::linear(blocks as u32, THREADS)
}

/// The kernel parameters of `out = a (op) b`: the contiguous layout when no operand broadcasts,
/// else the output shape and operand strides with dimensions collapsed as far as possible.
pub fn binary_params(op: &str, a: &[usize], b: &[usize], out: &[usize]) -> Result<BinaryParams, HostError> {
    let elems = out.iter().product::<usize>() as u64;
    let mut p = BinaryParams { elems, ..BinaryParams::default() };
    if a == out && b == out {
        return Ok(p);
    }
    let (sa, sb) = (broadcast_strides(a, out.len()), broadcast_strides(b, out.len()));
    // (size, a stride, b stride), outermost first; size-1 dimensions carry no index.
    let mut dims: Vec<(usize, usize, usize)> = Vec::new();
    for i in 0..out.len() {
        if out[i] == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 == sa[i] * out[i] && last.2 == sb[i] * out[i] => {
                *last = (last.0 * out[i], sa[i], sb[i]);
            }
            _ => dims.push((out[i], sa[i], sb[i])),
        }
    }
    // Fully contiguous after collapsing (e.g. [1, n] with [n]): the fast path applies.
    if dims.len() <= 1 && dims.iter().all(|&(_, x, y)| x == 1 && y == 1) {
        return Ok(p);
    }
    if dims.len() > MAX_RANK {
        return Err(HostError::RankTooHigh { op: op.into(), rank: dims.len(), max: MAX_RANK });
    }
    p.rank = dims.len() as u32;
    let first = MAX_RANK - dims.len();
    for (k, &(n, x, y)) in dims.iter().enumerate() {
        p.out_shape[first + k] = n as u64;
        p.a_strides[first + k] = x as u64;
        p.b_strides[first + k] = y as u64;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(p: &BinaryParams) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
        let first = MAX_RANK - p.rank as usize;
        (p.out_shape[first..].to_vec(), p.a_strides[first..].to_vec(), p.b_strides[first..].to_vec())
    }

    #[test]
    fn same_shapes_take_the_contiguous_path() {
        let p = binary_params("Add", &[3, 5], &[3, 5], &[3, 5]).unwrap();
        assert_eq!((p.rank, p.elems), (0, 15));
        let p = binary_params("Add", &[1, 7], &[7], &[1, 7]).unwrap();
        assert_eq!((p.rank, p.elems), (0, 7));
    }

    #[test]
    fn bias_add_collapses_to_two_dims() {
        let p = binary_params("Add", &[2, 3, 4], &[4], &[2, 3, 4]).unwrap();
        assert_eq!(used(&p), (vec![6, 4], vec![4, 1], vec![0, 1]));
    }

    #[test]
    fn scalar_and_outer_broadcasts() {
        let p = binary_params("Mul", &[5], &[], &[5]).unwrap();
        assert_eq!(used(&p), (vec![5], vec![1], vec![0]));
        let p = binary_params("Sub", &[3, 1], &[1, 4], &[3, 4]).unwrap();
        assert_eq!(used(&p), (vec![3, 4], vec![1, 0], vec![0, 1]));
        let p = binary_params("Sub", &[2, 1, 3], &[2, 5, 3], &[2, 5, 3]).unwrap();
        assert_eq!(used(&p), (vec![2, 5, 3], vec![3, 0, 1], vec![15, 3, 1]));
    }

    #[test]
    fn too_many_alternating_dims_is_an_error() {
        let a = [2, 1, 2, 1, 2, 1, 2, 1, 2, 1];
        let b = [1, 2, 1, 2, 1, 2, 1, 2, 1, 2];
        let out = [2; 10];
        assert!(matches!(binary_params("Add", &a, &b, &out), Err(HostError::RankTooHigh { rank: 10, .. })));
    }
}
