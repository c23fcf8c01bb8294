//! ONNX Resize: nearest (any element size), linear and cubic (f32); ONNX GridSample and
//! AffineGrid (f32).

use super::{MAX_RANK, Params};

/// Most axes one Resize launch interpolates (the others are copied index for index).
pub const RESIZE_MAX_AXES: usize = 3;

/// `ResizeParams::ctm`: ONNX `coordinate_transformation_mode`.
pub mod resize_ctm {
    /// `(x + 0.5) / scale - 0.5`.
    pub const HALF_PIXEL: u32 = 0;
    /// Half pixel, centred on the unrounded output length.
    pub const HALF_PIXEL_SYMMETRIC: u32 = 1;
    /// Half pixel, 0 for an output length of 1.
    pub const PYTORCH_HALF_PIXEL: u32 = 2;
    /// `x * (in - 1) / (scale * in - 1)`.
    pub const ALIGN_CORNERS: u32 = 3;
    /// `x / scale`.
    pub const ASYMMETRIC: u32 = 4;
    /// Crop to the roi, `extrapolation` outside the input.
    pub const TF_CROP_AND_RESIZE: u32 = 5;
}

/// `ResizeParams::nearest_mode`: ONNX `nearest_mode`.
pub mod resize_nearest {
    /// Round, halves down.
    pub const ROUND_PREFER_FLOOR: u32 = 0;
    /// Round, halves up.
    pub const ROUND_PREFER_CEIL: u32 = 1;
    /// Floor.
    pub const FLOOR: u32 = 2;
    /// Ceil.
    pub const CEIL: u32 = 3;
}

/// One interpolated axis of [`ResizeParams`]. An unused slot is `ResizeAxis::UNUSED` (lengths 1,
/// stride 0): it maps every output to input 0 with weight 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeAxis {
    /// Output elements per step of this axis (the product of the later output extents).
    pub out_stride: u64,
    /// Output extent.
    pub out_len: u64,
    /// Input extent (at least 1).
    pub in_len: u64,
    /// Input element stride.
    pub in_stride: u64,
    /// Scale (output / input) as the ONNX reference computes it, in f64.
    pub scale: f64,
    /// Linear / cubic filter scale: `min(scale, 1)` under antialias, else 1 (the filter spans
    /// `support / filter_scale` input elements each side).
    pub filter_scale: f64,
    /// `tf_crop_and_resize` roi start (normalized), 0 otherwise.
    pub roi_start: f64,
    /// `tf_crop_and_resize` roi end (normalized), 1 otherwise.
    pub roi_end: f64,
}

impl ResizeAxis {
    /// A slot that interpolates nothing.
    pub const UNUSED: ResizeAxis = ResizeAxis {
        out_stride: 1,
        out_len: 1,
        in_len: 1,
        in_stride: 0,
        scale: 1.0,
        filter_scale: 1.0,
        roi_start: 0.0,
        roi_end: 1.0,
    };
}

impl Default for ResizeAxis {
    fn default() -> Self {
        Self::UNUSED
    }
}

/// Parameters of the `resize::resize_*` kernels (ONNX Resize, opset 19 semantics). Output element `i` (row-major over `out_shape[MAX_RANK - rank..]`) reads the
/// input at `base + sum_k taps_k`, where `base = sum_d idx[d] * copy_strides[d]` covers the axes
/// that are copied unchanged (`copy_strides` is 0 on the interpolated axes) and each of the
/// `RESIZE_MAX_AXES` slots of `axes` maps its output coordinate to input taps exactly as the CPU
/// reference does (coordinates and weights in f64). With `tf_crop_and_resize`, an element whose
/// coordinate leaves the input on any interpolated axis is `value_bits` (the element's bits).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ResizeParams {
    /// Output elements.
    pub elems: u64,
    /// Number of used dimensions of `out_shape` / `copy_strides`.
    pub rank: u32,
    /// One of [`resize_ctm`].
    pub ctm: u32,
    /// One of [`resize_nearest`] (nearest kernels only).
    pub nearest_mode: u32,
    /// Cubic: zero the weights of taps outside the input (then renormalize), when non-zero.
    pub exclude_outside: u32,
    /// Cubic coefficient `a` (the f32 attribute widened).
    pub cubic_coeff_a: f64,
    /// Extrapolation value, as the low bytes of this word (little-endian element bits).
    pub value_bits: u64,
    /// Output shape, right-aligned.
    pub out_shape: [u64; MAX_RANK],
    /// Input element stride of each copied axis, 0 on interpolated axes, right-aligned.
    pub copy_strides: [u64; MAX_RANK],
    /// The interpolated axes (unused slots are [`ResizeAxis::UNUSED`]).
    pub axes: [ResizeAxis; RESIZE_MAX_AXES],
}

