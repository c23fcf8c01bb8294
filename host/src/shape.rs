//! Shape arithmetic shared by the CPU reference and the GPU launchers: NumPy broadcasting.

/// The broadcast shape of `a` and `b` under NumPy rules (right-aligned; each dimension pair equal,
/// or one of them 1), or `None` if they do not broadcast.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_broadcasting() {
        assert_eq!(broadcast_shape(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_shape(&[4, 1, 5], &[3, 1]), Some(vec![4, 3, 5]));
        assert_eq!(broadcast_shape(&[], &[7]), Some(vec![7]));
        assert_eq!(broadcast_shape(&[0, 3], &[1, 3]), Some(vec![0, 3]));
        assert_eq!(broadcast_shape(&[2, 3], &[4]), None);
        assert_eq!(broadcast_shape(&[0], &[2]), None);
    }

    #[test]
    fn strides_broadcast_size_one_and_missing_dims() {
        assert_eq!(broadcast_strides(&[3], 2), vec![0, 1]);
        assert_eq!(broadcast_strides(&[2, 1, 4], 3), vec![4, 0, 1]);
        assert_eq!(broadcast_strides(&[], 2), vec![0, 0]);
    }
}
