//! [`node`]: the one exhaustive `match` from [`Op`] to its reference implementation. Each arm only
//! picks inputs and attributes; the semantics live in the op-family files. Neural-network ops go
//! to [`crate::reference::nn`] with the node's raw input slots.

use planner::{Node, Op};

use crate::error::HostError;
use crate::reference::compare_logic::{self as cl, Compare, Logic};
use crate::reference::strides::{int_scalar, ints, optional, required};
use crate::reference::unary::{self as u, map_float, map_num};
use crate::reference::{
    NodeCtx, Scope, control, generate, index, lanes, math, nn, reduce, scatter, shape, slice,
};
use crate::tensor::HostTensor;

/// Evaluates one node on its input slots; returns one tensor per output slot it produces.
/// Inputs the node reads through column windows (`Op::input_windows`, set by the planner) are
/// first cut to their windows: the columns they name, viewed as the window's dims.
pub fn node(
    ctx: &NodeCtx,
    node: &Node,
    inputs: &[Option<&HostTensor>],
    scope: Scope,
) -> Result<Vec<HostTensor>, HostError> {
    let Some(windows) = node.op.input_windows().filter(|w| !w.is_empty()) else {
        return evaluate(ctx, node, inputs, scope);
    };
    let mut cut: Vec<Option<HostTensor>> = inputs.iter().map(|_| None).collect();
    for (i, w) in &windows.0 {
        let x = required(ctx, inputs, *i)?;
        let lead = x.shape().len().checked_sub(1).ok_or_else(|| ctx.err(format!("input {i} is a scalar")))?;
        let (start, end) = (w.start as i64, (w.start + w.width()) as i64);
        if end > x.shape()[lead] as i64 {
            return Err(ctx.err(format!("input {i} {:?} has no columns {start}..{end}", x.shape())));
        }
        let part = slice::slice(ctx, x, &[start], &[end], Some(&[-1]), None)?;
        cut[*i] = Some(HostTensor::new(w.operand_dims(x.shape()), part.into_data())?);
    }
    let inputs: Vec<Option<&HostTensor>> =
        inputs.iter().zip(&cut).map(|(given, cut)| cut.as_ref().or(*given)).collect();
    evaluate(ctx, node, &inputs, scope)
}

