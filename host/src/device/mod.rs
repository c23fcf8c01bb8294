//! The CUDA device side of the host: [`Context`] (device, stream, loaded kernels), device tensors,
//! the embedded PTX and the launch function.
//!
//! A [`Context`] is created explicitly and passed by reference (no global device singleton), so
//! tests and embedding programs can hold several. All work goes to the context's one stream, in
//! order; errors of asynchronous work surface at the next synchronisation.

mod buffer;
pub mod cache;
mod cubin_archive;
mod launch;
mod module;
mod ptx;
mod ptx_split;
pub mod shipped;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream, result, sys};
use kernels_gpu::abi::KernelId;

pub use buffer::DeviceTensor;
pub use cache::{CacheUsage, KernelCache};
pub use launch::{KernelArg, L2Window, LaunchShape, params_bytes};
pub use module::{KernelLoad, KernelSource, LoadReport};
pub use ptx::PtxFlavour;

use crate::error::HostError;
use module::{LoadedModule, Target};

/// What the driver reports about the device a [`Context`] runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Device memory in bytes.
    pub total_memory_bytes: usize,
    /// Driver API version, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
    /// Most L2 cache a context may set aside for persisting accesses (0: none).
    pub persisting_l2_max_bytes: usize,
    /// Largest access-policy window (the address range an L2 persistence hint covers).
    pub access_window_max_bytes: usize,
}

/// A CUDA device with its stream and every kernel loaded.
///
/// Field order matters: the module is unloaded before the stream and context are released.
#[derive(Debug)]
pub struct Context {
    module: LoadedModule,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
    flavour: PtxFlavour,
    module_load_time: Duration,
    /// The L2 set aside for persisting accesses, once [`Context::persisting_l2`] has asked.
    persisting_l2: OnceLock<usize>,
}

/// Number of CUDA devices; [`HostError::NoDriver`] when `libcuda` cannot be loaded and
/// [`HostError::NoDevice`] when the driver sees none.
pub fn device_count() -> Result<usize, HostError> {
    // SAFETY: only tries to dlopen libcuda under its usual names; no symbol is called.
    if !unsafe { sys::is_culib_present() } {
        return Err(HostError::NoDriver);
    }
    match result::init() {
        Ok(()) => {}
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => return Err(HostError::NoDevice),
        Err(source) => return Err(HostError::Driver { action: "initialising the CUDA driver", source }),
    }
    let count = result::device::get_count().map_err(HostError::driver("counting CUDA devices"))?;
    if count <= 0 { Err(HostError::NoDevice) } else { Ok(count as usize) }
}

/// What a plan for device `ordinal` is compiled for — its multiprocessors and PTX flavour — read
/// from the driver without creating a context (so a plan can be compiled while the context of
/// [`Context::new`] is being created on another thread).
pub fn plan_target(ordinal: usize) -> Result<(u32, PtxFlavour), HostError> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(HostError::NoSuchDevice { ordinal, count });
    }
    let dev = result::device::get(ordinal as i32).map_err(HostError::driver("opening the device"))?;
    let attr = |a, what| {
        // SAFETY: `dev` is a valid device handle (from the driver, above); no context is needed.
        unsafe { result::device::get_attribute(dev, a) }.map_err(HostError::driver(what))
    };
    use sys::CUdevice_attribute as A;
    let sm = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "reading the multiprocessor count")?;
    let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "reading the compute capability")?;
    let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "reading the compute capability")?;
    let flavour = PtxFlavour::for_compute_capability(major, minor).ok_or_else(|| {
        HostError::UnsupportedDevice { name: result::device::get_name(dev).unwrap_or_default(), major, minor }
    })?;
    Ok((sm as u32, flavour))
}

impl Context {
    /// Opens device `ordinal`: creates its stream and picks the PTX flavour its compute capability
    /// needs. Kernels load from the cubins shipped in the binary where they fit the device
    /// ([`shipped`]), else from the [kernel cache](cache) the environment names
    /// ([`KernelCache::from_env`]), compiled on a miss: those a session's plan needs before its
    /// first launch, in parallel ([`Context::preload`]), any other on its first launch
    /// ([`Context::load_all_kernels`] loads them all).
    pub fn new(ordinal: usize) -> Result<Self, HostError> {
        Self::with_cache(ordinal, KernelCache::from_env())
    }

