//! Reference `CenterCropPad` and `Col2Im`: block-wise data movement with zero fill and
//! accumulation.

use planner::op::{CenterCropPad, Col2Im, TensorScatter};

use super::operand::{axis, count, input, ints, required, strides, tensor, unravel};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::reference::lanes::Lanes;
use crate::tensor::HostTensor;

/// Non-negative integers of input `slot`.
fn sizes(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    what: &str,
) -> Result<Vec<usize>, HostError> {
    ints(node, required(node, inputs, slot, what)?, what)?
        .into_iter()
        .map(|v| usize::try_from(v).map_err(|_| node.err(format!("{what} holds the negative value {v}"))))
        .collect()
}

/// ONNX `CenterCropPad(input, shape)`: per listed axis, a longer input is cropped starting at
/// `(dim − target) / 2` and a shorter one is placed at `(target − dim) / 2` in zeros (both
/// rounded down).
pub fn center_crop_pad(
    node: &NodeCtx,
    attrs: &CenterCropPad,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = required(node, inputs, 0, "input_data")?;
    let target = sizes(node, inputs, 1, "shape")?;
    let r = x.shape().len();
    let axes: Vec<usize> = match &attrs.axes {
        Some(a) => a.iter().map(|&a| axis(node, a, r)).collect::<Result<_, _>>()?,
        None => (0..r).collect(),
    };
    if axes.len() != target.len() {
        return Err(node.err(format!("shape {target:?} does not match axes {axes:?}")));
    }
    let mut out_shape = x.shape().to_vec();
    // Output index i reads input index i + shift (signed), when in range.
    let mut shift = vec![0i64; r];
    for (&a, &t) in axes.iter().zip(&target) {
        let dim = x.shape()[a];
        shift[a] = if t <= dim { ((dim - t) / 2) as i64 } else { -(((t - dim) / 2) as i64) };
        out_shape[a] = t;
    }
    let n = count(node, &out_shape)?;
    let in_strides = strides(x.shape());
    let mut idx = vec![0; r];
    let mut src: Vec<Option<usize>> = crate::tensor::try_with_capacity(n, "a working buffer")?;
    for o in 0..n {
        unravel(o, &out_shape, &mut idx);
        let mut at = Some(0);
        for d in 0..r {
            let i = idx[d] as i64 + shift[d];
            at = at.filter(|_| (0..x.shape()[d] as i64).contains(&i)).map(|a| a + i as usize * in_strides[d]);
        }
        src.push(at);
    }
    let zero = Lanes::I(vec![0]).into_tensor(x.dtype(), vec![1])?;
    Ok(vec![crate::reference::lanes::gather_or_fill(x, &src, &zero, out_shape)?])
}

/// ONNX `Col2Im(input (N, C·∏K, L), image_shape, block_shape)`: block `b` (row-major over the
/// grid of block positions) at kernel offset `k` adds `input[n, c·∏K + k, b]` to image position
/// `b_pos · stride − pad_begin + k · dilation` when inside the image.
pub fn col2im(
    node: &NodeCtx,
    attrs: &Col2Im,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "input")?;
    let image = sizes(node, inputs, 1, "image_shape")?;
    let block = sizes(node, inputs, 2, "block_shape")?;
    let s = image.len();
    let list = |v: &[usize], default: usize, len: usize, what: &str| match v.len() {
        0 => Ok(vec![default; len]),
        n if n == len => Ok(v.to_vec()),
        _ => Err(node.err(format!("{what} {v:?} must have {len} entries"))),
    };
    let dil = list(&attrs.dilations, 1, s, "dilations")?;
    let stride = list(&attrs.strides, 1, s, "strides")?;
    let pads = list(&attrs.pads, 0, 2 * s, "pads")?;
    let &[n, ck, l] = x.shape.as_slice() else {
        return Err(node.err(format!("input {:?} must be (N, C*prod(block), L)", x.shape)));
    };
    let kprod: usize = block.iter().product();
    if block.len() != s || kprod == 0 || ck % kprod != 0 || stride.contains(&0) {
        return Err(
            node.err(format!("block_shape {block:?} does not fit image {image:?} and input {:?}", x.shape))
        );
    }
    let c = ck / kprod;
    let grid: Vec<usize> = (0..s)
        .map(|d| {
            let span = image[d] + pads[d] + pads[d + s];
            let need = dil[d] * (block[d] - 1) + 1;
            if span < need { 0 } else { (span - need) / stride[d] + 1 }
        })
        .collect();
    if grid.iter().product::<usize>() != l {
        return Err(node.err(format!("input length {l} is not the {grid:?} sliding blocks")));
    }
    let img = count(node, &image)?;
    let img_strides = strides(&image);
    let mut out = crate::tensor::try_filled(n * c * img, 0.0, "a working buffer")?;
    let (mut kk, mut bb) = (vec![0; s], vec![0; s]);
    for k in 0..kprod {
        unravel(k, &block, &mut kk);
        for b in 0..l {
            unravel(b, &grid, &mut bb);
            let mut at = Some(0);
            for d in 0..s {
                let pos = (bb[d] * stride[d] + kk[d] * dil[d]) as i64 - pads[d] as i64;
                at = at
                    .filter(|_| (0..image[d] as i64).contains(&pos))
                    .map(|a| a + pos as usize * img_strides[d]);
            }
            let Some(at) = at else { continue };
            for ni in 0..n {
                for ci in 0..c {
                    out[(ni * c + ci) * img + at] += x.data[(ni * ck + ci * kprod + k) * l + b];
                }
            }
        }
    }
    let mut shape = vec![n, c];
    shape.extend_from_slice(&image);
    Ok(vec![tensor(node, x.dtype, shape, out)?])
}

