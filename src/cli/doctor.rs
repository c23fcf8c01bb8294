//! `ferrofuse doctor`: what the driver and device are, which PTX flavour loads and how fast, and a
//! GPU self-test of the kernels against the CPU reference.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use host::device::{self, PtxFlavour};
use host::{Context, HostError};
use kernels_gpu::abi::KernelId;

/// Runs the checks on device `ordinal`; the exit code is 0 only when a GPU is present and every
/// self-test passes.
pub fn run(ordinal: usize) -> ExitCode {
    println!("ferrofuse {} doctor", env!("CARGO_PKG_VERSION"));
    for f in PtxFlavour::ALL {
        println!("embedded PTX: {:<8} {} ({} kernels)", f.name(), f.target(), f.entries().len());
    }
    match device::device_count() {
        Ok(n) => println!("CUDA devices: {n}"),
        Err(e @ (HostError::NoDriver | HostError::NoDevice)) => {
            println!("no GPU: {e}");
            println!("GPU execution is unavailable on this machine; the CPU reference still works.");
            return ExitCode::from(2);
        }
        Err(e) => {
            println!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let ctx = match Context::new(ordinal) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let info = ctx.info();
    let v = info.driver_version;
    println!("driver: CUDA {}.{} ({v})", v / 1000, (v % 1000) / 10);
    println!(
        "device {}: {}, compute capability {}.{}, {} SMs, {:.1} GiB",
        info.ordinal,
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.sm_count,
        info.total_memory_bytes as f64 / (1u64 << 30) as f64
    );
    println!("PTX flavour: {} ({})", ctx.flavour().name(), ctx.flavour().target());
    println!("kernels: {} in the PTX, each loaded (JIT-compiled) on its first launch", KernelId::ALL.len());
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    println!("self-test (seed {seed}):");
    let mut failed = 0;
    let selftest_start = std::time::Instant::now();
    for (name, outcome) in host::selftest::run_all(&ctx, seed) {
        match outcome {
            Ok(()) => println!("  ok    {name}"),
            Err(e) => {
                failed += 1;
                println!("  FAIL  {name}: {e}");
            }
        }
    }
    let (used, selftest_time) = (ctx.loaded_kernel_count(), selftest_start.elapsed());
    match ctx.load_all_kernels() {
        Ok(t) => println!(
            "kernel load: the self-test took {:.1} ms, loading its {used} kernels included; loading the \
             other {} took {:.1} ms (JIT time when the driver's cache is cold)",
            selftest_time.as_secs_f64() * 1e3,
            KernelId::ALL.len() - used,
            t.as_secs_f64() * 1e3
        ),
        Err(e) => {
            failed += 1;
            println!("  FAIL  loading every kernel: {e}");
        }
    }
    if failed == 0 {
        println!("all checks passed");
        ExitCode::SUCCESS
    } else {
        println!("{failed} check(s) failed");
        ExitCode::FAILURE
    }
}
