//! Self-test kernels of the device intrinsics.

use super::Params;

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

// SAFETY: #[repr(C)], two u32.
unsafe impl Params for ProbeParams {}
