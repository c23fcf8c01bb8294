//! Context creation, device information and error reporting.

use host::device::PtxFlavour;
use host::{Context, HostError};

use crate::ctx;

#[test]
fn context_reports_the_device_and_picks_its_flavour() {
    let info = ctx().info();
    assert!(info.sm_count > 0 && info.total_memory_bytes > 0, "{info:?}");
    let (major, minor) = info.compute_capability;
    assert_eq!(Some(ctx().flavour()), PtxFlavour::for_compute_capability(major, minor));
}

#[test]
fn a_missing_device_is_a_clear_error() {
    match Context::new(4096) {
        Err(HostError::NoSuchDevice { ordinal: 4096, count }) => assert!(count >= 1),
        other => panic!("expected NoSuchDevice, got {other:?}"),
    }
}

/// Every self-test (`host::selftest::run_all`) passes on `c`.
fn self_test_passes(c: &Context, seed: u64) {
    let (_, failures): (Vec<_>, Vec<_>) =
        host::selftest::run_all(c, seed).into_iter().partition(|(_, r)| r.is_ok());
    assert!(
        failures.is_empty(),
        "{:?}",
        failures.iter().map(|(n, r)| format!("{n}: {r:?}")).collect::<Vec<_>>()
    );
}

/// A fresh, empty cache folder for one test.
fn scratch_cache(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ferrofuse-gpu-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn kernels_compile_in_parallel_into_the_cache_and_load_from_it_afterwards() {
    use host::device::{KernelCache, KernelSource};
    use kernels_gpu::abi::KernelId;
    let dir = scratch_cache("fill");
    let kernels = [KernelId::AddF32, KernelId::SoftmaxF32, KernelId::LayerNormF32, KernelId::GemmF32];
    let cold = ctx().measure_load_all_of(&kernels, KernelCache::at(&dir)).expect("compiles");
    assert_eq!(cold.count(KernelSource::Compiled), kernels.len(), "{cold:?}");
    assert_eq!(KernelCache::at(&dir).usage().entries, kernels.len());
    let warm = ctx().measure_load_all_of(&kernels, KernelCache::at(&dir)).expect("loads");
    assert_eq!(warm.count(KernelSource::Cache), kernels.len(), "{warm:?}");
    // A corrupt entry (one byte flipped, then one truncated) is detected, compiled again and
    // rewritten; the next load takes it from the cache again.
    let entries: Vec<_> = walk(&dir);
    let mut bytes = std::fs::read(&entries[0]).unwrap();
    *bytes.last_mut().unwrap() ^= 0x5a;
    std::fs::write(&entries[0], &bytes).unwrap();
    std::fs::write(&entries[1], &bytes[..bytes.len() / 2]).unwrap();
    let again = ctx().measure_load_all_of(&kernels, KernelCache::at(&dir)).expect("recompiles");
    assert_eq!(again.invalid_entries, 2, "{again:?}");
    assert_eq!(again.count(KernelSource::Compiled), 2, "{again:?}");
    let healed = ctx().measure_load_all_of(&kernels, KernelCache::at(&dir)).expect("loads");
    assert_eq!(healed.count(KernelSource::Cache), kernels.len(), "{healed:?}");
    // And the kernels loaded from the cache compute: a session on a context using this cache
    // (not the shipped cubins).
    let c = Context::with_kernel_sources(0, KernelCache::at(&dir), false).expect("context");
    self_test_passes(&c, 11);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shipped_cubins_load_before_the_cache_and_compute() {
    use host::device::{KernelCache, KernelSource, shipped};
    use kernels_gpu::abi::KernelId;
    // An empty cache: a kernel not shipped would be compiled into it.
    let dir = scratch_cache("shipped");
    let c = Context::with_kernel_sources(0, KernelCache::at(&dir), true).expect("context");
    let r = c.load_all_kernels().expect("loads");
    let s = shipped::shipped(c.flavour());
    if s.kernels == 0 {
        // Built without FERROFUSE_PTXAS: nothing shipped, every kernel compiled into the cache.
        eprintln!("no shipped cubins in this build (FERROFUSE_PTXAS unset): checking the fallback");
        assert_eq!(r.count(KernelSource::Shipped), 0, "{r:?}");
        assert_eq!(r.count(KernelSource::Compiled), KernelId::ALL.len(), "{r:?}");
    } else {
        // Every kernel from the binary, none compiled, nothing written to the cache, none refused.
        assert_eq!(r.count(KernelSource::Shipped), KernelId::ALL.len(), "{s:?}: {r:?}");
        assert_eq!(r.shipped_refused, 0, "{r:?}");
        assert_eq!(KernelCache::at(&dir).usage().entries, 0);
    }
    self_test_passes(&c, 12);
    drop(c);
    // Switched off, the same kernels come from the cache the first context filled (or compile).
    let off = Context::with_kernel_sources(0, KernelCache::at(&dir), false).expect("context");
    let r = off.preload(&[KernelId::AddF32]).expect("loads");
    assert_eq!(r.count(KernelSource::Shipped), 0, "{r:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_the_cache_off_kernels_are_jit_compiled_by_the_driver() {
    use host::device::{KernelCache, KernelSource};
    use kernels_gpu::abi::KernelId;
    let r = ctx().measure_load_all_of(&[KernelId::AddF32], KernelCache::off()).expect("loads");
    assert_eq!(r.count(KernelSource::DriverJit), 1, "{r:?}");
}

#[test]
fn an_unwritable_cache_is_reported_and_the_kernel_still_loads() {
    use host::device::{KernelCache, KernelSource};
    use kernels_gpu::abi::KernelId;
    // A file where the cache folder should be: no entry can be written under it.
    let dir = scratch_cache("unwritable");
    std::fs::write(&dir, b"not a folder").unwrap();
    let r = ctx().measure_load_all_of(&[KernelId::AddF32], KernelCache::at(&dir)).expect("loads");
    assert_eq!(r.count(KernelSource::Compiled), 1, "{r:?}");
    assert!(r.write_error.as_deref().is_some_and(|e| e.contains("add_f32")), "{r:?}");
    let _ = std::fs::remove_file(&dir);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out.sort();
    out
}
