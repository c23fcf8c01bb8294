//! Sampling and signal kernels (f32, coordinates and sums in f64 as the CPU reference):
//! GridSample, AffineGrid, Col2Im, DFT and STFT (direct summation).

use crate::abi::{
    AffineGridParams, Col2ImParams, DftParams, GRID_MAX_RANK, GridSampleParams, StftParams, grid_mode,
    grid_padding,
};
use crate::intrinsics::{floor_f64, global_thread_x, grid_threads_x};
use crate::resize::cubic;

/// Reflects `x` into `[lo, hi]` by folding at the nearer border until inside.
#[inline(always)]
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let fold = |dx: f64, near: f64, far: f64, dir: f64| {
        let (n, r) = (floor_f64(dx / range), dx % range);
        if n % 2.0 == 0.0 { near + dir * r } else { far - dir * r }
    };
    if x < lo {
        fold(lo - x, lo, hi, 1.0)
    } else if x > hi {
        fold(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// Keys cubic convolution weights (Resize's [`cubic`] kernel, a = -0.75) of the taps at offsets -1,
/// 0, 1, 2 for fraction `t`.
#[inline(always)]
fn keys_weights(t: f64) -> [f64; 4] {
    [t + 1.0, t, 1.0 - t, 2.0 - t].map(|x| cubic(x, -0.75))
}

/// The taps of one spatial axis: up to 4 (input index or -1 for a zero, weight), and their count.
#[inline(always)]
fn grid_taps(p: &GridSampleParams, size: u64, norm: f64) -> ([(i64, f64); 4], usize) {
    let n = size as f64;
    let (lo, hi) = if p.align_corners != 0 { (0.0, n - 1.0) } else { (-0.5, n - 0.5) };
    let mut v =
        if p.align_corners != 0 { (norm + 1.0) / 2.0 * (n - 1.0) } else { ((norm + 1.0) * n - 1.0) / 2.0 };
    if p.mode == grid_mode::NEAREST {
        v = libm::rint(v);
    }
    if v < lo || v > hi {
        match p.padding {
            grid_padding::BORDER => v = v.clamp(0.0, n - 1.0),
            grid_padding::REFLECTION => v = reflect(v, lo, hi),
            _ => {}
        }
    }
    let last = size as i64 - 1;
    let tap = |i: i64| -> i64 {
        let i = match p.padding {
            grid_padding::BORDER => i.clamp(0, last),
            // Truncation toward zero, as the ONNX reference converts the reflected coordinate.
            grid_padding::REFLECTION => reflect(i as f64, lo, hi) as i64,
            _ => i,
        };
        if (0..=last).contains(&i) { i } else { -1 }
    };
    let mut taps = [(-1i64, 0.0f64); 4];
    match p.mode {
        grid_mode::NEAREST => {
            taps[0] = (tap(v as i64), 1.0);
            (taps, 1)
        }
        grid_mode::LINEAR => {
            let f = floor_f64(v);
            let t = v - f;
            taps[0] = (tap(f as i64), 1.0 - t);
            taps[1] = (tap(f as i64 + 1), t);
            (taps, 2)
        }
        _ => {
            let f = floor_f64(v);
            let w = keys_weights(v - f);
            for (k, slot) in taps.iter_mut().enumerate() {
                *slot = (tap(f as i64 - 1 + k as i64), w[k]);
            }
            (taps, 4)
        }
    }
}

/// ONNX GridSample ([`GridSampleParams`]): each output element is the weighted sum of the input
/// taps around its grid point (a tensor product of 1, 2 or 4 taps per spatial axis), computed in
/// f64 as the CPU reference does.
///
/// # Safety
/// `x` holds `n * c * prod(size)` f32, `grid` `n * points * rank` f32 and `y` `n * c * points` f32
/// (not overlapping `x`); `1 <= rank <= GRID_MAX_RANK`; every size is non-zero.
///
/// # Parameters
/// `p`; input `x`; `grid`; output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `n * c * points` outputs in
/// (batch, channel, point) order (neighbouring threads take neighbouring points of one channel).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn grid_sample_f32(
    p: GridSampleParams,
    x: *const f32,
    grid: *const f32,
    y: *mut f32,
) {
    let r = p.rank as usize;
    if r == 0 || r > GRID_MAX_RANK {
        return;
    }
    let image: u64 = p.size[..r].iter().product();
    let total = p.n * p.c * p.points;
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < total {
        let point = i % p.points;
        let b = i / (p.points * p.c);
        let plane = (i / p.points) * image; // (b * c + ch) * image
        let mut axes = [([(-1i64, 0.0f64); 4], 1usize); GRID_MAX_RANK];
        for (d, axis) in axes.iter_mut().enumerate().take(r) {
            // Axis d (outermost first) reads grid coordinate r - 1 - d (innermost listed first).
            // SAFETY: inside the grid's `rank` coordinates of this point.
            let norm =
                unsafe { *grid.add(((b * p.points + point) * r as u64) as usize + (r - 1 - d)) } as f64;
            *axis = grid_taps(&p, p.size[d], norm);
        }
        // Every combination of taps, the innermost axis fastest (the reference's order).
        let mut acc = 0.0f64;
        let combos = axes[..r].iter().map(|a| a.1).product::<usize>();
        for k in 0..combos {
            let mut pick = [0usize; GRID_MAX_RANK];
            let mut rest = k;
            for d in (0..r).rev() {
                pick[d] = rest % axes[d].1;
                rest /= axes[d].1;
            }
            let (mut weight, mut offset, mut inside) = (1.0f64, 0u64, true);
            for d in 0..r {
                let (at, w) = axes[d].0[pick[d]];
                weight *= w;
                inside &= at >= 0;
                offset = offset * p.size[d] + at.max(0) as u64;
            }
            if inside {
                // SAFETY: every tap index is inside its axis: the offset is inside the plane.
                acc += weight * unsafe { *x.add((plane + offset) as usize) } as f64;
            }
        }
        // SAFETY: i < total, the output's length.
        unsafe { *y.add(i as usize) = acc as f32 };
        i += stride;
    }
}

/// ONNX AffineGrid ([`AffineGridParams`]): each grid entry is a row of theta times the point's
/// normalized coordinates (innermost first) extended by 1, in f64 as the CPU reference.
///
/// # Safety
/// `theta` holds `n * rank * (rank + 1)` f32 and `y` `n * points * rank` f32; `rank` is 2 or 3 and
/// every spatial dim is non-zero.
///
/// # Parameters
/// `p`; input `theta`; output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `n * points * rank` outputs in
/// (batch, point, row) order.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn affine_grid_f32(p: AffineGridParams, theta: *const f32, y: *mut f32) {
    let r = p.rank as usize;
    if !(2..=GRID_MAX_RANK).contains(&r) {
        return;
    }
    let cols = r + 1;
    let total = p.n * p.points * r as u64;
    let (mut i, stride) = (global_thread_x(), grid_threads_x());
    while i < total {
        let row = (i % r as u64) as usize;
        let point = (i / r as u64) % p.points;
        let b = i / (r as u64 * p.points);
        // The point's coordinates, innermost axis first, then 1.
        let mut v = [1.0f64; GRID_MAX_RANK + 1];
        let mut rest = point;
        for d in (0..r).rev() {
            let len = p.spatial[d];
            let at = rest % len;
            rest /= len;
            v[r - 1 - d] = match (p.align_corners != 0, len) {
                (true, 1) => -1.0,
                (true, _) => -1.0 + 2.0 * at as f64 / (len - 1) as f64,
                (false, _) => -1.0 + (2 * at + 1) as f64 / len as f64,
            };
        }
        let mut acc = 0.0f64;
        for (c, &vc) in v.iter().enumerate().take(cols) {
            // SAFETY: b < n, row < r, c < cols: inside theta.
            acc += unsafe { *theta.add(((b as usize * r + row) * cols) + c) } as f64 * vc;
        }
        // SAFETY: i < total: inside y.
        unsafe { *y.add(i as usize) = acc as f32 };
        i += stride;
    }
}

