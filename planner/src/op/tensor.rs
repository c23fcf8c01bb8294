//! Attribute structs of the data-movement operators (indexing, slicing, reshaping, padding, resizing).
//!
//! Attributes that later opsets moved to inputs (`Slice` starts/ends/axes, `Split` sizes,
//! `Squeeze`/`Unsqueeze` axes, `Pad` pads/value, `TopK` k) are `Option`s holding the legacy attribute;
//! `None` means "from the input".

use serde::{Deserialize, Serialize};

use crate::constant::ConstTensor;

/// `Gather` along `axis` (default 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gather {
    /// Axis of `data` that the indices select along.
    pub axis: i64,
}

/// `GatherElements` along `axis` (default 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatherElements {
    /// Axis of `data` that the indices select along.
    pub axis: i64,
}

/// `GatherND`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GatherNd {
    /// Number of leading batch dims shared by data and indices (default 0).
    pub batch_dims: usize,
}

/// How scatter operators combine updates with existing data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScatterReduction {
    /// Overwrite (default).
    #[default]
    None,
    /// Add.
    Add,
    /// Multiply.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

/// Deprecated `Scatter` (same as `ScatterElements` without reduction).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scatter {
    /// Axis (default 0).
    pub axis: i64,
}

/// `ScatterElements`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScatterElements {
    /// Axis (default 0).
    pub axis: i64,
    /// Reduction (default none).
    pub reduction: ScatterReduction,
}

/// `ScatterND`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScatterNd {
    /// Reduction (default none).
    pub reduction: ScatterReduction,
}

/// `Slice`. Since opset 10, starts/ends/axes/steps are inputs 1..=4; the fields hold opset-1
/// attributes and must be `None` when the inputs are used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// Legacy `starts`.
    pub starts: Option<Vec<i64>>,
    /// Legacy `ends`.
    pub ends: Option<Vec<i64>>,
    /// Legacy `axes`.
    pub axes: Option<Vec<i64>>,
}

/// `Split` into several outputs along `axis`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Axis (default 0).
    pub axis: i64,
    /// Legacy `split` sizes attribute (opset < 13); otherwise input 1.
    pub split: Option<Vec<i64>>,
    /// Number of outputs for an even split (opset 18); otherwise the node's output count.
    pub num_outputs: Option<usize>,
}

/// `Concat` along `axis` (required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Concat {
    /// Axis; negative counts from the back.
    pub axis: i64,
}

/// Padding mode of `Pad`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PadMode {
    /// Fill with a constant (default).
    #[default]
    Constant,
    /// Mirror without repeating the edge.
    Reflect,
    /// Repeat the edge.
    Edge,
    /// Wrap around.
    Wrap,
}

/// `Pad`. Inputs data, pads, constant_value?, axes?; `pads`/`value` hold opset-2 attributes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pad {
    /// Padding mode.
    pub mode: PadMode,
    /// Legacy `pads` attribute: begins then ends, may be negative.
    pub pads: Option<Vec<i64>>,
    /// Legacy `value` attribute.
    pub value: Option<f32>,
}

/// `Resize` coordinate transformation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum CoordinateTransformationMode {
    #[default]
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// `Resize` interpolation mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum ResizeMode {
    #[default]
    Nearest,
    Linear,
    Cubic,
}

/// `Resize` rounding for nearest mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum NearestMode {
    #[default]
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// `Resize` policy when `sizes` is given with `axes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum KeepAspectRatioPolicy {
    #[default]
    Stretch,
    NotLarger,
    NotSmaller,
}

/// `Resize`. Inputs X, roi?, scales?, sizes?.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resize {
    /// Antialiasing filter when downscaling (default false).
    pub antialias: bool,
    /// Axes that `scales`/`sizes` refer to (default: all).
    pub axes: Option<Vec<i64>>,
    /// Coordinate mapping.
    pub coordinate_transformation_mode: CoordinateTransformationMode,
    /// Cubic coefficient (default -0.75).
    pub cubic_coeff_a: f32,
    /// Zero weights outside the input (default false).
    pub exclude_outside: bool,
    /// Value outside the input for tf_crop_and_resize (default 0).
    pub extrapolation_value: f32,
    /// Aspect-ratio policy.
    pub keep_aspect_ratio_policy: KeepAspectRatioPolicy,
    /// Interpolation.
    pub mode: ResizeMode,
    /// Rounding for nearest.
    pub nearest_mode: NearestMode,
}

impl Default for Resize {
    fn default() -> Self {
        Resize {
            antialias: false,
            axes: None,
            coordinate_transformation_mode: CoordinateTransformationMode::HalfPixel,
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            extrapolation_value: 0.0,
            keep_aspect_ratio_policy: KeepAspectRatioPolicy::Stretch,
            mode: ResizeMode::Nearest,
            nearest_mode: NearestMode::RoundPreferFloor,
        }
    }
}

