//! Attribute structs of recurrent, control-flow and state-space operators.
//!
//! Control-flow bodies are nested `Graph`s (boxed, so `Op` stays small). A body names the outer values
//! it reads in `Graph::captures`. The state-space operators are those of `OPS.md`; each has optional
//! initial-state inputs and final-state outputs (state is always f32).

use serde::{Deserialize, Serialize};

use crate::graph::Graph;

/// Direction of an ONNX recurrent operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RnnDirection {
    /// Forward only (default); num_directions = 1.
    #[default]
    Forward,
    /// Backward only; num_directions = 1.
    Reverse,
    /// Both; num_directions = 2.
    Bidirectional,
}

impl RnnDirection {
    /// ONNX `num_directions`.
    pub fn num_directions(self) -> usize {
        match self {
            RnnDirection::Forward | RnnDirection::Reverse => 1,
            RnnDirection::Bidirectional => 2,
        }
    }
}

/// Tensor layout of an ONNX recurrent operator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RnnLayout {
    /// `layout = 0` (default): X is `[seq, batch, input]`, Y is `[seq, dirs, batch, hidden]`.
    #[default]
    SeqFirst,
    /// `layout = 1`: X is `[batch, seq, input]`, Y is `[batch, seq, dirs, hidden]`.
    BatchFirst,
}

/// Activation functions an ONNX recurrent operator can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum RnnActivation {
    Relu,
    Tanh,
    Sigmoid,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus,
}

/// Attributes shared by `LSTM`, `GRU` and `RNN`. Empty `activations` means the operator's default list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recurrent {
    /// Alpha per activation (where the activation takes one).
    pub activation_alpha: Vec<f32>,
    /// Beta per activation (where the activation takes one).
    pub activation_beta: Vec<f32>,
    /// Activations, one list per direction concatenated (empty = default).
    pub activations: Vec<RnnActivation>,
    /// Clip cell inputs to `[-clip, clip]`.
    pub clip: Option<f32>,
    /// Direction.
    pub direction: RnnDirection,
    /// Hidden size (required).
    pub hidden_size: usize,
    /// Layout.
    pub layout: RnnLayout,
}

/// `LSTM`: inputs X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?; outputs Y?, Y_h?, Y_c?.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lstm {
    /// Shared recurrent attributes.
    pub common: Recurrent,
    /// Couple input and forget gates (default false).
    pub input_forget: bool,
}

/// `GRU`: inputs X, W, R, B?, sequence_lens?, initial_h?; outputs Y?, Y_h?.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gru {
    /// Shared recurrent attributes.
    pub common: Recurrent,
    /// Apply the linear transform before the reset gate (default false).
    pub linear_before_reset: bool,
}

/// `RNN`: inputs X, W, R, B?, sequence_lens?, initial_h?; outputs Y?, Y_h?.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rnn {
    /// Shared recurrent attributes.
    pub common: Recurrent,
}

/// `If`: input 0 is the boolean condition; outputs are the taken branch's outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct If {
    /// Graph run when the condition is true (no inputs).
    pub then_branch: Box<Graph>,
    /// Graph run when the condition is false (no inputs).
    pub else_branch: Box<Graph>,
}

/// `Loop`: inputs M?, cond?, v_initial...; outputs v_final..., scan_outputs...
/// The body has inputs (iteration_num, cond_in, v...) and outputs (cond_out, v..., scan...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    /// Loop body.
    pub body: Box<Graph>,
}

/// `Scan`: inputs are N initial states then M scan inputs; outputs are N final states then K scan
/// outputs. Empty axis/direction lists mean the defaults (axis 0, forward).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    /// Loop body: inputs N states + M slices, outputs N states + K slices.
    pub body: Box<Graph>,
    /// M (required).
    pub num_scan_inputs: usize,
    /// Axis scanned per scan input.
    pub scan_input_axes: Vec<i64>,
    /// 0 = forward, 1 = reverse, per scan input.
    pub scan_input_directions: Vec<i64>,
    /// Axis along which each scan output is stacked.
    pub scan_output_axes: Vec<i64>,
    /// 0 = append, 1 = prepend, per scan output.
    pub scan_output_directions: Vec<i64>,
}

/// `SelectiveScan` (ai.ferrofuse): Mamba-1 `selective_scan_ref`.
/// Inputs: u `(B,D,L)`, delta `(B,D,L)`, A `(D,N)`, Bm `(B,N,L)` or `(B,G,N,L)`, Cm (like Bm),
/// D? `(D)`, z? `(B,D,L)`, delta_bias? `(D)`, initial_state? `(B,D,N)`.
/// Outputs: out `(B,D,L)`, final_state? `(B,D,N)` f32.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelectiveScan {
    /// Apply softplus to `delta + delta_bias` (default false, as in `selective_scan_ref`).
    pub delta_softplus: bool,
}

/// An operand read as a window of the columns of a wider tensor: the input given is `(..., W)`,
/// row-major, and the operand is its columns `start .. start + Π dims` of every row, those
/// columns viewed as `dims`. A part of a last-axis `Split` read where it lies
/// (`plan/row_views.rs`), so no copy makes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnWindow {
    /// The window's first column.
    pub start: usize,
    /// The window's columns as the operand's trailing dims.
    pub dims: Vec<usize>,
}

impl ColumnWindow {
    /// Columns in the window.
    pub fn width(&self) -> usize {
        self.dims.iter().product()
    }