/// Frequency `k` of the length-`n` transform of the signal `s`: `Σ_j s[j] e^{sign 2πi jk/n}` in
/// f64, `jk` reduced mod `n` before the angle is formed (as the CPU reference).
#[inline(always)]
fn dft_term(n: u64, k: u64, sign: f64, s: impl Fn(u64) -> (f64, f64)) -> (f64, f64) {
    let (mut re, mut im) = (0.0f64, 0.0f64);
    for j in 0..n {
        let (a, b) = s(j);
        let angle = sign * core::f64::consts::TAU * ((j * k) % n) as f64 / n as f64;
        let (c, sn) = (libm::cos(angle), libm::sin(angle));
        re = re + a * c - b * sn;
        im = im + a * sn + b * c;
    }
    (re, im)
}

/// ONNX DFT ([`DftParams`]) by direct summation in f64: every output element sums the `n` terms of
/// its frequency (O(n) per element, O(n²) per signal), with `jk` reduced mod `n` before the angle
/// is formed, as the CPU reference does.
///
/// # Safety
/// `x` holds `outer * m * inner * comps` f32 and `y` `outer * out_len * inner * out_comps` f32;
/// `n >= 1`, `comps` and `out_comps` are 1 or 2.
///
/// # Parameters
/// `p`; input `x`; output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `outer * out_len * inner`
/// outputs, each thread computing both components of one.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn dft_f32(p: DftParams, x: *const f32, y: *mut f32) {
    if p.n == 0 || !(1..=2).contains(&p.comps) || !(1..=2).contains(&p.out_comps) {
        return;
    }
    let (sign, scale) = if p.inverse != 0 { (1.0, 1.0 / p.n as f64) } else { (-1.0, 1.0) };
    let total = p.outer * p.out_len * p.inner;
    let (mut t, stride) = (global_thread_x(), grid_threads_x());
    while t < total {
        let i = t % p.inner;
        let k = (t / p.inner) % p.out_len;
        let o = t / (p.inner * p.out_len);
        // Element j of the input signal (zero past m), as (re, im).
        let read = |j: u64| -> (f64, f64) {
            if j >= p.m {
                return (0.0, 0.0);
            }
            let at = (((o * p.m + j) * p.inner + i) * p.comps as u64) as usize;
            // SAFETY: o < outer, j < m, i < inner: inside x.
            unsafe { (*x.add(at) as f64, if p.comps == 2 { *x.add(at + 1) as f64 } else { 0.0 }) }
        };
        let half = p.n / 2;
        let (re, im) = dft_term(p.n, k, sign, |j| {
            if p.half_inverse == 0 {
                read(j)
            } else if j == 0 || (j == half && p.n % 2 == 0) {
                (read(j).0, 0.0)
            } else if j <= half {
                read(j)
            } else {
                let (a, b) = read(p.n - j);
                (a, -b)
            }
        });
        let at = (((o * p.out_len + k) * p.inner + i) * p.out_comps as u64) as usize;
        // SAFETY: inside y (t < total).
        unsafe {
            *y.add(at) = (re * scale) as f32;
            if p.out_comps == 2 {
                *y.add(at + 1) = (im * scale) as f32;
            }
        }
        t += stride;
    }
}

