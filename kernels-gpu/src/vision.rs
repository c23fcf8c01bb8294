//! Detection kernels, f32: RoiAlign (bilinear samples averaged or maxed per bin) and DeformConv
//! (a convolution whose taps are displaced by learned offsets). Both mirror the CPU reference's
//! formulas term by term; every output element is written by exactly one thread (no atomics).

use crate::abi::{DEFORM_MAX_RANK, DeformConvParams, RoiAlignParams};
use crate::indexing::load_index;
use crate::intrinsics::{floor_f64, global_thread_x, grid_threads_x};

/// Most samples one RoiAlign bin takes (`sampling_ratio` or the adaptive count, squared); a bin
/// past it (a RoI of absurd size) is NaN rather than a launch that never ends.
const ROI_MAX_SAMPLES: u64 = 1 << 28;

/// The two taps of coordinate `v` (already inside `[-1, n]`) along an axis of `n >= 1` pixels:
/// `(low, high, fraction)`, clamped to the last pixel as the reference does.
#[inline(always)]
fn roi_axis(v: f64, n: u64) -> (u64, u64, f64) {
    let v = v.max(0.0);
    let low = v as u64;
    if low >= n - 1 { (n - 1, n - 1, 0.0) } else { (low, low + 1, v - low as f64) }
}

/// Bilinear taps `(offset in the plane, weight)` of point `(y, x)` in an `h x w` plane: four zero
/// weights (at offset 0) outside `[-1, h] x [-1, w]`.
#[inline(always)]
fn roi_taps(y: f64, x: f64, h: u64, w: u64) -> [(u64, f32); 4] {
    if y < -1.0 || y > h as f64 || x < -1.0 || x > w as f64 {
        return [(0, 0.0); 4];
    }
    let (y0, y1, ly) = roi_axis(y, h);
    let (x0, x1, lx) = roi_axis(x, w);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [
        (y0 * w + x0, (hy * hx) as f32),
        (y0 * w + x1, (hy * lx) as f32),
        (y1 * w + x0, (ly * hx) as f32),
        (y1 * w + x1, (ly * lx) as f32),
    ]
}

