//! Launch parameters of the elementwise kernels from operand shapes: NumPy broadcasting collapsed
//! into the fewest dimensions (adjacent dimensions merge when every operand walks them
//! contiguously), and the contiguous vectorised layout whenever nothing broadcasts.

use kernels_gpu::abi::{BinaryParams, MAX_RANK};

/// Row-major element strides of `shape` as seen from an output of rank `out_rank`: right-aligned,
/// with stride 0 on every dimension of size 1 (it broadcasts) and on the missing leading ones.
pub fn broadcast_strides(shape: &[usize], out_rank: usize) -> Vec<usize> {
    let mut strides = vec![0; out_rank];
    let mut step = 1;
    for (i, &d) in shape.iter().enumerate().rev() {
        let o = out_rank - shape.len() + i;
        strides[o] = if d == 1 { 0 } else { step };
        step *= d;
    }
    strides
}

/// `shape` as the fewest dims the kernels index: size-1 dims dropped, and neighbours merged where
/// every operand walks them contiguously (the outer stride is the inner stride times the inner
/// extent). `strides[k]` are operand `k`'s element strides along `shape`. Returns (extent, the
/// operands' strides), outermost first; empty when `shape` holds one element.
pub(super) fn collapse_dims(shape: &[usize], strides: &[Vec<i64>]) -> Vec<(usize, Vec<i64>)> {
    let mut dims: Vec<(usize, Vec<i64>)> = Vec::new();
    for (d, &n) in shape.iter().enumerate() {
        if n == 1 {
            continue;
        }
        let s: Vec<i64> = strides.iter().map(|st| st[d]).collect();
        match dims.last_mut() {
            Some((ln, ls)) if ls.iter().zip(&s).all(|(&outer, &inner)| outer == inner * n as i64) => {
                *ln *= n;
                *ls = s;
            }
            _ => dims.push((n, s)),
        }
    }
    dims
}

/// [`broadcast_strides`] as the signed strides [`collapse_dims`] takes.
pub(super) fn broadcast_strides_i64(shape: &[usize], out_rank: usize) -> Vec<i64> {
    broadcast_strides(shape, out_rank).into_iter().map(|s| s as i64).collect()
}

/// The kernel parameters of `out = a (op) b`, or `None` when the collapsed rank exceeds
/// [`MAX_RANK`]. `out` must be the broadcast shape of `a` and `b`.
pub fn binary_params(a: &[usize], b: &[usize], out: &[usize]) -> Option<BinaryParams> {
    let elems = out.iter().product::<usize>() as u64;
    let mut p = BinaryParams { elems, ..BinaryParams::default() };
    if a == out && b == out {
        return Some(p);
    }
    let strides = [broadcast_strides_i64(a, out.len()), broadcast_strides_i64(b, out.len())];
    let dims = collapse_dims(out, &strides);
    // Fully contiguous after collapsing (e.g. [1, n] with [n]): the fast path applies.
    if dims.len() <= 1 && dims.iter().all(|(_, s)| s.iter().all(|&x| x == 1)) {
        return Some(p);
    }
    if dims.len() > MAX_RANK {
        return None;
    }
    p.rank = dims.len() as u32;
    let first = MAX_RANK - dims.len();
    for (k, (n, s)) in dims.iter().enumerate() {
        p.out_shape[first + k] = *n as u64;
        p.a_strides[first + k] = s[0] as u64;
        p.b_strides[first + k] = s[1] as u64;
    }
    Some(p)
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
        let p = binary_params(&[3, 5], &[3, 5], &[3, 5]).unwrap();
        assert_eq!((p.rank, p.elems), (0, 15));
        let p = binary_params(&[1, 7], &[7], &[1, 7]).unwrap();
        assert_eq!((p.rank, p.elems), (0, 7));
    }

    #[test]
    fn bias_add_collapses_to_two_dims() {
        let p = binary_params(&[2, 3, 4], &[4], &[2, 3, 4]).unwrap();
        assert_eq!(used(&p), (vec![6, 4], vec![4, 1], vec![0, 1]));
    }

    #[test]
    fn scalar_and_outer_broadcasts() {
        let p = binary_params(&[5], &[], &[5]).unwrap();
        assert_eq!(used(&p), (vec![5], vec![1], vec![0]));
        let p = binary_params(&[3, 1], &[1, 4], &[3, 4]).unwrap();
        assert_eq!(used(&p), (vec![3, 4], vec![1, 0], vec![0, 1]));
        let p = binary_params(&[2, 1, 3], &[2, 5, 3], &[2, 5, 3]).unwrap();
        assert_eq!(used(&p), (vec![2, 5, 3], vec![3, 0, 1], vec![15, 3, 1]));
    }

    #[test]
    fn strides_broadcast_size_one_and_missing_dims() {
        assert_eq!(broadcast_strides(&[3], 2), vec![0, 1]);
        assert_eq!(broadcast_strides(&[2, 1, 4], 3), vec![4, 0, 1]);
        assert_eq!(broadcast_strides(&[], 2), vec![0, 0]);
    }

    #[test]
    fn too_many_alternating_dims_is_none() {
        let a = [2, 1, 2, 1, 2, 1, 2, 1, 2, 1];
        let b = [1, 2, 1, 2, 1, 2, 1, 2, 1, 2];
        assert!(binary_params(&a, &b, &[2; 10]).is_none());
    }
}