    /// [`Context::new`] with the kernel cache `cache` ([`KernelCache::off`]: none).
    pub fn with_cache(ordinal: usize, cache: KernelCache) -> Result<Self, HostError> {
        Self::with_kernel_sources(ordinal, cache, shipped::enabled_from_env())
    }

    /// [`Context::new`] with the kernel cache `cache`, loading the shipped cubins first only when
    /// `shipped`.
    pub fn with_kernel_sources(ordinal: usize, cache: KernelCache, shipped: bool) -> Result<Self, HostError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(HostError::NoSuchDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(HostError::driver("creating the CUDA context"))?;
        // SAFETY: buffers are allocated and freed on the context's stream; a session uses them on
        // its own stream only after waiting for the context's stream (allocation) and waits for
        // its stream before freeing or moving them (drop, arena growth, state reallocation), so
        // cudarc's cross-stream event tracking is not needed.
        unsafe { ctx.disable_event_tracking() };
        let info = device_info(&ctx, ordinal)?;
        let (major, minor) = info.compute_capability;
        let flavour = PtxFlavour::for_compute_capability(major, minor)
            .ok_or_else(|| HostError::UnsupportedDevice { name: info.name.clone(), major, minor })?;
        let stream = ctx.new_stream().map_err(HostError::driver("creating a stream"))?;
        let start = Instant::now();
        let target =
            Target { compute_capability: info.compute_capability, driver_version: info.driver_version };
        let module = LoadedModule::new(flavour, target, cache, shipped);
        let module_load_time = start.elapsed();
        Ok(Context { module, stream, ctx, info, flavour, module_load_time, persisting_l2: OnceLock::new() })
    }

    /// The device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The PTX flavour loaded.
    pub fn flavour(&self) -> PtxFlavour {
        self.flavour
    }

    /// Time `Context::new` spent preparing the kernels (they load on first use).
    pub fn module_load_time(&self) -> Duration {
        self.module_load_time
    }

    /// The kernel cache this context loads from.
    pub fn kernel_cache(&self) -> &KernelCache {
        self.module.cache()
    }