/// ONNX RoiAlign ([`RoiAlignParams`]): each output element is the average (or, with `max`, the
/// largest weighted tap) of the bilinear samples of its bin. Roi geometry and sample coordinates
/// are computed in f64 exactly as the CPU reference (the sample counts `ceil(size / bins)` and the
/// outside-the-image tests are discontinuous in them); the taps' values are summed in f32. A roi
/// whose batch index lies outside `[0, n)` (an error for the reference) gets NaN outputs.
///
/// # Safety
/// `x` holds `n * c * h * w` f32, `rois` `rois * 4` f32, `batch` `rois` indices of `index_bytes`
/// bytes and `y` `rois * c * out_h * out_w` f32 (overlapping none of them); `h` and `w` are
/// non-zero.
///
/// # Parameters
/// `p`; input `x`; the rois; their batch indices; output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `rois * c * out_h * out_w`
/// outputs in (roi, channel, row, column) order, a thread per output bin (it walks the bin's
/// `g_h x g_w` samples, four taps each).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn roi_align_f32(
    p: RoiAlignParams,
    x: *const f32,
    rois: *const f32,
    batch: *const u8,
    y: *mut f32,
) {
    if p.h == 0 || p.w == 0 {
        return;
    }
    let scale = p.spatial_scale as f64;
    let offset = if p.half_pixel != 0 { 0.5 } else { 0.0 };
    let bins = p.out_h * p.out_w;
    let total = p.rois * p.c * bins;
    let (mut i, step) = (global_thread_x(), grid_threads_x());
    while i < total {
        let (pw, ph) = (i % p.out_w, (i / p.out_w) % p.out_h);
        let ch = (i / bins) % p.c;
        let ri = i / (bins * p.c);
        // SAFETY: ri < rois: one index each (the contract).
        let b = unsafe { load_index(batch, p.index_bytes, ri) };
        if b < 0 || b as u64 >= p.n {
            // SAFETY: i < total: inside y.
            unsafe { *y.add(i as usize) = f32::NAN };
            i += step;
            continue;
        }
        // SAFETY: ri < rois, k < 4: inside rois.
        let roi = |k: u64| unsafe { *rois.add((ri * 4 + k) as usize) } as f64;
        let (x1, y1) = (roi(0) * scale - offset, roi(1) * scale - offset);
        let (mut rw, mut rh) = (roi(2) * scale - offset - x1, roi(3) * scale - offset - y1);
        if p.half_pixel == 0 {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / p.out_h as f64, rw / p.out_w as f64);
        let grid = |size: f64, bins: u64| match p.sampling_ratio {
            // ceil(v) as -floor(-v): exact, like the host's f64::ceil.
            0 => (-floor_f64(-(size / bins as f64))).max(0.0) as u64,
            s => s,
        };
        let (gh, gw) = (grid(rh, p.out_h), grid(rw, p.out_w));
        // A RoI of non-finite or absurd size would sample forever: its bins are NaN.
        if !(rh.is_finite() && rw.is_finite()) || gh.saturating_mul(gw) > ROI_MAX_SAMPLES {
            // SAFETY: i < total: inside y.
            unsafe { *y.add(i as usize) = f32::NAN };
            i += step;
            continue;
        }
        let plane = (b as u64 * p.c + ch) * p.h * p.w;
        // SAFETY: every tap offset is inside the h x w plane of (b, ch) (roi_taps), b < n.
        let at = |o: u64| unsafe { *x.add((plane + o) as usize) };
        let (mut sum, mut best) = (0.0f32, None::<f32>);
        for iy in 0..gh {
            let yy = y1 + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
            for ix in 0..gw {
                let xx = x1 + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                let taps = roi_taps(yy, xx, p.h, p.w);
                if p.max != 0 {
                    let m = taps.iter().fold(f32::NEG_INFINITY, |m, &(o, wt)| m.max(wt * at(o)));
                    best = Some(best.map_or(m, |b| b.max(m)));
                } else {
                    for &(o, wt) in &taps {
                        sum += wt * at(o);
                    }
                }
            }
        }
        let value = if p.max != 0 { best.unwrap_or(0.0) } else { sum / (gh * gw).max(1) as f32 };
        // SAFETY: i < total: inside y.
        unsafe { *y.add(i as usize) = value };
        i += step;
    }
}

/// The bilinear (N-linear) taps of the sampling point `pos` in an image of dims `image[..r]`: up
/// to `2^r` (offset in the image, weight) pairs, corners outside the image left out.
#[inline(always)]
fn deform_taps(
    pos: &[f32; DEFORM_MAX_RANK],
    image: &[u64; DEFORM_MAX_RANK],
    r: usize,
) -> ([(u64, f32); 1 << DEFORM_MAX_RANK], usize) {
    let mut taps = [(0u64, 0.0f32); 1 << DEFORM_MAX_RANK];
    let mut count = 0;
    for corner in 0..1usize << r {
        let (mut weight, mut at, mut inside) = (1.0f32, 0u64, true);
        for d in 0..r {
            let f = libm::floorf(pos[d]);
            let t = pos[d] - f;
            let hi = (corner >> d) & 1 == 1;
            let c = f as i64 + hi as i64;
            weight *= if hi { t } else { 1.0 - t };
            inside &= c >= 0 && (c as u64) < image[d];
            at = at * image[d] + c.max(0) as u64;
        }
        if inside {
            taps[count] = (at, weight);
            count += 1;
        }
    }
    (taps, count)
}

/// Splits `index` into the coordinates of `dims[..r]` (row-major, the last fastest).
#[inline(always)]
fn unravel(mut index: u64, dims: &[u64; DEFORM_MAX_RANK], r: usize) -> [u64; DEFORM_MAX_RANK] {
    let mut at = [0u64; DEFORM_MAX_RANK];
    for d in (0..r).rev() {
        at[d] = index % dims[d];
        index /= dims[d];
    }
    at
}

