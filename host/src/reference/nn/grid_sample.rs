//! Reference `GridSample` (opsets 16/20/22), N-D: X `(N, C, D_1..D_r)` sampled at the points of
//! grid `(N, O_1..O_r, r)`, whose last axis holds normalized coordinates in `[-1, 1]` listed
//! innermost dimension first (`x`, then `y`, ...).
//!
//! A coordinate `g` maps to pixel space as `(g + 1) / 2 * (D - 1)` with `align_corners`, else
//! `((g + 1) * D - 1) / 2`. `nearest` rounds half to even; `linear` and `cubic` (Keys, a = -0.75)
//! weight the 2 or 4 taps around the point per dimension (a tensor product). Points outside the
//! border (pixel centres with `align_corners`, outer edges otherwise) are first clamped
//! (`border`) or reflected (`reflection`); taps outside the input then read 0 (`zeros`), the
//! clamped pixel (`border`) or the reflected pixel (`reflection`).

use planner::op::{AffineGrid, GridSample, GridSampleMode, GridSamplePadding};

use super::operand::{count, input, ints, required, strides, tensor, unravel};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// Reflects `x` into `[lo, hi]` by folding at the nearer border until inside.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    if x < lo {
        let dx = lo - x;
        let (n, r) = ((dx / range).floor(), dx % range);
        if n % 2.0 == 0.0 { lo + r } else { hi - r }
    } else if x > hi {
        let dx = x - hi;
        let (n, r) = ((dx / range).floor(), dx % range);
        if n % 2.0 == 0.0 { hi - r } else { lo + r }
    } else {
        x
    }
}

/// Keys cubic convolution weights of the 4 taps at offsets -1, 0, 1, 2 for fraction `t`.
fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.75;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// One spatial dimension: its size and border.
struct Axis {
    size: usize,
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The input index tap `i` reads, or `None` for a zero.
    fn tap(&self, i: i64, padding: GridSamplePadding) -> Option<usize> {
        let last = self.size as i64 - 1;
        let i = match padding {
            GridSamplePadding::Zeros => i,
            GridSamplePadding::Border => i.clamp(0, last),
            // Truncation toward zero, as the ONNX reference converts the reflected coordinate.
            GridSamplePadding::Reflection => reflect(i as f64, self.lo, self.hi) as i64,
        };
        usize::try_from(i).ok().filter(|&i| i < self.size)
    }
}

