//! The one place kernels are launched: [`Context::launch`] maps typed arguments to
//! `cuLaunchKernel`'s parameter array.

use std::ffi::c_void;

use cudarc::driver::{CudaStream, sys};
use kernels_gpu::abi::KernelId;

use super::Context;
use crate::error::HostError;

/// An L2 persistence hint for one launch: accesses to `bytes` from `base`, a `hit_ratio` share of
/// them (spread over the range), are marked persisting and stay in the L2 the context set aside
/// ([`Context::persisting_l2`]); the rest stream. A session gives its weights this hint, so that
/// they stay in L2 from one run to the next while activations come and go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct L2Window {
    /// Device address the range starts at.
    pub base: u64,
    /// Bytes in the range.
    pub bytes: usize,
    /// Share of the range's accesses marked persisting, in `[0, 1]`.
    pub hit_ratio: f32,
}

impl L2Window {
    /// The hint for `bytes` from `base` on `ctx`'s device: the range clipped to the largest window,
    /// the hit ratio the share of it that the set-aside L2 holds. `None` without persisting L2.
    pub fn for_range(ctx: &Context, base: u64, bytes: usize) -> Option<L2Window> {
        let bytes = bytes.min(ctx.info().access_window_max_bytes);
        let reserved = ctx.persisting_l2();
        (bytes > 0 && reserved > 0).then(|| L2Window {
            base,
            bytes,
            hit_ratio: (reserved as f64 / bytes as f64).min(1.0) as f32,
        })
    }
}

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
        // SAFETY: forwarded.
        unsafe { self.launch_dependent(stream, kernel, shape, args, false, None) }
    }

    /// [`Context::launch_on`], and with `programmatic` the launch may begin before the previous
    /// kernel on `stream` has finished (programmatic dependent launch, where the loaded flavour's
    /// kernels wait for it first: [`Context::programmatic_launch`]; elsewhere the flag is ignored).
    /// Its launch overlaps the previous kernel's completion (its blocks wait on the device for
    /// that kernel's writes), which shortens the gap between two short kernels, also inside a
    /// captured CUDA graph.
    ///
    /// # Safety
    /// As [`Context::launch`]; `stream` belongs to this context.
    pub unsafe fn launch_dependent(
        &self,
        stream: &CudaStream,
        kernel: KernelId,
        shape: LaunchShape,
        args: &[KernelArg],
        programmatic: bool,
        window: Option<L2Window>,
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
        // The launch's attributes, the first `used` of them (on the stack: no allocation per
        // launch).
        let pdl = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
        };
        let mut attributes = [pdl; 2];
        let mut used = usize::from(programmatic && self.programmatic_launch());
        if let Some(w) = window {
            attributes[used] = sys::CUlaunchAttribute {
                id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                pad: [0; 4],
                value: sys::CUlaunchAttributeValue {
                    accessPolicyWindow: sys::CUaccessPolicyWindow {
                        base_ptr: w.base as *mut c_void,
                        num_bytes: w.bytes,
                        hitRatio: w.hit_ratio,
                        hitProp: sys::CUaccessProperty::CU_ACCESS_PROPERTY_PERSISTING,
                        missProp: sys::CUaccessProperty::CU_ACCESS_PROPERTY_STREAMING,
                    },
                },
            };
            used += 1;
        }
        let config = sys::CUlaunchConfig {
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: shape.shared_bytes,
            hStream: stream.cu_stream(),
            attrs: attributes.as_mut_ptr(),
            numAttrs: used as u32,
        };
        // SAFETY: the function belongs to this context's loaded module; `params` holds one pointer
        // per kernel parameter, each to live storage of the parameter's size (caller's contract);
        // `config` and its attribute outlive the call.
        unsafe { sys::cuLaunchKernelEx(&config, function, params.as_mut_ptr(), std::ptr::null_mut()) }
            .result()
            .map_err(|source| HostError::Launch { kernel, source })
    }

    /// Whether the loaded kernels wait for the grids they depend on (the Hopper flavour's
    /// `griddepcontrol.wait`), so that [`Context::launch_dependent`] may overlap launches.
    pub fn programmatic_launch(&self) -> bool {
        self.flavour == super::PtxFlavour::Hopper
    }
}
