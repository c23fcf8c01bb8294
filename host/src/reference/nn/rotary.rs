//! Reference ONNX `RotaryEmbedding` (opset 23): rotates pairs of each head's first
//! `rotary_embedding_dim` features by the angle whose cos/sin the caches hold for the token's
//! position; the remaining features pass through.
//!
//! Pairs are `(x[k], x[k + r/2])` (halves) or `(x[2k], x[2k + 1])` (interleaved), and become
//! `(cos·x1 − sin·x2, sin·x1 + cos·x2)`.

use planner::op::RotaryEmbedding;

use super::operand::{input, ints, optional, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// ONNX `RotaryEmbedding` (opset 23). X is `(B, H, S, D)` or `(B, S, H·D)` (`num_heads` required);
/// with `position_ids (B, S)` the caches are `(max_position + 1, r/2)` and are indexed by
/// position, without them they are `(B, S, r/2)`; a 2-D cache without position ids is indexed
/// by the sequence index (ONNX Runtime's reading).
pub fn rotary_embedding(
    node: &NodeCtx,
    attrs: &RotaryEmbedding,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let cos = input(node, inputs, 1, "cos_cache")?;
    let sin = input(node, inputs, 2, "sin_cache")?;
    if cos.shape != sin.shape {
        return Err(node.err(format!("cos_cache {:?} and sin_cache {:?} differ", cos.shape, sin.shape)));
    }
    // Element (b, s, h, d) of X lives at offset b·bs + s·ss + h·hs + d.
    let (batch, seq, heads, size, bs, ss, hs) = match (x.shape.as_slice(), attrs.num_heads) {
        (&[b, h, s, d], _) => (b, s, h, d, h * s * d, d, s * d),
        (&[b, s, hidden], Some(h)) if h > 0 && hidden % h == 0 => {
            let d = hidden / h;
            (b, s, h, d, s * hidden, hidden, d)
        }
        (&[_, _, _], _) => return Err(node.err("3-D X needs num_heads dividing its hidden size")),
        (s, _) => return Err(node.err(format!("X must be 3-D or 4-D, got {s:?}"))),
    };
    let rot = if attrs.rotary_embedding_dim == 0 { size } else { attrs.rotary_embedding_dim };
    if rot % 2 != 0 || rot > size {
        return Err(node.err(format!("rotary_embedding_dim {rot} must be even and at most head size {size}")));
    }
    let half = rot / 2;
    let positions = optional(inputs, 3).map(|p| ints(node, p, "position_ids")).transpose()?;
    // Full-width caches: the element strides of b, h and s (each feature its own cos and sin).
    let full = if attrs.full_caches {
        if positions.is_some() {
            return Err(node.err("full-width caches take no position ids"));
        }
        let strides = RotaryEmbedding::full_cache_strides(&cos.shape, [batch, heads, seq, rot]);
        Some(strides.map_err(|e| node.err(e))?)
    } else {
        None
    };
    if let Some(p) = &positions
        && p.len() != batch * seq
    {
        return Err(node.err(format!("position_ids must be (B={batch}, S={seq}), got {} ids", p.len())));
    }
    // Offset of the cache row for token (b, s) (half-width caches).
    let row =
        |b: usize, s: usize| -> Result<usize, HostError> {
            match (cos.shape.as_slice(), &positions) {
                (&[rows, w], Some(p)) if w == half => {
                    let pos = p[b * seq + s];
                    usize::try_from(pos).ok().filter(|&r| r < rows).map(|r| r * half).ok_or_else(|| {
                        node.err(format!("position id {pos} is outside the cache of {rows} rows"))
                    })
                }
                (&[rows, w], None) if w == half && s < rows => Ok(s * half),
                (&[cb, cs, w], None) if w == half && cb == batch && cs == seq => Ok((b * seq + s) * half),
                (c, _) => {
                    Err(node.err(format!("caches {c:?} do not fit B={batch}, S={seq}, rotary dim/2={half}")))
                }
            }
        };
    let mut y = x.data.clone();
    for b in 0..batch {
        for s in 0..seq {
            let r = if full.is_some() { 0 } else { row(b, s)? };
            for h in 0..heads {
                let base = b * bs + s * ss + h * hs;
                // Where this head's cache values start; each feature reads its own (full width)
                // or its pair's (half width).
                let c0 = full.map_or(r, |[cb, ch, cs]| b * cb + h * ch + s * cs);
                let at = |k: usize, i: usize| if full.is_some() { i } else { k };
                for k in 0..half {
                    let (i1, i2) = if attrs.interleaved { (2 * k, 2 * k + 1) } else { (k, k + half) };
                    let (x1, x2) = (x.data[base + i1], x.data[base + i2]);
                    let (j1, j2) = (c0 + at(k, i1), c0 + at(k, i2));
                    // `x·cos + rotate_half(x)·sin`: (cos x1 − sin x2, cos x2 + sin x1).
                    y[base + i1] = x1 * cos.data[j1] - x2 * sin.data[j1];
                    y[base + i2] = x2 * cos.data[j2] + x1 * sin.data[j2];
                }
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, x.shape.clone(), y)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, ti, vals};

    fn run(attrs: &RotaryEmbedding, ins: &[Option<&HostTensor>]) -> Result<Vec<f64>, HostError> {
        rotary_embedding(&node("RotaryEmbedding"), attrs, ins).map(|y| vals(&y[0]))
    }

    #[test]
    fn quarter_turn_by_hand_in_both_pairings() {
        let x = tf(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
        let (cos, sin) = (tf(&[1, 1, 2], &[0., 0.]), tf(&[1, 1, 2], &[1., 1.]));
        let y = run(&RotaryEmbedding::default(), &[Some(&x), Some(&cos), Some(&sin)]).unwrap();
        assert_close(&y, &[-3., -4., 1., 2.], 1e-12);
        let inter = RotaryEmbedding { interleaved: true, ..RotaryEmbedding::default() };
        let y = run(&inter, &[Some(&x), Some(&cos), Some(&sin)]).unwrap();
        assert_close(&y, &[-2., 1., -4., 3.], 1e-12);
        // Partial rotation: only the first 2 features turn.
        let (c1, s1) = (tf(&[1, 1, 1], &[0.]), tf(&[1, 1, 1], &[1.]));
        let part = RotaryEmbedding { rotary_embedding_dim: 2, ..RotaryEmbedding::default() };
        let y = run(&part, &[Some(&x), Some(&c1), Some(&s1)]).unwrap();
        assert_close(&y, &[-2., 1., 3., 4.], 1e-12);
    }

    #[test]
    fn position_ids_select_cache_rows_and_norms_are_preserved() {
        let mut rng = Rng::new(8);
        let (b, s, h, d) = (2, 3, 2, 4);
        let x = rng.vec(b * s * h * d, -1.0, 1.0);
        let angles: Vec<f64> = rng.vec(5 * d / 2, -3.0, 3.0);
        let cos = tf(&[5, d / 2], &angles.iter().map(|a| a.cos()).collect::<Vec<_>>());
        let sin = tf(&[5, d / 2], &angles.iter().map(|a| a.sin()).collect::<Vec<_>>());
        let pos = ti(&[b, s], &[4, 0, 2, 1, 1, 3]);
        let attrs = RotaryEmbedding { num_heads: Some(h), ..RotaryEmbedding::default() };
        let x3 = tf(&[b, s, h * d], &x);
        let y = run(&attrs, &[Some(&x3), Some(&cos), Some(&sin), Some(&pos)]).unwrap();
        for (tok, p) in [4usize, 0, 2, 1, 1, 3].iter().enumerate() {
            for hh in 0..h {
                let o = (tok * h + hh) * d;
                for k in 0..d / 2 {
                    let a = angles[p * d / 2 + k];
                    let (x1, x2) = (x[o + k], x[o + k + d / 2]);
                    let want = [a.cos() * x1 - a.sin() * x2, a.sin() * x1 + a.cos() * x2];
                    assert_close(&[y[o + k], y[o + k + d / 2]], &want, 1e-6);
                }
            }
        }
        let norm = |v: &[f64]| v.iter().map(|e| e * e).sum::<f64>();
        assert_close(&[norm(&y)], &[norm(&x)], 1e-5);
        let bad = ti(&[b, s], &[5, 0, 0, 0, 0, 0]);
        assert!(run(&attrs, &[Some(&x3), Some(&cos), Some(&sin), Some(&bad)]).is_err());
    }

    /// Full-width caches (`plan::rotary_lift`): each feature reads its own cos and sin, the caches
    /// broadcast over the heads; equal to `x·cos + rotate_half(x)·sin` on the first `rot`
    /// features, 4-D and 3-D X alike; misfit caches and position ids are errors.
    #[test]
    fn full_width_caches_are_the_spelled_out_rotation() {
        let mut rng = Rng::new(23);
        let (b, h, s, d, rot) = (2, 3, 4, 8, 4);
        let x = rng.vec(b * h * s * d, -1.0, 1.0);
        let (cos, sin) = (rng.vec(b * s * rot, -1.0, 1.0), rng.vec(b * s * rot, -1.0, 1.0));
        let (ct, st) = (tf(&[b, 1, s, rot], &cos), tf(&[b, 1, s, rot], &sin));
        let attrs =
            RotaryEmbedding { rotary_embedding_dim: rot, full_caches: true, ..RotaryEmbedding::default() };
        let y = run(&attrs, &[Some(&tf(&[b, h, s, d], &x)), Some(&ct), Some(&st)]).unwrap();
        let half = rot / 2;
        let mut want = x.clone();
        for (bb, hh, ss) in (0..b).flat_map(|i| (0..h).flat_map(move |j| (0..s).map(move |k| (i, j, k)))) {
            let o = ((bb * h + hh) * s + ss) * d;
            let c = (bb * s + ss) * rot;
            for j in 0..rot {
                let turned = if j < half { -x[o + j + half] } else { x[o + j - half] };
                want[o + j] = x[o + j] * cos[c + j] + turned * sin[c + j];
            }
        }
        assert_close(&y, &want, 1e-6);
        // The same as (B, S, H·D) with num_heads.
        let x3: Vec<f64> = (0..b * s * h * d)
            .map(|i| {
                let (bb, ss, hh, j) = (i / (s * h * d), i / (h * d) % s, i / d % h, i % d);
                x[((bb * h + hh) * s + ss) * d + j]
            })
            .collect();
        let three = RotaryEmbedding { num_heads: Some(h), ..attrs.clone() };
        let y3 = run(&three, &[Some(&tf(&[b, s, h * d], &x3)), Some(&ct), Some(&st)]).unwrap();
        for (i, v) in y3.iter().enumerate() {
            let (bb, ss, hh, j) = (i / (s * h * d), i / (h * d) % s, i / d % h, i % d);
            assert_eq!(*v, y[((bb * h + hh) * s + ss) * d + j], "element {i}");
        }
        let narrow = tf(&[b, 1, s, rot / 2], &cos[..b * s * rot / 2]);
        assert!(run(&attrs, &[Some(&tf(&[b, h, s, d], &x)), Some(&narrow), Some(&narrow)]).is_err());
        let pos = ti(&[b, s], &vec![0; b * s]);
        assert!(run(&attrs, &[Some(&tf(&[b, h, s, d], &x)), Some(&ct), Some(&st), Some(&pos)]).is_err());
    }
}
