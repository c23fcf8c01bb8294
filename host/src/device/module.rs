//! Kernels loaded on first use, one PTX module per kernel.
//!
//! The embedded PTX holds every kernel; JIT-compiling all of it when a context opens took seconds
//! on a machine whose driver cache is cold. Instead each kernel's module (its entry and the
//! functions it calls, `ptx::kernel_module`) is loaded the first time the kernel is launched, so a
//! model pays for the kernels its plan uses. [`LoadedModule::load_all`] loads every kernel (for
//! `doctor`, and to fail early).
//!
//! Invariant: `functions[k as usize]`, once set, is the function of kernel `k` in `modules`; the
//! modules outlive the functions (they are unloaded together, on drop).

use std::ffi::CString;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::{result, sys};
use kernels_gpu::abi::KernelId;

use super::ptx::{PtxFlavour, kernel_module};
use crate::error::HostError;

/// The kernels of one PTX flavour, each loaded on first use.
#[derive(Debug)]
pub(crate) struct LoadedModule {
    flavour: PtxFlavour,
    functions: Vec<OnceLock<sys::CUfunction>>,
    modules: Mutex<Vec<sys::CUmodule>>,
}

// SAFETY: CUmodule and CUfunction handles are plain driver handles; the driver API is thread-safe
// and these are only used with their context bound (Context::bind); the module list is behind a
// mutex and each function is set once.
unsafe impl Send for LoadedModule {}
// SAFETY: as above.
unsafe impl Sync for LoadedModule {}

impl LoadedModule {
    /// The kernels of `flavour`, none loaded yet.
    pub(crate) fn load(flavour: PtxFlavour) -> Result<Self, HostError> {
        Ok(LoadedModule {
            flavour,
            functions: KernelId::ALL.iter().map(|_| OnceLock::new()).collect(),
            modules: Mutex::new(Vec::new()),
        })
    }

    /// Loads every kernel now (JIT included); a missing or broken one is an error here.
    pub(crate) fn load_all(&self) -> Result<(), HostError> {
        for &kernel in KernelId::ALL {
            self.function(kernel)?;
        }
        Ok(())
    }

    /// Kernels loaded so far.
    pub(crate) fn loaded_count(&self) -> usize {
        self.functions.iter().filter(|f| f.get().is_some()).count()
    }

    /// The function of `kernel`, loading its module on first use. The caller has the context bound
    /// to this thread.
    pub(crate) fn function(&self, kernel: KernelId) -> Result<sys::CUfunction, HostError> {
        if let Some(f) = self.functions[kernel as usize].get() {
            return Ok(*f);
        }
        // One loader at a time: two threads racing for the same kernel load it once.
        let mut modules = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = self.functions[kernel as usize].get() {
            return Ok(*f);
        }
        let flavour = self.flavour.name();
        let source =
            kernel_module(self.flavour.source(), kernel.symbol()).ok_or(HostError::MissingKernel {
                kernel,
                source: cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_NOT_FOUND),
            })?;
        let image = CString::new(source).expect("PTX text has no NUL bytes");
        // SAFETY: `image` is a NUL-terminated PTX string that lives across the call; the caller
        // bound the context to this thread.
        let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(|source| HostError::ModuleLoad { flavour, source })?;
        modules.push(module);
        let name = CString::new(kernel.symbol()).expect("symbols have no NUL bytes");
        // SAFETY: `module` was loaded above and is kept until drop.
        let f = unsafe { result::module::get_function(module, name) }
            .map_err(|source| HostError::MissingKernel { kernel, source })?;
        let _ = self.functions[kernel as usize].set(f);
        Ok(f)
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        let modules = self.modules.get_mut().map(std::mem::take).unwrap_or_default();
        for m in modules {
            // SAFETY: each module was loaded by `function` and no function of it is used after
            // this. An unload error at teardown leaves nothing to recover.
            let _ = unsafe { result::module::unload(m) };
        }
    }
}
