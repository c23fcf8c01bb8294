//! Reference `DFT` (opsets 17/20), by direct summation in f64.
//!
//! The input's last dim holds 1 (real) or 2 (real, imaginary) components; the signal runs along
//! `axis` (of the full-rank input) and is zero-padded or truncated to `N = dft_length`.
//! - forward: `X[k] = Σ_j x[j] e^{-2πi jk/N}`, `k < N` (or `k ≤ N/2` one-sided);
//! - inverse: `x[j] = 1/N Σ_k X[k] e^{2πi jk/N}`;
//! - one-sided inverse: the input is the first `N/2 + 1` frequencies of a real signal's spectrum
//!   (the rest follow by conjugate symmetry; the imaginary parts of the DC and Nyquist terms are
//!   ignored) and the output is the real signal, last dim 1.
//!
//! Without `dft_length`, `N` is the axis length (`2 (m − 1)` for the one-sided inverse).

use std::f64::consts::TAU;

use planner::op::{Dft, Stft};

use super::operand::{axis, input, input_opt, ints, optional, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// `e^{sign 2πi jk/N}` as `(cos, sin)`, with `jk` reduced mod `N` for accuracy.
fn twiddle(j: usize, k: usize, n: usize, sign: f64) -> (f64, f64) {
    let angle = sign * TAU * ((j * k) % n) as f64 / n as f64;
    (angle.cos(), angle.sin())
}

/// The first `out_len` terms `Σ_j s[j] e^{sign 2πi jk/N}` of the length-`N` transform of `s`.
pub(super) fn transform(s: &[(f64, f64)], out_len: usize, sign: f64) -> Vec<(f64, f64)> {
    let n = s.len();
    (0..out_len)
        .map(|k| {
            s.iter().enumerate().fold((0.0, 0.0), |(re, im), (j, &(a, b))| {
                let (c, sn) = twiddle(j, k, n, sign);
                (re + a * c - b * sn, im + a * sn + b * c)
            })
        })
        .collect()
}

/// First element of an optional integer input.
fn scalar_input(
    node: &NodeCtx,
    inputs: &[Option<&HostTensor>],
    slot: usize,
    what: &str,
) -> Result<Option<i64>, HostError> {
    match optional(inputs, slot).filter(|t| !t.is_empty()) {
        Some(t) => Ok(ints(node, t, what)?.first().copied()),
        None => Ok(None),
    }
}

/// ONNX `DFT(input, dft_length?, axis?)`.
pub fn dft(
    node: &NodeCtx,
    attrs: &Dft,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "input")?;
    let r = x.shape.len();
    let comps = x.shape.last().copied().unwrap_or(0);
    if r < 2 || !(comps == 1 || comps == 2) {
        return Err(node.err(format!("input {:?} must end in 1 or 2 components", x.shape)));
    }
    let attr_axis = match attrs.axis {
        Some(a) => a,
        None => scalar_input(node, inputs, 2, "axis")?.unwrap_or(-2),
    };
    let ax = axis(node, attr_axis, r)?;
    if ax == r - 1 {
        return Err(node.err("axis must not be the component axis"));
    }
    let m = x.shape[ax];
    let half_inverse = attrs.inverse && attrs.onesided;
    let n = match scalar_input(node, inputs, 1, "dft_length")? {
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| node.err(format!("dft_length {n} must be positive")))?,
        None if half_inverse => 2 * m.saturating_sub(1),
        None => m,
    };
    if n == 0 {
        return Err(node.err("the transform length is 0"));
    }
    let out_len = if attrs.onesided && !attrs.inverse { n / 2 + 1 } else { n };
    let out_comps = if half_inverse { 1 } else { 2 };
    let outer: usize = x.shape[..ax].iter().product();
    let inner: usize = x.shape[ax + 1..r - 1].iter().product();
    let mut out_shape = x.shape.clone();
    out_shape[ax] = out_len;
    out_shape[r - 1] = out_comps;
    let mut y = crate::tensor::try_filled(outer * out_len * inner * out_comps, 0.0, "a working buffer")?;
    let mut signal = vec![(0.0, 0.0); n];
    for o in 0..outer {
        for i in 0..inner {
            // Read the signal (or spectrum), padded/truncated to N.
            signal.iter_mut().for_each(|s| *s = (0.0, 0.0));
            for (j, s) in signal.iter_mut().enumerate().take(m) {
                let at = ((o * m + j) * inner + i) * comps;
                *s = (x.data[at], if comps == 2 { x.data[at + 1] } else { 0.0 });
            }
            if half_inverse {
                // Rebuild the full Hermitian spectrum from frequencies 0..=N/2.
                let half = n / 2;
                signal[0].1 = 0.0;
                if n % 2 == 0 {
                    signal[half].1 = 0.0;
                }
                for k in (half + 1)..n {
                    let (re, im) = if n - k < m { signal[n - k] } else { (0.0, 0.0) };
                    signal[k] = (re, -im);
                }
            }
            let sign = if attrs.inverse { 1.0 } else { -1.0 };
            let scale = if attrs.inverse { 1.0 / n as f64 } else { 1.0 };
            for (k, (re, im)) in transform(&signal, out_len, sign).into_iter().enumerate() {
                let at = ((o * out_len + k) * inner + i) * out_comps;
                y[at] = re * scale;
                if out_comps == 2 {
                    y[at + 1] = im * scale;
                }
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, out_shape, y)?])
}

