//! Attribute structs of convolution, pooling, normalization and attention operators.
//!
//! Per-spatial-axis lists (`strides`, `pads`, `dilations`, `kernel_shape`) follow ONNX: an empty list
//! means the ONNX default (all 1, all 0, or taken from the weight shape). `pads` holds all begins, then
//! all ends: `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`.

use serde::{Deserialize, Serialize};

use crate::tensor_info::DType;

/// ONNX `auto_pad`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum AutoPad {
    /// Use explicit `pads` (default).
    #[default]
    NotSet,
    /// Output size `ceil(in / stride)`; extra padding at the end.
    SameUpper,
    /// Output size `ceil(in / stride)`; extra padding at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

/// `Conv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conv {
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Dilation per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Number of groups (default 1).
    pub group: usize,
    /// Kernel size per spatial axis (empty = from W).
    pub kernel_shape: Vec<usize>,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Stride per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

impl Default for Conv {
    fn default() -> Self {
        Conv {
            auto_pad: AutoPad::NotSet,
            dilations: Vec::new(),
            group: 1,
            kernel_shape: Vec::new(),
            pads: Vec::new(),
            strides: Vec::new(),
        }
    }
}

/// Planner-internal, made by the epilogue fusion (no ONNX op_type): a Conv (f32) whose result
/// feeds an elementwise program that the convolution applies to each output element as it stores
/// it (a QDQ model's requantization, a residual add). Inputs: X, W, B (optional), then the
/// program's other inputs (each broadcastable to the output). Output: the program's result, of
/// shape `dims`. The program lives in the plan's fusion tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FusedConv {
    /// The Conv's attributes.
    pub conv: Conv,
    /// Output dims.
    pub dims: Vec<usize>,
}

/// `ConvTranspose`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvTranspose {
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Dilation per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Number of groups (default 1).
    pub group: usize,
    /// Kernel size per spatial axis (empty = from W).
    pub kernel_shape: Vec<usize>,
    /// Extra size added to one side of each output axis (empty = 0).
    pub output_padding: Vec<usize>,
    /// Requested output spatial shape (empty = computed); when set, pads are derived from it.
    pub output_shape: Vec<usize>,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Stride per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

impl Default for ConvTranspose {
    fn default() -> Self {
        ConvTranspose {
            auto_pad: AutoPad::NotSet,
            dilations: Vec::new(),
            group: 1,
            kernel_shape: Vec::new(),
            output_padding: Vec::new(),
            output_shape: Vec::new(),
            pads: Vec::new(),
            strides: Vec::new(),
        }
    }
}

/// `MaxPool` (`kernel_shape` is required). Output 1 (optional) holds flat `I64` indices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MaxPool {
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Round output sizes up instead of down (default false).
    pub ceil_mode: bool,
    /// Dilation per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Window size per spatial axis.
    pub kernel_shape: Vec<usize>,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Index order of the indices output: 0 = row major (default), 1 = column major.
    pub storage_order: i64,
    /// Stride per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

/// `AveragePool` (`kernel_shape` is required).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AveragePool {
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Round output sizes up instead of down (default false).
    pub ceil_mode: bool,
    /// Count padding elements in the divisor (default false).
    pub count_include_pad: bool,
    /// Dilation per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Window size per spatial axis.
    pub kernel_shape: Vec<usize>,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Stride per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

/// `LpPool` (`kernel_shape` is required).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LpPool {
    /// Padding mode.
    pub auto_pad: AutoPad,
    /// Round output sizes up instead of down (default false).
    pub ceil_mode: bool,
    /// Dilation per spatial axis (empty = 1).
    pub dilations: Vec<usize>,
    /// Window size per spatial axis.
    pub kernel_shape: Vec<usize>,
    /// Order of the norm (default 2).
    pub p: i64,
    /// Begins then ends (empty = 0).
    pub pads: Vec<usize>,
    /// Stride per spatial axis (empty = 1).
    pub strides: Vec<usize>,
}

impl Default for LpPool {
    fn default() -> Self {
        LpPool {
            auto_pad: AutoPad::NotSet,
            ceil_mode: false,
            dilations: Vec::new(),
            kernel_shape: Vec::new(),
            p: 2,
            pads: Vec::new(),
            strides: Vec::new(),
        }
    }
}

/// `BatchNormalization`: inputs X, scale, B, mean, var.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchNormalization {
    /// Default 1e-5.
    pub epsilon: f32,
    /// Default 0.9 (training only).
    pub momentum: f32,
    /// Training mode adds running mean/var outputs (default false).
    pub training_mode: bool,
}

impl Default for BatchNormalization {
    fn default() -> Self {
        BatchNormalization { epsilon: 1e-5, momentum: 0.9, training_mode: false }
    }
}

/// `InstanceNormalization`: inputs X, scale, B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceNormalization {
    /// Default 1e-5.
    pub epsilon: f32,
}

impl Default for InstanceNormalization {
    fn default() -> Self {
        InstanceNormalization { epsilon: 1e-5 }
    }
}

