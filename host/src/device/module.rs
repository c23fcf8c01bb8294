//! Kernels loaded on first use or ahead of it, one module per kernel, from the shipped cubins or the
//! kernel cache.
//!
//! The embedded PTX holds every kernel; JIT-compiling all of it when a context opens took seconds
//! on a machine whose driver cache is cold. Instead each kernel's module (its entry and the
//! functions it calls, [`PtxIndex::module`](super::ptx::PtxIndex::module)) is loaded on its own:
//! from the cubin shipped in the binary for this device when there is one ([`shipped`]), else from
//! its cubin in the [kernel cache](super::cache) when an intact entry is there, else compiled
//! by the driver's linker (`cuLinkCreate` / `cuLinkAddData` / `cuLinkComplete`) and stored. With
//! the cache off, the driver JIT-compiles the PTX module itself. [`LoadedModule::preload`]
//! compiles a list of kernels in parallel, one thread per core, before their first launch (a
//! session calls it with its plan's kernels); a kernel not preloaded loads on its first launch.
//!
//! Invariant: `functions[k as usize]`, once set, is the function of kernel `k` in `modules`; the
//! modules outlive the functions (they are unloaded together, on drop).

use std::ffi::CString;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::{DriverError, result, sys};
use kernels_gpu::abi::KernelId;

use super::cache::{EntryKey, KernelCache, Miss, fnv1a};
use super::ptx::PtxFlavour;
use super::shipped;
use crate::error::HostError;

/// Where a kernel's machine code came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelSource {
    /// A cubin shipped in the binary ([`shipped`](super::shipped)).
    Shipped,
    /// An intact entry of the kernel cache.
    Cache,
    /// Compiled now by the driver's linker (and stored in the cache).
    Compiled,
    /// JIT-compiled from PTX by the driver as the module loaded (the cache is off).
    DriverJit,
}

/// One kernel's load: where its code came from and how long it took (compile and module load).
#[derive(Clone, Copy, Debug)]
pub struct KernelLoad {
    /// The kernel.
    pub kernel: KernelId,
    /// Where its code came from.
    pub source: KernelSource,
    /// Wall time of this kernel's load on its thread.
    pub time: Duration,
}

/// What loading a set of kernels did ([`Context::preload`](super::Context::preload)).
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Each kernel loaded by this call (none for kernels already loaded).
    pub loads: Vec<KernelLoad>,
    /// Wall time of the whole call.
    pub wall: Duration,
    /// Threads that compiled.
    pub threads: usize,
    /// Cache entries found but not usable (corrupt, truncated, foreign), replaced.
    pub invalid_entries: usize,
    /// The first error writing an entry (the kernel still ran; later processes compile again).
    pub write_error: Option<String>,
    /// Shipped cubins the driver refused (a driver older than their compiler); those kernels came
    /// from the cache or were compiled instead.
    pub shipped_refused: usize,
}

impl LoadReport {
    /// Kernels whose code came from `source`.
    pub fn count(&self, source: KernelSource) -> usize {
        self.loads.iter().filter(|l| l.source == source).count()
    }

    /// The slowest `n` loads, slowest first.
    pub fn slowest(&self, n: usize) -> Vec<KernelLoad> {
        let mut v = self.loads.clone();
        v.sort_by_key(|l| std::cmp::Reverse(l.time));
        v.truncate(n);
        v
    }

    fn absorb(&mut self, other: LoadReport) {
        self.loads.extend(other.loads);
        self.invalid_entries += other.invalid_entries;
        self.shipped_refused += other.shipped_refused;
        self.write_error = self.write_error.take().or(other.write_error);
    }
}

/// What a cubin is compiled for (the cache key's device part).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    pub(crate) compute_capability: (i32, i32),
    pub(crate) driver_version: i32,
}

/// The kernels of one PTX flavour, each loaded on first use or by [`LoadedModule::preload`].
#[derive(Debug)]
pub(crate) struct LoadedModule {
    flavour: PtxFlavour,
    target: Target,
    cache: KernelCache,
    /// Whether kernels load from the shipped cubins first.
    shipped: bool,
    functions: Vec<OnceLock<sys::CUfunction>>,
    /// One lock per kernel: two threads wanting the same kernel load it once, different kernels
    /// load in parallel.
    loading: Vec<Mutex<()>>,
    modules: Mutex<Vec<sys::CUmodule>>,
    /// Every load so far, for [`LoadedModule::history`].
    history: Mutex<LoadReport>,
}

// SAFETY: CUmodule and CUfunction handles are plain driver handles; the driver API is thread-safe
// and these are only used with their context bound (Context::bind); the module list is behind a
// mutex and each function is set once.
unsafe impl Send for LoadedModule {}
// SAFETY: as above.
unsafe impl Sync for LoadedModule {}