/// ONNX `GridSample(X, grid)`.
pub fn grid_sample(
    node: &NodeCtx,
    attrs: &GridSample,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let grid = input(node, inputs, 1, "grid")?;
    let r = x.shape.len().saturating_sub(2);
    if r == 0 || grid.shape.len() != r + 2 || grid.shape[r + 1] != r || grid.shape[0] != x.shape[0] {
        return Err(node.err(format!(
            "X {:?} and grid {:?} do not fit (N, C, D...) / (N, O..., r)",
            x.shape, grid.shape
        )));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let axes: Vec<Axis> = x.shape[2..]
        .iter()
        .map(|&size| {
            let (lo, hi) =
                if attrs.align_corners { (0.0, size as f64 - 1.0) } else { (-0.5, size as f64 - 0.5) };
            Axis { size, lo, hi }
        })
        .collect();
    let out_spatial = &grid.shape[1..=r];
    let points = count(node, out_spatial)?;
    let image = count(node, &x.shape[2..])?;
    let xs = strides(&x.shape[2..]);
    let mut out_shape = vec![n, c];
    out_shape.extend_from_slice(out_spatial);
    let mut y = crate::tensor::try_filled(count(node, &out_shape)?, 0.0, "a working buffer")?;
    let mut taps: Vec<Vec<(Option<usize>, f64)>> = vec![Vec::new(); r];
    let mut corner = vec![0; r];
    for b in 0..n {
        for p in 0..points {
            let g = &grid.data[(b * points + p) * r..(b * points + p + 1) * r];
            for (i, ax) in axes.iter().enumerate() {
                let norm = g[r - 1 - i];
                let size = ax.size as f64;
                let mut v = if attrs.align_corners {
                    (norm + 1.0) / 2.0 * (size - 1.0)
                } else {
                    ((norm + 1.0) * size - 1.0) / 2.0
                };
                if attrs.mode == GridSampleMode::Nearest {
                    v = v.round_ties_even();
                }
                if v < ax.lo || v > ax.hi {
                    match attrs.padding_mode {
                        GridSamplePadding::Border => v = v.clamp(0.0, size - 1.0),
                        GridSamplePadding::Reflection => v = reflect(v, ax.lo, ax.hi),
                        GridSamplePadding::Zeros => {}
                    }
                }
                let pad = attrs.padding_mode;
                taps[i] = match attrs.mode {
                    GridSampleMode::Nearest => vec![(ax.tap(v as i64, pad), 1.0)],
                    GridSampleMode::Linear => {
                        let f = v.floor();
                        let t = v - f;
                        vec![(ax.tap(f as i64, pad), 1.0 - t), (ax.tap(f as i64 + 1, pad), t)]
                    }
                    GridSampleMode::Cubic => {
                        let f = v.floor();
                        let w = cubic_weights(v - f);
                        (0..4).map(|k| (ax.tap(f as i64 - 1 + k as i64, pad), w[k])).collect()
                    }
                };
            }
            // Sum over every combination of taps.
            let sizes: Vec<usize> = taps.iter().map(Vec::len).collect();
            let combos: usize = sizes.iter().product();
            for ch in 0..c {
                let plane = &x.data[(b * c + ch) * image..(b * c + ch + 1) * image];
                let mut acc = 0.0;
                for k in 0..combos {
                    unravel(k, &sizes, &mut corner);
                    let mut weight = 1.0;
                    let mut offset = Some(0);
                    for (i, &j) in corner.iter().enumerate() {
                        let (at, w) = taps[i][j];
                        weight *= w;
                        offset = offset.zip(at).map(|(o, a)| o + a * xs[i]);
                    }
                    if let Some(o) = offset {
                        acc += weight * plane[o];
                    }
                }
                y[(b * c + ch) * points + p] = acc;
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, out_shape, y)?])
}

/// ONNX `AffineGrid(theta (N, r, r+1), size (N, C, D1..Dr))` -> `(N, D1..Dr, r)`: point
/// `(.., i_d, ..)` has normalized coordinates `-1 + (2 i + 1) / L` per axis of length `L`
/// (`-1 + 2 i / (L − 1)` with `align_corners`, -1 when `L = 1`), listed innermost axis first and
/// extended by 1; the grid holds `theta` times that vector.
pub fn affine_grid(
    node: &NodeCtx,
    attrs: &AffineGrid,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let theta = input(node, inputs, 0, "theta")?;
    let size = ints(node, required(node, inputs, 1, "size")?, "size")?;
    let &[n, r, cols] = theta.shape.as_slice() else {
        return Err(node.err(format!("theta {:?} must be (N, r, r + 1)", theta.shape)));
    };
    if !(r == 2 || r == 3) || cols != r + 1 || size.len() != r + 2 || usize::try_from(size[0]).ok() != Some(n)
    {
        return Err(node.err(format!("theta {:?} does not fit size {size:?}", theta.shape)));
    }
    let spatial: Vec<usize> = size[2..]
        .iter()
        .map(|&v| usize::try_from(v).map_err(|_| node.err(format!("size {size:?} holds a negative value"))))
        .collect::<Result<_, _>>()?;
    let coord = |i: usize, len: usize| match (attrs.align_corners, len) {
        (true, 1) => -1.0,
        (true, _) => -1.0 + 2.0 * i as f64 / (len - 1) as f64,
        (false, _) => -1.0 + (2 * i + 1) as f64 / len as f64,
    };
    let points = count(node, &spatial)?;
    let mut idx = vec![0; r];
    let mut out = crate::tensor::try_with_capacity(n * points * r, "a working buffer")?;
    let mut v = vec![1.0; r + 1];
    for b in 0..n {
        let t = &theta.data[b * r * cols..(b + 1) * r * cols];
        for p in 0..points {
            unravel(p, &spatial, &mut idx);
            for d in 0..r {
                v[r - 1 - d] = coord(idx[d], spatial[d]);
            }
            for row in 0..r {
                out.push((0..cols).map(|c| t[row * cols + c] * v[c]).sum());
            }
        }
    }
    let mut shape = vec![n];
    shape.extend_from_slice(&spatial);
    shape.push(r);
    Ok(vec![tensor(node, theta.dtype, shape, out)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, vals};

    fn run(attrs: GridSample, x: &HostTensor, grid: &HostTensor) -> Vec<f64> {
        vals(&grid_sample(&node("GridSample"), &attrs, &[Some(x), Some(grid)]).unwrap()[0])
    }

    #[test]
    fn linear_nearest_and_padding_in_1d() {
        // X = [10, 20] (one row of 2 pixels, 2-D as (1, 1, 1, 2)); points along x only.
        let x = tf(&[1, 1, 1, 2], &[10.0, 20.0]);
        // Grid x = 0 is the centre between the two pixels -> 15 (align_corners false: pixel
        // coordinate 0.5); x = -1 is the left edge (-0.5): half of pixel 0, half zero -> 5.
        let grid = tf(&[1, 1, 2, 2], &[0.0, 0.0, -1.0, 0.0]);
        assert_close(&run(GridSample::default(), &x, &grid), &[15.0, 5.0], 1e-12);
        let border = GridSample { padding_mode: GridSamplePadding::Border, ..GridSample::default() };
        assert_close(&run(border, &x, &grid), &[15.0, 10.0], 1e-12);
        // align_corners: -1 is pixel 0 exactly.
        let aligned = GridSample { align_corners: true, ..GridSample::default() };
        assert_close(&run(aligned, &x, &grid), &[15.0, 10.0], 1e-12);
        // Nearest: 0.5 rounds to 0 (half to even); -0.5 rounds to -0 -> pixel 0.
        let nearest = GridSample { mode: GridSampleMode::Nearest, ..GridSample::default() };
        assert_close(&run(nearest, &x, &grid), &[10.0, 10.0], 1e-12);
    }

    #[test]
    fn bilinear_mixes_rows_and_columns() {
        // 2x2 image; the centre (0, 0) averages all four pixels.
        let x = tf(&[1, 1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let grid = tf(&[1, 1, 1, 2], &[0.0, 0.0]);
        assert_close(&run(GridSample::default(), &x, &grid), &[2.5], 1e-12);
        // Cubic weights sum to 1 and interpolate a constant exactly.
        let ones = tf(&[1, 1, 2, 2], &[7.0; 4]);
        let cubic = GridSample { mode: GridSampleMode::Cubic, align_corners: true, ..GridSample::default() };
        let grid = tf(&[1, 1, 1, 2], &[0.3, -0.2]);
        let border = GridSample { padding_mode: GridSamplePadding::Border, ..cubic };
        assert_close(&run(border, &ones, &grid), &[7.0], 1e-12);
    }

    #[test]
    fn affine_grid_identity_and_translation() {
        // Identity theta over a 1x2 image: x = -0.5, 0.5; y = 0.
        let theta = tf(&[1, 2, 3], &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let size = crate::reference::nn::testing::ti(&[4], &[1, 1, 1, 2]);
        let g =
            affine_grid(&node("AffineGrid"), &AffineGrid::default(), &[Some(&theta), Some(&size)]).unwrap();
        assert_eq!(g[0].shape(), [1, 1, 2, 2]);
        assert_close(&vals(&g[0]), &[-0.5, 0.0, 0.5, 0.0], 1e-12);
        // Shift x by 1 with align_corners: x = -1, 1 -> 0, 2; y (single row) = -1.
        let shift = tf(&[1, 2, 3], &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
        let aligned = AffineGrid { align_corners: true };
        let g = affine_grid(&node("AffineGrid"), &aligned, &[Some(&shift), Some(&size)]).unwrap();
        assert_close(&vals(&g[0]), &[0.0, -1.0, 2.0, -1.0], 1e-12);
    }

    #[test]
    fn reflection_folds_at_the_border() {
        assert_eq!(reflect(-0.75, -0.5, 1.5), -0.25);
        assert_eq!(reflect(2.0, -0.5, 1.5), 1.0);
        assert_eq!(reflect(4.0, -0.5, 1.5), 0.0);
        assert_eq!(cubic_weights(0.0), [0.0, 1.0, 0.0, 0.0]);
    }
}