// SAFETY: #[repr(C)], eight 8-byte fields.
unsafe impl Params for ResizeAxis {}
// SAFETY: #[repr(C)], u64, four u32, f64, u64, two u64 arrays, an array of 64-byte ResizeAxis.
unsafe impl Params for ResizeParams {}

/// `GridSampleParams::mode`.
pub mod grid_mode {
    /// Nearest pixel (half to even).
    pub const NEAREST: u32 = 0;
    /// N-linear.
    pub const LINEAR: u32 = 1;
    /// Cubic (Keys, a = -0.75).
    pub const CUBIC: u32 = 2;
}

/// `GridSampleParams::padding`.
pub mod grid_padding {
    /// Taps outside the input read 0.
    pub const ZEROS: u32 = 0;
    /// Points and taps are clamped to the border.
    pub const BORDER: u32 = 1;
    /// Points and taps are reflected at the border.
    pub const REFLECTION: u32 = 2;
}

/// Largest spatial rank `sampling::grid_sample_f32` samples.
pub const GRID_MAX_RANK: usize = 3;

/// Parameters of `sampling::grid_sample_f32` (ONNX GridSample): X `(n, c, size[0..rank])` sampled at
/// the `points` points per batch item of grid `(n, points, rank)` (normalized coordinates, the
/// innermost dimension first) into Y `(n, c, points)`; all row-major and contiguous.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GridSampleParams {
    /// Batch.
    pub n: u64,
    /// Channels.
    pub c: u64,
    /// Sample points per batch item.
    pub points: u64,
    /// Spatial dims of X, outermost first (`rank` of them).
    pub size: [u64; GRID_MAX_RANK],
    /// Spatial rank (1..=GRID_MAX_RANK).
    pub rank: u32,
    /// One of [`grid_mode`].
    pub mode: u32,
    /// One of [`grid_padding`].
    pub padding: u32,
    /// Non-zero: -1 and 1 address the centres of the corner pixels.
    pub align_corners: u32,
}

// SAFETY: #[repr(C)], six u64, four u32: no padding.
unsafe impl Params for GridSampleParams {}

/// Parameters of `sampling::affine_grid_f32` (ONNX AffineGrid): theta `(n, rank, rank + 1)`; the
/// grid `(n, spatial[0..rank], rank)`: point `(.., i_d, ..)` has normalized coordinates
/// `-1 + (2 i + 1) / L` per axis of length `L` (`-1 + 2 i / (L - 1)` with `align_corners`, -1 when
/// `L = 1`), listed innermost axis first and extended by 1, and its entry `row` is theta's row
/// `row` times that vector (in f64).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AffineGridParams {
    /// Batch.
    pub n: u64,
    /// Points per batch item (the product of the spatial dims).
    pub points: u64,
    /// Spatial dims, outermost first (`rank` of them).
    pub spatial: [u64; GRID_MAX_RANK],
    /// Spatial rank (2 or 3).
    pub rank: u32,
    /// Non-zero: -1 and 1 address the centres of the corner pixels.
    pub align_corners: u32,
}