/// ONNX DeformConv ([`DeformConvParams`]), direct: each output element sums, over its group's
/// input channels and the kernel taps, the N-linear sample of X at the tap's displaced position
/// (corners outside X read 0) times the mask and the weight, then adds the bias, in f32. A
/// sample's taps are computed once per (tap, offset group) and reused for that offset group's
/// channels.
///
/// # Safety
/// `x` holds `n * c * prod(image)` f32, `w` `m * (c / group) * kprod`, `offset`
/// `n * offset_group * kprod * rank * points`, `bias` (when `has_bias`) `m`, `mask` (when
/// `has_mask`) `n * offset_group * kprod * points`, `y` `n * m * points` (overlapping none);
/// `1 <= rank <= DEFORM_MAX_RANK`; `group` divides `c` and `m`, `offset_group` divides `c`; the
/// dims of `image`, `kernel` and `out` multiply to the counts above.
///
/// # Parameters
/// `p`; inputs `x`, `w`, `offset`, `bias` (or null), `mask` (or null); output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `n * m * points` outputs in
/// (batch, output channel, point) order (neighbouring threads take neighbouring points of one
/// channel, so their offsets, mask and X reads are close); a thread per output element.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn deform_conv_f32(
    p: DeformConvParams,
    x: *const f32,
    w: *const f32,
    offset: *const f32,
    bias: *const f32,
    mask: *const f32,
    y: *mut f32,
) {
    let r = p.rank as usize;
    if r == 0 || r > DEFORM_MAX_RANK || p.group == 0 || p.offset_group == 0 {
        return;
    }
    let (group, og) = (p.group as u64, p.offset_group as u64);
    let (cpg, mpg, cpo) = (p.c / group, p.m / group, p.c / og);
    let image: u64 = p.image[..r].iter().product();
    let total = p.n * p.m * p.points;
    let (mut t, step) = (global_thread_x(), grid_threads_x());
    while t < total {
        let pt = t % p.points;
        let mo = (t / p.points) % p.m;
        let b = t / (p.points * p.m);
        let oi = unravel(pt, &p.out, r);
        let (c_lo, c_hi) = ((mo / mpg) * cpg, (mo / mpg + 1) * cpg);
        let mut acc = 0.0f32;
        // Offset groups meeting this channel group (none when there are no channels).
        let (g_lo, g_hi) = if cpg == 0 { (0, 0) } else { (c_lo / cpo, (c_hi - 1) / cpo + 1) };
        for k in 0..p.kprod {
            let ki = unravel(k, &p.kernel, r);
            for g in g_lo..g_hi {
                let field = (b * og + g) * p.kprod + k;
                let mut pos = [0.0f32; DEFORM_MAX_RANK];
                for d in 0..r {
                    let base = (oi[d] * p.stride[d] + ki[d] * p.dilation[d]) as f32 - p.pad_begin[d] as f32;
                    // SAFETY: b < n, g < offset_group, k < kprod, d < rank, pt < points: inside
                    // the offsets.
                    pos[d] = base
                        + unsafe { *offset.add(((field * r as u64 + d as u64) * p.points + pt) as usize) };
                }
                let (taps, count) = deform_taps(&pos, &p.image, r);
                let scale = if p.has_mask != 0 {
                    // SAFETY: inside the mask (same field and point).
                    unsafe { *mask.add((field * p.points + pt) as usize) }
                } else {
                    1.0
                };
                for ci in c_lo.max(g * cpo)..c_hi.min((g + 1) * cpo) {
                    let plane = (b * p.c + ci) * image;
                    let mut v = 0.0f32;
                    for &(at, wt) in &taps[..count] {
                        // SAFETY: every tap is inside the image (deform_taps), b < n, ci < c.
                        v += wt * unsafe { *x.add((plane + at) as usize) };
                    }
                    // SAFETY: mo < m, ci - c_lo < c / group, k < kprod: inside W.
                    let wv = unsafe { *w.add(((mo * cpg + ci - c_lo) * p.kprod + k) as usize) };
                    acc += v * scale * wv;
                }
            }
        }
        if p.has_bias != 0 {
            // SAFETY: mo < m: inside B.
            acc += unsafe { *bias.add(mo as usize) };
        }
        // SAFETY: t < total: inside y.
        unsafe { *y.add(t as usize) = acc };
        t += step;
    }
}
