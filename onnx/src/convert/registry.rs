//! The one table from `(domain, op_type)` to a constructor: the only place ONNX op_type strings
//! appear in the converter.
//!
//! Domains: the default ONNX domain (`""` or `"ai.onnx"`), ferrofuse's own `ai.ferrofuse`, and
//! SOFIE's three operators, accepted from any domain (OPS.md). Default-domain entries carry the
//! opset range they convert (`since..=until`, within the converter's global range); a node
//! outside it is reported as unsupported, with the range as the reason. The `math`, `nn`,
//! `shape`, `sequence` and `control` files hold the constructors; attribute-free operators are
//! mapped inline.

use planner::Op;

use crate::error::OnnxError;

use super::lower::Lower;
use super::{control, math, ml, nn, optional, sequence, shape, text, training, vision};

/// A constructor: converts one node, emitting planner nodes into the current graph.
pub(crate) type Build = fn(&mut Lower<'_, '_>) -> Result<(), OnnxError>;

/// Which node domains an entry matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Domain {
    /// The default ONNX domain.
    Onnx,
    /// `ai.ferrofuse`.
    Ferrofuse,
    /// Any domain (SOFIE's operators).
    Any,
    /// `ai.onnx.preview.training` (the optimizers).
    Training,
    /// `ai.onnx.preview`.
    Preview,
    /// `ai.onnx.ml`.
    Ml,
}

/// One registry row.
pub(crate) struct Entry {
    domain: Domain,
    op_type: &'static str,
    since: i64,
    until: i64,
    /// The constructor.
    pub(crate) build: Build,
}

/// The default-domain opset from which an entry converts unless it says otherwise: 11 is where
/// most operators reached the semantics their constructors implement (negative axes, opset-11
/// Resize/Pad inputs). Rows whose older versions mean the same thing say so with
/// [`Entry::since`]; every other row reports older opsets as unsupported, per operator.
const MODERN: i64 = 11;

const fn onnx(op_type: &'static str, build: Build) -> Entry {
    Entry { domain: Domain::Onnx, op_type, since: MODERN, until: i64::MAX, build }
}

const fn ferrofuse(op_type: &'static str, build: Build) -> Entry {
    Entry { domain: Domain::Ferrofuse, op_type, since: 1, until: i64::MAX, build }
}

const fn preview(op_type: &'static str, build: Build) -> Entry {
    Entry { domain: Domain::Preview, op_type, since: 1, until: i64::MAX, build }
}

const fn ml(op_type: &'static str, build: Build) -> Entry {
    Entry { domain: Domain::Ml, op_type, since: 1, until: i64::MAX, build }
}

const fn training(op_type: &'static str, build: Build) -> Entry {
    Entry { domain: Domain::Training, op_type, since: 1, until: i64::MAX, build }
}

const fn any(op_type: &'static str, build: Build) -> Entry {
    Entry { domain: Domain::Any, op_type, since: 1, until: i64::MAX, build }
}

impl Entry {
    /// Limits the entry to default-domain opsets `since..=until`.
    const fn opsets(mut self, since: i64, until: i64) -> Entry {
        self.since = since;
        self.until = until;
        self
    }

    /// Limits the entry to default-domain opsets from `since` on.
    const fn since(self, since: i64) -> Entry {
        self.opsets(since, i64::MAX)
    }
}

/// True for the default ONNX domain's two spellings.
pub(crate) fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// The entry converting `op_type` of `domain` under default-domain opset `opset`, or why
/// there is none.
pub(crate) fn find(domain: &str, op_type: &str, opset: i64) -> Result<&'static Entry, String> {
    let class = if is_default_domain(domain) {
        Some(Domain::Onnx)
    } else if domain == "ai.ferrofuse" {
        Some(Domain::Ferrofuse)
    } else if domain == "ai.onnx.preview.training" {
        Some(Domain::Training)
    } else if domain == "ai.onnx.preview" {
        Some(Domain::Preview)
    } else if domain == "ai.onnx.ml" {
        Some(Domain::Ml)
    } else {
        None
    };
    let entry = TABLE
        .iter()
        .find(|e| e.op_type == op_type && (e.domain == Domain::Any || Some(e.domain) == class))
        .ok_or_else(|| "no converter for this operator".to_owned())?;
    if entry.domain == Domain::Onnx && !(entry.since..=entry.until).contains(&opset) {
        let range = match entry.until {
            i64::MAX => format!("from opset {}", entry.since),
            until => format!("in opsets {}..={until}", entry.since),
        };
        return Err(format!("converted {range}; the model imports opset {opset}"));
    }
    Ok(entry)
}

