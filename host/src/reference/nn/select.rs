//! Reference selection operators whose output lengths depend on the data: `Compress`,
//! `Unique` and `NonMaxSuppression`, plus `ReverseSequence`. Data moves through [`Lanes`], so
//! every dtype is copied exactly.

use std::cmp::Ordering;

use planner::DType;
use planner::op::{Compress, NonMaxSuppression, ReverseSequence, Unique};

use super::operand::{axis, count, floats, ints, optional, required};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::{Lanes, gather_elems};
use crate::tensor::HostTensor;

/// `(outer, len, inner)` of `shape` around axis `ax`.
fn split_at(shape: &[usize], ax: usize) -> (usize, usize, usize) {
    (shape[..ax].iter().product(), shape[ax], shape[ax + 1..].iter().product())
}

/// Offsets of the elements of the slices `picks` (in order) along axis `ax` of `shape`.
fn slice_offsets(shape: &[usize], ax: usize, picks: &[usize]) -> Vec<usize> {
    let (outer, len, inner) = split_at(shape, ax);
    let mut out = Vec::with_capacity(outer * picks.len() * inner);
    for o in 0..outer {
        for &p in picks {
            out.extend((0..inner).map(|i| (o * len + p) * inner + i));
        }
    }
    out
}

/// I64 tensor of `shape`.
fn i64s(shape: Vec<usize>, v: Vec<i64>) -> Result<HostTensor, HostError> {
    HostTensor::new(shape, v)
}

/// ONNX `Compress(input, condition)`: the slices (or flattened elements) where `condition` holds;
/// a condition shorter than the axis leaves the rest out, one longer selecting past it fails.
pub fn compress(
    node: &NodeCtx,
    attrs: &Compress,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = required(node, inputs, 0, "input")?;
    let cond = required(node, inputs, 1, "condition")?;
    if cond.dtype() != DType::Bool || cond.shape().len() != 1 {
        return Err(node.err(format!("condition must be a 1-D bool tensor, got {:?}", cond.shape())));
    }
    let flags = match Lanes::of(cond)? {
        Lanes::I(v) => v,
        Lanes::F(_) => return Err(node.err("condition must be bool")),
    };
    let (shape, ax) = match attrs.axis {
        Some(a) => (x.shape().to_vec(), axis(node, a, x.shape().len())?),
        None => (vec![x.len()], 0),
    };
    let picks: Vec<usize> = flags.iter().enumerate().filter(|(_, f)| **f != 0).map(|(i, _)| i).collect();
    if let Some(&last) = picks.last()
        && last >= shape[ax]
    {
        return Err(node.err(format!("condition selects index {last} of an axis of length {}", shape[ax])));
    }
    let mut out_shape = shape.clone();
    out_shape[ax] = picks.len();
    Ok(vec![gather_elems(x, &slice_offsets(&shape, ax, &picks), out_shape)?])
}

/// ONNX `ReverseSequence(input, sequence_lens)`.
pub fn reverse_sequence(
    node: &NodeCtx,
    attrs: &ReverseSequence,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = required(node, inputs, 0, "input")?;
    let lens = ints(node, required(node, inputs, 1, "sequence_lens")?, "sequence_lens")?;
    let shape = x.shape();
    let (b_ax, t_ax) = (attrs.batch_axis, attrs.time_axis);
    if shape.len() < 2 || b_ax.max(t_ax) > 1 || b_ax == t_ax || lens.len() != shape[b_ax] {
        return Err(node.err(format!("input {shape:?} with {} sequence_lens", lens.len())));
    }
    let inner: usize = shape[2..].iter().product();
    let n = count(node, shape)?;
    let mut from: Vec<usize> = (0..n).collect();
    for (b, &len) in lens.iter().enumerate() {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= shape[t_ax])
            .ok_or_else(|| node.err(format!("sequence length {len} is outside [0, {}]", shape[t_ax])))?;
        for t in 0..len {
            let at = |t: usize| {
                let (i0, i1) = if b_ax == 0 { (b, t) } else { (t, b) };
                (i0 * shape[1] + i1) * inner
            };
            for i in 0..inner {
                from[at(t) + i] = at(len - 1 - t) + i;
            }
        }
    }
    Ok(vec![gather_elems(x, &from, shape.to_vec())?])
}

