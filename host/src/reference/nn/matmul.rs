//! Reference `MatMul` (NumPy `matmul` semantics with batch broadcasting) and `Gemm`.
//!
//! Products accumulate in f64 and round once to the output dtype; integer inputs (I32, I64) are
//! accepted as ONNX allows and produce an integer output.

use planner::op::Gemm;

use super::operand::{Floats, OutBuf, count, expect_rank, number_view, numbers, optional, required};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::shape::{broadcast_shape, broadcast_strides};
use crate::tensor::{HostTensor, try_with_capacity};

/// ONNX `MatMul` (opset 13): `A @ B` as `numpy.matmul`. A 1-D A is treated as `[1, K]` and a 1-D B
/// as `[K, 1]`, the inserted dim being removed from the result; leading (batch) dims broadcast.
pub fn matmul(
    node: &NodeCtx,
    _attrs: &(),
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let a = number_view(node, required(node, inputs, 0, "A")?, "A")?;
    let b = number_view(node, required(node, inputs, 1, "B")?, "B")?;
    if a.dtype != b.dtype {
        return Err(node.err(format!("A and B have different dtypes: {} and {}", a.dtype, b.dtype)));
    }
    if a.shape.is_empty() || b.shape.is_empty() {
        return Err(node.err("MatMul operands must have rank >= 1"));
    }
    let a_shape = if a.shape.len() == 1 { vec![1, a.shape[0]] } else { a.shape.to_vec() };
    let b_shape = if b.shape.len() == 1 { vec![b.shape[0], 1] } else { b.shape.to_vec() };
    let (ra, rb) = (a_shape.len(), b_shape.len());
    let (m, k) = (a_shape[ra - 2], a_shape[ra - 1]);
    let (k2, n) = (b_shape[rb - 2], b_shape[rb - 1]);
    if k != k2 {
        return Err(node.err(format!("inner dims differ: A {:?}, B {:?}", a.shape, b.shape)));
    }
    let batch = broadcast_shape(&a_shape[..ra - 2], &b_shape[..rb - 2]).ok_or_else(|| {
        node.err(format!("batch dims of A {:?} and B {:?} do not broadcast", a.shape, b.shape))
    })?;
    let batches = count(node, &batch)?;
    let a_bs = broadcast_strides(&a_shape[..ra - 2], batch.len());
    let b_bs = broadcast_strides(&b_shape[..rb - 2], batch.len());
    let mut shape = batch.clone();
    if a.shape.len() > 1 {
        shape.push(m);
    }
    if b.shape.len() > 1 {
        shape.push(n);
    }
    count(node, &[batches, m, n])?;
    let mut out = OutBuf::new(node, a.dtype, shape)?;
    let mut idx = vec![0usize; batch.len()];
    // Widened one at a time: B's matrix of the batch (transposed, so that a column is a
    // slice) and a row of A.
    let mut a_row = crate::tensor::try_filled(k, 0.0, "a working buffer")?;
    let mut b_t = try_with_capacity::<f64>(k * n, "B widened")?;
    for bi in 0..batches {
        super::operand::unravel(bi, &batch, &mut idx);
        let a_off = idx.iter().zip(&a_bs).map(|(i, s)| i * s).sum::<usize>() * m * k;
        let b_off = idx.iter().zip(&b_bs).map(|(i, s)| i * s).sum::<usize>() * k * n;
        b_t.clear();
        b_t.extend((0..n).flat_map(|j| (0..k).map(move |p| b_off + p * n + j)).map(|at| b.at(at)));
        for i in 0..m {
            for (p, v) in a_row.iter_mut().enumerate() {
                *v = a.at(a_off + i * k + p);
            }
            for (j, col) in b_t.chunks_exact(k.max(1)).take(n).enumerate() {
                let acc = a_row.iter().zip(col).fold(0.0, |acc, (x, y)| acc + x * y);
                out.set((bi * m + i) * n + j, acc);
            }
        }
    }
    Ok(vec![out.finish(node)?])
}

