//! Reference state-space and linear-recurrence operators of `OPS.md`: SOFIE's `MambaScan`,
//! `GriffinRGLRU` and `RWKV_WKV6`, and ferrofuse's `SelectiveScan`, `SSDScan`, `RGLRU`, `WKV6` and
//! `CausalConvWithState`.
//!
//! Every recurrence here is the SEQUENTIAL form OPS.md states, one step at a time, in f64; the
//! chunked/parallel GPU kernels are tested against it. Outputs keep the dtype of the main input;
//! final states are always F32 (OPS.md: state is kept in f32). SOFIE's operators start from a zero
//! state and return only `y`; ferrofuse's take an optional initial state and return `[y, state]`.

mod causal_conv;
mod mamba;
mod rglru;
mod ssd;
mod wkv;

pub use causal_conv::causal_conv_with_state;
pub use mamba::{mamba_scan, selective_scan};
pub use rglru::{griffin_rglru, linear_scan, rglru};
pub use ssd::ssd_scan;
pub use wkv::{rwkv_wkv6, wkv6};