/// ONNX `TensorScatter(past_cache, update, write_indices?)`: for every index of the axes before
/// `axis` (the first being the batch `b`) and every `j` below the update's length along `axis`,
/// the cache's slice at `write_indices[b] + j` (wrapped in `circular` mode) becomes the update's
/// slice `j`.
pub fn tensor_scatter(
    node: &NodeCtx,
    attrs: &TensorScatter,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let cache = required(node, inputs, 0, "past_cache")?;
    let update = required(node, inputs, 1, "update")?;
    let (cs, us) = (cache.shape(), update.shape());
    let ax = axis(node, attrs.axis, cs.len())?;
    let fits =
        cs.len() == us.len() && (0..cs.len()).all(|d| if d == ax { us[d] <= cs[d] } else { us[d] == cs[d] });
    if ax == 0 || !fits || cache.dtype() != update.dtype() {
        return Err(node.err(format!("update {us:?} does not fit cache {cs:?} along axis {ax}")));
    }
    let writes = match super::operand::optional(inputs, 2) {
        Some(t) => ints(node, t, "write_indices")?,
        None => vec![0; cs[0]],
    };
    if writes.len() != cs[0] {
        return Err(node.err(format!("write_indices has {} entries for batch {}", writes.len(), cs[0])));
    }
    let (outer, inner): (usize, usize) = (cs[..ax].iter().product(), cs[ax + 1..].iter().product());
    let per_batch = outer / cs[0].max(1);
    let (len, ulen) = (cs[ax] as i64, us[ax]);
    let mut from: Vec<usize> = (0..cache.len()).collect();
    let base = cache.len();
    for o in 0..outer {
        let start = writes[o / per_batch.max(1)];
        for j in 0..ulen {
            let mut dest = start + j as i64;
            if attrs.circular && len > 0 {
                dest = dest.rem_euclid(len);
            }
            if !(0..len).contains(&dest) {
                return Err(node.err(format!("write position {dest} is outside [0, {len})")));
            }
            for i in 0..inner {
                from[(o * cs[ax] + dest as usize) * inner + i] = base + (o * ulen + j) * inner + i;
            }
        }
    }
    let all = Lanes::concat(&[Lanes::of(cache)?, Lanes::of(update)?]);
    Ok(vec![all.take(&from).into_tensor(cache.dtype(), cs.to_vec())?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, tf, ti, vals};

    #[test]
    fn crop_and_pad_centre_the_data() {
        let x = tf(&[5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
        let crop = center_crop_pad(&node("C"), &CenterCropPad::default(), &[Some(&x), Some(&ti(&[1], &[2]))])
            .unwrap();
        assert_eq!(vals(&crop[0]), [2.0, 3.0]);
        let pad = center_crop_pad(&node("C"), &CenterCropPad::default(), &[Some(&x), Some(&ti(&[1], &[8]))])
            .unwrap();
        assert_eq!(vals(&pad[0]), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0]);
        let m = tf(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let axes = CenterCropPad { axes: Some(vec![-1]) };
        let y = center_crop_pad(&node("C"), &axes, &[Some(&m), Some(&ti(&[1], &[1]))]).unwrap();
        assert_eq!(y[0].shape(), [2, 1]);
        assert_eq!(vals(&y[0]), [2.0, 5.0]);
    }

    #[test]
    fn tensor_scatter_writes_at_offsets() {
        // Cache (2, 3), update (2, 2) along axis 1; batch 0 at 1, batch 1 at 2 (circular).
        let cache = tf(&[2, 3], &[0.0; 6]);
        let update = tf(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let at = ti(&[2], &[1, 2]);
        let circ = TensorScatter { axis: 1, circular: true };
        let y = tensor_scatter(&node("TS"), &circ, &[Some(&cache), Some(&update), Some(&at)]).unwrap();
        assert_eq!(vals(&y[0]), [0.0, 1.0, 2.0, 4.0, 0.0, 3.0]);
        let linear = TensorScatter { axis: 1, circular: false };
        assert!(tensor_scatter(&node("TS"), &linear, &[Some(&cache), Some(&update), Some(&at)]).is_err());
        let y = tensor_scatter(&node("TS"), &linear, &[Some(&cache), Some(&update)]).unwrap();
        assert_eq!(vals(&y[0]), [1.0, 2.0, 0.0, 3.0, 4.0, 0.0]);
    }

    #[test]
    fn col2im_sums_overlapping_blocks() {
        // 1-D image of 3, block 2, stride 1: blocks at 0 and 1; kernel rows k0 = [1, 2], k1 = [3, 4].
        // image[0] = 1, image[1] = 3 + 2, image[2] = 4.
        let x = tf(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let y = col2im(
            &node("Col2Im"),
            &Col2Im::default(),
            &[Some(&x), Some(&ti(&[1], &[3])), Some(&ti(&[1], &[2]))],
        )
        .unwrap();
        assert_eq!(y[0].shape(), [1, 1, 3]);
        assert_eq!(vals(&y[0]), [1.0, 5.0, 4.0]);
        // Padding 1 on both sides: 4 blocks over positions -1..=3; the outermost taps fall off.
        let x = tf(&[1, 2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let padded = Col2Im { pads: vec![1, 1], ..Col2Im::default() };
        let y = col2im(&node("Col2Im"), &padded, &[Some(&x), Some(&ti(&[1], &[3])), Some(&ti(&[1], &[2]))])
            .unwrap();
        assert_eq!(vals(&y[0]), [2.0 + 5.0, 3.0 + 6.0, 4.0 + 7.0]);
    }
}
