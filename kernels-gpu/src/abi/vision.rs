//! Detection operators: RoiAlign and DeformConv (f32, NCHW-style contiguous layouts).

use super::Params;

/// Parameters of `vision::roi_align_f32` (ONNX RoiAlign, opsets 10/16): X `(n, c, h, w)`, rois
/// `(rois, 4)` as `(x1, y1, x2, y2)`, batch indices `(rois)` (`index_bytes` wide), Y
/// `(rois, c, out_h, out_w)`; all row-major and contiguous.
///
/// Each roi is scaled by `spatial_scale` (and shifted by -0.5 when `half_pixel`; otherwise its
/// sides are at least 1) and split into `out_h x out_w` bins, each sampled on a grid of
/// `sampling_ratio` points per axis (`ceil(bin size)` when 0). Roi geometry and sample coordinates
/// are computed in f64, exactly as the CPU reference, so that the sample counts and the
/// outside-the-image decisions agree; the interpolated values are accumulated in f32.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoiAlignParams {
    /// Batch of X.
    pub n: u64,
    /// Channels.
    pub c: u64,
    /// Rows of X (non-zero).
    pub h: u64,
    /// Columns of X (non-zero).
    pub w: u64,
    /// Number of rois.
    pub rois: u64,
    /// Output rows per roi.
    pub out_h: u64,
    /// Output columns per roi.
    pub out_w: u64,
    /// Samples per bin and axis; 0: `ceil(roi size / bins)` per roi.
    pub sampling_ratio: u64,
    /// Scale from roi coordinates to X's pixels.
    pub spatial_scale: f32,
    /// Non-zero: `half_pixel` (shift by -0.5); zero: `output_half_pixel` (sides at least 1).
    pub half_pixel: u32,
    /// Non-zero: the max of the samples' weighted taps; zero: the average of the samples.
    pub max: u32,
    /// Bytes per batch index: 4 (i32) or 8 (i64).
    pub index_bytes: u32,
}

// SAFETY: #[repr(C)], eight u64, an f32 and three u32: no padding.
unsafe impl Params for RoiAlignParams {}

/// Largest spatial rank `vision::deform_conv_f32` convolves.
pub const DEFORM_MAX_RANK: usize = 3;

/// Parameters of `vision::deform_conv_f32` (ONNX DeformConv, opset 19): X `(n, c, image...)`,
/// W `(m, c / group, kernel...)`, offset `(n, offset_group * kprod * rank, out...)`, optional B
/// `(m)` and mask `(n, offset_group * kprod, out...)`, Y `(n, m, out...)`; all row-major and
/// contiguous, spatial dims outermost first (`rank` of them, unused slots 1 or 0).
///
/// Output point `o`, kernel tap `k` and input channel `ci` (offset group `ci / (c / offset_group)`,
/// channel group `ci / (c / group)`) read X at `o · stride − pad_begin + k · dilation +
/// offset[n, g, k, :, o]` by N-linear interpolation (corners outside X read 0), scaled by the mask
/// (1 without), times `W[mo, ci mod (c / group), k]`; output channel `mo` sums its group's
/// channels and taps, plus `B[mo]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeformConvParams {
    /// Batch.
    pub n: u64,
    /// Input channels.
    pub c: u64,
    /// Output channels.
    pub m: u64,
    /// Output points per channel (the product of `out`).
    pub points: u64,
    /// Kernel taps (the product of `kernel`).
    pub kprod: u64,
    /// Spatial dims of X.
    pub image: [u64; DEFORM_MAX_RANK],
    /// Kernel dims.
    pub kernel: [u64; DEFORM_MAX_RANK],
    /// Output spatial dims (the offset's).
    pub out: [u64; DEFORM_MAX_RANK],
    /// Strides.
    pub stride: [u64; DEFORM_MAX_RANK],
    /// Dilations.
    pub dilation: [u64; DEFORM_MAX_RANK],
    /// Padding at the start of each axis.
    pub pad_begin: [u64; DEFORM_MAX_RANK],
    /// Channel groups (divides `c` and `m`).
    pub group: u32,
    /// Offset groups (divides `c`).
    pub offset_group: u32,
    /// Spatial rank (1..=DEFORM_MAX_RANK).
    pub rank: u32,
    /// Non-zero: the launch passes B.
    pub has_bias: u32,
    /// Non-zero: the launch passes the mask.
    pub has_mask: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

// SAFETY: #[repr(C)], five u64, six u64 arrays, six u32 (`_pad` explicit): no padding.
unsafe impl Params for DeformConvParams {}