/// ONNX `Gemm` (opset 13): `Y = alpha * A' @ B' + beta * C`, with `A' = transA ? Aᵀ : A` (2-D),
/// likewise B', and the optional C unidirectionally broadcast to `(M, N)`.
pub fn gemm(
    node: &NodeCtx,
    attrs: &Gemm,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let a = number_view(node, required(node, inputs, 0, "A")?, "A")?;
    let b = numbers(node, required(node, inputs, 1, "B")?, "B")?;
    expect_rank(node, a.shape, 2, "A")?;
    expect_rank(node, &b.shape, 2, "B")?;
    let (m, k) = if attrs.trans_a { (a.shape[1], a.shape[0]) } else { (a.shape[0], a.shape[1]) };
    let (k2, n) = if attrs.trans_b { (b.shape[1], b.shape[0]) } else { (b.shape[0], b.shape[1]) };
    if k != k2 {
        return Err(node.err(format!(
            "inner dims differ: A {:?} (transA={}), B {:?} (transB={})",
            a.shape, attrs.trans_a, b.shape, attrs.trans_b
        )));
    }
    let c = optional(inputs, 2).map(|t| numbers(node, t, "C")).transpose()?;
    let c_at = c_indexer(node, c.as_ref(), m, n)?;
    let at = |i: usize, p: usize| if attrs.trans_a { a.at(p * m + i) } else { a.at(i * k + p) };
    let bt = |p: usize, j: usize| if attrs.trans_b { b.data[j * k + p] } else { b.data[p * n + j] };
    let (alpha, beta) = (attrs.alpha as f64, attrs.beta as f64);
    let mut out = OutBuf::new(node, a.dtype, vec![m, n])?;
    // A is read in place, one row widened at a time (B, usually a weight, is widened whole).
    let mut a_row = crate::tensor::try_filled(k, 0.0, "a working buffer")?;
    for i in 0..m {
        for (p, v) in a_row.iter_mut().enumerate() {
            *v = at(i, p);
        }
        for j in 0..n {
            let mut acc = 0.0;
            for (p, x) in a_row.iter().enumerate() {
                acc += x * bt(p, j);
            }
            let bias = match (&c, &c_at) {
                (Some(c), Some((si, sj))) => beta * c.data[i * si + j * sj],
                _ => 0.0,
            };
            out.set(i * n + j, alpha * acc + bias);
        }
    }
    Ok(vec![out.finish(node)?])
}