/// `LayerNormalization`: normalizes over `axis..rank`; outputs Y, Mean?, InvStdDev?.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerNormalization {
    /// First normalized axis (default -1).
    pub axis: i64,
    /// Default 1e-5.
    pub epsilon: f32,
    /// Type of the mean/inv-std computation and outputs (default F32).
    pub stash_type: DType,
}

impl Default for LayerNormalization {
    fn default() -> Self {
        LayerNormalization { axis: -1, epsilon: 1e-5, stash_type: DType::F32 }
    }
}

/// `GroupNormalization` (opset 21): inputs X, scale (C), bias (C).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupNormalization {
    /// Default 1e-5.
    pub epsilon: f32,
    /// Number of groups; required, must divide C.
    pub num_groups: usize,
    /// Type of the statistics computation (default F32).
    pub stash_type: DType,
}

/// `RMSNormalization` (opset 23): normalizes over `axis..rank` by the root mean square.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RmsNormalization {
    /// First normalized axis (default -1).
    pub axis: i64,
    /// Default 1e-5.
    pub epsilon: f32,
    /// Type of the statistics computation (default F32).
    pub stash_type: DType,
}

impl Default for RmsNormalization {
    fn default() -> Self {
        RmsNormalization { axis: -1, epsilon: 1e-5, stash_type: DType::F32 }
    }
}

/// `Attention` (opset 23). Inputs Q, K, V, attn_mask?, past_key?, past_value?; outputs Y,
/// present_key?, present_value?, qk_matmul_output?. Q/K/V are 4-D `(B, heads, seq, head_size)` or
/// 3-D `(B, seq, heads * head_size)`, in which case the head counts are required.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attention {
    /// Apply a causal (upper-triangular -inf) mask (default false).
    pub is_causal: bool,
    /// Number of K/V heads (3-D inputs only).
    pub kv_num_heads: Option<usize>,
    /// Number of Q heads (3-D inputs only).
    pub q_num_heads: Option<usize>,
    /// Which intermediate the qk_matmul_output shows (0 = raw QK^T, default).
    pub qk_matmul_output_mode: i64,
    /// Scale of QK^T (default `1 / sqrt(head_size)`).
    pub scale: Option<f32>,
    /// Soft cap `softcap * tanh(x / softcap)` on the scores; 0 disables (default).
    pub softcap: f32,
    /// Precision of the softmax (default: the input type).
    pub softmax_precision: Option<DType>,
}

/// Planner-internal fused attention (`ai.ferrofuse`, never produced by the loader): stands for a
/// matched `MatMul -> [score program] -> Softmax -> MatMul` chain whose operands the attention
/// kernel reads in place. Inputs: the values holding Q, K, V, then up to three score-program
/// inputs; the launch parameters (views, program) are kept by the planner beside the graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FusedAttention {
    /// Dims of the output value.
    pub dims: Vec<usize>,
}

/// `RotaryEmbedding` (opset 23). Inputs X, cos_cache, sin_cache, position_ids?.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RotaryEmbedding {
    /// Rotate interleaved pairs (x0,x1),(x2,x3) instead of the two halves (default false).
    pub interleaved: bool,
    /// Number of heads (required for 3-D input).
    pub num_heads: Option<usize>,
    /// Rotate only the first this-many dims of each head; 0 = all (default).
    pub rotary_embedding_dim: usize,
    /// Not ONNX (set by `plan::rotary_lift`, never by the importer): the caches hold a value per
    /// rotated feature — their last dim is the rotary dim, not half of it — and broadcast
    /// (right-aligned) to `(B, H, S, rot)`, read at the feature's own index, as an exporter's
    /// spelled-out `x·cos + rotate_half(x)·sin` reads them: `y[k] = x[k]·cos[k] − x[k+r/2]·sin[k]`
    /// and `y[k+r/2] = x[k+r/2]·cos[k+r/2] + x[k]·sin[k+r/2]`. No position ids.
    #[serde(default)]
    pub full_caches: bool,
}

impl RotaryEmbedding {
    /// Full-width caches of dims `cache` (see [`RotaryEmbedding::full_caches`]) in the frame
    /// `(B, H, S, rot)`: the element strides of b, h and s (0 where the cache broadcasts; the
    /// feature's is 1). Fails unless the dims broadcast to the frame with the last one `rot`.
    pub fn full_cache_strides(cache: &[usize], frame: [usize; 4]) -> Result<[usize; 3], String> {
        let fits = cache.len() <= 4
            && cache.last() == Some(&frame[3])
            && cache.iter().rev().zip(frame.iter().rev()).all(|(&c, &f)| c == f || c == 1);
        if !fits {
            return Err(format!("caches {cache:?} do not broadcast to (B, H, S, rotary dim) = {frame:?}"));
        }
        let lead = 4 - cache.len();
        let mut strides = [0usize; 3];
        let mut step = frame[3];
        for axis in (0..3).rev() {
            let d = if axis >= lead { cache[axis - lead] } else { 1 };
            strides[axis] = if d == 1 { 0 } else { step };
            step *= d;
        }
        Ok(strides)
    }
}
