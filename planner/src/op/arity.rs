//! `Op::arity`: how many input and output slots each operator accepts.
//!
//! Counts include optional slots (which may be `None` in a node). Control-flow operators whose slot
//! counts follow from their bodies are checked in more detail by `validate`.

use super::Op;

/// Accepted numbers of input and output slots, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arity {
    /// Fewest input slots.
    pub min_inputs: usize,
    /// Most input slots (`usize::MAX` for variadic operators).
    pub max_inputs: usize,
    /// Fewest output slots.
    pub min_outputs: usize,
    /// Most output slots.
    pub max_outputs: usize,
}

const MANY: usize = usize::MAX;

impl Arity {
    /// An arity from its four bounds.
    pub const fn new(min_inputs: usize, max_inputs: usize, min_outputs: usize, max_outputs: usize) -> Self {
        Arity { min_inputs, max_inputs, min_outputs, max_outputs }
    }

    /// True when `inputs` and `outputs` slot counts are accepted.
    pub fn accepts(&self, inputs: usize, outputs: usize) -> bool {
        (self.min_inputs..=self.max_inputs).contains(&inputs)
            && (self.min_outputs..=self.max_outputs).contains(&outputs)
    }
}

const fn fixed(inputs: usize, outputs: usize) -> Arity {
    Arity::new(inputs, inputs, outputs, outputs)
}

