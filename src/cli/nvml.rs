//! NVML for `ferrofuse bench`: the driver's version, this process's device memory and the GPU's
//! utilisation, sampled on a thread while a measurement runs. NVML (`libnvidia-ml.so.1`) is loaded
//! at run time; where it cannot be, the benchmark records why and goes on without these figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;

/// How often the sampler reads NVML.
const PERIOD: Duration = Duration::from_millis(10);

/// NVML, opened on one device.
pub struct Gpu {
    nvml: Arc<Nvml>,
    index: u32,
}

impl Gpu {
    /// NVML on the device of CUDA ordinal `ordinal` (NVML's index of the same device when
    /// `CUDA_VISIBLE_DEVICES` does not reorder them).
    pub fn open(ordinal: usize) -> Result<Gpu, String> {
        let nvml = Nvml::init().map_err(|e| format!("NVML: {e}"))?;
        let index = u32::try_from(ordinal).map_err(|e| e.to_string())?;
        nvml.device_by_index(index).map_err(|e| format!("NVML device {index}: {e}"))?;
        Ok(Gpu { nvml: Arc::new(nvml), index })
    }

    /// The driver's version, e.g. `580.159.04`.
    pub fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    /// Device memory in use on the whole device, in bytes.
    pub fn device_used_bytes(&self) -> Option<u64> {
        self.nvml.device_by_index(self.index).ok()?.memory_info().ok().map(|m| m.used)
    }
}

/// One reading: this process's device memory, the device's used memory, utilisation (%).
type Reading = (Option<u64>, Option<u64>, Option<u32>);

fn read(nvml: &Nvml, index: u32, pid: u32) -> Reading {
    let Ok(device) = nvml.device_by_index(index) else { return (None, None, None) };
    let process = device.running_compute_processes().ok().and_then(|ps| {
        ps.into_iter().find(|p| p.pid == pid).and_then(|p| match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        })
    });
    let used = device.memory_info().ok().map(|m| m.used);
    (process, used, device.utilization_rates().ok().map(|u| u.gpu))
}

/// A thread reading NVML every [`PERIOD`] until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Sampled>,
}

/// What a [`Sampler`] saw.
#[derive(Debug, Default)]
pub struct Sampled {
    /// The most device memory NVML attributed to this process (None: NVML did not say).
    pub process_peak_bytes: Option<u64>,
    /// The most device memory in use on the device.
    pub device_used_peak_bytes: Option<u64>,
    /// Each utilisation reading (% of the sample period with a kernel running).
    pub utilization: Vec<u32>,
}

impl Sampled {
    /// The mean utilisation, if any reading was taken.
    pub fn mean_utilization(&self) -> Option<f64> {
        (!self.utilization.is_empty()).then(|| {
            self.utilization.iter().map(|&u| f64::from(u)).sum::<f64>() / self.utilization.len() as f64
        })
    }

    /// The highest utilisation reading.
    pub fn max_utilization(&self) -> Option<u32> {
        self.utilization.iter().copied().max()
    }

    fn add(&mut self, (process, used, util): Reading) {
        let max = |a: Option<u64>, b: Option<u64>| a.max(b);
        self.process_peak_bytes = max(self.process_peak_bytes, process);
        self.device_used_peak_bytes = max(self.device_used_peak_bytes, used);
        self.utilization.extend(util);
    }
}

impl Sampler {
    /// Starts sampling `gpu`.
    pub fn start(gpu: &Gpu) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let (nvml, index, flag) = (gpu.nvml.clone(), gpu.index, stop.clone());
        let pid = std::process::id();
        let thread = std::thread::spawn(move || {
            let mut seen = Sampled::default();
            while !flag.load(Ordering::Relaxed) {
                seen.add(read(&nvml, index, pid));
                std::thread::sleep(PERIOD);
            }
            seen.add(read(&nvml, index, pid));
            seen
        });
        Sampler { stop, thread }
    }

    /// Stops sampling and returns what was seen.
    pub fn stop(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}