impl LoadedModule {
    /// The kernels of `flavour` for `target`, none loaded yet: from the shipped cubins when
    /// `shipped` and one fits, else from `cache` (compiled and stored there on a miss).
    pub(crate) fn new(flavour: PtxFlavour, target: Target, cache: KernelCache, shipped: bool) -> Self {
        LoadedModule {
            flavour,
            target,
            cache,
            shipped,
            functions: KernelId::ALL.iter().map(|_| OnceLock::new()).collect(),
            loading: KernelId::ALL.iter().map(|_| Mutex::new(())).collect(),
            modules: Mutex::new(Vec::new()),
            history: Mutex::new(LoadReport::default()),
        }
    }

    /// The kernel cache this module loads from.
    pub(crate) fn cache(&self) -> &KernelCache {
        &self.cache
    }

    /// Kernels loaded so far.
    pub(crate) fn loaded_count(&self) -> usize {
        self.functions.iter().filter(|f| f.get().is_some()).count()
    }

    /// Every kernel load so far (preloads and loads on first launch).
    pub(crate) fn history(&self) -> LoadReport {
        self.history.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Loads the kernels of `kernels` not yet loaded, on up to `threads` threads (each first runs
    /// `bind`, which makes the context current there). The first error is returned after every
    /// thread has stopped.
    pub(crate) fn preload(
        &self,
        kernels: &[KernelId],
        threads: usize,
        bind: &(dyn Fn() -> Result<(), HostError> + Sync),
    ) -> Result<LoadReport, HostError> {
        let start = Instant::now();
        let mut todo: Vec<KernelId> = Vec::new();
        for &k in kernels {
            if self.functions[k as usize].get().is_none() && !todo.contains(&k) {
                todo.push(k);
            }
        }
        // The largest kernels first, so that the longest compiles do not start last.
        let index = self.flavour.index();
        todo.sort_by_key(|k| std::cmp::Reverse(index.entry_bytes(k.symbol())));
        let threads = threads.clamp(1, todo.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<Result<LoadReport, HostError>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        bind()?;
                        let mut report = LoadReport::default();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&k) = todo.get(i) else { return Ok(report) };
                            report.absorb(self.load(k)?.1);
                        }
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
        });
        let mut report = LoadReport { threads, ..LoadReport::default() };
        for r in results {
            report.absorb(r?);
        }
        report.wall = start.elapsed();
        Ok(report)
    }

    /// The function of `kernel`, loading its module on first use. The caller has the context bound
    /// to this thread.
    pub(crate) fn function(&self, kernel: KernelId) -> Result<sys::CUfunction, HostError> {
        if let Some(f) = self.functions[kernel as usize].get() {
            return Ok(*f);
        }
        Ok(self.load(kernel)?.0)
    }

    /// Loads `kernel` unless another thread did first; returns its function and what this call
    /// did (no load when it was already there).
    fn load(&self, kernel: KernelId) -> Result<(sys::CUfunction, LoadReport), HostError> {
        let _guard = self.loading[kernel as usize].lock().unwrap_or_else(|p| p.into_inner());
        let mut report = LoadReport::default();
        if let Some(f) = self.functions[kernel as usize].get() {
            return Ok((*f, report));
        }
        let start = Instant::now();
        let symbol = kernel.symbol();
        let missing =
            || HostError::MissingKernel { kernel, source: DriverError(sys::CUresult::CUDA_ERROR_NOT_FOUND) };
        let ptx = self.flavour.index().module(symbol).ok_or_else(missing)?;
        let ptx = CString::new(ptx).expect("PTX text has no NUL bytes");
        let ptx_hash = fnv1a(ptx.as_bytes());
        let shipped = self
            .shipped
            .then(|| shipped::find(self.flavour, symbol, ptx_hash, self.target.compute_capability))
            .flatten()
            .and_then(|cubin| match load_image(cubin.to_vec().as_ptr().cast(), self.flavour) {
                Ok(m) => Some(m),
                Err(_) => {
                    report.shipped_refused += 1;
                    None
                }
            });
        let (module, source) = if let Some(m) = shipped {
            (m, KernelSource::Shipped)
        } else if self.cache.dir().is_none() {
            (load_image(ptx.as_ptr().cast(), self.flavour)?, KernelSource::DriverJit)
        } else {
            let key = EntryKey {
                flavour: self.flavour.name(),
                symbol,
                compute_capability: self.target.compute_capability,
                driver_version: self.target.driver_version,
                ptx_hash,
                ptx_len: ptx.as_bytes().len(),
            };
            let cached = match self.cache.read(&key) {
                Ok(cubin) => match load_image(cubin.as_ptr().cast(), self.flavour) {
                    Ok(m) => Some(m),
                    // Intact but refused by the driver: compile it again.
                    Err(_) => {
                        report.invalid_entries += 1;
                        None
                    }
                },
                Err(Miss::Invalid) => {
                    report.invalid_entries += 1;
                    None
                }
                Err(Miss::Absent) => None,
            };
            match cached {
                Some(m) => (m, KernelSource::Cache),
                None => {
                    let cubin = link(&ptx, kernel)?;
                    if let Err(e) = self.cache.write(&key, &cubin) {
                        report.write_error = Some(format!(
                            "writing the kernel cache entry of `{symbol}` under {}: {e}",
                            self.cache.dir().map_or("?".into(), |d| d.display().to_string())
                        ));
                    }
                    (load_image(cubin.as_ptr().cast(), self.flavour)?, KernelSource::Compiled)
                }
            }
        };
        self.modules.lock().unwrap_or_else(|p| p.into_inner()).push(module);
        let name = CString::new(symbol).expect("symbols have no NUL bytes");
        // SAFETY: `module` was loaded above and is kept until drop.
        let f = unsafe { result::module::get_function(module, name) }
            .map_err(|source| HostError::MissingKernel { kernel, source })?;
        if let Some(bytes) = kernel.large_shared_bytes() {
            // SAFETY: `f` is a function of the module loaded above, in the current context.
            unsafe {
                sys::cuFuncSetAttribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as i32,
                )
            }
            .result()
            .map_err(|source| HostError::ModuleLoad { flavour: self.flavour.name(), source })?;
        }
        if kernel.prefers_shared_carveout() {
            // SAFETY: as above.
            unsafe {
                sys::cuFuncSetAttribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                    100,
                )
            }
            .result()
            .map_err(|source| HostError::ModuleLoad { flavour: self.flavour.name(), source })?;
        }
        // Under the driver's lazy loading the code reaches the device at the first launch; load it
        // now, on this (possibly parallel) thread, so a first run does not pay for it launch by
        // launch.
        // SAFETY: `f` is a function of the module loaded above, in the current context.
        unsafe { sys::cuFuncLoad(f) }
            .result()
            .map_err(|source| HostError::ModuleLoad { flavour: self.flavour.name(), source })?;
        let _ = self.functions[kernel as usize].set(f);
        report.loads.push(KernelLoad { kernel, source, time: start.elapsed() });
        self.history.lock().unwrap_or_else(|p| p.into_inner()).absorb(report.clone());
        Ok((f, report))
    }
}

