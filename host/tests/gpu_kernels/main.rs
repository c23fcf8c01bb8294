//! GPU kernel tests: every kernel against the CPU reference on the device. Built only with the `gpu`
//! feature; they fail (never skip) when no GPU is present.

mod arena;
mod attention;
mod bad_input;
mod canonical;
mod clip;
mod context;
mod control;
mod conv;
mod decomposed;
mod dtypes;
mod elementwise;
mod ew_ops;
mod gemm;
mod gemm_cat;
mod gemm_programs;
mod hoist;
mod indexing;
mod loss;
mod mlp;
mod models;
mod movement;
mod norm;
mod precision;
mod probes;
mod programs;
mod recurrent;
mod reduce;
mod resize;
mod rows;
mod select;
mod sequence;
mod sequence_state;
mod session;
mod shape_ops;
mod vision;

use std::sync::OnceLock;

use host::Context;

/// The device all tests share (module loading is paid once). Panics with the reason when there is
/// no usable GPU: these tests must not pass vacuously.
pub fn ctx() -> &'static Context {
    static CTX: OnceLock<Context> = OnceLock::new();
    CTX.get_or_init(|| match Context::new(0) {
        Ok(ctx) => ctx,
        Err(e) => panic!("the gpu tests need an NVIDIA GPU: {e}"),
    })
}
