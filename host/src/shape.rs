//! NumPy broadcasting of shapes, shared by the CPU reference and the GPU launchers (the stride
//! side lives with the launch parameters in `planner::plan`).

pub use planner::plan::broadcast_strides;

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
}