/// Loads a module from a PTX text (NUL-terminated) or a cubin image into the current context.
fn load_image(image: *const std::ffi::c_void, flavour: PtxFlavour) -> Result<sys::CUmodule, HostError> {
    // SAFETY: `image` points to a NUL-terminated PTX string or a whole cubin that lives across the
    // call; the caller bound the context to this thread.
    unsafe { result::module::load_data(image) }
        .map_err(|source| HostError::ModuleLoad { flavour: flavour.name(), source })
}

/// Compiles the PTX module `ptx` of `kernel` to a cubin for the current context's device with the
/// driver's linker. A failure carries the linker's error log.
fn link(ptx: &CString, kernel: KernelId) -> Result<Vec<u8>, HostError> {
    const LOG: usize = 16 << 10;
    let mut log = vec![0u8; LOG];
    let mut options =
        [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut values: [*mut std::ffi::c_void; 2] = [log.as_mut_ptr().cast(), LOG as *mut std::ffi::c_void];
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    let fail = |log: &[u8], source: DriverError| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        HostError::KernelCompile {
            kernel,
            log: String::from_utf8_lossy(&log[..end]).trim().to_owned(),
            source,
        }
    };
    // SAFETY: the option arrays hold two entries each, the log buffer outlives the link state
    // (destroyed below on every path), and the context is current (the caller's contract).
    unsafe {
        sys::cuLinkCreate_v2(2, options.as_mut_ptr(), values.as_mut_ptr(), &mut state)
            .result()
            .map_err(|e| fail(&log, e))?;
        let name = c"ferrofuse.ptx";
        let added = sys::cuLinkAddData_v2(
            state,
            sys::CUjitInputType::CU_JIT_INPUT_PTX,
            ptx.as_ptr() as *mut std::ffi::c_void,
            ptx.as_bytes_with_nul().len(),
            name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .result();
        let mut cubin: *mut std::ffi::c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let linked = added.and_then(|()| sys::cuLinkComplete(state, &mut cubin, &mut size).result());
        // The cubin belongs to the link state: copy it out before destroying the state.
        let out = linked.map(|()| std::slice::from_raw_parts(cubin.cast::<u8>(), size).to_vec());
        let _ = sys::cuLinkDestroy(state);
        out.map_err(|e| fail(&log, e))
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        let modules = self.modules.get_mut().map(std::mem::take).unwrap_or_default();
        for m in modules {
            // SAFETY: each module was loaded by `load` and no function of it is used after this.
            // An unload error at teardown leaves nothing to recover.
            let _ = unsafe { result::module::unload(m) };
        }
    }
}
