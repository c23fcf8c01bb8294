//! ferrofuse: an ONNX inference engine for NVIDIA GPUs written entirely in Rust, host and device
//! code alike.
//!
//! This facade re-exports the workspace crates: [`onnx`] (loading and converting models),
//! [`planner`] (graph IR, shape inference), [`host`] (CUDA runtime over cudarc, CPU reference
//! executor) and [`kernels`] (the device code's ABI: launch-parameter structs and kernel ids), and
//! holds the bundled [`demo`] model.

pub mod demo;

pub use host;
pub use kernels_gpu as kernels;
pub use onnx;
pub use planner;