/// ONNX `STFT(signal (B, L, 1|2), frame_step, window?, frame_length?)` -> `(B, frames, bins, 2)`:
/// frame `f` is `signal[f · step .. f · step + frame_length]` times the window (ones without
/// one), transformed with the forward DFT of length `frame_length` (bins `≤ frame_length / 2`
/// when one-sided). The frame length defaults to the window's, then to `L`.
pub fn stft(
    node: &NodeCtx,
    attrs: &Stft,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "signal")?;
    let &[b, len, comps] = x.shape.as_slice() else {
        return Err(node.err(format!("signal {:?} must be (B, L, 1 or 2)", x.shape)));
    };
    if !(comps == 1 || comps == 2) {
        return Err(node.err(format!("signal {:?} must end in 1 or 2 components", x.shape)));
    }
    let step =
        scalar_input(node, inputs, 1, "frame_step")?.ok_or_else(|| node.err("frame_step is required"))?;
    let step = usize::try_from(step)
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| node.err(format!("frame_step {step} must be positive")))?;
    let window = input_opt(node, inputs, 2, "window")?;
    let frame = match (scalar_input(node, inputs, 3, "frame_length")?, &window) {
        (Some(f), _) => usize::try_from(f)
            .ok()
            .filter(|&f| f > 0)
            .ok_or_else(|| node.err(format!("frame_length {f} must be positive")))?,
        (None, Some(w)) => w.data.len(),
        (None, None) => len,
    };
    if let Some(w) = &window
        && w.shape != [frame]
    {
        return Err(node.err(format!("window {:?} must have the frame length {frame}", w.shape)));
    }
    if frame > len {
        return Err(node.err(format!("frame length {frame} exceeds the signal length {len}")));
    }
    let frames = 1 + (len - frame) / step;
    let bins = if attrs.onesided { frame / 2 + 1 } else { frame };
    let mut y = crate::tensor::try_with_capacity(b * frames * bins * 2, "a working buffer")?;
    for bi in 0..b {
        for f in 0..frames {
            let segment: Vec<(f64, f64)> = (0..frame)
                .map(|j| {
                    let at = (bi * len + f * step + j) * comps;
                    let wt = window.as_ref().map_or(1.0, |w| w.data[j]);
                    (x.data[at] * wt, if comps == 2 { x.data[at + 1] * wt } else { 0.0 })
                })
                .collect();
            for (re, im) in transform(&segment, bins, -1.0) {
                y.extend([re, im]);
            }
        }
    }
    Ok(vec![tensor(node, x.dtype, vec![b, frames, bins, 2], y)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{assert_close, node, tf, ti, vals};

    fn run(attrs: Dft, x: &HostTensor, len: Option<&HostTensor>) -> HostTensor {
        dft(&node("DFT"), &attrs, &[Some(x), len]).unwrap().remove(0)
    }

    #[test]
    fn forward_onesided_and_inverse() {
        // x = [1, 2, 3, 4] real along axis 0: X = [10, -2+2i, -2, -2-2i].
        let x = tf(&[4, 1], &[1.0, 2.0, 3.0, 4.0]);
        let fwd = Dft { axis: Some(0), ..Dft::default() };
        let y = run(fwd.clone(), &x, None);
        assert_eq!(y.shape(), [4, 2]);
        assert_close(&vals(&y), &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0], 1e-6);
        let rfft = Dft { onesided: true, ..fwd.clone() };
        let half = run(rfft, &x, None);
        assert_close(&vals(&half), &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0], 1e-6);
        // Inverse of the full spectrum gives back x (imaginary parts 0).
        let inv = Dft { inverse: true, ..fwd.clone() };
        assert_close(&vals(&run(inv, &y, None)), &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0], 1e-6);
        // One-sided inverse of the half spectrum gives back the real x, length 2 (3 - 1).
        let irfft = Dft { inverse: true, onesided: true, axis: Some(0) };
        let back = run(irfft, &half, None);
        assert_eq!(back.shape(), [4, 1]);
        assert_close(&vals(&back), &[1.0, 2.0, 3.0, 4.0], 1e-6);
    }

    #[test]
    fn stft_frames_and_windows() {
        // Signal [1, 2, 3, 4], frames of 2 with step 2: [1, 2] and [3, 4]; one-sided bins 0, 1.
        let x = tf(&[1, 4, 1], &[1.0, 2.0, 3.0, 4.0]);
        let (step, len) = (ti(&[], &[2]), ti(&[], &[2]));
        let y = stft(&node("STFT"), &Stft::default(), &[Some(&x), Some(&step), None, Some(&len)]).unwrap();
        assert_eq!(y[0].shape(), [1, 2, 2, 2]);
        assert_close(&vals(&y[0]), &[3.0, 0.0, -1.0, 0.0, 7.0, 0.0, -1.0, 0.0], 1e-9);
        // A window [1, 0] keeps the first sample of each frame.
        let w = tf(&[2], &[1.0, 0.0]);
        let y = stft(&node("STFT"), &Stft::default(), &[Some(&x), Some(&step), Some(&w)]).unwrap();
        assert_close(&vals(&y[0]), &[1.0, 0.0, 1.0, 0.0, 3.0, 0.0, 3.0, 0.0], 1e-9);
    }

    #[test]
    fn dft_length_pads_and_the_axis_input_selects() {
        // [1, 1] padded to 4: X = [2, 1-i, 0, 1+i].
        let x = tf(&[2, 1], &[1.0, 1.0]);
        let len = ti(&[], &[4]);
        let y = run(Dft { axis: Some(0), ..Dft::default() }, &x, Some(&len));
        assert_close(&vals(&y), &[2.0, 0.0, 1.0, -1.0, 0.0, 0.0, 1.0, 1.0], 1e-6);
        // Opset 20: the axis comes from input 2 (default -2).
        let x = tf(&[1, 2, 1], &[1.0, 3.0]);
        let y = dft(&node("DFT"), &Dft::default(), &[Some(&x)]).unwrap().remove(0);
        assert_close(&vals(&y), &[4.0, 0.0, -2.0, 0.0], 1e-6);
    }
}
