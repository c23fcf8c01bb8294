//! ferrofuse: an ONNX inference engine for NVIDIA GPUs written entirely in Rust, host and device
//! code alike.
//!
//! This facade re-exports the workspace crates: [`host`] (CUDA runtime over cudarc, CPU reference
//! executor) and [`kernels`] (the device code's ABI: launch-parameter structs and kernel ids).

pub use host;
pub use kernels_gpu as kernels;