/// ONNX STFT ([`StftParams`]): each output bin is the forward DFT term of its windowed frame,
/// summed directly in f64 as the CPU reference does.
///
/// # Safety
/// `x` holds `batch * len * comps` f32, `window` (when `windowed`) `frame` f32, `y`
/// `batch * frames * bins * 2` f32; every frame lies inside the signal; `frame >= 1`.
///
/// # Parameters
/// `p`; the signal `x`; the `window` (or null); output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `batch * frames * bins` outputs.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn stft_f32(p: StftParams, x: *const f32, window: *const f32, y: *mut f32) {
    if p.frame == 0 || !(1..=2).contains(&p.comps) {
        return;
    }
    let total = p.batch * p.frames * p.bins;
    let (mut t, stride) = (global_thread_x(), grid_threads_x());
    while t < total {
        let k = t % p.bins;
        let f = (t / p.bins) % p.frames;
        let b = t / (p.bins * p.frames);
        let (re, im) = dft_term(p.frame, k, -1.0, |j| {
            let at = ((b * p.len + f * p.step + j) * p.comps as u64) as usize;
            // SAFETY: the frame lies inside the signal, j < frame (the contract).
            unsafe {
                let w = if p.windowed != 0 { *window.add(j as usize) as f64 } else { 1.0 };
                let im = if p.comps == 2 { *x.add(at + 1) as f64 * w } else { 0.0 };
                (*x.add(at) as f64 * w, im)
            }
        });
        // SAFETY: t < total: inside y.
        unsafe {
            *y.add(2 * t as usize) = re as f32;
            *y.add(2 * t as usize + 1) = im as f32;
        }
        t += stride;
    }
}

/// ONNX Col2Im ([`Col2ImParams`]), as a gather: each output pixel sums, over the block offsets in
/// row-major order, the one input value (if any) whose sliding block puts that offset on it.
///
/// # Safety
/// `x` holds `n * c * kprod * l` f32 and `y` `n * c * prod(image)` f32; `1 <= rank <=
/// GRID_MAX_RANK`; strides and dilations are >= 1; `grid` is the block count the shapes imply.
///
/// # Parameters
/// `p`; input `x`; output `y`.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the output pixels.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn col2im_f32(p: Col2ImParams, x: *const f32, y: *mut f32) {
    let r = p.rank as usize;
    if r == 0 || r > GRID_MAX_RANK || p.stride[..r].contains(&0) {
        return;
    }
    let img: u64 = p.image[..r].iter().product();
    let total = p.n * p.c * img;
    let (mut t, step) = (global_thread_x(), grid_threads_x());
    while t < total {
        let plane = t / img; // n * c + channel
        let (ni, ci) = (plane / p.c, plane % p.c);
        let mut pos = [0u64; GRID_MAX_RANK];
        let mut rest = t % img;
        for d in (0..r).rev() {
            pos[d] = rest % p.image[d];
            rest /= p.image[d];
        }
        let mut acc = 0.0f64;
        for k in 0..p.kprod {
            // This offset's block, when one puts it on `pos`.
            let (mut rest, mut b, mut hit) = (k, 0u64, true);
            let mut kd = [0u64; GRID_MAX_RANK];
            for d in (0..r).rev() {
                kd[d] = rest % p.block[d];
                rest /= p.block[d];
            }
            for d in 0..r {
                let q = (pos[d] + p.pad_begin[d]) as i64 - (kd[d] * p.dilation[d]) as i64;
                let bd = q / p.stride[d] as i64;
                hit &= q >= 0 && q % p.stride[d] as i64 == 0 && (bd as u64) < p.grid[d];
                b = b * p.grid[d] + if hit { bd as u64 } else { 0 };
            }
            if hit {
                // SAFETY: k < kprod and b < l: inside x (the contract).
                acc += unsafe { *x.add((((ni * p.c + ci) * p.kprod + k) * p.l + b) as usize) } as f64;
            }
        }
        // SAFETY: t < total: inside y.
        unsafe { *y.add(t as usize) = acc as f32 };
        t += step;
    }
}
