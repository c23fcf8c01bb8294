//! ferrofuse host runtime.
//!
//! - [`device`]: the CUDA side, over cudarc's driver API with dynamic loading (nothing links
//!   `libcuda` at build time, so everything builds and the CPU tests run on machines without CUDA):
//!   [`Context`] selects a device, loads the PTX flavour its compute capability needs and resolves
//!   every kernel eagerly; one launch function is the only place kernels are launched.
//! - [`ops`]: typed, checked launches of the kernel families (elementwise so far).
//! - [`reference`](mod@reference): the CPU reference every GPU result is tested against.
//! - [`selftest`]: device self-tests shared by `ferrofuse doctor` and the GPU test suite.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod arena;
pub mod budget;
pub mod compare;
pub mod device;
pub mod error;
pub mod npy;
pub mod ops;
pub mod reference;
pub mod selftest;
pub mod session;
pub mod shape;
mod specialize;
mod state;
pub mod tensor;

pub use device::{Context, DeviceInfo, DeviceTensor, PtxFlavour};
pub use error::HostError;
pub use session::{PlanAhead, Precision, PrepareReport, Session, SessionOptions};
pub use specialize::fold_constants;
pub use tensor::{HostTensor, TensorData};
