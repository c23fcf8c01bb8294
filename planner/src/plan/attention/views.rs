//! Strided views of the attention pass: an operand traced through reshapes as an offset and
//! strides over the value it starts from, and its form as the kernel's `[batch, head, row, col]`.

use kernels_gpu::abi::AttnView;

use crate::graph::ValueId;
use crate::op::Op;

/// Elements of `base` seen as `dims` with element `strides` from `offset`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct View {
    pub(super) base: ValueId,
    pub(super) offset: u64,
    pub(super) dims: Vec<usize>,
    pub(super) strides: Vec<u64>,
    /// `(axis, g)`: along `axis`, index `i` reads element `i / g` (`strides[axis]` apart): a
    /// head shared by `g` query heads, as grouped-query attention repeats K and V
    /// (`Reshape(Expand(Unsqueeze(k)))`). `None`: every index its own.
    pub(super) group: Option<(usize, usize)>,
}

pub(super) fn reshape_like(op: &Op) -> bool {
    matches!(op, Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) | Op::Identity)
}

/// `view` (rank 2 to 4) as the kernel's `[batch, head, row, col]`, its leading dims right-aligned
/// against `batch` (an extent of 1 broadcasts).
pub(super) fn attn_view(view: &View, batch: [usize; 2]) -> Option<AttnView> {
    let r = view.dims.len();
    if !(2..=4).contains(&r) {
        return None;
    }
    let mut strides = [0u64; 4];
    strides[2] = view.strides[r - 2];
    strides[3] = view.strides[r - 1];
    for k in 0..r - 2 {
        let slot = 4 - r + k;
        if view.dims[k] == batch[slot] {
            strides[slot] = view.strides[k];
        } else if view.dims[k] != 1 {
            return None;
        }
    }
    Some(AttnView { offset: view.offset, strides })
}

/// `view` (no group) reshaped to `dims` by merging two neighbouring dims `(a, g)` into one of
/// `a·g` where the second repeats (stride 0): the merged dim reads element `i / g` (a group,
/// [`View::group`]). Every other dim stays as it is.
pub(super) fn grouped(view: &View, dims: &[usize]) -> Option<View> {
    let r = view.dims.len();
    if view.group.is_some() || dims.len() + 1 != r {
        return None;
    }
    let axis = (0..r - 1).find(|&k| view.strides[k + 1] == 0 && view.dims[k + 1] > 1)?;
    let (a, g) = (view.dims[axis], view.dims[axis + 1]);
    let mut want = view.dims.clone();
    want[axis] = a * g;
    want.remove(axis + 1);
    if want != dims {
        return None;
    }
    let mut strides = view.strides.clone();
    strides.remove(axis + 1);
    Some(View { dims: dims.to_vec(), strides, group: Some((axis, g)), ..view.clone() })
}