// SAFETY: #[repr(C)], five u64, two u32: no padding.
unsafe impl Params for AffineGridParams {}

/// Parameters of `sampling::dft_f32` (ONNX DFT, direct summation in f64): the input is
/// `[outer, m, inner, comps]` (the signal along `m`, `comps` 1 real or 2 complex components), read
/// zero-padded or truncated to `n`; the output `[outer, out_len, inner, out_comps]` holds
/// `X[k] = scale · Σ_j s[j] e^{sign 2πi jk/n}` for `k < out_len`. With `half_inverse`, `s` is the
/// Hermitian spectrum rebuilt from the input's frequencies `0..=n/2` (the imaginary parts of the
/// DC and Nyquist terms ignored) and only the real part is written (`out_comps` 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DftParams {
    /// Elements before the signal axis.
    pub outer: u64,
    /// Input extent along the signal axis.
    pub m: u64,
    /// Elements between the signal axis and the components.
    pub inner: u64,
    /// Transform length.
    pub n: u64,
    /// Output frequencies (or samples).
    pub out_len: u64,
    /// Input components (1 or 2).
    pub comps: u32,
    /// Output components (1 or 2).
    pub out_comps: u32,
    /// Non-zero: the inverse transform (`sign` +1, `scale` 1/n); else forward (-1, 1).
    pub inverse: u32,
    /// Non-zero: the one-sided inverse (real output from a half spectrum).
    pub half_inverse: u32,
}

// SAFETY: #[repr(C)], five u64, four u32: no padding.
unsafe impl Params for DftParams {}

/// Parameters of `sampling::stft_f32` (ONNX STFT): signal `(batch, len, comps)`; frame `f` is
/// `signal[f * step .. f * step + frame]` times the window (ones without one), and the output
/// `(batch, frames, bins, 2)` holds its forward DFT of length `frame` (the first `bins`
/// frequencies), summed directly in f64.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StftParams {
    /// Batch.
    pub batch: u64,
    /// Signal length.
    pub len: u64,
    /// Frames.
    pub frames: u64,
    /// Frame length (the transform length).
    pub frame: u64,
    /// Samples between frame starts.
    pub step: u64,
    /// Frequencies kept per frame.
    pub bins: u64,
    /// Signal components (1 or 2).
    pub comps: u32,
    /// Non-zero: a window of `frame` f32 multiplies each frame.
    pub windowed: u32,
}

// SAFETY: #[repr(C)], six u64, two u32: no padding.
unsafe impl Params for StftParams {}

/// Parameters of `sampling::col2im_f32` (ONNX Col2Im): input `(n, c * kprod, l)` holds, for each of
/// the `l` sliding blocks (row-major over `grid`) and each block offset `k` (row-major over
/// `block`), the value that lands on image position `b * stride + k * dilation - pad_begin` (per
/// spatial dim); the output `(n, c, image)` sums them (in f64, block offsets in order, as the CPU
/// reference).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Col2ImParams {
    /// Batch.
    pub n: u64,
    /// Channels of the image.
    pub c: u64,
    /// Sliding blocks.
    pub l: u64,
    /// Elements per block (the product of `block`).
    pub kprod: u64,
    /// Image dims (`rank` of them, outermost first).
    pub image: [u64; GRID_MAX_RANK],
    /// Block dims.
    pub block: [u64; GRID_MAX_RANK],
    /// Blocks along each dim.
    pub grid: [u64; GRID_MAX_RANK],
    /// Strides (>= 1).
    pub stride: [u64; GRID_MAX_RANK],
    /// Dilations (>= 1).
    pub dilation: [u64; GRID_MAX_RANK],
    /// Padding before each dim.
    pub pad_begin: [u64; GRID_MAX_RANK],
    /// Spatial rank (1..=GRID_MAX_RANK).
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], four u64, six u64 arrays, two u32: no padding.
unsafe impl Params for Col2ImParams {}