/// Every mapped operator. Adding an operator: one row here, its constructor in a family file.
static TABLE: &[Entry] = &[
    // Elementwise arithmetic and logic.
    // Opset 7 made the arithmetic and logic ops broadcast multidirectionally (as today).
    onnx("Add", |l| l.emit(Op::Add)).since(7),
    onnx("Sub", |l| l.emit(Op::Sub)).since(7),
    onnx("Mul", |l| l.emit(Op::Mul)).since(7),
    onnx("Div", |l| l.emit(Op::Div)).since(7),
    onnx("Pow", |l| l.emit(Op::Pow)),
    onnx("Mod", math::modulo),
    onnx("BitShift", math::bit_shift),
    onnx("BitwiseAnd", |l| l.emit(Op::Bitwise(planner::op::Bitwise::And))).since(18),
    onnx("BitwiseOr", |l| l.emit(Op::Bitwise(planner::op::Bitwise::Or))).since(18),
    onnx("BitwiseXor", |l| l.emit(Op::Bitwise(planner::op::Bitwise::Xor))).since(18),
    onnx("BitwiseNot", |l| l.emit(Op::BitwiseNot)).since(18),
    onnx("Max", |l| l.emit(Op::Max)),
    onnx("Min", |l| l.emit(Op::Min)),
    onnx("Sum", |l| l.emit(Op::Sum)),
    onnx("Mean", |l| l.emit(Op::Mean)),
    onnx("Equal", |l| l.emit(Op::Equal)),
    onnx("Less", |l| l.emit(Op::Less)),
    onnx("Greater", |l| l.emit(Op::Greater)),
    onnx("LessOrEqual", |l| l.emit(Op::LessOrEqual)).since(12),
    onnx("GreaterOrEqual", |l| l.emit(Op::GreaterOrEqual)).since(12),
    onnx("And", |l| l.emit(Op::And)).since(7),
    onnx("Or", |l| l.emit(Op::Or)).since(7),
    onnx("Xor", |l| l.emit(Op::Xor)).since(7),
    onnx("Not", |l| l.emit(Op::Not)).since(1),
    onnx("Where", |l| l.emit(Op::Where)),
    // Elementwise unary math.
    onnx("Abs", |l| l.emit(Op::Abs)),
    onnx("Neg", |l| l.emit(Op::Neg)),
    onnx("Exp", |l| l.emit(Op::Exp)),
    onnx("Log", |l| l.emit(Op::Log)),
    onnx("Sqrt", |l| l.emit(Op::Sqrt)),
    onnx("Reciprocal", |l| l.emit(Op::Reciprocal)),
    onnx("Floor", |l| l.emit(Op::Floor)),
    onnx("Ceil", |l| l.emit(Op::Ceil)),
    onnx("Round", |l| l.emit(Op::Round)),
    onnx("Sign", |l| l.emit(Op::Sign)),
    onnx("Sin", |l| l.emit(Op::Sin)),
    onnx("Cos", |l| l.emit(Op::Cos)),
    onnx("Tan", |l| l.emit(Op::Tan)),
    onnx("Asin", |l| l.emit(Op::Asin)),
    onnx("Acos", |l| l.emit(Op::Acos)),
    onnx("Atan", |l| l.emit(Op::Atan)),
    onnx("Sinh", |l| l.emit(Op::Sinh)),
    onnx("Cosh", |l| l.emit(Op::Cosh)),
    onnx("Asinh", |l| l.emit(Op::Asinh)),
    onnx("Acosh", |l| l.emit(Op::Acosh)),
    onnx("Atanh", |l| l.emit(Op::Atanh)),
    onnx("Erf", |l| l.emit(Op::Erf)),
    onnx("IsNaN", |l| l.emit(Op::IsNaN)),
    onnx("IsInf", math::is_inf),
    // Activations.
    onnx("Relu", |l| l.emit(Op::Relu)),
    onnx("LeakyRelu", math::leaky_relu),
    onnx("Elu", math::elu),
    onnx("Selu", math::selu),
    onnx("Celu", math::celu).since(12),
    onnx("Sigmoid", |l| l.emit(Op::Sigmoid)),
    onnx("HardSigmoid", math::hard_sigmoid),
    onnx("HardSwish", |l| l.emit(Op::HardSwish)).since(14),
    onnx("Tanh", |l| l.emit(Op::Tanh)),
    onnx("Softplus", |l| l.emit(Op::Softplus)),
    onnx("Softsign", |l| l.emit(Op::Softsign)),
    onnx("Mish", |l| l.emit(Op::Mish)).since(18),
    onnx("Gelu", math::gelu).since(20),
    onnx("PRelu", |l| l.emit(Op::PRelu)),
    onnx("ThresholdedRelu", math::thresholded_relu),
    onnx("Clip", math::clip),
    onnx("Swish", math::swish).since(24),
    onnx("SwiGLU", math::swiglu).since(28),
    // Types and identity.
    onnx("Cast", math::cast),
    onnx("BitCast", math::bit_cast).since(26),
    onnx("CastLike", math::cast_like).since(15),
    onnx("Identity", |l| l.emit(Op::Identity)).since(1),
    // Tensor inputs only (opset 18); the planner has no optional values.
    onnx("OptionalHasElement", optional::has_element).since(18),
    onnx("OptionalGetElement", optional::get_element).since(18),
    onnx("Dropout", math::dropout),
    // Reductions.
    onnx("ReduceSum", |l| math::reduce(l, Op::ReduceSum, 13)),
    onnx("ReduceMean", |l| math::reduce(l, Op::ReduceMean, 18)),
    onnx("ReduceMax", |l| math::reduce(l, Op::ReduceMax, 18)),
    onnx("ReduceMin", |l| math::reduce(l, Op::ReduceMin, 18)),
    onnx("ReduceProd", |l| math::reduce(l, Op::ReduceProd, 18)),
    onnx("ReduceL1", |l| math::reduce(l, Op::ReduceL1, 18)),
    onnx("ReduceL2", |l| math::reduce(l, Op::ReduceL2, 18)),
    onnx("ReduceLogSum", |l| math::reduce(l, Op::ReduceLogSum, 18)),
    onnx("ReduceLogSumExp", |l| math::reduce(l, Op::ReduceLogSumExp, 18)),
    onnx("ReduceSumSquare", |l| math::reduce(l, Op::ReduceSumSquare, 18)),
    onnx("ArgMax", |l| math::arg_reduce(l, Op::ArgMax)),
    onnx("ArgMin", |l| math::arg_reduce(l, Op::ArgMin)),
    onnx("CumSum", math::cum_sum),
    onnx("CumProd", math::cum_prod).since(26),
    onnx("EyeLike", shape::eye_like),
    onnx("QuantizeLinear", math::quantize_linear).since(10),
    onnx("DequantizeLinear", math::dequantize_linear).since(10),
    onnx("DynamicQuantizeLinear", |l| l.emit(Op::DynamicQuantizeLinear)),
    onnx("MatMulInteger", |l| l.emit(Op::MatMulInteger)).since(10),
    onnx("QLinearMatMul", |l| l.emit(Op::QLinearMatMul)).since(10),
    onnx("ConvInteger", nn::conv_integer).since(10),
    onnx("QLinearConv", nn::qlinear_conv).since(10),
    // Linear algebra.
    onnx("MatMul", |l| l.emit(Op::MatMul)),
    onnx("Gemm", math::gemm),
    onnx("Einsum", math::einsum).since(12),
    // Convolution, pooling, normalization, attention.
    onnx("Conv", nn::conv),
    onnx("ConvTranspose", nn::conv_transpose),
    onnx("DeformConv", nn::deform_conv).since(19),
    onnx("MaxPool", nn::max_pool),
    onnx("AveragePool", nn::average_pool),
    onnx("LpPool", nn::lp_pool),
    onnx("MaxUnpool", nn::max_unpool),
    onnx("GlobalAveragePool", |l| l.emit(Op::GlobalAveragePool)),
    onnx("GlobalMaxPool", |l| l.emit(Op::GlobalMaxPool)),
    onnx("BatchNormalization", nn::batch_norm),
    onnx("InstanceNormalization", nn::instance_norm),
    onnx("LayerNormalization", nn::layer_norm).since(17),
    // Opsets 18-20 define per-group scale/bias; the planner op is opset 21's per-channel form.
    onnx("GroupNormalization", nn::group_norm).since(21),
    onnx("RMSNormalization", nn::rms_norm).since(23),
    onnx("Softmax", |l| nn::softmax_like(l, Op::Softmax)),
    onnx("LogSoftmax", |l| nn::softmax_like(l, Op::LogSoftmax)),
    onnx("Hardmax", |l| nn::softmax_like(l, Op::Hardmax)),
    // Opset 24 adds input 6 (nonpad_kv_seqlen) and 25 window attributes; the planner op is
    // opset 24's.
    onnx("Attention", nn::attention).opsets(23, 24),
    onnx("RotaryEmbedding", nn::rotary_embedding).since(23),
    onnx("LinearAttention", nn::linear_attention).since(27),
    // Indexing and data movement.
    onnx("Gather", shape::gather),
    onnx("GatherElements", shape::gather_elements),
    onnx("GatherND", shape::gather_nd),
    // Scatter-9/10 is ScatterElements without reduction.
    onnx("Scatter", shape::scatter).since(9),
    onnx("ScatterElements", shape::scatter_elements),
    onnx("ScatterND", shape::scatter_nd),
    onnx("Slice", shape::slice),
    onnx("Split", shape::split),
    onnx("Concat", shape::concat),
    onnx("Pad", shape::pad),
    onnx("Resize", shape::resize),
    // Upsample-9/10 take scales as input 1 (opset 7's attribute is rejected by the constructor).
    onnx("Upsample", shape::upsample).since(9),
    onnx("Tile", |l| l.emit(Op::Tile)),
    onnx("Expand", |l| l.emit(Op::Expand)),
    onnx("Reshape", shape::reshape),
    onnx("Flatten", shape::flatten),
    onnx("Squeeze", shape::squeeze),
    onnx("Unsqueeze", shape::unsqueeze),
    onnx("Transpose", shape::transpose),
    onnx("DepthToSpace", shape::depth_to_space),
    onnx("SpaceToDepth", shape::space_to_depth),
    onnx("Trilu", shape::trilu).since(14),
    // Shapes, constants and generators.
    onnx("Shape", shape::shape),
    onnx("Size", |l| l.emit(Op::Size)),
    onnx("Constant", shape::constant),
    onnx("ConstantOfShape", shape::constant_of_shape),
    // Range-27 adds `stash_type` (f16/bf16 accumulation only); the planner op has none.
    onnx("Range", |l| l.emit(Op::Range)),
    onnx("OneHot", shape::one_hot),
    onnx("TopK", shape::top_k),
    onnx("NonZero", |l| l.emit(Op::NonZero)),
    // Recurrent layers and control flow.
    onnx("LSTM", sequence::lstm),
    onnx("GRU", sequence::gru),
    onnx("RNN", sequence::rnn),
    onnx("If", control::if_),
    onnx("Loop", control::loop_),
    // Scan-8 (batch axis, sequence_lens) is rewritten by the constructor.
    onnx("Scan", control::scan).since(8),
    // Losses, sampling, selection.
    onnx("NegativeLogLikelihoodLoss", vision::nll_loss).since(12),
    onnx("SoftmaxCrossEntropyLoss", vision::softmax_cross_entropy).since(12),
    onnx("GridSample", vision::grid_sample).since(16),
    onnx("NonMaxSuppression", vision::non_max_suppression),
    onnx("Shrink", vision::shrink).since(9),
    onnx("Compress", vision::compress),
    onnx("ReverseSequence", vision::reverse_sequence).since(10),
    onnx("Unique", vision::unique),
    onnx("LRN", vision::lrn),
    onnx("LpNormalization", vision::lp_normalization),
    onnx("Det", |l| l.emit(Op::Det)),
    onnx("DFT", vision::dft).since(17),
    onnx("STFT", vision::stft).since(17),
    onnx("HannWindow", vision::hann_window).since(17),
    onnx("MelWeightMatrix", vision::mel_weight_matrix).since(17),
    onnx("TfIdfVectorizer", vision::tf_idf_vectorizer).since(9),
    onnx("StringNormalizer", text::string_normalizer).since(10),
    onnx("StringSplit", text::string_split).since(20),
    onnx("StringConcat", |l| l.emit(Op::StringConcat)).since(20),
    onnx("RegexFullMatch", text::regex_full_match).since(20),
    onnx("HammingWindow", vision::hamming_window).since(17),
    onnx("BlackmanWindow", vision::blackman_window).since(17),
    onnx("CenterCropPad", vision::center_crop_pad).since(18),
    onnx("Col2Im", vision::col2im).since(18),
    onnx("AffineGrid", vision::affine_grid).since(20),
    onnx("RoiAlign", vision::roi_align),
    onnx("TensorScatter", vision::tensor_scatter).since(24),
    onnx("CausalConvWithState", sequence::onnx_causal_conv).since(27),
    onnx("MeanVarianceNormalization", vision::mean_variance_normalization).since(9),
    // SOFIE's operators (any domain) and ferrofuse's own (OPS.md).
    any("MambaScan", |l| l.emit(Op::MambaScan)),
    any("GriffinRGLRU", |l| l.emit(Op::GriffinRglru)),
    any("RWKV_WKV6", |l| l.emit(Op::RwkvWkv6)),
    ferrofuse("SelectiveScan", sequence::selective_scan),
    ferrofuse("SSDScan", sequence::ssd_scan),
    ferrofuse("RGLRU", |l| l.emit(Op::Rglru)),
    ferrofuse("LinearScan", |l| l.emit(Op::LinearScan)),
    ferrofuse("WKV6", sequence::wkv6),
    ferrofuse("CausalConvWithState", sequence::causal_conv),
    // ai.onnx.preview.training (version 1).
    training("Adagrad", training::adagrad),
    training("Adam", training::adam),
    training("Momentum", training::momentum),
    // ai.onnx.preview and ai.onnx.ml.
    preview("FlexAttention", ml::flex_attention),
    ml("Binarizer", ml::binarizer),
    ml("LabelEncoder", text::label_encoder),
    ml("ArrayFeatureExtractor", |l| l.emit(Op::ArrayFeatureExtractor)),
    ml("TreeEnsemble", ml::tree_ensemble),
];

