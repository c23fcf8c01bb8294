//! `infer_node`: the one exhaustive `match` from `Op` to its inference function.

use super::{
    Ctx, attention, einsum, elementwise as ew, index_ops, nn, preview, reduce, sequence as seq, shape_ops,
    text, vision,
};
use crate::error::PlanError;
use crate::op::Op;
use crate::tensor_info::TensorInfo;

/// Infers the infos of every output slot the op defines (at least as many as the node has).
pub(crate) fn infer_node(ctx: &mut Ctx) -> Result<Vec<TensorInfo>, PlanError> {
    let node = ctx.node;
    let op = &node.op;
    match op {
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Mod(_) => ew::binary(ctx),
        Op::Pow => ew::pow(ctx),
        Op::BitShift(_) => ew::bit_shift(ctx),
        Op::Bitwise(_) => ew::bitwise(ctx),
        Op::BitwiseNot => ew::bitwise_not(ctx),
        Op::Max | Op::Min | Op::Sum | Op::Mean => ew::variadic(ctx),
        Op::Equal | Op::Less | Op::Greater | Op::LessOrEqual | Op::GreaterOrEqual => ew::compare(ctx),
        Op::And | Op::Or | Op::Xor => ew::logical(ctx),
        Op::Not => ew::not(ctx),
        Op::Abs | Op::Neg | Op::Sign | Op::Relu => ew::unary(ctx),
        Op::Identity => ew::identity(ctx),
        Op::Exp
        | Op::Log
        | Op::Sqrt
        | Op::Reciprocal
        | Op::Floor
        | Op::Ceil
        | Op::Round
        | Op::Sin
        | Op::Cos
        | Op::Tan
        | Op::Asin
        | Op::Acos
        | Op::Atan
        | Op::Sinh
        | Op::Cosh
        | Op::Asinh
        | Op::Acosh
        | Op::Atanh
        | Op::Erf
        | Op::LeakyRelu(_)
        | Op::Elu(_)
        | Op::Selu(_)
        | Op::Celu(_)
        | Op::Sigmoid
        | Op::HardSigmoid(_)
        | Op::HardSwish
        | Op::Tanh
        | Op::Softplus
        | Op::Softsign
        | Op::Mish
        | Op::Gelu(_)
        | Op::ThresholdedRelu(_) => ew::unary_float(ctx),
        Op::PRelu => ew::prelu(ctx),
        Op::Clip(_) => ew::clip(ctx),
        Op::IsNaN | Op::IsInf(_) => ew::is_test(ctx),
        Op::Where => ew::where_(ctx),
        Op::Cast(c) => ew::cast(ctx, c.to),
        Op::BitCast(c) => ew::bit_cast(ctx, c.to),
        Op::CastLike(_) => ew::cast_like(ctx),
        Op::Dropout(_) => ew::dropout(ctx),
        Op::ReduceSum(r)
        | Op::ReduceMean(r)
        | Op::ReduceMax(r)
        | Op::ReduceMin(r)
        | Op::ReduceProd(r)
        | Op::ReduceL1(r)
        | Op::ReduceL2(r)
        | Op::ReduceLogSum(r)
        | Op::ReduceLogSumExp(r)
        | Op::ReduceSumSquare(r) => reduce::reduce(ctx, r),
        Op::ArgMax(a) | Op::ArgMin(a) => reduce::arg_reduce(ctx, a),
        Op::MatMul => nn::matmul(ctx),
        Op::Gemm(g) => nn::gemm(ctx, g),
        Op::FusedGemm(f) => nn::fused_gemm(ctx, f),
        Op::FusedConv(f) => nn::fused_conv(ctx, f),
        Op::Einsum(e) => einsum::einsum(ctx, &e.equation),
        Op::Conv(c) => nn::conv(ctx, c),
        Op::ConvTranspose(c) => nn::conv_transpose(ctx, c),
        Op::MaxPool(p) => {
            let attrs = nn::PoolAttrs::from(p);
            let y = nn::pool(ctx, &attrs)?;
            let indices = TensorInfo { dtype: crate::tensor_info::DType::I64, shape: y.shape.clone() };
            Ok(vec![y, indices])
        }
        Op::AveragePool(p) => Ok(vec![nn::pool(ctx, &nn::PoolAttrs::from(p))?]),
        Op::LpPool(p) => Ok(vec![nn::pool(ctx, &nn::PoolAttrs::from(p))?]),
        Op::GlobalAveragePool | Op::GlobalMaxPool => nn::global_pool(ctx),
        Op::BatchNormalization(b) => nn::batch_norm(ctx, b.training_mode),
        Op::InstanceNormalization(_) => nn::instance_norm(ctx),
        Op::LayerNormalization(l) => nn::layer_norm(ctx, l.axis, l.stash_type),
        Op::GroupNormalization(g) => nn::group_norm(ctx, g.num_groups),
        Op::RmsNormalization(r) => nn::rms_norm(ctx, r.axis),
        Op::Softmax(s) | Op::LogSoftmax(s) | Op::Hardmax(s) => nn::softmax(ctx, s.axis),
        Op::Attention(a) => attention::attention(ctx, a),
        Op::RotaryEmbedding(r) => attention::rotary_embedding(ctx, r),
        Op::CumSum(_) | Op::CumProd(_) => reduce::cumsum(ctx),
        Op::QuantizeLinear(q) => nn::quantize(ctx, q),
        Op::DequantizeLinear(_) => nn::dequantize(ctx),
        Op::DynamicQuantizeLinear => nn::dynamic_quantize(ctx),
        Op::MatMulInteger => nn::matmul_integer(ctx),
        Op::QLinearMatMul => nn::qlinear_matmul(ctx),
        Op::ConvInteger(c) => nn::conv_quantized(ctx, c, false),
        Op::QLinearConv(c) => nn::conv_quantized(ctx, c, true),
        Op::Gather(g) => index_ops::gather(ctx, g.axis),
        Op::FusedGather(f) => index_ops::fused_gather(ctx, f),
        Op::GatherElements(g) => index_ops::gather_elements(ctx, g.axis),
        Op::GatherNd(g) => index_ops::gather_nd(ctx, g.batch_dims),
        Op::Scatter(_) | Op::ScatterElements(_) | Op::ScatterNd(_) => index_ops::scatter(ctx),
        Op::Slice(s) => index_ops::slice(ctx, s),
        Op::Split(s) => shape_ops::split(ctx, s),
        Op::Concat(c) => shape_ops::concat(ctx, c.axis),
        Op::Pad(p) => index_ops::pad(ctx, p),
        Op::Resize(r) => index_ops::resize(ctx, r),
        Op::Tile => shape_ops::tile(ctx),
        Op::Expand => shape_ops::expand(ctx),
        Op::Reshape(r) => shape_ops::reshape(ctx, r.allowzero),
        Op::Flatten(f) => shape_ops::flatten(ctx, f.axis),
        Op::Squeeze(s) => shape_ops::squeeze(ctx, s.axes.clone()),
        Op::Unsqueeze(u) => shape_ops::unsqueeze(ctx, u.axes.clone()),
        Op::Transpose(t) => shape_ops::transpose(ctx, t),
        Op::Shape(s) => shape_ops::shape(ctx, s.start, s.end),
        Op::Size => shape_ops::size(ctx),
        Op::Constant(c) => Ok(vec![c.value.info()]),
        Op::EyeLike(e) => shape_ops::eye_like(ctx, e),
        Op::ConstantOfShape(c) => shape_ops::constant_of_shape(ctx, c.value.dtype, c.value.elems()),
        Op::Range => shape_ops::range(ctx),
        Op::OneHot(o) => index_ops::one_hot(ctx, o.axis),
        Op::Trilu(_) => index_ops::trilu(ctx),
        Op::TopK(t) => reduce::top_k(ctx, t),
        Op::NonZero => index_ops::non_zero(ctx),
        Op::DepthToSpace(d) => shape_ops::depth_to_space(ctx, d.blocksize),
        Op::SpaceToDepth(s) => shape_ops::space_to_depth(ctx, s.blocksize),
        Op::Lstm(l) => seq::recurrent(ctx, &l.common, 4, 3),
        Op::Gru(g) => seq::recurrent(ctx, &g.common, 3, 2),
        Op::Rnn(r) => seq::recurrent(ctx, &r.common, 1, 2),
        Op::If(_) => seq::if_(ctx),
        Op::Loop(_) => seq::loop_(ctx),
        Op::Scan(_) => seq::scan(ctx),
        Op::MambaScan => seq::mamba_scan(ctx),
        Op::GriffinRglru => seq::griffin_rglru(ctx),
        Op::RwkvWkv6 => seq::rwkv_wkv6(ctx),
        Op::SelectiveScan(_) => seq::selective_scan(ctx),
        Op::SsdScan(_) => seq::ssd_scan(ctx),
        Op::Rglru => seq::rglru(ctx),
        Op::LinearScan => seq::linear_scan(ctx),
        Op::Wkv6(w) => seq::wkv6(ctx, w.layout),
        Op::CausalConvWithState(a) => seq::causal_conv(ctx, a.channels_last),
        Op::NegativeLogLikelihoodLoss(l) => Ok(vision::loss(ctx, l.reduction)?[..1].to_vec()),
        Op::SoftmaxCrossEntropyLoss(l) => vision::loss(ctx, l.reduction),
        Op::GridSample(_) => vision::grid_sample(ctx),
        Op::NonMaxSuppression(_) => vision::non_max_suppression(ctx),
        Op::Shrink(_) => vision::same_as_input(ctx, false),
        Op::Lrn(_) | Op::LpNormalization(_) => vision::same_as_input(ctx, true),
        Op::Compress(c) => vision::compress(ctx, c),
        Op::ReverseSequence(_) => vision::reverse_sequence(ctx),
        Op::Unique(u) => vision::unique(ctx, u),
        Op::Det => vision::det(ctx),
        Op::LinearAttention(a) => attention::linear_attention(ctx, a),
        Op::Dft(d) => vision::dft(ctx, d),
        Op::CenterCropPad(c) => vision::center_crop_pad(ctx, c),
        Op::Col2Im(_) => vision::col2im(ctx),
        Op::AffineGrid(_) => vision::affine_grid(ctx),
        Op::TensorScatter(_) => vision::tensor_scatter(ctx),
        Op::RoiAlign(r) => vision::roi_align(ctx, r),
        Op::MaxUnpool(m) => vision::max_unpool(ctx, m),
        Op::DeformConv(_) => vision::deform_conv(ctx),
        Op::Stft(s) => vision::stft(ctx, s.onesided),
        Op::SignalWindow(w) => shape_ops::signal_window(ctx, w.output_dtype),
        Op::MelWeightMatrix(m) => shape_ops::mel_weight_matrix(ctx, m.output_dtype),
        Op::TfIdfVectorizer(t) => shape_ops::tf_idf_vectorizer(ctx, t),
        Op::StringNormalizer(_) => text::string_normalizer(ctx),
        Op::StringSplit(_) => text::string_split(ctx),
        Op::StringConcat => text::string_concat(ctx),
        Op::RegexFullMatch(_) => text::regex_full_match(ctx),
        Op::LabelEncoder(l) => text::label_encoder(ctx, l),
        Op::Adagrad(_) | Op::Momentum(_) => super::training::optimizer(ctx, 3),
        Op::Adam(_) => super::training::optimizer(ctx, 4),
        Op::FlexAttention(_) => preview::flex_attention(ctx),
        Op::FusedAttention(a) => attention::fused_attention(ctx, a),
        Op::Binarizer(_) => preview::binarizer(ctx),
        Op::ArrayFeatureExtractor => preview::array_feature_extractor(ctx),
        Op::TreeEnsemble(t) => preview::tree_ensemble(ctx, t.n_targets),
    }
}
