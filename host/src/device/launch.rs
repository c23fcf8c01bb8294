//! The one place kernels are launched: [`Context::launch`] maps typed arguments to
//! `cuLaunchKernel`'s parameter array.

use std::ffi::c_void;

use cudarc::driver::{CudaStream, result};
use kernels_gpu::abi::KernelId;

use super::Context;
use crate::error::HostError;

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks per grid dimension.
    pub grid: [u32; 3],
    /// Threads per block dimension.
    pub block: [u32; 3],
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl LaunchShape {
    /// A 1-D launch of `blocks` blocks of `threads` threads, no shared memory.
    pub fn linear(blocks: u32, threads: u32) -> Self {
        LaunchShape { grid: [blocks, 1, 1], block: [threads, 1, 1], shared_bytes: 0 }
    }
}

/// One kernel argument, in the kernel's parameter order.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// A `#[repr(C)]` parameter struct passed by value, as its bytes.
    Params(&'a [u8]),
    /// A device pointer.
    Ptr(u64),
    /// A `u32` scalar.
    U32(u32),
    /// An `f32` scalar.
    F32(f32),
}

/// The bytes of a launch-parameter struct, for [`KernelArg::Params`].
pub fn params_bytes<T: kernels_gpu::abi::Params>(p: &T) -> &[u8] {
    p.as_bytes()
}

impl Context {
    /// Launches `kernel` on the context's stream.
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list in order and type (its doc in `kernels-gpu`),
    /// every pointer must be valid for the accesses that doc states for the given parameters, and
    /// `shape` must satisfy the kernel's thread-mapping requirements.
    pub unsafe fn launch(
        &self,
        kernel: KernelId,
        shape: LaunchShape,
        args: &[KernelArg],
    ) -> Result<(), HostError> {
        // SAFETY: forwarded; the context's own stream.
        unsafe { self.launch_on(&self.stream, kernel, shape, args) }
    }

    /// [`Context::launch`] on another stream of this context (a session's own stream).
    ///
    /// # Safety
    /// As [`Context::launch`]; `stream` belongs to this context.
    pub unsafe fn launch_on(
        &self,
        stream: &CudaStream,
        kernel: KernelId,
        shape: LaunchShape,
        args: &[KernelArg],
    ) -> Result<(), HostError> {
        // Storage the parameter pointers point into; it outlives the launch call, which copies it.
        let mut scalars: Vec<u64> = args
            .iter()
            .map(|a| match *a {
                KernelArg::Ptr(p) => p,
                KernelArg::U32(v) => v as u64,
                KernelArg::F32(v) => v.to_bits() as u64,
                KernelArg::Params(_) => 0,
            })
            .collect();
        let mut params: Vec<*mut c_void> = args
            .iter()
            .zip(scalars.iter_mut())
            .map(|(a, slot)| match a {
                KernelArg::Params(bytes) => bytes.as_ptr() as *mut c_void,
                // Little-endian: the low 4 bytes of the u64 slot are the u32/f32 value.
                _ => slot as *mut u64 as *mut c_void,
            })
            .collect();
        self.bind()?;
        let function = self.module.function(kernel)?;
        let [gx, gy, gz] = shape.grid;
        let [bx, by, bz] = shape.block;
        // SAFETY: the function belongs to this context's loaded module; `params` holds one pointer
        // per kernel parameter, each to live storage of the parameter's size (caller's contract).
        unsafe {
            result::launch_kernel(
                function,
                (gx, gy, gz),
                (bx, by, bz),
                shape.shared_bytes,
                stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|source| HostError::Launch { kernel, source })
    }
}