    /// Threads that compile kernels in parallel: `FERROFUSE_JIT_THREADS` when set, else one per
    /// core.
    pub fn compile_threads() -> usize {
        std::env::var("FERROFUSE_JIT_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Loads the kernels of `kernels` that are not loaded yet, in parallel ([`Context::compile_threads`]
    /// threads): each from the kernel cache, or compiled and stored there. A session calls this with
    /// its plan's kernels before their first launch. A missing or broken kernel is an error here.
    pub fn preload(&self, kernels: &[KernelId]) -> Result<LoadReport, HostError> {
        self.module.preload(kernels, Self::compile_threads(), &|| self.bind())
    }

    /// Loads every kernel now ([`Context::preload`] of all) and reports what it did.
    pub fn load_all_kernels(&self) -> Result<LoadReport, HostError> {
        self.preload(KernelId::ALL)
    }

    /// Loads every kernel into a second, temporary set of modules through `cache` (the
    /// context's own stay as they are; shipped cubins are not used) and reports it: with an empty or switched-off cache this
    /// is the cold compile of every kernel, with a filled one the warm load (for `doctor`).
    pub fn measure_load_all(&self, cache: KernelCache) -> Result<LoadReport, HostError> {
        self.measure_load_all_of(KernelId::ALL, cache)
    }

    /// [`Context::measure_load_all`] of `kernels` only.
    pub fn measure_load_all_of(
        &self,
        kernels: &[KernelId],
        cache: KernelCache,
    ) -> Result<LoadReport, HostError> {
        let target = Target {
            compute_capability: self.info.compute_capability,
            driver_version: self.info.driver_version,
        };
        let module = LoadedModule::new(self.flavour, target, cache, false);
        let report = module.preload(kernels, Self::compile_threads(), &|| self.bind());
        // The temporary modules unload with the context current on this thread.
        self.bind()?;
        drop(module);
        report
    }

    /// Every kernel load of this context so far (preloads and loads on first launch).
    pub fn load_history(&self) -> LoadReport {
        self.module.history()
    }

    /// Kernels loaded so far (each loads on its first launch).
    pub fn loaded_kernel_count(&self) -> usize {
        self.module.loaded_count()
    }

    /// Bytes of L2 set aside for persisting accesses ([`L2Window`]): on first call, the device's
    /// maximum is set aside for this context (normal accesses still use it while no persisting
    /// line does). 0 where the device has none or the driver refuses.
    pub fn persisting_l2(&self) -> usize {
        *self.persisting_l2.get_or_init(|| {
            let want = self.info.persisting_l2_max_bytes;
            if want == 0 || self.bind().is_err() {
                return 0;
            }
            // SAFETY: sets a limit of the current context (bound above).
            let set = unsafe { sys::cuCtxSetLimit(sys::CUlimit::CU_LIMIT_PERSISTING_L2_CACHE_SIZE, want) };
            if set.result().is_ok() { want } else { 0 }
        })
    }

    /// Waits for all work on the stream; reports the first asynchronous error.
    pub fn synchronize(&self) -> Result<(), HostError> {
        self.stream.synchronize().map_err(HostError::driver("synchronizing the stream"))
    }

    /// Device time in milliseconds of the work `f` enqueues, measured with CUDA events on the
    /// stream (waits for it to finish).
    pub fn time_device<F>(&self, f: F) -> Result<f32, HostError>
    where
        F: FnOnce() -> Result<(), HostError>,
    {
        self.time_on(&self.stream, f)
    }

    /// [`Context::time_device`] for work enqueued on `stream`.
    pub fn time_on<F>(&self, stream: &CudaStream, f: F) -> Result<f32, HostError>
    where
        F: FnOnce() -> Result<(), HostError>,
    {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start = self.ctx.new_event(flags).map_err(HostError::driver("creating an event"))?;
        let end = self.ctx.new_event(flags).map_err(HostError::driver("creating an event"))?;
        start.record(stream).map_err(HostError::driver("recording an event"))?;
        f()?;
        end.record(stream).map_err(HostError::driver("recording an event"))?;
        end.synchronize().map_err(HostError::driver("waiting for an event"))?;
        start.elapsed_ms(&end).map_err(HostError::driver("reading event times"))
    }

    /// A new timing event of this context.
    pub(crate) fn event(&self) -> Result<cudarc::driver::CudaEvent, HostError> {
        self.ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(HostError::driver("creating an event"))
    }

    fn bind(&self) -> Result<(), HostError> {
        self.ctx.bind_to_thread().map_err(HostError::driver("binding the context to this thread"))
    }

    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A new stream of this context (each session runs on its own, so sessions on different
    /// threads neither serialise nor disturb each other's graph capture).
    pub fn new_stream(&self) -> Result<Arc<CudaStream>, HostError> {
        self.ctx.new_stream().map_err(HostError::driver("creating a stream"))
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // The module unload that follows needs the context current on this thread.
        let _ = self.bind();
    }
}

fn device_info(ctx: &Arc<CudaContext>, ordinal: usize) -> Result<DeviceInfo, HostError> {
    let name = ctx.name().map_err(HostError::driver("reading the device name"))?;
    let compute_capability =
        ctx.compute_capability().map_err(HostError::driver("reading the compute capability"))?;
    let sm_count = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(HostError::driver("reading the multiprocessor count"))? as u32;
    let total_memory_bytes = ctx.total_mem().map_err(HostError::driver("reading the memory size"))?;
    let mut driver_version = 0;
    // SAFETY: writes one int through a valid pointer.
    unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .map_err(HostError::driver("reading the driver version"))?;
    // Zero where the device or driver has no L2 persistence (the hint is then not given).
    let attr = |a| ctx.attribute(a).map_or(0, |v| v.max(0) as usize);
    let persisting_l2_max_bytes =
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
    let access_window_max_bytes =
        attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
    Ok(DeviceInfo {
        ordinal,
        name,
        compute_capability,
        sm_count,
        total_memory_bytes,
        driver_version,
        persisting_l2_max_bytes,
        access_window_max_bytes,
    })
}