/// ONNX `Unique(X)` -> Y, indices, inverse_indices, counts.
pub fn unique(
    node: &NodeCtx,
    attrs: &Unique,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = required(node, inputs, 0, "X")?;
    let (shape, ax) = match attrs.axis {
        Some(a) => (x.shape().to_vec(), axis(node, a, x.shape().len())?),
        None => (vec![x.len()], 0),
    };
    let lanes = Lanes::of(x)?;
    let (outer, len, inner) = split_at(&shape, ax);
    // Compares slices `a` and `b` lexicographically in row-major order.
    let cmp = |a: usize, b: usize| {
        for o in 0..outer {
            for i in 0..inner {
                let ord = lanes.cmp_at((o * len + a) * inner + i, (o * len + b) * inner + i);
                if ord != Ordering::Equal {
                    return ord;
                }
            }
        }
        Ordering::Equal
    };
    // Stable sort keeps the first occurrence first among equal slices.
    let mut order: Vec<usize> = (0..len).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    let mut firsts: Vec<usize> = Vec::new(); // first occurrence of each distinct slice, sorted
    let mut group_of = vec![0; len];
    let mut counts: Vec<i64> = Vec::new();
    for &k in &order {
        match firsts.last() {
            Some(&f) if cmp(f, k) == Ordering::Equal => {
                if let Some(c) = counts.last_mut() {
                    *c += 1;
                }
            }
            _ => {
                firsts.push(k);
                counts.push(1);
            }
        }
        group_of[k] = firsts.len() - 1;
    }
    // Output order: sorted, or by first occurrence.
    let mut rank: Vec<usize> = (0..firsts.len()).collect();
    if !attrs.sorted {
        rank.sort_by_key(|&g| firsts[g]);
    }
    let mut position = vec![0; firsts.len()];
    for (p, &g) in rank.iter().enumerate() {
        position[g] = p;
    }
    let picks: Vec<usize> = rank.iter().map(|&g| firsts[g]).collect();
    let mut y_shape = shape.clone();
    y_shape[ax] = picks.len();
    let y = gather_elems(x, &slice_offsets(&shape, ax, &picks), y_shape)?;
    let u = picks.len();
    let indices = picks.iter().map(|&k| k as i64).collect();
    let inverse = group_of.iter().map(|&g| position[g] as i64).collect();
    let counts = rank.iter().map(|&g| counts[g]).collect();
    Ok(vec![y, i64s(vec![u], indices)?, i64s(vec![len], inverse)?, i64s(vec![u], counts)?])
}

/// Corners `(y1, x1, y2, x2)` of box `b` (ordered min, max per axis).
fn corners(b: &[f64], center: bool) -> [f64; 4] {
    if center {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        [b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw]
    } else {
        [b[0].min(b[2]), b[1].min(b[3]), b[0].max(b[2]), b[1].max(b[3])]
    }
}

/// Intersection over union of two boxes in corner form (0 for degenerate boxes).
fn iou(a: [f64; 4], b: [f64; 4]) -> f64 {
    let h = a[2].min(b[2]) - a[0].max(b[0]);
    let w = a[3].min(b[3]) - a[1].max(b[1]);
    if h <= 0.0 || w <= 0.0 {
        return 0.0;
    }
    let inter = h * w;
    let area = |c: [f64; 4]| (c[2] - c[0]) * (c[3] - c[1]);
    let union = area(a) + area(b) - inter;
    if area(a) <= 0.0 || area(b) <= 0.0 || union <= 0.0 { 0.0 } else { inter / union }
}

