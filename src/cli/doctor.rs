//! `ferrofuse doctor`: what the driver and device are, which PTX flavour loads, the kernel cache
//! (where, how large, cold and warm load times), and a GPU self-test of the kernels against the
//! CPU reference.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use host::device::{self, KernelCache, KernelSource, LoadReport, PtxFlavour};
use host::{Context, HostError};
use kernels_gpu::abi::KernelId;

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The cache folder and what it holds, as one phrase.
pub fn cache_line(cache: &KernelCache) -> String {
    match cache.dir() {
        None => format!("off ({}=off); kernels are JIT-compiled by the driver", device::cache::SWITCH_VAR),
        Some(d) => {
            let u = cache.usage();
            format!(
                "{} ({} entries, {:.1} MiB)",
                d.display(),
                u.entries,
                u.bytes as f64 / (1u64 << 20) as f64
            )
        }
    }
}

/// One line for a load: wall time, threads, where the code came from, and the slowest kernels.
pub fn load_line(r: &LoadReport) -> String {
    let mut line = format!(
        "{} kernels in {:.1} ms on {} thread(s): {} shipped, {} from the cache, {} compiled, {} JIT-compiled by the driver",
        r.loads.len(),
        ms(r.wall),
        r.threads,
        r.count(KernelSource::Shipped),
        r.count(KernelSource::Cache),
        r.count(KernelSource::Compiled),
        r.count(KernelSource::DriverJit)
    );
    if compiled(r) > 0 {
        let slow: Vec<String> =
            r.slowest(4).iter().map(|l| format!("{} {:.0} ms", l.kernel.symbol(), ms(l.time))).collect();
        line += &format!("; slowest: {}", slow.join(", "));
    }
    if r.invalid_entries > 0 {
        line += &format!("; {} corrupt or foreign cache entries replaced", r.invalid_entries);
    }
    if r.shipped_refused > 0 {
        line += &format!("; {} shipped cubins refused by the driver (compiled instead)", r.shipped_refused);
    }
    if let Some(e) = &r.write_error {
        line += &format!("; warning: {e}");
    }
    line
}

/// Kernels of `r` compiled from PTX (by the driver's linker or its JIT) rather than loaded as
/// machine code (shipped or cached).
pub fn compiled(r: &LoadReport) -> usize {
    r.count(KernelSource::Compiled) + r.count(KernelSource::DriverJit)
}

/// One line for what `flavour` ships.
fn shipped_line(flavour: PtxFlavour) -> String {
    let s = device::shipped::shipped(flavour);
    if s.kernels == 0 {
        "none (built without FERROFUSE_PTXAS: kernels compile on first use, then load from the cache)".into()
    } else {
        format!(
            "{} kernels for {} ({:.1} MiB, {}){}",
            s.kernels,
            s.arch,
            s.bytes as f64 / (1u64 << 20) as f64,
            s.compiler,
            if device::shipped::enabled_from_env() {
                String::new()
            } else {
                format!(", switched off ({}=off)", device::shipped::SWITCH_VAR)
            }
        )
    }
}

/// Runs the checks on device `ordinal`; the exit code is 0 only when a GPU is present and every
/// self-test passes. `cold` also measures compiling every kernel into an empty cache when the
/// user's cache already holds them.
pub fn run(ordinal: usize, cold: bool) -> ExitCode {
    println!("ferrofuse {} doctor", env!("CARGO_PKG_VERSION"));
    for f in PtxFlavour::ALL {
        println!(
            "embedded PTX: {:<8} {} ({} kernels, {:.1} MiB)",
            f.name(),
            f.target(),
            f.entries().len(),
            f.source().len() as f64 / (1u64 << 20) as f64
        );
        println!("shipped cubins: {:<8} {}", f.name(), shipped_line(f));
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
    let cache = ctx.kernel_cache().clone();
    println!("kernel cache: {}", cache_line(&cache));
    let mut failed = 0;
    // Every kernel, from the shipped cubins and through the user's cache: cold where something had
    // to be compiled, warm where nothing did.
    match ctx.load_all_kernels() {
        Ok(r) => {
            // Warm: nothing compiled (every kernel shipped or cached).
            let warm = compiled(&r) == 0;
            println!("kernel load ({}): {}", if warm { "warm" } else { "cold" }, load_line(&r));
            if !warm && cache.dir().is_some() && r.count(KernelSource::Shipped) == 0 {
                match ctx.measure_load_all(cache.clone()) {
                    Ok(w) => println!("kernel load (warm, fresh modules from the cache): {}", load_line(&w)),
                    Err(e) => {
                        failed += 1;
                        println!("  FAIL  loading every kernel from the cache: {e}");
                    }
                }
            } else if cold {
                let dir = std::env::temp_dir().join(format!("ferrofuse-doctor-cold-{}", std::process::id()));
                match ctx.measure_load_all(KernelCache::at(&dir)) {
                    Ok(c) => println!("kernel load (cold, into an empty cache): {}", load_line(&c)),
                    Err(e) => {
                        failed += 1;
                        println!("  FAIL  compiling every kernel: {e}");
                    }
                }
                let _ = std::fs::remove_dir_all(&dir);
            } else if warm {
                println!(
                    "kernel load (cold, compiling): not measured, nothing needed compiling (`ferrofuse doctor --cold` measures it)"
                );
            }
        }
        Err(e) => {
            failed += 1;
            println!("  FAIL  loading every kernel: {e}");
        }
    }
    println!("kernel cache after: {}", cache_line(&cache));
    println!("kernels: {} in the PTX, {} loaded", KernelId::ALL.len(), ctx.loaded_kernel_count());
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    println!("self-test (seed {seed}):");
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
    println!("self-test: {:.1} ms", ms(selftest_start.elapsed()));
    if failed == 0 {
        println!("all checks passed");
        ExitCode::SUCCESS
    } else {
        println!("{failed} check(s) failed");
        ExitCode::FAILURE
    }
}