/// Every `(domain, op_type)` the converter maps, in table order; the domain is `""` for the
/// default ONNX domain and `"*"` for operators accepted from any domain.
pub(crate) fn supported() -> impl Iterator<Item = (&'static str, &'static str)> {
    TABLE.iter().map(|e| {
        let domain = match e.domain {
            Domain::Onnx => "",
            Domain::Ferrofuse => "ai.ferrofuse",
            Domain::Any => "*",
            Domain::Training => "ai.onnx.preview.training",
            Domain::Preview => "ai.onnx.preview",
            Domain::Ml => "ai.onnx.ml",
        };
        (domain, e.op_type)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_unique_per_domain() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in &TABLE[i + 1..] {
                assert!(a.op_type != b.op_type || a.domain != b.domain, "{} twice", a.op_type);
            }
        }
        assert_eq!(supported().count(), TABLE.len());
    }

    #[test]
    fn domains_and_opset_ranges() {
        assert!(find("", "Relu", 11).is_ok());
        assert!(find("ai.onnx", "Relu", 11).is_ok());
        assert!(find("com.microsoft", "Relu", 11).is_err());
        assert!(find("com.sofie", "MambaScan", 0).is_ok());
        assert!(find("", "GriffinRGLRU", 17).is_ok());
        assert!(find("ai.ferrofuse", "WKV6", 0).is_ok());
        assert!(find("", "WKV6", 17).is_err());
        assert!(find("ai.onnx.preview.training", "Momentum", 17).is_ok());
        assert!(find("", "Adam", 17).is_err());
        let reason = find("", "GroupNormalization", 18).err().unwrap_or_default();
        assert!(reason.contains("from opset 21") && reason.contains("18"), "{reason}");
        assert!(find("", "Attention", 25).is_err() && find("", "Attention", 24).is_ok());
        assert!(find("", "And", 7).is_ok() && find("", "And", 6).is_err());
        assert!(find("", "Not", 1).is_ok());
        let reason = find("", "Relu", 9).err().unwrap_or_default();
        assert!(reason.contains("from opset 11"), "{reason}");
    }
}
