//! The ABI shared by host and device: the launch-parameter structs and [`KernelId`], the single list
//! of PTX entry points.
//!
//! Every struct here is `#[repr(C)]`, `Copy`, has no padding the compiler could fill differently on
//! the two targets (explicit `_pad` fields), and travels to the kernel by value as its first
//! parameter. The host passes the struct's bytes to `cuLaunchKernel`, so the layouts must agree
//! exactly; a host test pins each size.

/// A launch-parameter struct: `#[repr(C)]` plain data with explicit padding fields, so that all of
/// its bytes are initialised and the host can pass them to `cuLaunchKernel` as they are.
///
/// # Safety
/// Implement only for `#[repr(C)]` structs of integers and floats whose padding is spelled out as
/// fields (no implicit padding bytes).
pub unsafe trait Params: Copy {
    /// The struct's bytes, as the kernel receives them.
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the trait's contract: every byte of `Self` is initialised plain data; the slice
        // borrows `self`.
        unsafe {
            core::slice::from_raw_parts((self as *const Self).cast::<u8>(), core::mem::size_of::<Self>())
        }
    }
}

// SAFETY: #[repr(C)], u64/u32 fields with the padding spelled out as `_pad`.
unsafe impl Params for BinaryParams {}
// SAFETY: #[repr(C)], u64 then f32 and an explicit `_pad`.
unsafe impl Params for UnaryParams {}
// SAFETY: #[repr(C)], two u32.
unsafe impl Params for ProbeParams {}
// SAFETY: #[repr(C)], four u32, ten u64, then six 4-byte fields (the last an explicit `_pad`).
unsafe impl Params for GemmParams {}
// SAFETY: #[repr(C)], five u64 then two 4-byte fields: 48 bytes, no padding.
unsafe impl Params for RowParams {}
// SAFETY: #[repr(C)], u64, two u32 (the second an explicit `_pad`), then two u64 arrays.
unsafe impl Params for TransposeParams {}
// SAFETY: #[repr(C)], four u64.
unsafe impl Params for GatherParams {}

/// Largest tensor rank the strided elementwise kernels index. Higher ranks are collapsed by the host
/// (adjacent dimensions that are contiguous in every operand merge into one) before launch.
pub const MAX_RANK: usize = 8;

/// Parameters of a binary elementwise kernel, `y[i] = f(a[ia], b[ib])`.
///
/// Two layouts:
/// - `rank == 0`: `a`, `b` and `y` all hold `elems` contiguous elements (same shape, no
///   broadcasting); the kernel uses 16-byte vector accesses when all three pointers are 16-byte
///   aligned.
/// - `1 <= rank <= MAX_RANK`: the output has shape `out_shape[MAX_RANK - rank..]` (row-major,
///   contiguous) and the operands are read at element offsets `sum_d idx[d] * x_strides[d]`;
///   a stride of 0 broadcasts that dimension (NumPy rules). Unused leading entries are ignored.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BinaryParams {
    /// Number of output elements.
    pub elems: u64,
    /// Number of used dimensions, 0 for the contiguous layout.
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Output shape, right-aligned: dimension `d` of a rank-`r` shape is at `MAX_RANK - r + d`.
    pub out_shape: [u64; MAX_RANK],
    /// Element strides of `a`, right-aligned like `out_shape`; 0 broadcasts.
    pub a_strides: [u64; MAX_RANK],
    /// Element strides of `b`, right-aligned like `out_shape`; 0 broadcasts.
    pub b_strides: [u64; MAX_RANK],
}