impl Resize {
    /// Per-axis scale and output extent of a Resize of `shape` (opset 19): `axes` are resolved
    /// (non-negative, in range) and exactly one of `scales` / `sizes` is given. Output extents are
    /// `floor(in · scale)` for scales, the sizes for `stretch`, and `floor(s · in + 0.5)` with `s`
    /// the min/max ratio under the other `keep_aspect_ratio_policy` values. Axes not resized keep
    /// scale 1. The CPU reference and the GPU lowering both use this.
    pub fn geometry(
        &self,
        shape: &[usize],
        axes: &[usize],
        scales: Option<&[f64]>,
        sizes: Option<&[i64]>,
    ) -> Result<(Vec<f64>, Vec<usize>), String> {
        let mut scale = vec![1.0f64; shape.len()];
        let mut out = shape.to_vec();
        match (scales, sizes) {
            (Some(s), None) => {
                if s.len() != axes.len() || s.iter().any(|&v| v <= 0.0) {
                    return Err(format!("scales {s:?} must hold {} positive values", axes.len()));
                }
                for (&a, &v) in axes.iter().zip(s) {
                    scale[a] = v;
                    out[a] = (shape[a] as f64 * v).floor() as usize;
                }
            }
            (None, Some(sz)) => {
                if sz.len() != axes.len() || sz.iter().any(|&v| v < 0) || axes.iter().any(|&a| shape[a] == 0)
                {
                    return Err(format!("sizes {sz:?} must hold {} sizes of non-empty axes", axes.len()));
                }
                let ratios: Vec<f64> =
                    axes.iter().zip(sz).map(|(&a, &v)| v as f64 / shape[a] as f64).collect();
                let common = match self.keep_aspect_ratio_policy {
                    KeepAspectRatioPolicy::Stretch => None,
                    KeepAspectRatioPolicy::NotLarger => {
                        Some(ratios.iter().copied().fold(f64::INFINITY, f64::min))
                    }
                    KeepAspectRatioPolicy::NotSmaller => Some(ratios.iter().copied().fold(0.0, f64::max)),
                };
                for (i, &a) in axes.iter().enumerate() {
                    (scale[a], out[a]) = match common {
                        None => (ratios[i], sz[i] as usize),
                        Some(c) => (c, (c * shape[a] as f64 + 0.5).floor() as usize),
                    };
                }
            }
            _ => return Err("exactly one of scales and sizes must be given".into()),
        }
        Ok((scale, out))
    }
}

/// `Reshape` to the shape given by input 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reshape {
    /// A 0 in the shape means size 0 (true) instead of "copy the input dim" (false, default).
    pub allowzero: bool,
}

/// `Flatten` to 2-D at `axis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flatten {
    /// Dims before `axis` form the first output dim (default 1).
    pub axis: i64,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { axis: 1 }
    }
}

/// `Squeeze`; `axes` holds the opset < 13 attribute, otherwise input 1 (absent = all size-1 dims).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Squeeze {
    /// Legacy `axes` attribute.
    pub axes: Option<Vec<i64>>,
}

/// `Unsqueeze`; `axes` holds the opset < 13 attribute, otherwise input 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unsqueeze {
    /// Legacy `axes` attribute.
    pub axes: Option<Vec<i64>>,
}

/// `Transpose`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Transpose {
    /// Output axis i is input axis `perm[i]` (default: reversed axes).
    pub perm: Option<Vec<usize>>,
}

impl Transpose {
    /// The permutation of an input of `rank` dims: `perm`, or the axes reversed (not checked
    /// against `rank`).
    pub fn axes(&self, rank: usize) -> Vec<usize> {
        self.perm.clone().unwrap_or_else(|| (0..rank).rev().collect())
    }
}

/// `Shape`, optionally of a sub-range of dims (opset 15).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShapeOf {
    /// First dim (default 0; negative counts from the back; clamped).
    pub start: i64,
    /// One past the last dim (default: rank).
    pub end: Option<i64>,
}

/// `Constant`: the loader turns every `value*` attribute form into one tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constant {
    /// The value.
    pub value: ConstTensor,
}

/// `ConstantOfShape`: a tensor of the shape given by input 0, filled with `value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstantOfShape {
    /// One-element fill value; its dtype is the output dtype (default F32 zero).
    pub value: ConstTensor,
}

impl Default for ConstantOfShape {
    fn default() -> Self {
        ConstantOfShape { value: ConstTensor::scalar_f32(0.0) }
    }
}

/// `OneHot`: inputs indices, depth, values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneHot {
    /// Where the new one-hot axis goes (default -1).
    pub axis: i64,
}

impl Default for OneHot {
    fn default() -> Self {
        OneHot { axis: -1 }
    }
}

/// `Trilu`: keep the upper or lower triangle; input 1 (optional) is the diagonal offset k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trilu {
    /// Upper triangle (default true).
    pub upper: bool,
}

impl Default for Trilu {
    fn default() -> Self {
        Trilu { upper: true }
    }
}

/// `TopK`; k is input 1 (or the opset-1 attribute `k`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopK {
    /// Axis (default -1).
    pub axis: i64,
    /// Largest (default true) or smallest elements.
    pub largest: bool,
    /// Sorted output (default true).
    pub sorted: bool,
    /// Legacy `k` attribute.
    pub k: Option<i64>,
}

impl Default for TopK {
    fn default() -> Self {
        TopK { axis: -1, largest: true, sorted: true, k: None }
    }
}

/// Element order of `DepthToSpace`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DepthToSpaceMode {
    /// Depth-column-row (default).
    #[default]
    Dcr,
    /// Column-row-depth.
    Crd,
}

/// `DepthToSpace` (`blocksize` is required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepthToSpace {
    /// Block size.
    pub blocksize: usize,
    /// Element order.
    pub mode: DepthToSpaceMode,
}

/// `SpaceToDepth` (`blocksize` is required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpaceToDepth {
    /// Block size.
    pub blocksize: usize,
}

/// `EyeLike`: a 2-D tensor of the input's shape, ones on diagonal `k` (above the main one for
/// `k > 0`), zeros elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EyeLike {
    /// The output dtype (`None`: the input's).
    pub dtype: Option<crate::DType>,
    /// The diagonal.
    pub k: i64,
}