impl Op {
    /// Input and output slot counts this operator accepts.
    pub fn arity(&self) -> Arity {
        match self {
            Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Pow
            | Op::Mod(_)
            | Op::BitShift(_)
            | Op::Bitwise(_)
            | Op::Equal
            | Op::Less
            | Op::Greater
            | Op::LessOrEqual
            | Op::GreaterOrEqual
            | Op::And
            | Op::Or
            | Op::Xor
            | Op::PRelu
            | Op::CastLike(_)
            | Op::MatMul
            | Op::RmsNormalization(_)
            | Op::CumSum(_)
            | Op::CumProd(_)
            | Op::Gather(_)
            | Op::GatherElements(_)
            | Op::GatherNd(_)
            | Op::Tile
            | Op::Expand
            | Op::Reshape(_)
            | Op::GriffinRglru => fixed(2, 1),
            Op::Max | Op::Min | Op::Sum | Op::Mean | Op::Einsum(_) | Op::Concat(_) => {
                Arity::new(1, MANY, 1, 1)
            }
            Op::Not
            | Op::BitwiseNot
            | Op::Abs
            | Op::Neg
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Reciprocal
            | Op::Floor
            | Op::Ceil
            | Op::Round
            | Op::Sign
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
            | Op::Relu
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
            | Op::ThresholdedRelu(_)
            | Op::IsNaN
            | Op::IsInf(_)
            | Op::Cast(_)
            | Op::BitCast(_)
            | Op::Identity
            | Op::ArgMax(_)
            | Op::ArgMin(_)
            | Op::AveragePool(_)
            | Op::GlobalAveragePool
            | Op::GlobalMaxPool
            | Op::LpPool(_)
            | Op::Softmax(_)
            | Op::LogSoftmax(_)
            | Op::Hardmax(_)
            | Op::Flatten(_)
            | Op::Transpose(_)
            | Op::Shape(_)
            | Op::Size
            | Op::ConstantOfShape(_)
            | Op::EyeLike(_)
            | Op::SignalWindow(_)
            | Op::NonZero
            | Op::DepthToSpace(_)
            | Op::SpaceToDepth(_) => fixed(1, 1),
            Op::Clip(_) => Arity::new(1, 3, 1, 1),
            Op::MelWeightMatrix(_) => fixed(5, 1),
            Op::TfIdfVectorizer(_)
            | Op::StringNormalizer(_)
            | Op::RegexFullMatch(_)
            | Op::LabelEncoder(_) => fixed(1, 1),
            Op::StringSplit(_) => fixed(1, 2),
            Op::StringConcat => fixed(2, 1),
            Op::QuantizeLinear(_) | Op::DequantizeLinear(_) => Arity::new(2, 3, 1, 1),
            Op::DynamicQuantizeLinear => fixed(1, 3),
            Op::MatMulInteger => Arity::new(2, 4, 1, 1),
            Op::QLinearMatMul => fixed(8, 1),
            Op::ConvInteger(_) => Arity::new(2, 4, 1, 1),
            Op::QLinearConv(_) => Arity::new(8, 9, 1, 1),
            Op::Where
            | Op::InstanceNormalization(_)
            | Op::GroupNormalization(_)
            | Op::Scatter(_)
            | Op::ScatterElements(_)
            | Op::ScatterNd(_)
            | Op::Range
            | Op::OneHot(_) => fixed(3, 1),
            Op::Dropout(_) => Arity::new(1, 3, 1, 2),
            Op::ReduceSum(_)
            | Op::ReduceMean(_)
            | Op::ReduceMax(_)
            | Op::ReduceMin(_)
            | Op::ReduceProd(_)
            | Op::ReduceL1(_)
            | Op::ReduceL2(_)
            | Op::ReduceLogSum(_)
            | Op::ReduceLogSumExp(_)
            | Op::ReduceSumSquare(_)
            | Op::Squeeze(_)
            | Op::Unsqueeze(_)
            | Op::Trilu(_) => Arity::new(1, 2, 1, 1),
            Op::Gemm(_) | Op::Conv(_) | Op::ConvTranspose(_) => Arity::new(2, 3, 1, 1),
            // A, B, optional C, then up to three program inputs.
            Op::FusedGemm(_) => Arity::new(2, 6, 1, 1),
            Op::FusedGather(_) => Arity::new(2, 5, 1, 1),
            Op::FusedConv(_) => Arity::new(2, 6, 1, 1),
            Op::MaxPool(_) => Arity::new(1, 1, 1, 2),
            Op::BatchNormalization(_) => Arity::new(5, 5, 1, 3),
            Op::LayerNormalization(_) => Arity::new(2, 3, 1, 3),
            Op::Attention(_) => Arity::new(3, 7, 1, 4),
            Op::RotaryEmbedding(_) => Arity::new(3, 4, 1, 1),
            Op::Slice(_) => Arity::new(1, 5, 1, 1),
            Op::Split(_) => Arity::new(1, 2, 1, MANY),
            Op::Pad(_) | Op::Resize(_) => Arity::new(1, 4, 1, 1),
            Op::Constant(_) => Arity::new(0, 0, 1, 1),
            Op::TopK(_) => Arity::new(1, 2, 2, 2),
            Op::Lstm(_) => Arity::new(3, 8, 0, 3),
            Op::Gru(_) | Op::Rnn(_) => Arity::new(3, 6, 0, 2),
            Op::If(x) => Arity::new(1, 1, x.then_branch.outputs.len(), x.then_branch.outputs.len()),
            Op::Loop(_) => Arity::new(2, MANY, 1, MANY),
            Op::Scan(_) => Arity::new(1, MANY, 1, MANY),
            Op::MambaScan => fixed(6, 1),
            Op::RwkvWkv6 => fixed(5, 1),
            Op::SelectiveScan(_) | Op::SsdScan(_) => Arity::new(5, 9, 1, 2),
            Op::Rglru | Op::CausalConvWithState(_) => Arity::new(2, 4, 1, 2),
            Op::LinearScan => Arity::new(2, 3, 1, 2),
            Op::Wkv6(_) => Arity::new(5, 6, 1, 2),
            Op::NegativeLogLikelihoodLoss(_) => Arity::new(2, 3, 1, 1),
            Op::SoftmaxCrossEntropyLoss(_) => Arity::new(2, 3, 1, 2),
            Op::GridSample(_) | Op::Compress(_) | Op::ReverseSequence(_) => fixed(2, 1),
            Op::NonMaxSuppression(_) => Arity::new(2, 5, 1, 1),
            Op::Shrink(_) | Op::Lrn(_) | Op::Det | Op::LpNormalization(_) => fixed(1, 1),
            Op::Unique(_) => Arity::new(1, 1, 1, 4),
            Op::LinearAttention(_) => Arity::new(3, 6, 1, 2),
            Op::Dft(_) => Arity::new(1, 3, 1, 1),
            Op::CenterCropPad(_) => fixed(2, 1),
            Op::Col2Im(_) => fixed(3, 1),
            Op::AffineGrid(_) => fixed(2, 1),
            Op::RoiAlign(_) => fixed(3, 1),
            Op::MaxUnpool(_) => Arity::new(2, 3, 1, 1),
            Op::DeformConv(_) => Arity::new(3, 5, 1, 1),
            Op::Stft(_) => Arity::new(2, 4, 1, 1),
            // R, T, then 3 (Adagrad, Momentum) or 4 (Adam) tensors per optimized input; the
            // group structure is checked by shape inference.
            Op::Adagrad(_) | Op::Momentum(_) => Arity::new(5, MANY, 2, MANY),
            Op::Adam(_) => Arity::new(6, MANY, 3, MANY),
            Op::FlexAttention(_) => fixed(3, 1),
            Op::FusedAttention(_) => Arity::new(3, 6, 1, 1),
            Op::Binarizer(_) => fixed(1, 1),
            Op::ArrayFeatureExtractor => fixed(2, 1),
            // Input 1: the tables the planner packs for the GPU kernel (`plan::decompose`).
            Op::TreeEnsemble(_) => Arity::new(1, 2, 1, 1),
            Op::TensorScatter(_) => Arity::new(2, 3, 1, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::constant::ConstTensor;
    use crate::graph::Graph;
    use crate::op::{self, Op};

    #[test]
    fn names_domains_and_arity() {
        assert_eq!(Op::RmsNormalization(Default::default()).name(), "RMSNormalization");
        assert_eq!(Op::GatherNd(Default::default()).name(), "GatherND");
        assert_eq!(Op::SsdScan(Default::default()).name(), "SSDScan");
        assert_eq!(Op::RwkvWkv6.name(), "RWKV_WKV6");
        assert_eq!(Op::Wkv6(Default::default()).domain(), "ai.ferrofuse");
        assert_eq!(Op::MambaScan.domain(), "com.sofie");
        assert_eq!(Op::Add.domain(), "");
        assert_eq!(Op::Adam(Default::default()).domain(), "ai.onnx.preview.training");
        assert!(Op::Adagrad(Default::default()).arity().accepts(8, 4));
        assert!(Op::Add.arity().accepts(2, 1));
        assert!(!Op::Add.arity().accepts(3, 1));
        assert!(Op::Sum.arity().accepts(7, 1));
        assert!(Op::Constant(op::Constant { value: ConstTensor::scalar_f32(1.0) }).arity().accepts(0, 1));
        let body = Box::new(Graph::new());
        let iff = Op::If(op::If { then_branch: body.clone(), else_branch: body });
        assert!(iff.arity().accepts(1, 0));
        assert_eq!(iff.subgraphs().len(), 2);
    }

    #[test]
    fn defaults_follow_onnx() {
        assert_eq!(op::LeakyRelu::default().alpha, 0.01);
        assert_eq!(op::Softmax::default().axis, -1);
        assert_eq!(op::Flatten::default().axis, 1);
        assert!(op::Reduce::default().keepdims);
        assert_eq!(op::Conv::default().group, 1);
        assert_eq!(op::LpPool::default().p, 2);
        assert_eq!(op::Gemm::default().alpha, 1.0);
        assert_eq!(op::Resize::default().cubic_coeff_a, -0.75);
        assert!(op::Trilu::default().upper);
        assert_eq!(op::ConstantOfShape::default().value.to_f64s(), vec![0.0]);
        assert_eq!(op::NegativeLogLikelihoodLoss::default().reduction, op::LossReduction::Mean);
        assert_eq!(op::Shrink::default().lambd, 0.5);
        assert_eq!(op::ReverseSequence::default().batch_axis, 1);
        assert!(op::Unique::default().sorted);
        assert_eq!(op::Lrn::default().beta, 0.75);
        assert_eq!(op::GridSample::default().mode, op::GridSampleMode::Linear);
    }
}