/// [`node`] on inputs as the op reads them.
fn evaluate(
    ctx: &NodeCtx,
    node: &Node,
    inputs: &[Option<&HostTensor>],
    scope: Scope,
) -> Result<Vec<HostTensor>, HostError> {
    let x = || required(ctx, inputs, 0);
    let y = || required(ctx, inputs, 1);
    let z = || required(ctx, inputs, 2);
    let all = || {
        inputs
            .iter()
            .enumerate()
            .map(|(i, t)| t.ok_or_else(|| ctx.err(format!("input {i} is required"))))
            .collect::<Result<Vec<_>, _>>()
    };
    let float = |f: fn(f64) -> f64| map_float(ctx, x()?, f);
    let red = |a: &planner::op::Reduce, k| reduce::reduce(ctx, x()?, optional(inputs, 1), a, k);
    use reduce::Reduction as R;
    let one = match &node.op {
        Op::Add => math::add(ctx, x()?, y()?),
        Op::Sub => math::sub(ctx, x()?, y()?),
        Op::Mul => math::mul(ctx, x()?, y()?),
        Op::Div => math::div(ctx, x()?, y()?),
        Op::Pow => math::pow(ctx, x()?, y()?),
        Op::Mod(a) => math::modulo(ctx, x()?, y()?, a.fmod),
        Op::BitShift(a) => math::bit_shift(ctx, x()?, y()?, a.direction),
        Op::Bitwise(o) => math::bitwise(ctx, x()?, y()?, *o),
        Op::BitwiseNot if !x()?.dtype().is_int() => Err(ctx.err("BitwiseNot needs integers")),
        Op::BitwiseNot => map_num(x()?, |v| v, |v| !v),
        Op::Max => math::max(ctx, &all()?),
        Op::Min => math::min(ctx, &all()?),
        Op::Sum => math::sum(ctx, &all()?),
        Op::Mean => math::mean(ctx, &all()?),
        Op::Equal if x()?.dtype() == planner::DType::String => super::strings::equal(ctx, x()?, y()?),
        Op::Equal => cl::compare(ctx, x()?, y()?, Compare::Equal),
        Op::StringConcat => super::strings::concat(ctx, x()?, y()?),
        Op::RegexFullMatch(a) => super::strings::regex_full_match(ctx, x()?, a),
        Op::StringNormalizer(a) => super::strings::string_normalizer(ctx, x()?, a),
        Op::LabelEncoder(a) => super::strings::label_encoder(ctx, x()?, a),
        Op::StringSplit(a) => return super::strings::string_split(ctx, x()?, a),
        Op::Less => cl::compare(ctx, x()?, y()?, Compare::Less),
        Op::Greater => cl::compare(ctx, x()?, y()?, Compare::Greater),
        Op::LessOrEqual => cl::compare(ctx, x()?, y()?, Compare::LessOrEqual),
        Op::GreaterOrEqual => cl::compare(ctx, x()?, y()?, Compare::GreaterOrEqual),
        Op::And => cl::logic(ctx, x()?, y()?, Logic::And),
        Op::Or => cl::logic(ctx, x()?, y()?, Logic::Or),
        Op::Xor => cl::logic(ctx, x()?, y()?, Logic::Xor),
        Op::Not => cl::not(ctx, x()?),
        Op::Abs => map_num(x()?, f64::abs, i64::wrapping_abs),
        Op::Neg => map_num(x()?, |v| -v, i64::wrapping_neg),
        Op::Sign => map_num(x()?, u::sign, i64::signum),
        Op::Relu => map_num(x()?, u::relu, |v| v.max(0)),
        Op::Exp => float(f64::exp),
        Op::Log => float(f64::ln),
        Op::Sqrt => float(f64::sqrt),
        Op::Reciprocal => float(u::reciprocal),
        Op::Floor => float(f64::floor),
        Op::Ceil => float(f64::ceil),
        Op::Round => float(u::round),
        Op::Sin => float(f64::sin),
        Op::Cos => float(f64::cos),
        Op::Tan => float(f64::tan),
        Op::Asin => float(f64::asin),
        Op::Acos => float(f64::acos),
        Op::Atan => float(f64::atan),
        Op::Sinh => float(f64::sinh),
        Op::Cosh => float(f64::cosh),
        Op::Asinh => float(f64::asinh),
        Op::Acosh => float(f64::acosh),
        Op::Atanh => float(f64::atanh),
        Op::Erf => float(u::erf),
        Op::Sigmoid => float(u::sigmoid),
        Op::HardSwish => float(u::hard_swish),
        Op::Tanh => float(f64::tanh),
        Op::Softplus => float(u::softplus),
        Op::Softsign => float(u::softsign),
        Op::Mish => float(u::mish),
        Op::LeakyRelu(a) => map_float(ctx, x()?, |v| u::leaky_relu(v, a.alpha)),
        Op::Elu(a) => map_float(ctx, x()?, |v| u::elu(v, a.alpha)),
        Op::Selu(a) => map_float(ctx, x()?, |v| u::selu(v, a.alpha, a.gamma)),
        Op::Celu(a) => map_float(ctx, x()?, |v| u::celu(v, a.alpha)),
        Op::HardSigmoid(a) => map_float(ctx, x()?, |v| u::hard_sigmoid(v, a.alpha, a.beta)),
        Op::ThresholdedRelu(a) => map_float(ctx, x()?, |v| u::thresholded_relu(v, a.alpha)),
        Op::Gelu(a) => match a.approximate {
            planner::op::GeluApproximation::None => float(u::gelu_erf),
            planner::op::GeluApproximation::Tanh => float(u::gelu_tanh),
        },
        Op::PRelu => math::prelu(ctx, x()?, y()?),
        Op::Clip(a) => {
            let attr = |v: Option<f32>| v.map(|v| HostTensor::new(vec![], vec![v])).transpose();
            let (lo_attr, hi_attr) = (attr(a.min)?, attr(a.max)?);
            let lo = optional(inputs, 1).or(lo_attr.as_ref());
            let hi = optional(inputs, 2).or(hi_attr.as_ref());
            math::clip(ctx, x()?, lo, hi)
        }
        Op::IsNaN => cl::is_nan(x()?),
        Op::IsInf(a) => cl::is_inf(x()?, a.detect_positive, a.detect_negative),
        Op::Where => cl::where_(ctx, x()?, y()?, z()?),
        Op::Cast(a) => lanes::cast(x()?, a.to, a.saturate, a.round_mode),
        Op::BitCast(a) => lanes::bit_cast(ctx, x()?, a.to),
        Op::CastLike(a) => lanes::cast(x()?, y()?.dtype(), a.saturate, a.round_mode),
        Op::Identity => Ok(x()?.clone()),
        Op::Dropout(_) => return shape::dropout(ctx, x()?, optional(inputs, 1), optional(inputs, 2)),
        Op::ReduceSum(a) => red(a, R::Sum),
        Op::ReduceMean(a) => red(a, R::Mean),
        Op::ReduceMax(a) => red(a, R::Max),
        Op::ReduceMin(a) => red(a, R::Min),
        Op::ReduceProd(a) => red(a, R::Prod),
        Op::ReduceL1(a) => red(a, R::L1),
        Op::ReduceL2(a) => red(a, R::L2),
        Op::ReduceLogSum(a) => red(a, R::LogSum),
        Op::ReduceLogSumExp(a) => red(a, R::LogSumExp),
        Op::ReduceSumSquare(a) => red(a, R::SumSquare),
        Op::ArgMax(a) => reduce::arg_reduce(ctx, x()?, a, true),
        Op::ArgMin(a) => reduce::arg_reduce(ctx, x()?, a, false),
        Op::CumSum(a) => reduce::cumsum(ctx, x()?, y()?, a.exclusive, a.reverse),
        Op::CumProd(a) => reduce::cumprod(ctx, x()?, y()?, a.exclusive, a.reverse),
        Op::Gather(a) => index::gather(ctx, x()?, y()?, a.axis),
        Op::GatherElements(a) => index::gather_elements(ctx, x()?, y()?, a.axis),
        Op::GatherNd(a) => index::gather_nd(ctx, x()?, y()?, a.batch_dims),
        Op::Scatter(a) => scatter::scatter_elements(ctx, x()?, y()?, z()?, a.axis, Default::default()),
        Op::ScatterElements(a) => scatter::scatter_elements(ctx, x()?, y()?, z()?, a.axis, a.reduction),
        Op::ScatterNd(a) => scatter::scatter_nd(ctx, x()?, y()?, z()?, a.reduction),
        Op::Slice(a) => {
            let list = |legacy: &Option<Vec<i64>>, slot: usize| match (legacy, optional(inputs, slot)) {
                (Some(v), _) => Ok(Some(v.clone())),
                (None, Some(t)) => ints(ctx, t, "slice parameter").map(Some),
                (None, None) => Ok(None),
            };
            let starts = list(&a.starts, 1)?.ok_or_else(|| ctx.err("starts is required"))?;
            let ends = list(&a.ends, 2)?.ok_or_else(|| ctx.err("ends is required"))?;
            let axes = list(&a.axes, 3)?;
            let steps = list(&None, 4)?;
            slice::slice(ctx, x()?, &starts, &ends, axes.as_deref(), steps.as_deref())
        }
        Op::Split(a) => {
            let sizes = match (&a.split, optional(inputs, 1)) {
                (Some(s), _) => Some(s.clone()),
                (None, Some(t)) => Some(ints(ctx, t, "split")?),
                (None, None) => None,
            };
            return slice::split(ctx, x()?, a.axis, sizes, a.num_outputs.unwrap_or(node.outputs.len()));
        }
        Op::Concat(a) => slice::concat(ctx, &all()?, a.axis),
        Op::Pad(a) => {
            let pads = match (&a.pads, optional(inputs, 1)) {
                (Some(p), _) => p.clone(),
                (None, Some(t)) => ints(ctx, t, "pads")?,
                (None, None) => return Err(ctx.err("pads is required")),
            };
            let legacy = HostTensor::new(vec![], vec![a.value.unwrap_or(0.0)])?;
            let value = optional(inputs, 2).filter(|t| !t.is_empty()).unwrap_or(&legacy);
            let axes = optional(inputs, 3).map(|t| ints(ctx, t, "axes")).transpose()?;
            slice::pad(ctx, x()?, &pads, value, axes, a.mode)
        }
        Op::Tile => shape::tile(ctx, x()?, y()?),
        Op::Expand => shape::expand(ctx, x()?, y()?),
        Op::Reshape(a) => shape::reshape(ctx, x()?, y()?, a.allowzero),
        Op::Flatten(a) => shape::flatten(ctx, x()?, a.axis),
        Op::Squeeze(a) => {
            let axes = match (&a.axes, optional(inputs, 1)) {
                (Some(v), _) => Some(v.clone()),
                (None, Some(t)) => Some(ints(ctx, t, "axes")?),
                (None, None) => None,
            };
            shape::squeeze(ctx, x()?, axes)
        }
        Op::Unsqueeze(a) => {
            let axes = match (&a.axes, optional(inputs, 1)) {
                (Some(v), _) => v.clone(),
                (None, Some(t)) => ints(ctx, t, "axes")?,
                (None, None) => return Err(ctx.err("axes is required")),
            };
            shape::unsqueeze(ctx, x()?, &axes)
        }
        Op::Transpose(a) => shape::transpose(ctx, x()?, a.perm.as_deref()),
        Op::Shape(a) => shape::shape_of(x()?, a.start, a.end),
        Op::Size => shape::size(x()?),
        Op::Constant(a) => HostTensor::from_const(&a.value),
        Op::EyeLike(a) => generate::eye_like(ctx, x()?, a),
        Op::SignalWindow(a) => generate::signal_window(ctx, x()?, a),
        Op::MelWeightMatrix(a) => generate::mel_weight_matrix(ctx, inputs, a),
        Op::TfIdfVectorizer(a) => return nn::tf_idf_vectorizer(ctx, a, inputs),
        Op::ConstantOfShape(a) => generate::constant_of_shape(ctx, x()?, &a.value),
        Op::Range => generate::range(ctx, x()?, y()?, z()?),
        Op::OneHot(a) => generate::one_hot(ctx, x()?, y()?, z()?, a.axis),
        Op::Trilu(a) => {
            let k = optional(inputs, 1).map(|t| int_scalar(ctx, t, "k")).transpose()?.unwrap_or(0);
            generate::trilu(ctx, x()?, k, a.upper)
        }
        Op::TopK(a) => {
            let k = match (a.k, optional(inputs, 1)) {
                (Some(k), _) => k,
                (None, Some(t)) => int_scalar(ctx, t, "K")?,
                (None, None) => return Err(ctx.err("K is required")),
            };
            return generate::top_k(ctx, x()?, k, a.axis, a.largest);
        }
        Op::NonZero => generate::non_zero(x()?),
        Op::DepthToSpace(a) => slice::depth_to_space(ctx, x()?, a.blocksize, a.mode),
        Op::SpaceToDepth(a) => slice::space_to_depth(ctx, x()?, a.blocksize),
        Op::If(a) => return control::if_(ctx, a, inputs, scope),
        Op::Loop(a) => return control::loop_(ctx, a, inputs, node.outputs.len(), scope),
        Op::Scan(a) => return control::scan(ctx, a, inputs, node.outputs.len(), scope),
        Op::MatMul => return nn::matmul(ctx, &(), inputs),
        Op::MatMulInteger => return nn::matmul_integer(ctx, &(), inputs),
        Op::QLinearMatMul => return nn::qlinear_matmul(ctx, &(), inputs),
        Op::ConvInteger(a) => return nn::conv_integer(ctx, a, inputs),
        Op::QLinearConv(a) => return nn::qlinear_conv(ctx, a, inputs),
        Op::QuantizeLinear(a) => return nn::quantize_linear(ctx, a, inputs),
        Op::DequantizeLinear(a) => return nn::dequantize_linear(ctx, a, inputs),
        Op::DynamicQuantizeLinear => return nn::dynamic_quantize_linear(ctx, &(), inputs),
        Op::Gemm(a) => return nn::gemm(ctx, a, inputs),
        Op::FusedGemm(_) | Op::FusedGather(_) | Op::FusedConv(_) => {
            return Err(ctx.err(format!(
                "{} is made by the planner's fusion; the reference runs unfused graphs",
                node.op.name()
            )));
        }
        Op::Einsum(a) => return nn::einsum(ctx, a, inputs),
        Op::Conv(a) => return nn::conv(ctx, a, inputs),
        Op::ConvTranspose(a) => return nn::conv_transpose(ctx, a, inputs),
        Op::MaxPool(a) => return nn::max_pool(ctx, a, inputs),
        Op::AveragePool(a) => return nn::average_pool(ctx, a, inputs),
        Op::GlobalAveragePool => return nn::global_average_pool(ctx, &(), inputs),
        Op::GlobalMaxPool => return nn::global_max_pool(ctx, &(), inputs),
        Op::LpPool(a) => return nn::lp_pool(ctx, a, inputs),
        Op::BatchNormalization(a) => return nn::batch_normalization(ctx, a, inputs),
        Op::InstanceNormalization(a) => return nn::instance_normalization(ctx, a, inputs),
        Op::LayerNormalization(a) => return nn::layer_normalization(ctx, a, inputs),
        Op::GroupNormalization(a) => return nn::group_normalization(ctx, a, inputs),
        Op::RmsNormalization(a) => return nn::rms_normalization(ctx, a, inputs),
        Op::Softmax(a) => return nn::softmax(ctx, a, inputs),
        Op::LogSoftmax(a) => return nn::log_softmax(ctx, a, inputs),
        Op::Hardmax(a) => return nn::hardmax(ctx, a, inputs),
        Op::Attention(a) => return nn::attention(ctx, a, inputs),
        Op::RotaryEmbedding(a) => return nn::rotary_embedding(ctx, a, inputs),
        Op::Resize(a) => return nn::resize(ctx, a, inputs),
        Op::Lstm(a) => return nn::lstm(ctx, a, inputs),
        Op::Gru(a) => return nn::gru(ctx, a, inputs),
        Op::Rnn(a) => return nn::rnn(ctx, a, inputs),
        Op::MambaScan => return nn::mamba_scan(ctx, &(), inputs),
        Op::GriffinRglru => return nn::griffin_rglru(ctx, &(), inputs),
        Op::RwkvWkv6 => return nn::rwkv_wkv6(ctx, &(), inputs),
        Op::SelectiveScan(a) => return nn::selective_scan(ctx, a, inputs),
        Op::SsdScan(a) => return nn::ssd_scan(ctx, a, inputs),
        Op::Rglru => return nn::rglru(ctx, &(), inputs),
        Op::LinearScan => return nn::linear_scan(ctx, &(), inputs),
        Op::Wkv6(a) => return nn::wkv6(ctx, a, inputs),
        Op::CausalConvWithState(a) => return nn::causal_conv_with_state(ctx, a, inputs),
        Op::NegativeLogLikelihoodLoss(a) => return nn::negative_log_likelihood_loss(ctx, a, inputs),
        Op::SoftmaxCrossEntropyLoss(a) => return nn::softmax_cross_entropy_loss(ctx, a, inputs),
        Op::GridSample(a) => return nn::grid_sample(ctx, a, inputs),
        Op::NonMaxSuppression(a) => return nn::non_max_suppression(ctx, a, inputs),
        Op::Compress(a) => return nn::compress(ctx, a, inputs),
        Op::ReverseSequence(a) => return nn::reverse_sequence(ctx, a, inputs),
        Op::Unique(a) => return nn::unique(ctx, a, inputs),
        Op::Lrn(a) => return nn::lrn(ctx, a, inputs),
        Op::LpNormalization(a) => return nn::lp_normalization(ctx, a, inputs),
        Op::Det => return nn::det(ctx, &(), inputs),
        Op::LinearAttention(a) => return nn::linear_attention(ctx, a, inputs),
        Op::Dft(a) => return nn::dft(ctx, a, inputs),
        Op::CenterCropPad(a) => return nn::center_crop_pad(ctx, a, inputs),
        Op::Col2Im(a) => return nn::col2im(ctx, a, inputs),
        Op::AffineGrid(a) => return nn::affine_grid(ctx, a, inputs),
        Op::TensorScatter(a) => return nn::tensor_scatter(ctx, a, inputs),
        Op::RoiAlign(a) => return nn::roi_align(ctx, a, inputs),
        Op::MaxUnpool(a) => return nn::max_unpool(ctx, a, inputs),
        Op::DeformConv(a) => return nn::deform_conv(ctx, a, inputs),
        Op::Stft(a) => return nn::stft(ctx, a, inputs),
        Op::Adagrad(a) => return nn::adagrad(ctx, a, inputs),
        Op::Adam(a) => return nn::adam(ctx, a, inputs),
        Op::Momentum(a) => return nn::momentum(ctx, a, inputs),
        Op::FlexAttention(a) => return nn::flex_attention(ctx, a, inputs, scope),
        Op::FusedAttention(_) => {
            return Err(ctx.err("FusedAttention is planner-internal: the reference runs the unfused graph"));
        }
        Op::Binarizer(a) => return nn::binarizer(ctx, a, inputs),
        Op::ArrayFeatureExtractor => return nn::array_feature_extractor(ctx, &(), inputs),
        Op::TreeEnsemble(a) => return nn::tree_ensemble(ctx, a, inputs),
        Op::Shrink(a) => map_float(ctx, x()?, |v| u::shrink(v, a.lambd, a.bias)),
    };
    Ok(vec![one?])
}
