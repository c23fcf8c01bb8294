//! Attribute structs of sampling, box and selection operators: `GridSample`,
//! `NonMaxSuppression`, `Shrink`, `Compress`, `ReverseSequence`, `Unique`, `LRN`.

use serde::{Deserialize, Serialize};

/// `GridSample` interpolation mode (opset 20 names; opset 16's `bilinear`/`bicubic` map here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridSampleMode {
    /// N-linear (default).
    #[default]
    Linear,
    /// Nearest (round half to even).
    Nearest,
    /// Bicubic (Keys, a = -0.75); 2-D only.
    Cubic,
}

/// `GridSample` handling of sample points outside the input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridSamplePadding {
    /// Zeros outside (default).
    #[default]
    Zeros,
    /// Clamp to the border.
    Border,
    /// Reflect at the border.
    Reflection,
}

/// `GridSample(X (N, C, D...), grid (N, D_out..., r))`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GridSample {
    /// Grid -1/1 address the centres of the corner pixels (true) or their outer edges (default).
    pub align_corners: bool,
    /// Interpolation mode.
    pub mode: GridSampleMode,
    /// Out-of-range handling.
    pub padding_mode: GridSamplePadding,
}

/// `NonMaxSuppression(boxes, scores, max_output_boxes_per_class?, iou_threshold?,
/// score_threshold?)` -> selected `(num_selected, 3)` I64 (count data-dependent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NonMaxSuppression {
    /// Boxes are `[x_center, y_center, width, height]` (true) or two corners (default).
    pub center_point_box: bool,
}

/// `Shrink`: `x < -lambd ? x + bias : x > lambd ? x - bias : 0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shrink {
    /// Offset subtracted (default 0).
    pub bias: f32,
    /// Threshold (default 0.5).
    pub lambd: f32,
}

impl Default for Shrink {
    fn default() -> Self {
        Shrink { bias: 0.0, lambd: 0.5 }
    }
}

/// `Compress(input, condition)`: slices where the bool condition holds, along `axis`, or of
/// the flattened input when `axis` is `None` (output length data-dependent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Compress {
    /// Axis to select along (default: flatten).
    pub axis: Option<i64>,
}

/// `ReverseSequence(input, sequence_lens)`: reverses the first `sequence_lens[b]` entries along
/// `time_axis` of every batch entry `b` along `batch_axis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReverseSequence {
    /// Batch axis, 0 or 1 (default 1).
    pub batch_axis: usize,
    /// Time axis, 0 or 1 (default 0).
    pub time_axis: usize,
}

impl Default for ReverseSequence {
    fn default() -> Self {
        ReverseSequence { batch_axis: 1, time_axis: 0 }
    }
}

/// `Unique(X)` -> Y, indices?, inverse_indices?, counts? (lengths data-dependent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unique {
    /// Slices along this axis are compared (default: the flattened input).
    pub axis: Option<i64>,
    /// Sort the unique values ascending (default true) or keep first-occurrence order.
    pub sorted: bool,
}

impl Default for Unique {
    fn default() -> Self {
        Unique { axis: None, sorted: true }
    }
}

/// `LRN`: `x / (bias + alpha / size * Σ x²)^beta` over `size` neighbouring channels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lrn {
    /// Scale (default 1e-4).
    pub alpha: f32,
    /// Exponent (default 0.75).
    pub beta: f32,
    /// Offset (default 1).
    pub bias: f32,
    /// Number of channels summed (required).
    pub size: usize,
}

impl Default for Lrn {
    fn default() -> Self {
        Lrn { alpha: 1e-4, beta: 0.75, bias: 1.0, size: 1 }
    }
}

/// `LpNormalization`: `x / ||x||_p` along `axis` (0 where the norm is 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LpNormalization {
    /// Axis the norm runs along (default -1).
    pub axis: i64,
    /// 1 or 2 (default 2).
    pub p: u32,
}

impl Default for LpNormalization {
    fn default() -> Self {
        LpNormalization { axis: -1, p: 2 }
    }
}

/// `CenterCropPad(input, shape)`: each of `axes` (default all) is centre-cropped or zero-padded
/// to the length `shape` gives (the extra element of an odd difference goes to the end).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CenterCropPad {
    /// Axes `shape` refers to (default: all, in order).
    pub axes: Option<Vec<i64>>,
}

/// `Col2Im(input (N, C·∏block, L), image_shape, block_shape)` -> `(N, C, image...)`: sums the
/// sliding blocks back into the image (the inverse of im2col).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Col2Im {
    /// Per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

/// `AffineGrid(theta (N, r, r+1), size)`: the sampling grid `(N, D.., r)` of an affine map over
/// the normalized coordinates of an image of `size` `(N, C, D..)` (r = 2 or 3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AffineGrid {
    /// -1/1 address the centres of the corner pixels (true) or their outer edges (default).
    pub align_corners: bool,
}

/// `TensorScatter(past_cache, update, write_indices?)` (opset 24): writes `update` into a copy of
/// the cache along `axis`, at the per-batch offsets `write_indices` (default 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorScatter {
    /// The sequence axis (default -2).
    pub axis: i64,
    /// Offsets wrap around the axis (`circular`) instead of having to fit (`linear`, default).
    pub circular: bool,
}

impl Default for TensorScatter {
    fn default() -> Self {
        TensorScatter { axis: -2, circular: false }
    }
}

/// `RoiAlign(X (N, C, H, W), rois (R, 4), batch_indices (R))` -> `(R, C, output_height,
/// output_width)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoiAlign {
    /// Shift pixel coordinates by -0.5 (`half_pixel`, opset 16's default) or not
    /// (`output_half_pixel`, opset 10's behaviour).
    pub half_pixel: bool,
    /// Max (true) or average (default) of the samples in a bin.
    pub max: bool,
    /// Output rows (default 1).
    pub output_height: usize,
    /// Output columns (default 1).
    pub output_width: usize,
    /// Samples per bin and axis; 0 (default) means `ceil(roi size / bins)`.
    pub sampling_ratio: usize,
    /// Scale from roi coordinates to X's pixels (default 1).
    pub spatial_scale: f32,
}

impl Default for RoiAlign {
    fn default() -> Self {
        RoiAlign {
            half_pixel: true,
            max: false,
            output_height: 1,
            output_width: 1,
            sampling_ratio: 0,
            spatial_scale: 1.0,
        }
    }
}

/// `MaxUnpool(X, I, output_shape?)`: scatters X to the flat positions I of the unpooled shape
/// `(in − 1) · stride − pads + kernel` per spatial axis; zeros elsewhere (then zero-padded at
/// the end of each axis up to `output_shape` when given).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MaxUnpool {
    /// Kernel size per spatial axis (required).
    pub kernel_shape: Vec<usize>,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

/// `DeformConv(X, W, offset, B?, mask?)` (opset 19): convolution whose taps are displaced by
/// learned offsets and scaled by an optional mask; the output's spatial shape is the offset's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeformConv {
    /// Per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Channel groups (default 1).
    pub group: usize,
    /// Kernel size per spatial axis (empty = from W).
    pub kernel_shape: Vec<usize>,
    /// Groups of input channels sharing an offset field (default 1).
    pub offset_group: usize,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

impl Default for DeformConv {
    fn default() -> Self {
        DeformConv {
            dilations: Vec::new(),
            group: 1,
            kernel_shape: Vec::new(),
            offset_group: 1,
            pads: Vec::new(),
            strides: Vec::new(),
        }
    }
}
