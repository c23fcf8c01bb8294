//! The recurrent-cell kernels (ONNX LSTM, GRU, RNN): their parameters and activation codes.

use super::Params;

/// An activation an ONNX recurrent operator can name, as the kernels apply it
/// (`math::activate_cell`). `alpha` and `beta` are those of [`ActivationSpec`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CellActivation {
    /// `max(x, 0)`.
    Relu = 0,
    /// `tanh(x)`.
    #[default]
    Tanh = 1,
    /// `1 / (1 + e^-x)`.
    Sigmoid = 2,
    /// `alpha * x + beta`.
    Affine = 3,
    /// `x < 0 ? alpha * x : x`.
    LeakyRelu = 4,
    /// `x > alpha ? x : 0`.
    ThresholdedRelu = 5,
    /// `alpha * tanh(beta * x)`.
    ScaledTanh = 6,
    /// `clamp(alpha * x + beta, 0, 1)`.
    HardSigmoid = 7,
    /// `x < 0 ? alpha * (e^x - 1) : x`.
    Elu = 8,
    /// `x / (1 + |x|)`.
    Softsign = 9,
    /// `ln(1 + e^x)`.
    Softplus = 10,
}

impl CellActivation {
    /// The activation for a code read from parameters. Unknown codes read as `Affine` (the
    /// identity with `alpha = 1, beta = 0`); the host only writes valid ones.
    pub const fn from_code(code: u32) -> CellActivation {
        match code {
            0 => CellActivation::Relu,
            1 => CellActivation::Tanh,
            2 => CellActivation::Sigmoid,
            4 => CellActivation::LeakyRelu,
            5 => CellActivation::ThresholdedRelu,
            6 => CellActivation::ScaledTanh,
            7 => CellActivation::HardSigmoid,
            8 => CellActivation::Elu,
            9 => CellActivation::Softsign,
            10 => CellActivation::Softplus,
            _ => CellActivation::Affine,
        }
    }
}

/// One activation of a cell with its resolved `alpha` and `beta` (unused ones are 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ActivationSpec {
    /// [`CellActivation`] code.
    pub code: u32,
    /// First parameter.
    pub alpha: f32,
    /// Second parameter.
    pub beta: f32,
}

/// The activations of one direction, named as in the ONNX operator definitions: `f` (gates), `g`
/// (cell candidate / hidden candidate) and `h` (LSTM output). RNN uses `f` only, GRU `f` and `g`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CellActivations {
    /// Gate activation (the RNN's only one).
    pub f: ActivationSpec,
    /// Candidate activation (LSTM, GRU).
    pub g: ActivationSpec,
    /// LSTM output activation.
    pub h: ActivationSpec,
}

/// Parameters of the recurrent kernels (`recurrent::lstm_f32`, `gru_f32`, `rnn_f32`).
///
/// The input projection `XW[d, t, b, :] = X[t, b, :] W[d]ᵀ + Wb[d]` (`gates * hidden` values per
/// row, gates in ONNX order) is computed beforehand; its row for (d, t, b) starts at
/// `d * xw_d + t * xw_t + b * xw_b`. `Y[t, d, b, j]` is at `t * y_t + d * y_d + b * y_b + j`, and the
/// states (`initial_h`, `initial_c`, `Y_h`, `Y_c`) of (d, b) start at `d * state_d + b * state_b`.
/// `R` is `[dirs, gates * hidden, hidden]`, `B` `[dirs, 2 * gates * hidden]` (`Rb` is its second
/// half), `P` `[dirs, 3 * hidden]` (Pi, Po, Pf), all contiguous. Strides are in elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecurrentParams {
    /// Time steps (`seq_length`).
    pub seq: u32,
    /// Batch rows.
    pub batch: u32,
    /// Hidden size.
    pub hidden: u32,
    /// Directions (1 or 2).
    pub dirs: u32,
    /// XW direction stride.
    pub xw_d: u64,
    /// XW time stride.
    pub xw_t: u64,
    /// XW batch stride.
    pub xw_b: u64,
    /// Y time stride.
    pub y_t: u64,
    /// Y direction stride.
    pub y_d: u64,
    /// Y batch stride.
    pub y_b: u64,
    /// State direction stride.
    pub state_d: u64,
    /// State batch stride.
    pub state_b: u64,
    /// Gate and candidate pre-activations are clamped to `[-clip, clip]` (`f32::INFINITY`: no clip;
    /// never negative or NaN).
    pub clip: f32,
    /// Bit `d` set: direction `d` runs backwards in time.
    pub reverse_dirs: u32,
    /// `RECURRENT_*` flag bits.
    pub flags: u32,
    /// Explicit padding; always 0.
    pub _pad: u32,
    /// Activations of direction 0 and 1.
    pub acts: [CellActivations; 2],
}

/// [`RecurrentParams::flags`]: LSTM `input_forget` (the forget gate is `1 - i`).
pub const RECURRENT_INPUT_FORGET: u32 = 1;
/// [`RecurrentParams::flags`]: GRU `linear_before_reset`.
pub const RECURRENT_LINEAR_BEFORE_RESET: u32 = 2;
/// [`RecurrentParams::flags`]: `sequence_lens` is i64 (otherwise i32).
pub const RECURRENT_LENS_I64: u32 = 4;

/// Most threads of a recurrent block (a warp per hidden unit at a time; `hidden` units per step).
pub const RECURRENT_MAX_THREADS: u32 = 512;
/// Most dynamic shared memory a recurrent launch asks for (the default limit, no opt-in).
pub const RECURRENT_MAX_SHARED_BYTES: u32 = 48 * 1024;

/// `hidden`-sized f32 vectors a recurrent kernel keeps in dynamic shared memory: the hidden state
/// twice (this step's and the next), plus the LSTM cell state, or the GRU update gate and `r ⊙ h`.
pub const fn recurrent_shared_vectors(kernel: super::KernelId) -> u32 {
    match kernel {
        super::KernelId::LstmF32 => 3,
        super::KernelId::GruF32 => 4,
        _ => 2,
    }
}

// SAFETY: #[repr(C)]: three 4-byte fields.
unsafe impl Params for ActivationSpec {}
// SAFETY: #[repr(C)]: three ActivationSpec, 4-byte aligned, no padding.
unsafe impl Params for CellActivations {}
// SAFETY: #[repr(C)]: four u32 (16 bytes), eight u64, four 4-byte fields (the last an explicit
// `_pad`), then 72 bytes of 4-byte fields: 168 bytes, a multiple of 8, no padding.
unsafe impl Params for RecurrentParams {}