/// Parameters of a unary elementwise kernel, `y[i] = f(x[i])` over `elems` contiguous elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnaryParams {
    /// Number of elements in `x` and `y`.
    pub elems: u64,
    /// Op attribute: the negative slope of LeakyRelu; unused (0) by other ops.
    pub alpha: f32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Elementwise function applied in a GEMM epilogue (after `alpha * A B + beta * C`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Activation {
    /// Identity.
    #[default]
    None = 0,
    /// `max(x, 0)`.
    Relu = 1,
    /// `1 / (1 + e^-x)`.
    Sigmoid = 2,
    /// `tanh(x)`.
    Tanh = 3,
    /// Gelu, erf form.
    GeluErf = 4,
    /// Gelu, tanh approximation.
    GeluTanh = 5,
    /// `x * sigmoid(x)`.
    Silu = 6,
    /// `x < 0 ? act_alpha * x : x`.
    LeakyRelu = 7,
}

impl Activation {
    /// The activation for a code read from parameters (unknown codes are the identity; the host
    /// only writes valid ones).
    pub const fn from_code(code: u32) -> Activation {
        match code {
            1 => Activation::Relu,
            2 => Activation::Sigmoid,
            3 => Activation::Tanh,
            4 => Activation::GeluErf,
            5 => Activation::GeluTanh,
            6 => Activation::Silu,
            7 => Activation::LeakyRelu,
            _ => Activation::None,
        }
    }
}

/// Parameters of the f32 GEMM kernels: for each batch `b < batch`, `i < m`, `j < n`,
/// `y[b*y_bs + i*n + j] = act(alpha * sum_k A[b,i,k] B[b,k,j] + beta * C[b,i,j])`, where
/// `A[b,i,k] = a[b*a_bs + i*a_rs + k*a_cs]`, `B[b,k,j] = b[b*b_bs + k*b_rs + j*b_cs]` and
/// `C[b,i,j] = c[b*c_bs + i*c_rs + j*c_cs]` (only when `has_c != 0`). Strides are in elements; a
/// zero stride broadcasts (bias rows, shared weights across a batch), a transposed operand swaps
/// its row and column strides.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmParams {
    /// Rows of the output.
    pub m: u32,
    /// Columns of the output.
    pub n: u32,
    /// Reduction length.
    pub k: u32,
    /// Batch count (grid z / y).
    pub batch: u32,
    /// A row stride.
    pub a_rs: u64,
    /// A column (k) stride.
    pub a_cs: u64,
    /// A batch stride.
    pub a_bs: u64,
    /// B row (k) stride.
    pub b_rs: u64,
    /// B column stride.
    pub b_cs: u64,
    /// B batch stride.
    pub b_bs: u64,
    /// C row stride.
    pub c_rs: u64,
    /// C column stride.
    pub c_cs: u64,
    /// C batch stride.
    pub c_bs: u64,
    /// Y batch stride (rows are contiguous, `n` apart).
    pub y_bs: u64,
    /// Scale of `A B`.
    pub alpha: f32,
    /// Scale of `C`.
    pub beta: f32,
    /// [`Activation`] code.
    pub act: u32,
    /// LeakyRelu slope.
    pub act_alpha: f32,
    /// Nonzero when `c` is read.
    pub has_c: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
}

/// Largest `m` the GEMV kernel handles (one accumulator register per row).
pub const GEMV_MAX_M: u32 = 8;

/// Output tile edge of `gemm_f32` (a block computes `GEMM_TILE x GEMM_TILE` outputs with
/// `GEMM_THREADS x GEMM_THREADS` threads).
pub const GEMM_TILE: u32 = 64;
/// Threads per edge of a `gemm_f32` block.
pub const GEMM_THREADS: u32 = 16;
/// Warps per `gemv_f32` block (they split the reduction, or own one column each).
pub const GEMV_WARPS: u32 = 16;
/// Columns a `gemv_f32` block owns when B's columns are contiguous (a divisor of 32).
pub const GEMV_COLS: u32 = 8;
/// Dynamic shared memory of `gemm_f32` (its A and B tiles) and of `gemv_f32` (partial sums).
pub const GEMM_SHARED_BYTES: u32 = 16384;

/// Parameters of the row kernels in `rows` (softmax, log-softmax, layer and RMS normalisation).
///
/// The tensor is viewed as `[outer, len, inner]` (row-major, contiguous); a *row* is the `len`
/// elements `base + j * inner`, `j < len`, for `base = o * len * inner + i`, `o < outer`,
/// `i < inner`, so there are `outer * inner` rows. The normalisations always have `inner == 1`.
/// `scale[j % scale_len]` and `bias[j % bias_len]` are read (a scale that broadcasts over leading
/// normalised dims has `scale_len < len`, dividing it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowParams {
    /// Dims before the reduced axis (product).
    pub outer: u64,
    /// Elements of one row (the reduced extent).
    pub len: u64,
    /// Dims after the reduced axis (product); the stride between a row's elements.
    pub inner: u64,
    /// Elements of `scale` (normalisations only; divides `len`).
    pub scale_len: u64,
    /// Elements of `bias`, 0 when there is none (LayerNormalization only; divides `len`).
    pub bias_len: u64,
    /// Added to the variance (mean square) before the square root (normalisations only).
    pub epsilon: f32,
    /// Threads that cooperate on one row: 1 (a thread per row), [`ROW_WARP`] (a warp per row) or
    /// the block size (a block per row, reductions through [`ROW_SHARED_BYTES`] of shared memory).
    pub threads_per_row: u32,
}