/// ONNX `NonMaxSuppression(boxes (B, N, 4), scores (B, C, N), max_output_boxes_per_class?,
/// iou_threshold?, score_threshold?)`: per batch and class, boxes in descending score order
/// (ties: lower index first) are kept unless one already kept overlaps with IoU above the
/// threshold, up to the maximum count (default 0); boxes scoring at or below `score_threshold`
/// (when given) are never candidates. Returns `(batch, class, box)` triples.
pub fn non_max_suppression(
    node: &NodeCtx,
    attrs: &NonMaxSuppression,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let boxes = floats(node, required(node, inputs, 0, "boxes")?, "boxes")?;
    let scores = floats(node, required(node, inputs, 1, "scores")?, "scores")?;
    let (&[nb, n, 4], &[sb, classes, sn]) = (boxes.shape.as_slice(), scores.shape.as_slice()) else {
        return Err(node.err(format!(
            "boxes {:?} must be (B, N, 4) and scores {:?} (B, C, N)",
            boxes.shape, scores.shape
        )));
    };
    if nb != sb || n != sn {
        return Err(node.err(format!("boxes {:?} and scores {:?} disagree", boxes.shape, scores.shape)));
    }
    let scalar = |slot: usize, what: &str| -> Result<Option<f64>, HostError> {
        let Some(t) = optional(inputs, slot).filter(|t| !t.is_empty()) else { return Ok(None) };
        if t.len() != 1 {
            return Err(node.err(format!("{what} must hold one value, got shape {:?}", t.shape())));
        }
        Ok(t.data().to_f64s().first().copied())
    };
    let max_out = scalar(2, "max_output_boxes_per_class")?.unwrap_or(0.0).max(0.0) as usize;
    let iou_threshold = scalar(3, "iou_threshold")?.unwrap_or(0.0);
    let score_threshold = scalar(4, "score_threshold")?;
    let mut selected: Vec<i64> = Vec::new();
    for b in 0..nb {
        let boxes_of =
            |i: usize| corners(&boxes.data[(b * n + i) * 4..(b * n + i + 1) * 4], attrs.center_point_box);
        for c in 0..classes {
            let s = &scores.data[(b * classes + c) * n..(b * classes + c + 1) * n];
            let mut candidates: Vec<usize> =
                (0..n).filter(|&i| score_threshold.is_none_or(|t| s[i] > t)).collect();
            candidates.sort_by(|&i, &j| s[j].partial_cmp(&s[i]).unwrap_or(Ordering::Equal).then(i.cmp(&j)));
            let mut kept: Vec<usize> = Vec::new();
            for i in candidates {
                if kept.len() >= max_out {
                    break;
                }
                if kept.iter().all(|&k| iou(boxes_of(i), boxes_of(k)) <= iou_threshold) {
                    kept.push(i);
                    selected.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    Ok(vec![i64s(vec![selected.len() / 3, 3], selected)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, tf, ti, vals};

    fn bools(v: &[bool]) -> HostTensor {
        HostTensor::new(vec![v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn compress_along_an_axis_and_flattened() {
        let x = tf(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let c = bools(&[false, true, true]);
        let y = compress(&node("Compress"), &Compress { axis: Some(1) }, &[Some(&x), Some(&c)]).unwrap();
        assert_eq!(y[0].shape(), [2, 2]);
        assert_eq!(vals(&y[0]), [2.0, 3.0, 5.0, 6.0]);
        let y = compress(&node("Compress"), &Compress { axis: None }, &[Some(&x), Some(&c)]).unwrap();
        assert_eq!(vals(&y[0]), [2.0, 3.0]);
        let long = bools(&[false, false, false, true]);
        assert!(compress(&node("Compress"), &Compress { axis: Some(1) }, &[Some(&x), Some(&long)]).is_err());
    }

    #[test]
    fn reverse_sequence_per_batch_prefix() {
        // time_axis 0, batch_axis 1: x[t][b]; batch 0 reverses 2 steps, batch 1 all 3.
        let x = tf(&[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let lens = ti(&[2], &[2, 3]);
        let y = reverse_sequence(&node("R"), &ReverseSequence::default(), &[Some(&x), Some(&lens)]).unwrap();
        assert_eq!(vals(&y[0]), [2.0, 5.0, 0.0, 3.0, 4.0, 1.0]);
    }

    #[test]
    fn unique_sorted_and_by_first_occurrence() {
        let x = tf(&[6], &[2.0, 1.0, 1.0, 3.0, 4.0, 3.0]);
        let out = unique(&node("Unique"), &Unique::default(), &[Some(&x)]).unwrap();
        assert_eq!(vals(&out[0]), [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(vals(&out[1]), [1.0, 0.0, 3.0, 4.0]);
        assert_eq!(vals(&out[2]), [1.0, 0.0, 0.0, 2.0, 3.0, 2.0]);
        assert_eq!(vals(&out[3]), [2.0, 1.0, 2.0, 1.0]);
        let unsorted = Unique { sorted: false, axis: None };
        let out = unique(&node("Unique"), &unsorted, &[Some(&x)]).unwrap();
        assert_eq!(vals(&out[0]), [2.0, 1.0, 3.0, 4.0]);
        assert_eq!(vals(&out[2]), [0.0, 1.0, 1.0, 2.0, 3.0, 2.0]);
        // Rows of a matrix: [1, 0] twice and [0, 1].
        let m = tf(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
        let out = unique(&node("Unique"), &Unique { axis: Some(0), sorted: true }, &[Some(&m)]).unwrap();
        assert_eq!(out[0].shape(), [2, 2]);
        assert_eq!(vals(&out[0]), [0.0, 1.0, 1.0, 0.0]);
        assert_eq!(vals(&out[3]), [1.0, 2.0]);
    }

    #[test]
    fn nms_suppresses_overlaps_per_class() {
        // Box 1 overlaps box 0 with IoU 0.81 / 1.19 ~ 0.68; box 2 is disjoint.
        let boxes = tf(&[1, 3, 4], &[0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]);
        let scores = tf(&[1, 1, 3], &[0.9, 0.95, 0.5]);
        let max = ti(&[1], &[3]);
        let iou_t = tf(&[1], &[0.5]);
        let ins = [Some(&boxes), Some(&scores), Some(&max), Some(&iou_t)];
        let y = non_max_suppression(&node("NMS"), &NonMaxSuppression::default(), &ins).unwrap();
        assert_eq!(y[0].shape(), [2, 3]);
        assert_eq!(vals(&y[0]), [0.0, 0.0, 1.0, 0.0, 0.0, 2.0]);
        // Score threshold 0.6 drops box 2; no max input selects nothing.
        let st = tf(&[1], &[0.6]);
        let y = non_max_suppression(
            &node("NMS"),
            &NonMaxSuppression::default(),
            &[Some(&boxes), Some(&scores), Some(&max), Some(&iou_t), Some(&st)],
        )
        .unwrap();
        assert_eq!(vals(&y[0]), [0.0, 0.0, 1.0]);
        let y =
            non_max_suppression(&node("NMS"), &NonMaxSuppression::default(), &[Some(&boxes), Some(&scores)])
                .unwrap();
        assert_eq!(y[0].shape(), [0, 3]);
    }
}