/// Row and column strides reading C broadcast to `(m, n)` (C may be a scalar, `[n]`, `[1, n]`,
/// `[m, 1]`, `[m, n]`, ...).
fn c_indexer(
    node: &NodeCtx,
    c: Option<&Floats>,
    m: usize,
    n: usize,
) -> Result<Option<(usize, usize)>, HostError> {
    let Some(c) = c else { return Ok(None) };
    if c.shape.len() > 2 || broadcast_shape(&c.shape, &[m, n]).as_deref() != Some(&[m, n][..]) {
        return Err(node.err(format!("C of shape {:?} does not broadcast to [{m}, {n}]", c.shape)));
    }
    let s = broadcast_strides(&c.shape, 2);
    Ok(Some((s[0], s[1])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, ti, vals};

    fn naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    out[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        out
    }

    #[test]
    fn matmul_2x3_by_3x2_by_hand() {
        let a = tf(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let b = tf(&[3, 2], &[7., 8., 9., 10., 11., 12.]);
        let y = matmul(&node("MatMul"), &(), &[Some(&a), Some(&b)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 2]);
        assert_eq!(vals(&y[0]), vec![58., 64., 139., 154.]);
    }

    #[test]
    fn matmul_vector_operands_drop_the_inserted_dim() {
        let a = tf(&[3], &[1., 2., 3.]);
        let b = tf(&[2, 3, 2], &[1., 0., 0., 1., 1., 1., 2., 0., 0., 2., 2., 2.]);
        let y = matmul(&node("MatMul"), &(), &[Some(&a), Some(&b)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 2]);
        assert_eq!(vals(&y[0]), vec![4., 5., 8., 10.]);
        let v = tf(&[2], &[1., -1.]);
        let y = matmul(&node("MatMul"), &(), &[Some(&b), Some(&v)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 3]);
        assert_eq!(vals(&y[0]), vec![1., -1., 0., 2., -2., 0.]);
    }

    #[test]
    fn matmul_integers_stay_integers() {
        let a = ti(&[1, 2], &[3, 4]);
        let b = ti(&[2, 1], &[5, 6]);
        let y = matmul(&node("MatMul"), &(), &[Some(&a), Some(&b)]).unwrap();
        assert_eq!(y[0].dtype(), planner::DType::I64);
        assert_eq!(vals(&y[0]), vec![39.]);
    }

    #[test]
    fn matmul_rejects_mismatched_inner_dims() {
        let a = tf(&[2, 3], &[0.; 6]);
        let b = tf(&[2, 2], &[0.; 4]);
        assert!(matmul(&node("MatMul"), &(), &[Some(&a), Some(&b)]).is_err());
    }

    #[test]
    fn matmul_batch_broadcast_matches_naive_per_batch() {
        let mut rng = Rng::new(7);
        for _ in 0..20 {
            let (m, k, n) = (rng.int(1, 4), rng.int(1, 5), rng.int(1, 4));
            let (b0, b1) = (rng.int(1, 3), rng.int(1, 3));
            let a = rng.vec(b0 * b1 * m * k, -2.0, 2.0);
            let b = rng.vec(b1 * k * n, -2.0, 2.0);
            let ta = tf(&[b0, b1, m, k], &a);
            let tb = tf(&[1, b1, k, n], &b);
            let y = matmul(&node("MatMul"), &(), &[Some(&ta), Some(&tb)]).unwrap();
            assert_eq!(y[0].shape(), &[b0, b1, m, n]);
            let mut want = Vec::new();
            for i0 in 0..b0 {
                for i1 in 0..b1 {
                    let ao = (i0 * b1 + i1) * m * k;
                    want.extend(naive(&a[ao..ao + m * k], &b[i1 * k * n..(i1 + 1) * k * n], m, k, n));
                }
            }
            assert_close(&vals(&y[0]), &want, 1e-6);
        }
    }

    #[test]
    fn gemm_transposes_and_bias_match_naive() {
        let mut rng = Rng::new(11);
        for case in 0..24 {
            let (m, k, n) = (rng.int(1, 4), rng.int(1, 5), rng.int(1, 4));
            let (ta_, tb_) = (case % 2 == 1, (case / 2) % 2 == 1);
            let a = rng.vec(m * k, -1.0, 1.0);
            let b = rng.vec(k * n, -1.0, 1.0);
            let c_shapes: [Vec<usize>; 4] = [vec![], vec![n], vec![m, 1], vec![m, n]];
            let cs = &c_shapes[(case / 4) % 4];
            let c = rng.vec(cs.iter().product(), -1.0, 1.0);
            let transpose = |x: &[f64], r: usize, cc: usize| {
                (0..cc)
                    .flat_map(|j| (0..r).map(move |i| (i, j)))
                    .map(|(i, j)| x[i * cc + j])
                    .collect::<Vec<_>>()
            };
            let (a_in, a_shape) = if ta_ { (transpose(&a, m, k), [k, m]) } else { (a.clone(), [m, k]) };
            let (b_in, b_shape) = if tb_ { (transpose(&b, k, n), [n, k]) } else { (b.clone(), [k, n]) };
            let attrs = Gemm { alpha: 0.5, beta: -2.0, trans_a: ta_, trans_b: tb_ };
            let (ta, tb, tc) = (tf(&a_shape, &a_in), tf(&b_shape, &b_in), tf(cs, &c));
            let y = gemm(&node("Gemm"), &attrs, &[Some(&ta), Some(&tb), Some(&tc)]).unwrap();
            let prod = naive(&a, &b, m, k, n);
            let want: Vec<f64> = (0..m * n)
                .map(|e| {
                    let (i, j) = (e / n, e % n);
                    let cv = match cs.len() {
                        0 => c[0],
                        1 => c[j],
                        _ if cs[1] == 1 => c[i],
                        _ => c[e],
                    };
                    0.5 * prod[e] - 2.0 * cv
                })
                .collect();
            assert_close(&vals(&y[0]), &want, 1e-6);
        }
    }

    #[test]
    fn gemm_rejects_c_that_does_not_broadcast() {
        let (a, b, c) = (tf(&[2, 2], &[0.; 4]), tf(&[2, 3], &[0.; 6]), tf(&[2], &[0.; 2]));
        assert!(gemm(&node("Gemm"), &Gemm::default(), &[Some(&a), Some(&b), Some(&c)]).is_err());
    }
}