/// `RowParams::threads_per_row` for a warp per row.
pub const ROW_WARP: u32 = 32;
/// Dynamic shared memory of a row kernel launched with a block per row (one partial per warp).
pub const ROW_SHARED_BYTES: u32 = 32 * 4;

/// Parameters of `movement::transpose_f32`: `y[i] = x[sum_d idx[d] * in_strides[d]]`, where `idx`
/// is output index `i` unravelled over `out_shape[MAX_RANK - rank..]` (row-major). The host
/// collapses the permutation first (drops size-1 dims, merges output dims that stay adjacent in the
/// input), so `rank <= MAX_RANK` for any ONNX perm of rank <= 8 and rank 0 means a single element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransposeParams {
    /// Number of output (and input) elements.
    pub elems: u64,
    /// Number of used dimensions.
    pub rank: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Output shape, right-aligned like [`BinaryParams::out_shape`].
    pub out_shape: [u64; MAX_RANK],
    /// Input element stride of each output dimension (the input stride of axis `perm[d]`),
    /// right-aligned.
    pub in_strides: [u64; MAX_RANK],
}

/// Parameters of `movement::gather_f32` (ONNX Gather): data is viewed as `[outer, axis_len, inner]`,
/// the `n_idx` i64 indices are flattened, and `y[o, j, k] = x[o, idx[j] (+ axis_len if < 0), k]`
/// for the output `[outer, n_idx, inner]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherParams {
    /// Product of the data dims before the axis.
    pub outer: u64,
    /// Extent of the gathered axis.
    pub axis_len: u64,
    /// Product of the data dims after the axis.
    pub inner: u64,
    /// Number of indices (product of the indices' dims).
    pub n_idx: u64,
}

/// Parameters of the self-test kernels in `probe` (used by `ferrofuse doctor` and the GPU tests to
/// check the device intrinsics): the number of threads launched and of output words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeParams {
    /// Threads in the (single) block.
    pub threads: u32,
    /// Output words the kernel may write.
    pub out_words: u32,
}

/// The binary elementwise ops with a kernel (f32, NumPy broadcasting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (IEEE division)
    Div,
    /// `a ^ b` (C `powf` semantics)
    Pow,
    /// `max(a, b)`; NaN if either is NaN
    Max,
    /// `min(a, b)`; NaN if either is NaN
    Min,
}

impl BinaryOp {
    /// Every binary op, in declaration order.
    pub const ALL: [BinaryOp; 7] =
        [Self::Add, Self::Sub, Self::Mul, Self::Div, Self::Pow, Self::Max, Self::Min];

    /// The f32 kernel that applies this op.
    pub const fn kernel(self) -> KernelId {
        match self {
            Self::Add => KernelId::AddF32,
            Self::Sub => KernelId::SubF32,
            Self::Mul => KernelId::MulF32,
            Self::Div => KernelId::DivF32,
            Self::Pow => KernelId::PowF32,
            Self::Max => KernelId::MaxF32,
            Self::Min => KernelId::MinF32,
        }
    }
}

/// The unary elementwise ops with a kernel (f32, contiguous).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN stays NaN
    Relu,
    /// `x < 0 ? alpha * x : x`
    LeakyRelu {
        /// Negative slope (ONNX default 0.01).
        alpha: f32,
    },
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `tanh(x)`
    Tanh,
    /// `e^x`
    Exp,
    /// natural logarithm
    Log,
    /// square root (correctly rounded)
    Sqrt,
    /// `|x|`
    Abs,
    /// `-x`
    Neg,
    /// error function
    Erf,
    /// ONNX Gelu, `approximate = "none"`: `x/2 * (1 + erf(x / sqrt 2))`
    GeluErf,
    /// ONNX Gelu, `approximate = "tanh"`: `x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`
    GeluTanh,
    /// `x * sigmoid(x)`
    Silu,
    /// `ln(1 + e^x)`, evaluated without overflow
    Softplus,
}

