//! `Op`: the closed set of operators the planner understands, each with typed attributes.
//!
//! Every behaviour over ops (shape inference, arity, op patterns, reference evaluation) is one
//! exhaustive `match` on `Op`, so adding a variant is a compiler-guided checklist. The ONNX op_type
//! strings live only in [`Op::name`]; the onnx crate maps strings to variants.

mod arity;
mod loss;
mod math;
mod name;
mod nn;
mod preview;
mod sequence;
mod signal;
mod tensor;
mod text;
mod training;
mod vision;

use serde::{Deserialize, Serialize};

pub use arity::Arity;
pub use loss::*;
pub use math::*;
pub use nn::*;
pub use preview::*;
pub use sequence::*;
pub use signal::*;
pub use tensor::*;
pub use text::*;
pub use training::*;
pub use vision::*;

use crate::graph::Graph;

/// An operator with its attributes (ONNX defaults already applied by the constructor of each struct).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Elementwise `a + b` (multidirectional broadcast).
    Add,
    /// Elementwise `a - b`.
    Sub,
    /// Elementwise `a * b`.
    Mul,
    /// Elementwise `a / b` (integer division truncates).
    Div,
    /// Elementwise `a ^ b`; output dtype is that of `a`.
    Pow,
    /// Elementwise modulus.
    Mod(Mod),
    /// Elementwise bit shift of unsigned integers.
    BitShift(BitShift),
    /// Bitwise and / or / xor of two integer tensors, broadcasting (opset 18).
    Bitwise(Bitwise),
    /// Bitwise complement of an integer tensor (opset 18).
    BitwiseNot,
    /// The bytes of a tensor read as another type of the same width (opset 26).
    BitCast(BitCast),
    /// Variadic elementwise maximum (1 or more inputs).
    Max,
    /// Variadic elementwise minimum.
    Min,
    /// Variadic elementwise sum.
    Sum,
    /// Variadic elementwise mean.
    Mean,
    /// `a == b` -> bool.
    Equal,
    /// `a < b` -> bool.
    Less,
    /// `a > b` -> bool.
    Greater,
    /// `a <= b` -> bool.
    LessOrEqual,
    /// `a >= b` -> bool.
    GreaterOrEqual,
    /// Logical and of bools.
    And,
    /// Logical or of bools.
    Or,
    /// Logical xor of bools.
    Xor,
    /// Logical not of a bool tensor.
    Not,
    /// `|x|`.
    Abs,
    /// `-x`.
    Neg,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `1 / x`.
    Reciprocal,
    /// Round down.
    Floor,
    /// Round up.
    Ceil,
    /// Round half to even.
    Round,
    /// -1, 0 or 1.
    Sign,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Tangent.
    Tan,
    /// Arc sine.
    Asin,
    /// Arc cosine.
    Acos,
    /// Arc tangent.
    Atan,
    /// Hyperbolic sine.
    Sinh,
    /// Hyperbolic cosine.
    Cosh,
    /// Inverse hyperbolic sine.
    Asinh,
    /// Inverse hyperbolic cosine.
    Acosh,
    /// Inverse hyperbolic tangent.
    Atanh,
    /// Error function.
    Erf,
    /// `max(x, 0)`.
    Relu,
    /// Leaky ReLU.
    LeakyRelu(LeakyRelu),
    /// ELU.
    Elu(Elu),
    /// SELU.
    Selu(Selu),
    /// CELU.
    Celu(Celu),
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// Hard sigmoid.
    HardSigmoid(HardSigmoid),
    /// `x * max(0, min(1, x / 6 + 0.5))`.
    HardSwish,
    /// Hyperbolic tangent.
    Tanh,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// GELU, exact or tanh-approximated.
    Gelu(Gelu),
    /// `x < 0 ? slope * x : x`; slope (input 1) broadcasts to x.
    PRelu,
    /// Thresholded ReLU.
    ThresholdedRelu(ThresholdedRelu),
    /// Clamp to `[min, max]` (optional inputs 1 and 2).
    Clip(Clip),
    /// Is-NaN test -> bool.
    IsNaN,
    /// Is-infinite test -> bool.
    IsInf(IsInf),
    /// `cond ? x : y` with three-way broadcast.
    Where,
    /// Element type conversion.
    Cast(Cast),
    /// Conversion to the dtype of input 1.
    CastLike(CastLike),
    /// Copy.
    Identity,
    /// Identity at inference; optional bool mask output.
    Dropout(Dropout),
    /// Sum over axes.
    ReduceSum(Reduce),
    /// Mean over axes.
    ReduceMean(Reduce),
    /// Maximum over axes.
    ReduceMax(Reduce),
    /// Minimum over axes.
    ReduceMin(Reduce),
    /// Product over axes.
    ReduceProd(Reduce),
    /// Sum of absolute values over axes.
    ReduceL1(Reduce),
    /// Euclidean norm over axes.
    ReduceL2(Reduce),
    /// `log(sum(x))` over axes.
    ReduceLogSum(Reduce),
    /// `log(sum(exp(x)))` over axes.
    ReduceLogSumExp(Reduce),
    /// Sum of squares over axes.
    ReduceSumSquare(Reduce),
    /// Index of the maximum along an axis (I64).
    ArgMax(ArgReduce),
    /// Index of the minimum along an axis (I64).
    ArgMin(ArgReduce),
    /// NumPy-style matrix product with batch broadcast.
    MatMul,
    /// `alpha * A' @ B' + beta * C` on 2-D operands.
    Gemm(Gemm),
    /// Planner-internal: a Gemm or MatMul with an elementwise program in its epilogue.
    FusedGemm(FusedGemm),
    /// See [`FusedGather`].
    FusedGather(FusedGather),
    /// Einstein summation.
    Einsum(Einsum),
    /// N-D convolution; inputs X, W, B?.
    Conv(Conv),
    /// See [`FusedConv`].
    FusedConv(FusedConv),
    /// N-D transposed convolution; inputs X, W, B?.
    ConvTranspose(ConvTranspose),
    /// Max pooling; outputs Y, Indices?.
    MaxPool(MaxPool),
    /// Average pooling.
    AveragePool(AveragePool),
    /// Mean over all spatial dims (kept as 1).
    GlobalAveragePool,
    /// Maximum over all spatial dims (kept as 1).
    GlobalMaxPool,
    /// Lp-norm pooling.
    LpPool(LpPool),
    /// Batch normalization with running statistics.
    BatchNormalization(BatchNormalization),
    /// Instance normalization.
    InstanceNormalization(InstanceNormalization),
    /// Layer normalization; outputs Y, Mean?, InvStdDev?.
    LayerNormalization(LayerNormalization),
    /// Group normalization.
    GroupNormalization(GroupNormalization),
    /// RMS normalization.
    RmsNormalization(RmsNormalization),
    /// Softmax along an axis.
    Softmax(Softmax),
    /// Log-softmax along an axis.
    LogSoftmax(Softmax),
    /// One-hot of the first maximum along an axis.
    Hardmax(Softmax),
    /// Scaled dot-product attention (opset 23).
    Attention(Attention),
    /// Rotary position embedding (opset 23).
    RotaryEmbedding(RotaryEmbedding),
    /// Cumulative sum along the axis given by input 1.
    CumSum(CumSum),
    /// Cumulative product along the axis given by input 1 (opset 26; CumSum's attributes).
    CumProd(CumSum),
    /// `y = saturate(round(x / scale) + zero_point)` to an 8-bit integer type.
    QuantizeLinear(Quantize),
    /// `y = (x - zero_point) * scale` from an integer type.
    DequantizeLinear(Quantize),
    /// uint8 quantization with the scale and zero point computed from x's range.
    DynamicQuantizeLinear,
    /// `(A - a_zero_point) @ (B - b_zero_point)` of 8-bit integers, in int32.
    MatMulInteger,
    /// MatMul of quantized A and B requantized to y's scale and zero point (8 inputs).
    QLinearMatMul,
    /// Conv of uint8 / int8 x and w less their zero points, in int32.
    ConvInteger(Conv),
    /// Conv of quantized x and w (and an int32 bias) requantized to y's scale and zero point.
    QLinearConv(Conv),
    /// Select slices along an axis by indices.
    Gather(Gather),
    /// Elementwise gather along an axis.
    GatherElements(GatherElements),
    /// Gather by index tuples.
    GatherNd(GatherNd),
    /// Deprecated elementwise scatter.
    Scatter(Scatter),
    /// Elementwise scatter along an axis.
    ScatterElements(ScatterElements),
    /// Scatter by index tuples.
    ScatterNd(ScatterNd),
    /// Strided slice; inputs data, starts, ends, axes?, steps?.
    Slice(Slice),
    /// Split into several outputs along an axis.
    Split(Split),
    /// Concatenate along an axis.
    Concat(Concat),
    /// Pad; inputs data, pads, constant_value?, axes?.
    Pad(Pad),
    /// Resize by scales or sizes.
    Resize(Resize),
    /// Repeat by the counts given by input 1.
    Tile,
    /// Broadcast to the shape given by input 1.
    Expand,
    /// Reshape to the shape given by input 1.
    Reshape(Reshape),
    /// Reshape to 2-D at an axis.
    Flatten(Flatten),
    /// Remove size-1 dims.
    Squeeze(Squeeze),
    /// Insert size-1 dims.
    Unsqueeze(Unsqueeze),
    /// Permute dims.
    Transpose(Transpose),
    /// The input's shape as a 1-D I64 tensor.
    Shape(ShapeOf),
    /// The input's element count as a scalar I64.
    Size,
    /// A constant tensor.
    Constant(Constant),
    /// A filled tensor of the shape given by input 0.
    ConstantOfShape(ConstantOfShape),
    /// Ones on a diagonal of a 2-D tensor shaped like the input.
    EyeLike(EyeLike),
    /// `[start, start + delta, ...)` below limit; inputs start, limit, delta.
    Range,
    /// One-hot encoding; inputs indices, depth, values.
    OneHot(OneHot),
    /// Upper or lower triangle of the last two dims.
    Trilu(Trilu),
    /// Top-k values and I64 indices along an axis.
    TopK(TopK),
    /// Indices of non-zero elements, `[rank, count]` I64 (count data-dependent).
    NonZero,
    /// Move depth blocks into spatial blocks.
    DepthToSpace(DepthToSpace),
    /// Move spatial blocks into depth.
    SpaceToDepth(SpaceToDepth),
    /// Long short-term memory layer.
    Lstm(Lstm),
    /// Gated recurrent unit layer.
    Gru(Gru),
    /// Simple (Elman) recurrent layer.
    Rnn(Rnn),
    /// Conditional with two subgraphs.
    If(If),
    /// Loop with a body subgraph.
    Loop(Loop),
    /// Scan with a body subgraph.
    Scan(Scan),
    /// SOFIE's Mamba scan: u, delta, A, Bm, Cm, Dskip -> y (see OPS.md).
    MambaScan,
    /// SOFIE's RG-LRU core: x, a -> y (see OPS.md).
    GriffinRglru,
    /// SOFIE's RWKV-6 WKV (exp(u) bonus): r, k, v, w, u -> y (see OPS.md).
    RwkvWkv6,
    /// Mamba-1 selective scan (ai.ferrofuse).
    SelectiveScan(SelectiveScan),
    /// Mamba-2 SSD scan (ai.ferrofuse).
    SsdScan(SsdScan),
    /// Griffin RG-LRU core (ai.ferrofuse): x `(B,L,W)`, a `(B,L,W)`, reset? `(B,L)` bool,
    /// initial_state? `(B,W)` -> y `(B,L,W)`, final_state? `(B,W)` f32.
    Rglru,
    /// First-order linear recurrence (ai.ferrofuse): x `(B,L,W)`, a `(B,L,W)`, initial_state?
    /// `(B,W)` -> y `(B,L,W)` with `y_t = a_t ⊙ y_{t−1} + x_t`, final_state? `(B,W)` f32. What the
    /// planner lifts an unrolled recurrence to (`plan/scan_lift.rs`).
    LinearScan,
    /// RWKV-6 WKV (ai.ferrofuse).
    Wkv6(Wkv6),
    /// Depthwise causal conv1d with carried state (ai.ferrofuse).
    CausalConvWithState(CausalConvWithState),
    /// Negative log-likelihood loss; inputs input, target, weight?.
    NegativeLogLikelihoodLoss(NegativeLogLikelihoodLoss),
    /// Softmax cross-entropy loss; inputs scores, labels, weights?; outputs loss, log_prob?.
    SoftmaxCrossEntropyLoss(SoftmaxCrossEntropyLoss),
    /// Sampling of X at the normalized points of a grid.
    GridSample(GridSample),
    /// Greedy per-class box selection; selected indices `[count, 3]` I64 (count data-dependent).
    NonMaxSuppression(NonMaxSuppression),
    /// Soft or hard shrinkage.
    Shrink(Shrink),
    /// Selection of slices by a bool condition (length data-dependent).
    Compress(Compress),
    /// Per-batch reversal of a prefix along the time axis.
    ReverseSequence(ReverseSequence),
    /// Unique values or slices; outputs Y, indices?, inverse_indices?, counts? (data-dependent).
    Unique(Unique),
    /// Local response normalization across channels.
    Lrn(Lrn),
    /// Determinant of the trailing square matrices.
    Det,
    /// L1 or L2 normalization along an axis.
    LpNormalization(LpNormalization),
    /// Recurrent linear attention with a carried state (opset 27).
    LinearAttention(LinearAttention),
    /// Discrete Fourier transform along one axis; inputs input, dft_length?, axis?.
    Dft(Dft),
    /// Centre crop or zero pad to a shape given by input 1.
    CenterCropPad(CenterCropPad),
    /// Sum of sliding blocks back into an image; inputs input, image_shape, block_shape.
    Col2Im(Col2Im),
    /// Affine sampling grid for GridSample; inputs theta, size.
    AffineGrid(AffineGrid),
    /// KV-cache style write of a block along an axis at per-batch offsets.
    TensorScatter(TensorScatter),
    /// Bilinearly sampled pooling over regions of interest.
    RoiAlign(RoiAlign),
    /// Partial inverse of MaxPool; inputs X, I, output_shape?.
    MaxUnpool(MaxUnpool),
    /// Deformable convolution; inputs X, W, offset, B?, mask?.
    DeformConv(DeformConv),
    /// Short-time Fourier transform; inputs signal, frame_step, window?, frame_length?.
    Stft(Stft),
    /// A Hann, Hamming or Blackman window of the size given by input 0.
    SignalWindow(SignalWindow),
    /// `MelWeightMatrix` (opset 17).
    MelWeightMatrix(MelWeightMatrix),
    /// `TfIdfVectorizer` (opset 9), integer pools.
    TfIdfVectorizer(TfIdfVectorizer),
    /// `StringNormalizer` (opset 10).
    StringNormalizer(StringNormalizer),
    /// `StringSplit` (opset 20).
    StringSplit(StringSplit),
    /// `StringConcat` (opset 20).
    StringConcat,
    /// `RegexFullMatch` (opset 20).
    RegexFullMatch(RegexFullMatch),
    /// `LabelEncoder` (ai.onnx.ml).
    LabelEncoder(LabelEncoder),
    /// Attention with score/probability modifier subgraphs (ai.onnx.preview); inputs Q, K, V.
    FlexAttention(FlexAttention),
    /// Planner-internal (never loaded): a fused `softmax(program(Q Kᵀ)) V` whose inputs are the
    /// arena values its strided operands live in; see [`FusedAttention`].
    FusedAttention(FusedAttention),
    /// `x > threshold` as 1/0 in x's dtype (ai.onnx.ml).
    Binarizer(Binarizer),
    /// Selection along the last axis by indices (ai.onnx.ml); 1-D data gives `[1, n]`.
    ArrayFeatureExtractor,
    /// Tree ensemble regressor/classifier scores (ai.onnx.ml); X `(N, F)` -> `(N, n_targets)`.
    TreeEnsemble(TreeEnsemble),
    /// Adagrad optimizer step (ai.onnx.preview.training); inputs R, T, X…, G…, H….
    Adagrad(Adagrad),
    /// Adam optimizer step (ai.onnx.preview.training); inputs R, T, X…, G…, V…, H….
    Adam(Adam),
    /// SGD with (Nesterov) momentum (ai.onnx.preview.training); inputs R, T, X…, G…, V….
    Momentum(Momentum),
}