    /// The operand's dims when the input given has dims `input`: its leading dims, then the
    /// window's.
    pub fn operand_dims(&self, input: &[usize]) -> Vec<usize> {
        let lead = input.len().saturating_sub(1);
        input[..lead].iter().chain(&self.dims).copied().collect()
    }
}

/// The inputs of a node read as [`ColumnWindow`]s, by input index; empty (the default): every
/// input as given. Only the ops whose kernels read operands through row strides carry them
/// ([`super::Op::input_windows`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputWindows(pub Vec<(usize, ColumnWindow)>);

impl InputWindows {
    /// The window input `input` is read through, if any.
    pub fn get(&self, input: usize) -> Option<&ColumnWindow> {
        self.0.iter().find(|(i, _)| *i == input).map(|(_, w)| w)
    }

    /// Whether no input is windowed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Reads input `input` through `window` (replacing any window it had).
    pub fn set(&mut self, input: usize, window: ColumnWindow) {
        self.0.retain(|(i, _)| *i != input);
        self.0.push((input, window));
        self.0.sort_by_key(|(i, _)| *i);
    }
}

/// `SSDScan` (ai.ferrofuse): Mamba-2 recurrence (recurrent on the GPU for short sequences, in its
/// chunked matrix form from `SSD_CHUNK` steps on; sequential on the CPU).
/// Inputs: x `(B,L,H,P)`, dt `(B,L,H)`, A `(H)`, Bm `(B,L,G,N)`, Cm `(B,L,G,N)`, D? `(H)` or `(H*P)`,
/// z? `(B,L,H,P)`, dt_bias? `(H)`, initial_state? `(B,H,P,N)`; x, dt, Bm, Cm and z may be read
/// through column windows (`windows`, set by the planner, never by a model).
/// Outputs: y `(B,L,H,P)`, final_state? `(B,H,P,N)` f32.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SsdScan {
    /// Apply softplus to `dt + dt_bias` (default false).
    pub dt_softplus: bool,
    /// Lower clamp of dt after softplus.
    pub dt_min: Option<f32>,
    /// Upper clamp of dt after softplus.
    pub dt_max: Option<f32>,
    /// Inputs read as column windows of wider tensors.
    pub windows: InputWindows,
}

/// Head layout of `WKV6` tensors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wkv6Layout {
    /// `[B, T, H, N]` (default; BlinkDL's kernel layout).
    #[default]
    Bthn,
    /// `[B, H, T, N]` (SOFIE's and fla's layout).
    Bhtn,
}

/// `WKV6` (ai.ferrofuse): RWKV-6 WKV with decay `exp(-exp(w))`, bonus u used linearly, no scale.
/// Inputs: r, k, v, w (each `[B,T,H,N]` or `[B,H,T,N]`), u `(H,N)`, initial_state? `(B,H,N,N)`.
/// Outputs: y (like r), final_state? `(B,H,N,N)` f32.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Wkv6 {
    /// Tensor layout.
    pub layout: Wkv6Layout,
}

/// Activation applied by `CausalConvWithState` after the convolution.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConvActivation {
    /// None (default).
    #[default]
    None,
    /// `x * sigmoid(x)`.
    Silu,
}

/// `CausalConvWithState` (ai.ferrofuse; not yet in OPS.md): depthwise causal conv1d of width K
/// with a carried window, as in Mamba's and Griffin's conv1d (decode keeps the last K-1 inputs).
/// Inputs: x `(B,D,L)`, weight `(D,K)`, bias? `(D)`, initial_state? `(B,D,K-1)`.
/// Outputs: y `(B,D,L)`, final_state? `(B,D,K-1)`.
/// With `channels_last` (set by the planner when it absorbs the transposes around the conv), x
/// and y are `(B,L,D)` and x may be read through a column window; the state keeps its layout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CausalConvWithState {
    /// Activation after the convolution.
    pub activation: ConvActivation,
    /// x and y are `(B,L,D)` instead of `(B,D,L)`.
    pub channels_last: bool,
    /// Inputs read as column windows of wider tensors (only x, only channels-last).
    pub windows: InputWindows,
}

/// How `LinearAttention` updates its state `S` `(d_k, d_v)` per step (opset 27).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LinearAttentionRule {
    /// `S += k vᵀ`.
    Linear,
    /// `S = exp(g) S + k vᵀ` (input decay).
    Gated,
    /// `S += k (β (v − Sᵀk))ᵀ` (input beta).
    Delta,
    /// Gated, then delta (default).
    #[default]
    GatedDelta,
}

/// `LinearAttention` (opset 27): query `(B,T,H_q·d_k)`, key `(B,T,H_kv·d_k)`, value
/// `(B,T,H_kv·d_v)`, past_state? `(B,H_kv,d_k,d_v)`, decay? `(B,T,H_kv)` or `(B,T,H_kv·d_k)`,
/// beta? `(B,T,H_kv)` or `(B,T,1)` -> output `(B,T,H_q·d_v)`, present_state `(B,H_kv,d_k,d_v)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinearAttention {
    /// Key/value heads (required; divides `q_num_heads`).
    pub kv_num_heads: usize,
    /// Query heads (required).
    pub q_num_heads: usize,
    /// Output scale; `None` (or ONNX's 0) means `1/sqrt(d_k)`.
    pub scale: Option<f32>,
    /// State update rule.
    pub update_rule: LinearAttentionRule,
}