impl UnaryOp {
    /// Every unary op (LeakyRelu with the ONNX default slope), in declaration order.
    pub const ALL: [UnaryOp; 14] = [
        Self::Relu,
        Self::LeakyRelu { alpha: 0.01 },
        Self::Sigmoid,
        Self::Tanh,
        Self::Exp,
        Self::Log,
        Self::Sqrt,
        Self::Abs,
        Self::Neg,
        Self::Erf,
        Self::GeluErf,
        Self::GeluTanh,
        Self::Silu,
        Self::Softplus,
    ];

    /// The f32 kernel that applies this op.
    pub const fn kernel(self) -> KernelId {
        match self {
            Self::Relu => KernelId::ReluF32,
            Self::LeakyRelu { .. } => KernelId::LeakyReluF32,
            Self::Sigmoid => KernelId::SigmoidF32,
            Self::Tanh => KernelId::TanhF32,
            Self::Exp => KernelId::ExpF32,
            Self::Log => KernelId::LogF32,
            Self::Sqrt => KernelId::SqrtF32,
            Self::Abs => KernelId::AbsF32,
            Self::Neg => KernelId::NegF32,
            Self::Erf => KernelId::ErfF32,
            Self::GeluErf => KernelId::GeluErfF32,
            Self::GeluTanh => KernelId::GeluTanhF32,
            Self::Silu => KernelId::SiluF32,
            Self::Softplus => KernelId::SoftplusF32,
        }
    }

    /// The op's attribute as the kernel reads it ([`UnaryParams::alpha`]).
    pub const fn alpha(self) -> f32 {
        match self {
            Self::LeakyRelu { alpha } => alpha,
            _ => 0.0,
        }
    }
}

/// Every kernel entry point in the PTX. [`KernelId::symbol`] is the only place a kernel's name is
/// spelled; the host resolves all of them when it loads the module, so a missing one fails at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[repr(u32)]
pub enum KernelId {
    /// `elementwise::add_f32`
    AddF32,
    /// `elementwise::sub_f32`
    SubF32,
    /// `elementwise::mul_f32`
    MulF32,
    /// `elementwise::div_f32`
    DivF32,
    /// `elementwise::pow_f32`
    PowF32,
    /// `elementwise::max_f32`
    MaxF32,
    /// `elementwise::min_f32`
    MinF32,
    /// `elementwise::relu_f32`
    ReluF32,
    /// `elementwise::leaky_relu_f32`
    LeakyReluF32,
    /// `elementwise::sigmoid_f32`
    SigmoidF32,
    /// `elementwise::tanh_f32`
    TanhF32,
    /// `elementwise::exp_f32`
    ExpF32,
    /// `elementwise::log_f32`
    LogF32,
    /// `elementwise::sqrt_f32`
    SqrtF32,
    /// `elementwise::abs_f32`
    AbsF32,
    /// `elementwise::neg_f32`
    NegF32,
    /// `elementwise::erf_f32`
    ErfF32,
    /// `elementwise::gelu_erf_f32`
    GeluErfF32,
    /// `elementwise::gelu_tanh_f32`
    GeluTanhF32,
    /// `elementwise::silu_f32`
    SiluF32,
    /// `elementwise::softplus_f32`
    SoftplusF32,
    /// `gemm::gemm_f32`: tiled f32 GEMM with epilogue
    GemmF32,
    /// `gemm::gemv_f32`: f32 GEMM for `m <= GEMV_MAX_M` (latency-lean small batches)
    GemvF32,
    /// `rows::softmax_f32`: softmax along one axis
    SoftmaxF32,
    /// `rows::log_softmax_f32`: log-softmax along one axis
    LogSoftmaxF32,
    /// `rows::layer_norm_f32`: LayerNormalization (Y only)
    LayerNormF32,
    /// `rows::rms_norm_f32`: RMSNormalization
    RmsNormF32,
    /// `movement::transpose_f32`: ONNX Transpose (any permutation up to rank 8)
    TransposeF32,
    /// `movement::gather_f32`: ONNX Gather along one axis with i64 indices
    GatherF32,
    /// `probe::probe_warp`: indices, barriers, shuffles, votes, atomics, dynamic shared memory
    ProbeWarp,
    /// `probe::probe_mma`: `cp.async`, `ldmatrix` and `mma.sync` (bf16) on one 16x8x16 tile
    ProbeMma,
    /// `probe::probe_hopper`: the sm_90a `wgmma` fences and async-proxy fence (reports whether the
    /// flavour it runs in has them)
    ProbeHopper,
}

