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
}

/// Strides of a reshape of the strided view `(od, os)` to `nd` without moving data, if there are
/// any (NumPy's no-copy reshape: each group of old dims that merges or splits must be contiguous
/// within itself).
pub(super) fn reshape_strides(od: &[usize], os: &[u64], nd: &[usize]) -> Option<Vec<u64>> {
    if od.iter().product::<usize>() != nd.iter().product::<usize>() || od.contains(&0) {
        return None;
    }
    let (od, os): (Vec<usize>, Vec<u64>) =
        od.iter().zip(os).filter(|(d, _)| **d != 1).map(|(d, s)| (*d, *s)).unzip();
    let mut ns = vec![1u64; nd.len()];
    let (mut oi, mut ni) = (0, 0);
    while oi < od.len() && ni < nd.len() {
        let (mut oj, mut nj) = (oi + 1, ni + 1);
        let (mut op, mut np) = (od[oi], nd[ni]);
        while op != np {
            if np < op {
                np *= *nd.get(nj)?;
                nj += 1;
            } else {
                op *= *od.get(oj)?;
                oj += 1;
            }
        }
        if (oi..oj - 1).any(|k| os[k] != od[k + 1] as u64 * os[k + 1]) {
            return None;
        }
        ns[nj - 1] = os[oj - 1];
        for k in (ni + 1..nj).rev() {
            ns[k - 1] = ns[k] * nd[k] as u64;
        }
        (oi, ni) = (oj, nj);
    }
    nd[ni..].iter().all(|&d| d == 1).then_some(ns)
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
