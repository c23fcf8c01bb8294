//! A loaded PTX module with every [`KernelId`] resolved to its `CUfunction`.
//!
//! Invariant: `functions[k as usize]` is the function of kernel `k`, for every `k` in
//! `KernelId::ALL`; the module outlives the functions (they are dropped together).

use std::ffi::CString;

use cudarc::driver::{result, sys};
use kernels_gpu::abi::KernelId;

use super::ptx::PtxFlavour;
use crate::error::HostError;

/// A loaded module and its resolved kernels.
#[derive(Debug)]
pub(crate) struct LoadedModule {
    module: sys::CUmodule,
    functions: Vec<sys::CUfunction>,
}

// SAFETY: CUmodule and CUfunction handles are plain driver handles; the driver API is thread-safe
// and these are only used with their context bound (Context::bind).
unsafe impl Send for LoadedModule {}
// SAFETY: as above; the handles are never mutated after loading.
unsafe impl Sync for LoadedModule {}

impl LoadedModule {
    /// Loads `flavour`'s PTX into the current context and resolves every kernel.
    pub(crate) fn load(flavour: PtxFlavour) -> Result<Self, HostError> {
        let image = CString::new(flavour.source()).expect("PTX text has no NUL bytes");
        // SAFETY: `image` is a NUL-terminated PTX string that lives across the call; the caller
        // bound the context to this thread.
        let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(|source| HostError::ModuleLoad { flavour: flavour.name(), source })?;
        let mut loaded = LoadedModule { module, functions: Vec::with_capacity(KernelId::ALL.len()) };
        for &kernel in KernelId::ALL {
            let name = CString::new(kernel.symbol()).expect("symbols have no NUL bytes");
            // SAFETY: `module` was loaded above and is still alive.
            let f = unsafe { result::module::get_function(loaded.module, name) }
                .map_err(|source| HostError::MissingKernel { kernel, source })?;
            loaded.functions.push(f);
        }
        Ok(loaded)
    }

    /// The function of `kernel`.
    pub(crate) fn function(&self, kernel: KernelId) -> sys::CUfunction {
        self.functions[kernel as usize]
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        // SAFETY: the module was loaded by `load` and no function of it is used after this.
        // An unload error at teardown leaves nothing to recover.
        let _ = unsafe { result::module::unload(self.module) };
    }
}