impl Op {
    /// Domain of the operator: `""` for standard ONNX, `"ai.ferrofuse"` for ferrofuse's own
    /// operators, `"com.sofie"` for SOFIE's (which the loader accepts from any domain).
    pub fn domain(&self) -> &'static str {
        match self {
            Op::SelectiveScan(_)
            | Op::SsdScan(_)
            | Op::Rglru
            | Op::LinearScan
            | Op::Wkv6(_)
            | Op::CausalConvWithState(_) => "ai.ferrofuse",
            Op::MambaScan | Op::GriffinRglru | Op::RwkvWkv6 => "com.sofie",
            Op::FusedAttention(_) => "ai.ferrofuse",
            Op::FlexAttention(_) => "ai.onnx.preview",
            Op::Binarizer(_) | Op::ArrayFeatureExtractor | Op::TreeEnsemble(_) | Op::LabelEncoder(_) => {
                "ai.onnx.ml"
            }
            Op::Adagrad(_) | Op::Adam(_) | Op::Momentum(_) => "ai.onnx.preview.training",
            _ => "",
        }
    }

    /// Whether the op's output sizes depend on its input values, not only on their shapes
    /// (NonZero, Compress, Unique, NonMaxSuppression). A size a model declares for such an output
    /// holds for one example input at most, so shape inference does not take it.
    pub fn data_dependent_shape(&self) -> bool {
        matches!(self, Op::NonZero | Op::Compress(_) | Op::Unique(_) | Op::NonMaxSuppression(_))
    }

    /// Inputs of a fused node (made by the planner's epilogue fusion) that are its producer's
    /// operands (A, B, C of a [`FusedGemm`]; data and indices of a [`FusedGather`]; X, W, B of a
    /// [`FusedConv`]); the program's other inputs follow them. `None` for every other op.
    pub fn fused_operands(&self) -> Option<usize> {
        match self {
            Op::FusedGemm(_) | Op::FusedConv(_) => Some(3),
            Op::FusedGather(_) => Some(2),
            _ => None,
        }
    }

    /// The inputs this node reads as column windows of wider tensors ([`InputWindows`]): `Some`
    /// for the ops whose kernels take them (`SSDScan`, `CausalConvWithState`), even when empty.
    pub fn input_windows(&self) -> Option<&InputWindows> {
        match self {
            Op::SsdScan(a) => Some(&a.windows),
            Op::CausalConvWithState(a) => Some(&a.windows),
            _ => None,
        }
    }

    /// The inputs this node's kernel can read through a column window (row views over their
    /// steps): x, dt, Bm, Cm and z of `SSDScan`, x of a channels-last `CausalConvWithState`.
    pub fn windowable_inputs(&self) -> &'static [usize] {
        match self {
            Op::SsdScan(_) => &[0, 1, 3, 4, 6],
            Op::CausalConvWithState(a) if a.channels_last => &[0],
            _ => &[],
        }
    }

    /// [`Op::input_windows`], to set them.
    pub fn input_windows_mut(&mut self) -> Option<&mut InputWindows> {
        match self {
            Op::SsdScan(a) => Some(&mut a.windows),
            Op::CausalConvWithState(a) => Some(&mut a.windows),
            _ => None,
        }
    }

    /// Nested graphs of control-flow operators (empty for every other op).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            Op::If(i) => vec![&i.then_branch, &i.else_branch],
            Op::Loop(l) => vec![&l.body],
            Op::Scan(s) => vec![&s.body],
            Op::FlexAttention(f) => f.score_mod.iter().chain(&f.prob_mod).map(|g| &**g).collect(),
            _ => Vec::new(),
        }
    }

    /// Mutable access to the nested graphs of control-flow operators.
    pub fn subgraphs_mut(&mut self) -> Vec<&mut Graph> {
        match self {
            Op::If(i) => vec![&mut i.then_branch, &mut i.else_branch],
            Op::Loop(l) => vec![&mut l.body],
            Op::Scan(s) => vec![&mut s.body],
            Op::FlexAttention(f) => f.score_mod.iter_mut().chain(&mut f.prob_mod).map(|g| &mut **g).collect(),
            _ => Vec::new(),
        }
    }
}
