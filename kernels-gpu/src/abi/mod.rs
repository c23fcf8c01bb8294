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

/// Largest tensor rank the strided elementwise kernels index. Higher ranks are collapsed by the host
/// (adjacent dimensions that are contiguous in every operand merge into one) before launch.
pub const MAX_RANK: usize = 8;

mod attention;
mod conv;
mod elementwise;
mod gemm;
mod indexing;
mod logic;
mod loss;
mod movement;
mod norm;
mod pack;
mod probe;
mod recurrent;
mod reduce;
mod resize;
mod rows;
mod select;
mod sequence;
mod tree;
mod vision;

pub use attention::*;
pub use conv::*;
pub use elementwise::*;
pub use gemm::*;
pub use indexing::*;
pub use logic::*;
pub use loss::*;
pub use movement::*;
pub use norm::*;
pub use pack::*;
pub use probe::*;
pub use recurrent::*;
pub use reduce::*;
pub use resize::*;
pub use rows::*;
pub use select::*;
pub use sequence::*;
pub use tree::*;
pub use vision::*;

/// Declares [`KernelId`]: one line per kernel, its variant and its PTX `.entry` name.
macro_rules! kernel_ids {
    ($($(#[$doc:meta])* $id:ident => $symbol:literal,)*) => {
        /// Every kernel entry point in the PTX. [`KernelId::symbol`] is the only place a kernel's name
        /// is spelled; the host resolves all of them when it loads the module, so a missing one fails
        /// at start.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[repr(u32)]
        pub enum KernelId {
            $($(#[$doc])* $id,)*
        }

        impl KernelId {
            /// Every kernel, in declaration order.
            pub const ALL: &'static [KernelId] = &[$(Self::$id,)*];

            /// The PTX `.entry` name of this kernel.
            pub const fn symbol(self) -> &'static str {
                match self {
                    $(Self::$id => $symbol,)*
                }
            }
        }
    };
}

// One section per kernel family (`kernels-gpu/src/<family>.rs`), each kernel's doc names its function.
kernel_ids! {
    // elementwise
    /// `elementwise::add_f32`
    AddF32 => "add_f32",
    /// `elementwise::sub_f32`
    SubF32 => "sub_f32",
    /// `elementwise::mul_f32`
    MulF32 => "mul_f32",
    /// `elementwise::div_f32`
    DivF32 => "div_f32",
    /// `elementwise::pow_f32`
    PowF32 => "pow_f32",
    /// `elementwise::max_f32`
    MaxF32 => "max_f32",
    /// `elementwise::min_f32`
    MinF32 => "min_f32",
    /// `elementwise::relu_f32`
    ReluF32 => "relu_f32",
    /// `elementwise::leaky_relu_f32`
    LeakyReluF32 => "leaky_relu_f32",
    /// `elementwise::sigmoid_f32`
    SigmoidF32 => "sigmoid_f32",
    /// `elementwise::tanh_f32`
    TanhF32 => "tanh_f32",
    /// `elementwise::exp_f32`
    ExpF32 => "exp_f32",
    /// `elementwise::log_f32`
    LogF32 => "log_f32",
    /// `elementwise::sqrt_f32`
    SqrtF32 => "sqrt_f32",
    /// `elementwise::abs_f32`
    AbsF32 => "abs_f32",
    /// `elementwise::neg_f32`
    NegF32 => "neg_f32",
    /// `elementwise::erf_f32`
    ErfF32 => "erf_f32",
    /// `elementwise::gelu_erf_f32`
    GeluErfF32 => "gelu_erf_f32",
    /// `elementwise::gelu_tanh_f32`
    GeluTanhF32 => "gelu_tanh_f32",
    /// `elementwise::silu_f32`
    SiluF32 => "silu_f32",
    /// `elementwise::softplus_f32`
    SoftplusF32 => "softplus_f32",
    /// `elementwise::relu_f64`
    ReluF64 => "relu_f64",
    /// `elementwise::exp_f64`
    ExpF64 => "exp_f64",
    /// `elementwise::log_f64`
    LogF64 => "log_f64",
    /// `elementwise::sqrt_f64`
    SqrtF64 => "sqrt_f64",
    /// `elementwise::abs_f64`
    AbsF64 => "abs_f64",
    /// `elementwise::neg_f64`
    NegF64 => "neg_f64",
    /// `program::ew_program_f32`: a fused chain of f32 elementwise ops (an elementwise program)
    EwProgramF32 => "ew_program_f32",
    // gemm
    /// `gemm::gemm_f32`: tiled f32 GEMM with epilogue
    GemmF32 => "gemm_f32",
    /// `gemm::gemv_f32`: f32 GEMM for `m <= GEMV_MAX_M` (latency-lean small batches)
    GemvF32 => "gemv_f32",
    /// `gemm::gemm_reduce_f32`: sums the split-K partials of `gemm_f32` and applies the epilogue
    GemmReduceF32 => "gemm_reduce_f32",
    /// `mlp::mlp_f32`: a chain of small-`m` GEMM layers in one launch (one cluster on Hopper)
    MlpF32 => "mlp_f32",
    /// `gemm::gemm_program_f32`: `gemm_f32` whose epilogue continues with an elementwise program
    GemmProgramF32 => "gemm_program_f32",
    /// `gemm::gemv_program_f32`: `gemv_f32` whose epilogue continues with an elementwise program
    GemvProgramF32 => "gemv_program_f32",
    /// `gemm::gemm_reduce_program_f32`: `gemm_reduce_f32` whose epilogue continues with an
    /// elementwise program
    GemmReduceProgramF32 => "gemm_reduce_program_f32",
    /// `gemm_tc::gemm_tc_f32`: f32 GEMM on the tensor cores (3xTF32, f32 accuracy), small tiles
    /// for small `m`, the reduction split over the warps of a block
    GemmTcF32 => "gemm_tc_f32",
    /// `gemm_tc::gemm_tc_program_f32`: `gemm_tc_f32` whose epilogue continues with an elementwise
    /// program
    GemmTcProgramF32 => "gemm_tc_program_f32",
    /// `gemm_tc::gemm_tc_packed_f32`: `gemm_tc_f32` with B a weight packed and split on the host
    /// (`gemm_tc_packed_len`): 16-byte loads, no B splitting
    GemmTcPackedF32 => "gemm_tc_packed_f32",
    /// `gemm_tc::gemm_tc_packed_program_f32`: `gemm_tc_packed_f32` whose epilogue continues with an
    /// elementwise program
    GemmTcPackedProgramF32 => "gemm_tc_packed_program_f32",
    /// `gemm_tc::gemm_tc_packed_norm_f32`: `gemm_tc_packed_f32` whose A is the LayerNormalization
    /// of its input rows, applied as A is loaded
    GemmTcPackedNormF32 => "gemm_tc_packed_norm_f32",
    /// `gemm_tc::pair::gemm_tc_pair_f32`: `gemm_tc_f32` with each column tile's k rounds split
    /// over a pair of blocks (a cluster of two on Hopper)
    GemmTcPairF32 => "gemm_tc_pair_f32",
    /// `gemm_tc::pair::gemm_tc_program_pair_f32`: `gemm_tc_program_f32` over block pairs
    GemmTcProgramPairF32 => "gemm_tc_program_pair_f32",
    /// `gemm_tc::pair::gemm_tc_packed_pair_f32`: `gemm_tc_packed_f32` over block pairs
    GemmTcPackedPairF32 => "gemm_tc_packed_pair_f32",
    /// `gemm_tc::pair::gemm_tc_packed_program_pair_f32`: `gemm_tc_packed_program_f32` over block
    /// pairs
    GemmTcPackedProgramPairF32 => "gemm_tc_packed_program_pair_f32",
    /// `gemm_tc::pair::gemm_tc_packed_norm_pair_f32`: `gemm_tc_packed_norm_f32` over block pairs
    GemmTcPackedNormPairF32 => "gemm_tc_packed_norm_pair_f32",
    /// `gemm_tile::gemm_tc128_n_f32`: f32 GEMM on the tensor cores (3xTF32), 128 x 128 block
    /// tiles through a `cp.async` pipeline, B's columns contiguous; optional program epilogue
    GemmTc128NF32 => "gemm_tc128_n_f32",
    /// `gemm_tile::gemm_tc128_k_f32`: `gemm_tc128_n_f32` with B's k contiguous (Gemm transB)
    GemmTc128KF32 => "gemm_tc128_k_f32",
    /// `gemm_tile::gemm_tc64_n_f32`: `gemm_tc128_n_f32` with 64 x 64 block tiles
    GemmTc64NF32 => "gemm_tc64_n_f32",
    /// `gemm_tile::gemm_tc64_k_f32`: `gemm_tc128_k_f32` with 64 x 64 block tiles
    GemmTc64KF32 => "gemm_tc64_k_f32",
    /// `gemm_tile::gemm_tc128_n_tf32`: `gemm_tc128_n_f32` in TF32 (operands rounded, one product)
    GemmTc128NTf32 => "gemm_tc128_n_tf32",
    /// `gemm_tile::gemm_tc128_k_tf32`: `gemm_tc128_k_f32` in TF32
    GemmTc128KTf32 => "gemm_tc128_k_tf32",
    /// `gemm_tile::gemm_tc64_n_tf32`: `gemm_tc64_n_f32` in TF32
    GemmTc64NTf32 => "gemm_tc64_n_tf32",
    /// `gemm_tile::gemm_tc64_k_tf32`: `gemm_tc64_k_f32` in TF32
    GemmTc64KTf32 => "gemm_tc64_k_tf32",
    /// `gemm_tile::gemm_tc128_n_f16`: `gemm_tc128_n_f32` with operands rounded to f16 (one
    /// `m16n8k16` product, f32 accumulation)
    GemmTc128NF16 => "gemm_tc128_n_f16",
    /// `gemm_tile::gemm_tc128_k_f16`: `gemm_tc128_k_f32` in f16
    GemmTc128KF16 => "gemm_tc128_k_f16",
    /// `gemm_tile::gemm_tc64_n_f16`: `gemm_tc64_n_f32` in f16
    GemmTc64NF16 => "gemm_tc64_n_f16",
    /// `gemm_tile::gemm_tc64_k_f16`: `gemm_tc64_k_f32` in f16
    GemmTc64KF16 => "gemm_tc64_k_f16",
    /// `gemm_tile::gemm_tc128_n_bf16`: `gemm_tc128_n_f32` with operands rounded to bf16
    GemmTc128NBf16 => "gemm_tc128_n_bf16",
    /// `gemm_tile::gemm_tc128_k_bf16`: `gemm_tc128_k_f32` in bf16
    GemmTc128KBf16 => "gemm_tc128_k_bf16",
    /// `gemm_tile::gemm_tc64_n_bf16`: `gemm_tc64_n_f32` in bf16
    GemmTc64NBf16 => "gemm_tc64_n_bf16",
    /// `gemm_tile::gemm_tc64_k_bf16`: `gemm_tc64_k_f32` in bf16
    GemmTc64KBf16 => "gemm_tc64_k_bf16",
    /// `gemm_wg::gemm_wg128_f32`: f32 GEMM on the Hopper tensor cores through `wgmma` (3xTF32),
    /// 128 x 128 block tiles, B a weight packed at plan time (`gemm_wg_packed_len`); optional
    /// program epilogue. Hopper flavour only (traps on the portable one)
    GemmWg128F32 => "gemm_wg128_f32",
    /// `gemm_wg::gemm_wg64_f32`: `gemm_wg128_f32` with 64 x 64 block tiles (one warpgroup)
    GemmWg64F32 => "gemm_wg64_f32",
    /// `gemm_wg::gemm_wg128_tf32`: `gemm_wg128_f32` in TF32 (one product, B packed rounded)
    GemmWg128Tf32 => "gemm_wg128_tf32",
    /// `gemm_wg::gemm_wg64_tf32`: `gemm_wg64_f32` in TF32
    GemmWg64Tf32 => "gemm_wg64_tf32",
    /// `gemm_wg::gemm_wg128_cat_f32`: `gemm_wg128_f32` reading A as segments of row tables, in
    /// order or gathered ([`GemmCatParams`])
    GemmWg128CatF32 => "gemm_wg128_cat_f32",
    /// `gemm_wg::gemm_wg64_cat_f32`: `gemm_wg64_f32` reading A as [`GemmCatParams`] segments
    GemmWg64CatF32 => "gemm_wg64_cat_f32",
    /// `gemm_wg::gemm_wg64_cat_resident_f32`: `gemm_wg64_cat_f32` with B resident in shared memory
    /// over several row tiles
    GemmWg64CatResidentF32 => "gemm_wg64_cat_resident_f32",
    /// `gemm_wg::gemm_wg128_cat_tf32`: `gemm_wg128_cat_f32` in TF32
    GemmWg128CatTf32 => "gemm_wg128_cat_tf32",
    /// `gemm_wg::gemm_wg64_cat_tf32`: `gemm_wg64_cat_f32` in TF32
    GemmWg64CatTf32 => "gemm_wg64_cat_tf32",
    // rows
    /// `rows::softmax_f32`: softmax along one axis
    SoftmaxF32 => "softmax_f32",
    /// `rows::log_softmax_f32`: log-softmax along one axis
    LogSoftmaxF32 => "log_softmax_f32",
    /// `rows::hardmax_f32`: Hardmax along one axis
    HardmaxF32 => "hardmax_f32",
    /// `rows::lp_norm1_f32`: LpNormalization with p = 1
    LpNorm1F32 => "lp_norm1_f32",
    /// `rows::lp_norm2_f32`: LpNormalization with p = 2
    LpNorm2F32 => "lp_norm2_f32",
    /// `rows::layer_norm_f32`: LayerNormalization (Y, and optionally Mean and InvStdDev)
    LayerNormF32 => "layer_norm_f32",
    /// `norm::lrn_f32`: ONNX LRN (local response normalization across channels)
    LrnF32 => "lrn_f32",
    /// `rows::rms_norm_f32`: RMSNormalization
    RmsNormF32 => "rms_norm_f32",
    // recurrent
    /// `recurrent::lstm_f32`: ONNX LSTM recurrence over a precomputed input projection
    LstmF32 => "lstm_f32",
    /// `recurrent::gru_f32`: ONNX GRU recurrence over a precomputed input projection
    GruF32 => "gru_f32",
    /// `recurrent::rnn_f32`: ONNX RNN recurrence over a precomputed input projection
    RnnF32 => "rnn_f32",
    // movement
    /// `movement::transpose_f32`: ONNX Transpose (any permutation up to rank 8)
    TransposeF32 => "transpose_f32",
    /// `movement::gather_f32`: ONNX Gather along one axis with i64 indices
    GatherF32 => "gather_f32",
    /// `movement::gather_program_f32`: `gather_f32` whose gathered elements go through an
    /// elementwise program before they are stored
    GatherProgramF32 => "gather_program_f32",
    /// `movement::gather_b8`: ONNX Gather of 8-byte elements (i64, f64)
    GatherB8 => "gather_b8",
    /// `movement::gather_b1`: ONNX Gather of 1-byte elements (bool, i8, u8)
    GatherB1 => "gather_b1",
    /// `movement::strided_copy_b1`: strided copy of 1-byte elements (Slice, Split, Concat, Expand, Tile)
    StridedCopyB1 => "strided_copy_b1",
    /// `movement::strided_copy_b2`: strided copy of 2-byte elements
    StridedCopyB2 => "strided_copy_b2",
    /// `movement::strided_copy_b4`: strided copy of 4-byte elements
    StridedCopyB4 => "strided_copy_b4",
    /// `movement::strided_copy_b8`: strided copy of 8-byte elements
    StridedCopyB8 => "strided_copy_b8",
    /// `movement::strided_copy_b16`: strided copy of 16-byte vectors (the planner's copies of
    /// narrower elements whose inner runs are whole vectors)
    StridedCopyB16 => "strided_copy_b16",
    /// `movement::reverse_sequence_b4`: ONNX ReverseSequence of 4-byte elements
    ReverseSequenceB4 => "reverse_sequence_b4",
    /// `movement::reverse_sequence_b8`: ONNX ReverseSequence of 8-byte elements
    ReverseSequenceB8 => "reverse_sequence_b8",
    /// `movement::pad_b4`: ONNX Pad of 4-byte elements
    PadB4 => "pad_b4",
    /// `movement::pad_b8`: ONNX Pad of 8-byte elements
    PadB8 => "pad_b8",
    /// `movement::gather_nd_b1`: ONNX GatherND of 1-byte elements
    GatherNdB1 => "gather_nd_b1",
    /// `movement::gather_nd_b4`: ONNX GatherND of 4-byte elements
    GatherNdB4 => "gather_nd_b4",
    /// `movement::gather_nd_b8`: ONNX GatherND of 8-byte elements
    GatherNdB8 => "gather_nd_b8",
    /// `movement::gather_nd_b16`: ONNX GatherND of slices of whole 16-byte vectors
    GatherNdB16 => "gather_nd_b16",
    // resize
    /// `resize::resize_nearest_b1`: ONNX Resize, nearest, 1-byte elements
    ResizeNearestB1 => "resize_nearest_b1",
    /// `resize::resize_nearest_b2`: ONNX Resize, nearest, 2-byte elements
    ResizeNearestB2 => "resize_nearest_b2",
    /// `resize::resize_nearest_b4`: ONNX Resize, nearest, 4-byte elements
    ResizeNearestB4 => "resize_nearest_b4",
    /// `resize::resize_nearest_b8`: ONNX Resize, nearest, 8-byte elements
    ResizeNearestB8 => "resize_nearest_b8",
    /// `resize::resize_linear_f32`: ONNX Resize, linear (n-linear over up to 3 axes), f32
    ResizeLinearF32 => "resize_linear_f32",
    /// `resize::resize_cubic_f32`: ONNX Resize, cubic (up to 3 axes), f32
    ResizeCubicF32 => "resize_cubic_f32",
    /// `sampling::grid_sample_f32`: ONNX GridSample (nearest, linear, cubic; 1 to 3 spatial dims)
    GridSampleF32 => "grid_sample_f32",
    /// `sampling::affine_grid_f32`: ONNX AffineGrid (2-D and 3-D)
    AffineGridF32 => "affine_grid_f32",
    /// `sampling::dft_f32`: ONNX DFT by direct summation (forward, inverse, one-sided)
    DftF32 => "dft_f32",
    /// `sampling::stft_f32`: ONNX STFT by direct summation
    StftF32 => "stft_f32",
    /// `sampling::col2im_f32`: ONNX Col2Im (1 to 3 spatial dims)
    Col2ImF32 => "col2im_f32",
    // logic
    /// `logic::cast`: ONNX Cast between f32, f64, i64, i32, i8, u8, bool, f16, bf16
    Cast => "cast",
    /// `logic::compare`: comparisons and boolean logic with broadcasting, bool output
    Compare => "compare",
    /// `logic::int_arith`: integer arithmetic with broadcasting (Add, Sub, Mul, Div, Mod, Max, Min,
    /// Pow, Neg, Abs)
    IntArith => "int_arith",
    /// `logic::one_hot`: ONNX OneHot (indices and values of any type)
    OneHot => "one_hot",
    /// `logic::where_b1`: ONNX Where of 1-byte elements
    WhereB1 => "where_b1",
    /// `logic::where_b4`: ONNX Where of 4-byte elements
    WhereB4 => "where_b4",
    /// `logic::where_b8`: ONNX Where of 8-byte elements
    WhereB8 => "where_b8",
    // sequence
    /// `sequence::selective_scan_f32`: Mamba-1 selective scan (SelectiveScan, SOFIE MambaScan)
    SelectiveScanF32 => "selective_scan_f32",
    /// `sequence::selective_scan_chunked_f32`: the same chunked over time (prefill, N <= 32)
    SelectiveScanChunkedF32 => "selective_scan_chunked_f32",
    /// `sequence::ssd_scan_f32`: Mamba-2 SSD scan, recurrent form (SSDScan)
    SsdScanF32 => "ssd_scan_f32",
    /// `sequence::ssd_chunk_f32`: Mamba-2 SSD scan, chunked (matrix) form (SSDScan, prefill)
    SsdChunkF32 => "ssd_chunk_f32",
    /// `sequence::ssd_chunk_states_f32`: each span's state change of a chunked SSD scan in spans
    SsdChunkStatesF32 => "ssd_chunk_states_f32",
    /// `sequence::ssd_chunk_pass_f32`: the spans' first states, chained
    SsdChunkPassF32 => "ssd_chunk_pass_f32",
    /// `sequence::rglru_f32`: chunked first-order linear scan (RGLRU, LinearScan, SOFIE GriffinRGLRU)
    RglruF32 => "rglru_f32",
    /// `sequence::wkv6_f32`: RWKV-6 WKV (WKV6, SOFIE RWKV_WKV6)
    Wkv6F32 => "wkv6_f32",
    /// `sequence::wkv6_wide_f32`: the same for head sizes above `WKV_SMALL_HEAD`
    Wkv6WideF32 => "wkv6_wide_f32",
    /// `sequence::wkv6_pass_f32`: the first states of a WKV6 run in spans, chained from the
    /// spans' state changes
    Wkv6PassF32 => "wkv6_pass_f32",
    /// `sequence::scan_program_f32`: a loop over time of an elementwise program with carried
    /// states (an ONNX Scan whose body is elementwise: the unrolled recurrences lifted to one)
    ScanProgramF32 => "scan_program_f32",
    /// `sequence::wkv4_f32`: RWKV-4 WKV (transformers' RWKV: a lifted Scan whose program computes it)
    Wkv4F32 => "wkv4_f32",
    /// `sequence::causal_conv_f32`: depthwise causal conv1d with a carried window
    /// (CausalConvWithState)
    CausalConvF32 => "causal_conv_f32",
    /// `sequence::causal_conv_rows_f32`: the same in the channels-last layout, x read through a
    /// row view (CausalConvWithState with `channels_last`)
    CausalConvRowsF32 => "causal_conv_rows_f32",
    /// `linear_attention::linear_attention_f32`: ONNX LinearAttention (linear, gated, delta and
    /// gated-delta rules)
    LinearAttentionF32 => "linear_attention_f32",
    // reduce
    /// `reduce::reduce_f32`: the ONNX `Reduce*` family over any axes
    ReduceF32 => "reduce_f32",
    /// `reduce::reduce_f64`
    ReduceF64 => "reduce_f64",
    /// `reduce::arg_reduce_f32`: ArgMax / ArgMin along one axis, i64 indices
    ArgReduceF32 => "arg_reduce_f32",
    // conv
    /// `conv::conv_gemm_f32`: Conv as an implicit GEMM per group (many output channels per group)
    ConvGemmF32 => "conv_gemm_f32",
    /// `gemm_wg::conv_wg128_f32`: Conv as an implicit GEMM on the Hopper tensor cores through
    /// `wgmma` (3xTF32), output positions x channels tiles of 128 x 128, the weights packed with
    /// the tap table at plan time (`conv_wg_packed_len`). Hopper flavour only (traps on the
    /// portable one)
    ConvWg128F32 => "conv_wg128_f32",
    /// `gemm_wg::conv_wg64_f32`: `conv_wg128_f32` with 64 x 64 tiles (one warpgroup)
    ConvWg64F32 => "conv_wg64_f32",
    /// `gemm_wg::conv_wg128_tf32`: `conv_wg128_f32` in TF32
    ConvWg128Tf32 => "conv_wg128_tf32",
    /// `gemm_wg::conv_wg64_tf32`: `conv_wg64_f32` in TF32
    ConvWg64Tf32 => "conv_wg64_tf32",
    /// `gemm_wg::conv_wg32_f32`: `conv_wg128_f32` with 64 x 32 tiles (one warpgroup)
    ConvWg32F32 => "conv_wg32_f32",
    /// `gemm_wg::conv_wg32_tf32`: `conv_wg32_f32` in TF32
    ConvWg32Tf32 => "conv_wg32_tf32",
    /// `conv::conv_direct_f32`: Conv, a thread per output (depthwise, few output channels per group)
    ConvDirectF32 => "conv_direct_f32",
    /// `conv::conv_transpose_f32`: ConvTranspose, a thread per output
    ConvTransposeF32 => "conv_transpose_f32",
    /// `conv::pool_f32`: MaxPool / AveragePool
    PoolF32 => "pool_f32",
    /// `conv::max_pool_indices_f32`: MaxPool's Indices output
    MaxPoolIndicesF32 => "max_pool_indices_f32",
    // norm
    /// `norm::batch_norm_f32`: BatchNormalization (inference)
    BatchNormF32 => "batch_norm_f32",
    /// `norm::group_norm_f32`: GroupNormalization / InstanceNormalization (a row per `(n, group)`)
    GroupNormF32 => "group_norm_f32",
    // attention
    /// `attention::attention_f32`: fused `softmax(program(Q Kᵀ)) V` over strided views
    AttentionF32 => "attention_f32",
    /// `attention_scores::attention_scores_f32`: ONNX Attention's `qk_matmul_output`, a thread per score
    AttentionScoresF32 => "attention_scores_f32",
    /// `attention_tc::attention_tc_f32`: `attention_f32` on the tensor cores (16-row query tiles)
    AttentionTcF32 => "attention_tc_f32",
    /// `attention_tc::small::attention_small_f32`: `attention_tc_f32` for heads up to 16 (the
    /// head's k steps only, two output tiles per lane)
    AttentionSmallF32 => "attention_small_f32",
    /// `attention_tc::flash::attention_flash_f32`: `attention_f32` on the tensor cores, a warp per
    /// 16 query rows over all their keys, K and V tiles shared by the block (heads up to 64)
    AttentionFlashF32 => "attention_flash_f32",
    /// `rotary::rotary_f32`: ONNX RotaryEmbedding
    RotaryF32 => "rotary_f32",
    // select
    /// `select::non_zero_count`: ONNX NonZero, the non-zero elements of each block's chunk
    NonZeroCount => "non_zero_count",
    /// `select::non_zero_write`: ONNX NonZero, the coordinates of the non-zero elements
    NonZeroWrite => "non_zero_write",
    /// `select::top_k`: ONNX TopK along one axis (a block sorts each row in shared memory)
    TopK => "top_k",
    /// `select::top_k_i64`: ONNX TopK of int64 along one axis (16-byte keys)
    TopKI64 => "top_k_i64",
    /// `tree::tree_ensemble_f32`: ai.onnx.ml TreeEnsemble, a thread per (row, target)
    TreeEnsembleF32 => "tree_ensemble_f32",
    /// `nms::nms_select`: ONNX NonMaxSuppression, the kept boxes of each (batch, class)
    NmsSelect => "nms_select",
    /// `nms::nms_write`: ONNX NonMaxSuppression, the `(batch, class, box)` rows
    NmsWrite => "nms_write",
    /// `unique::unique_count`: ONNX Unique, the distinct slices, their counts and positions
    UniqueCount => "unique_count",
    /// `unique::unique_write_b4`: ONNX Unique's outputs, 4-byte elements
    UniqueWriteB4 => "unique_write_b4",
    /// `unique::unique_write_b8`: ONNX Unique's outputs, 8-byte elements
    UniqueWriteB8 => "unique_write_b8",
    // indexing
    /// `indexing::gather_elements_b1`: ONNX GatherElements of 1-byte elements
    GatherElementsB1 => "gather_elements_b1",
    /// `indexing::gather_elements_b4`: ONNX GatherElements of 4-byte elements
    GatherElementsB4 => "gather_elements_b4",
    /// `indexing::gather_elements_b8`: ONNX GatherElements of 8-byte elements
    GatherElementsB8 => "gather_elements_b8",
    /// `indexing::scatter_elements_f32`: ONNX ScatterElements' update pass (f32, every reduction)
    ScatterElementsF32 => "scatter_elements_f32",
    /// `indexing::scatter_nd_f32`: ONNX ScatterND of f32, the update pass (any reduction)
    ScatterNdF32 => "scatter_nd_f32",
    /// `indexing::trilu_b1`: ONNX Trilu of 1-byte elements
    TriluB1 => "trilu_b1",
    /// `indexing::trilu_b4`: ONNX Trilu of 4-byte elements
    TriluB4 => "trilu_b4",
    /// `indexing::trilu_b8`: ONNX Trilu of 8-byte elements
    TriluB8 => "trilu_b8",
    /// `indexing::cumsum_f32`: ONNX CumSum of f32 (an f64 running sum)
    CumSumF32 => "cumsum_f32",
    /// `indexing::cumsum_f64`: ONNX CumSum of f64
    CumSumF64 => "cumsum_f64",
    /// `indexing::cumsum_i32`: ONNX CumSum of i32 (wrapping)
    CumSumI32 => "cumsum_i32",
    /// `indexing::cumsum_i64`: ONNX CumSum of i64 (wrapping)
    CumSumI64 => "cumsum_i64",
    /// `blocks::tensor_scatter_b4`: ONNX TensorScatter of 4-byte elements
    TensorScatterB4 => "tensor_scatter_b4",
    /// `blocks::tensor_scatter_b8`: ONNX TensorScatter of 8-byte elements
    TensorScatterB8 => "tensor_scatter_b8",
    /// `blocks::det_f32`: ONNX Det, a thread per matrix (Gaussian elimination, partial pivoting)
    DetF32 => "det_f32",
    // vision
    /// `vision::roi_align_f32`: ONNX RoiAlign (avg and max, half_pixel and output_half_pixel)
    RoiAlignF32 => "roi_align_f32",
    /// `vision::deform_conv_f32`: ONNX DeformConv (1 to 3 spatial dims, groups, offset groups,
    /// optional bias and mask), a thread per output element
    DeformConvF32 => "deform_conv_f32",
    // loss
    /// `loss::nll_loss_f32`: NegativeLogLikelihoodLoss (every reduction, weights, ignore_index)
    NllLossF32 => "nll_loss_f32",
    // pack
    /// `pack::pack_weights_f32`: a weight the device computed, packed for the tensor-core GEMMs
    /// and convolutions (`abi::pack`)
    PackWeightsF32 => "pack_weights_f32",
    // probe
    /// `probe::probe_warp`: indices, barriers, shuffles, votes, atomics, dynamic shared memory
    ProbeWarp => "probe_warp",
    /// `probe::probe_mma`: `cp.async`, `ldmatrix` and `mma.sync` (bf16) on one 16x8x16 tile
    ProbeMma => "probe_mma",
    /// `probe::probe_hopper`: the sm_90a `wgmma` fences and async-proxy fence (reports whether the
    /// flavour it runs in has them)
    ProbeHopper => "probe_hopper",
}

impl KernelId {
    /// How many trailing arguments of the kernel are outputs it writes (pointer arguments, or a
    /// null pointer for an omitted optional output); every earlier pointer argument is only read.
    pub const fn written_args(self) -> usize {
        match self {
            KernelId::LstmF32 => 3,
            KernelId::GruF32 | KernelId::RnnF32 | KernelId::SsdChunkStatesF32 => 2,
            _ => 1,
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
        assert_eq!(core::mem::size_of::<GemmParams>(), 16 + 16 * 8 + 32 + 8);
        assert_eq!(core::mem::size_of::<GemmCatParams>(), 4 * 8 + 8 * 4);
        assert_eq!(core::mem::size_of::<MlpLayer>(), 64);
        assert_eq!(core::mem::size_of::<MlpParams>(), 16 + 64 * MLP_MAX_LAYERS);
        assert_eq!(core::mem::size_of::<RowParams>(), 5 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<TransposeParams>(), 16 + 2 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<GatherParams>(), 4 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<StridedCopyParams>(), 32 + 3 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<PadParams>(), 24 + 3 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<GatherNdParams>(), 40 + 2 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<ResizeAxis>(), 8 * 8);
        assert_eq!(core::mem::size_of::<ResizeParams>(), 40 + 2 * 8 * MAX_RANK + 64 * RESIZE_MAX_AXES);
        assert_eq!(core::mem::size_of::<CastParams>(), 24);
        assert_eq!(core::mem::size_of::<EwInstr>(), 24);
        assert_eq!(
            core::mem::size_of::<EwProgramParams>(),
            24 + 8 * MAX_RANK * (1 + EW_MAX_INPUTS) + 24 * EW_MAX_INSTRS + 8 + 2 * 4 * MAX_RANK
        );
        assert_eq!(core::mem::size_of::<CompareParams>(), core::mem::size_of::<BinaryParams>() + 16);
        assert_eq!(core::mem::size_of::<WhereParams>(), 16 + 4 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<ActivationSpec>(), 12);
        assert_eq!(core::mem::size_of::<CellActivations>(), 36);
        assert_eq!(core::mem::size_of::<RecurrentParams>(), 16 + 8 * 8 + 16 + 2 * 36);
        assert_eq!(core::mem::align_of::<RecurrentParams>(), 8);
        assert_eq!(core::mem::size_of::<SelectiveScanParams>(), 8 * 4);
        assert_eq!(core::mem::size_of::<SsdScanParams>(), 22 * 4);
        assert_eq!(core::mem::size_of::<SsdChunkParams>(), 26 * 4);
        assert_eq!(core::mem::size_of::<RglruParams>(), 6 * 4);
        assert_eq!(core::mem::size_of::<Wkv6Params>(), 10 * 4);
        assert_eq!(core::mem::size_of::<ScanOperand>(), 8 * MAX_RANK + 24);
        assert_eq!(
            core::mem::size_of::<ScanProgramParams>(),
            40 + 8 * MAX_RANK
                + 88 * (SCAN_PROG_INPUTS + SCAN_PROG_OUTPUTS)
                + 8 * SCAN_PROG_COPIES
                + 24 * SCAN_PROG_INSTRS
        );
        assert_eq!(core::mem::size_of::<CausalConvParams>(), 6 * 4);
        assert_eq!(core::mem::size_of::<CausalConvRowsParams>(), 8 * 4);
        assert_eq!(core::mem::size_of::<ReduceParams>(), 2 * 8 + 4 * 8 * MAX_RANK + 6 * 4);
        assert_eq!(core::mem::size_of::<ConvParams>(), 26 * 4);
        assert_eq!(core::mem::size_of::<PackParams>(), 5 * 8 + 6 * 4 + 26 * 4);
        assert_eq!(core::mem::align_of::<PackParams>(), 8);
        assert_eq!(core::mem::size_of::<PoolParams>(), 8 + 26 * 4);
        assert_eq!(core::mem::align_of::<PoolParams>(), 8);
        assert_eq!(core::mem::size_of::<BatchNormParams>(), 3 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<GroupNormParams>(), 5 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<AttnView>(), 5 * 8);
        assert_eq!(core::mem::size_of::<AttentionParams>(), 12 * 4 + 7 * 5 * 8 + 24 * EW_MAX_INSTRS);
        assert_eq!(core::mem::align_of::<AttentionParams>(), 8);
        assert_eq!(core::mem::size_of::<ElementsParams>(), 2 * 8 + 4 * 4 + 2 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<TriluParams>(), 3 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<LossParams>(), 4 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<OneHotParams>(), 3 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<NonZeroParams>(), 4 * 8 + 2 * 4 + 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<TopKParams>(), 4 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<RotaryParams>(), 12 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<GridSampleParams>(), 6 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<AffineGridParams>(), 5 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<DftParams>(), 5 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<StftParams>(), 6 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<LrnParams>(), 3 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<ReverseSequenceParams>(), 3 * 8 + 2 * 4);
        assert_eq!(core::mem::size_of::<Col2ImParams>(), 4 * 8 + 6 * 8 * GRID_MAX_RANK + 2 * 4);
        assert_eq!(core::mem::size_of::<LinearAttentionParams>(), 10 * 4);
        assert_eq!(core::mem::size_of::<ScatterNdParams>(), 2 * 8 + 4 * 4 + 2 * 8 * MAX_RANK);
        assert_eq!(core::mem::size_of::<RoiAlignParams>(), 8 * 8 + 4 * 4);
        assert_eq!(core::mem::size_of::<DeformConvParams>(), 5 * 8 + 6 * 8 * DEFORM_MAX_RANK + 6 * 4);
    }
}
