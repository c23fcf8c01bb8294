//! ferrofuse device code.
//!
//! This crate compiles for two targets:
//! - `nvptx64-nvidia-cuda`, where the kernel entry points (`extern "ptx-kernel"`) and the device
//!   intrinsics exist; `host/build.rs` turns that build into the PTX that the host embeds;
//! - the host, where only [`abi`] (the `#[repr(C)]` launch-parameter structs and [`abi::KernelId`])
//!   and [`math`] (the scalar math every elementwise kernel applies) are compiled, so host and device
//!   cannot drift apart.
//!
//! `asm!` appears only in `intrinsics`. Kernels touch memory only behind bounds checks against the
//! element counts in their parameter structs.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, stmt_expr_attributes)
)]
#![cfg_attr(test, feature(f16))]

pub mod abi;
pub mod math;

#[cfg(target_arch = "nvptx64")]
pub mod intrinsics;

#[cfg(target_arch = "nvptx64")]
mod attention;
#[cfg(target_arch = "nvptx64")]
mod attention_scores;
#[cfg(target_arch = "nvptx64")]
mod attention_tc;
#[cfg(target_arch = "nvptx64")]
mod blocks;
#[cfg(target_arch = "nvptx64")]
mod conv;
#[cfg(target_arch = "nvptx64")]
mod elementwise;
#[cfg(target_arch = "nvptx64")]
mod gemm;
#[cfg(target_arch = "nvptx64")]
mod gemm_split;
#[cfg(target_arch = "nvptx64")]
mod gemm_tc;
#[cfg(target_arch = "nvptx64")]
mod gemm_tile;
#[cfg(target_arch = "nvptx64")]
mod gemm_wg;
#[cfg(target_arch = "nvptx64")]
mod group;
#[cfg(target_arch = "nvptx64")]
mod indexing;
#[cfg(target_arch = "nvptx64")]
mod linear_attention;
#[cfg(target_arch = "nvptx64")]
mod logic;
#[cfg(target_arch = "nvptx64")]
mod loss;
#[cfg(target_arch = "nvptx64")]
mod mlp;
#[cfg(target_arch = "nvptx64")]
mod movement;
#[cfg(target_arch = "nvptx64")]
mod nms;
#[cfg(target_arch = "nvptx64")]
mod norm;
#[cfg(target_arch = "nvptx64")]
mod pack;
#[cfg(target_arch = "nvptx64")]
mod probe;
#[cfg(target_arch = "nvptx64")]
mod program;
#[cfg(target_arch = "nvptx64")]
mod recurrent;
#[cfg(target_arch = "nvptx64")]
mod reduce;
#[cfg(target_arch = "nvptx64")]
mod resize;
#[cfg(target_arch = "nvptx64")]
mod rotary;
#[cfg(target_arch = "nvptx64")]
mod rows;
#[cfg(target_arch = "nvptx64")]
mod sampling;
#[cfg(target_arch = "nvptx64")]
mod select;
#[cfg(target_arch = "nvptx64")]
mod sequence;
#[cfg(target_arch = "nvptx64")]
mod tree;
#[cfg(target_arch = "nvptx64")]
mod unique;
#[cfg(target_arch = "nvptx64")]
mod vision;

/// A panic on the device cannot unwind or print: it traps, which aborts the launch and surfaces on
/// the host as `CUDA_ERROR_LAUNCH_FAILED` for the step that ran the kernel.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    intrinsics::trap()
}