impl KernelId {
    /// Every kernel, in declaration order.
    pub const ALL: [KernelId; 32] = [
        Self::AddF32,
        Self::SubF32,
        Self::MulF32,
        Self::DivF32,
        Self::PowF32,
        Self::MaxF32,
        Self::MinF32,
        Self::ReluF32,
        Self::LeakyReluF32,
        Self::SigmoidF32,
        Self::TanhF32,
        Self::ExpF32,
        Self::LogF32,
        Self::SqrtF32,
        Self::AbsF32,
        Self::NegF32,
        Self::ErfF32,
        Self::GeluErfF32,
        Self::GeluTanhF32,
        Self::SiluF32,
        Self::SoftplusF32,
        Self::GemmF32,
        Self::GemvF32,
        Self::SoftmaxF32,
        Self::LogSoftmaxF32,
        Self::LayerNormF32,
        Self::RmsNormF32,
        Self::TransposeF32,
        Self::GatherF32,
        Self::ProbeWarp,
        Self::ProbeMma,
        Self::ProbeHopper,
    ];

    /// The PTX `.entry` name of this kernel.
    pub const fn symbol(self) -> &'static str {
        match self {
            Self::AddF32 => "add_f32",
            Self::SubF32 => "sub_f32",
            Self::MulF32 => "mul_f32",
            Self::DivF32 => "div_f32",
            Self::PowF32 => "pow_f32",
            Self::MaxF32 => "max_f32",
            Self::MinF32 => "min_f32",
            Self::ReluF32 => "relu_f32",
            Self::LeakyReluF32 => "leaky_relu_f32",
            Self::SigmoidF32 => "sigmoid_f32",
            Self::TanhF32 => "tanh_f32",
            Self::ExpF32 => "exp_f32",
            Self::LogF32 => "log_f32",
            Self::SqrtF32 => "sqrt_f32",
            Self::AbsF32 => "abs_f32",
            Self::NegF32 => "neg_f32",
            Self::ErfF32 => "erf_f32",
            Self::GeluErfF32 => "gelu_erf_f32",
            Self::GeluTanhF32 => "gelu_tanh_f32",
            Self::SiluF32 => "silu_f32",
            Self::SoftplusF32 => "softplus_f32",
            Self::GemmF32 => "gemm_f32",
            Self::GemvF32 => "gemv_f32",
            Self::SoftmaxF32 => "softmax_f32",
            Self::LogSoftmaxF32 => "log_softmax_f32",
            Self::LayerNormF32 => "layer_norm_f32",
            Self::RmsNormF32 => "rms_norm_f32",
            Self::TransposeF32 => "transpose_f32",
            Self::GatherF32 => "gather_f32",
            Self::ProbeWarp => "probe_warp",
            Self::ProbeMma => "probe_mma",
            Self::ProbeHopper => "probe_hopper",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_kernel_once_in_order() {
        for (i, k) in KernelId::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i, "{k:?} out of order in KernelId::ALL");
        }
        for (i, a) in KernelId::ALL.iter().enumerate() {
            for b in &KernelId::ALL[i + 1..] {
                assert_ne!(a.symbol(), b.symbol());
            }
        }
    }

    #[test]
    fn param_layouts_are_pinned() {
        assert_eq!(core::mem::size_of::<BinaryParams>(), 16 + 3 * 8 * MAX_RANK);
        assert_eq!(core::mem::align_of::<BinaryParams>(), 8);
        assert_eq!(core::mem::size_of::<UnaryParams>(), 16);
        assert_eq!(core::mem::size_of::<ProbeParams>(), 8);
        assert_eq!(core::mem::size_of::<GemmParams>(), 16 + 10 * 8 + 24);
        assert_eq!(core::mem::size_of::<RowParams>(), 5 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<TransposeParams>(), 16 + 2 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<GatherParams>(), 4 * 8);
    }
}
