//! Elementwise bandwidth on the GPU: a large f32 add (two reads and one write per element), against
//! a device-to-device copy of the same size measured in the same run (one read and one write).
//! Device time comes from CUDA events around back-to-back launches.
//!
//! Run with `cargo bench --features gpu --bench elementwise` (or the gpu-pack runner). A summary
//! line per case is printed before criterion's own report.

use std::time::Duration;

use criterion::{Criterion, Throughput};
use host::device::DeviceTensor;
use host::ops::elementwise;
use host::selftest::Rng;
use host::{Context, HostError};
use kernels_gpu::abi::{BinaryOp, UnaryOp};

/// 2^28 f32 = 1 GiB per operand: far beyond the 60 MB L2, so every pass streams from HBM.
const N: usize = 1 << 28;
/// The device copy bandwidth recorded for the H200 in DEVELOPERS.md (bytes read + written).
const H200_COPY_TBPS: f64 = 4.26;

struct Buffers {
    a: DeviceTensor,
    b: DeviceTensor,
    y: DeviceTensor,
}

fn add(ctx: &Context, t: &mut Buffers) -> Result<(), HostError> {
    elementwise::binary(ctx, BinaryOp::Add, &t.a, &t.b, &mut t.y)
}

/// `y = a + b` with `b` one row broadcast over `a`'s rows.
fn bias_add(ctx: &Context, t: &mut Buffers) -> Result<(), HostError> {
    elementwise::binary(ctx, BinaryOp::Add, &t.a, &t.b, &mut t.y)
}

fn relu(ctx: &Context, t: &mut Buffers) -> Result<(), HostError> {
    elementwise::unary(ctx, UnaryOp::Relu, &t.a, &mut t.y)
}

fn sigmoid(ctx: &Context, t: &mut Buffers) -> Result<(), HostError> {
    elementwise::unary(ctx, UnaryOp::Sigmoid, &t.a, &mut t.y)
}

fn copy(ctx: &Context, t: &mut Buffers) -> Result<(), HostError> {
    t.y.copy_from(ctx, &t.a)
}

/// Median device milliseconds of one call of `f`, over `reps` event-timed batches of 10 calls.
fn median_ms(ctx: &Context, reps: usize, mut f: impl FnMut() -> Result<(), HostError>) -> f64 {
    let mut times: Vec<f64> = (0..reps)
        .map(|_| ctx.time_device(|| (0..10).try_for_each(|_| f())).expect("timed launches") as f64 / 10.0)
        .collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}

fn main() {
    let ctx = Context::new(0).expect("the elementwise bench needs an NVIDIA GPU");
    let mut rng = Rng::new(42);
    let host_a = rng.tensor(&[N], -8.0, 8.0);
    let host_b = rng.tensor(&[N], -8.0, 8.0);
    let mut t = Buffers {
        a: DeviceTensor::from_host(&ctx, &host_a).unwrap(),
        b: DeviceTensor::from_host(&ctx, &host_b).unwrap(),
        y: DeviceTensor::filled(&ctx, &[N], 0.0).unwrap(),
    };
    drop((host_a, host_b));
    let rows = N / 4096;
    let mut wide = Buffers {
        a: DeviceTensor::from_host(&ctx, &rng.tensor(&[rows, 4096], -8.0, 8.0)).unwrap(),
        b: DeviceTensor::from_host(&ctx, &rng.tensor(&[4096], -1.0, 1.0)).unwrap(),
        y: DeviceTensor::filled(&ctx, &[rows, 4096], 0.0).unwrap(),
    };

    // Warm-up: module JIT, first-touch of the allocations, clocks up.
    for _ in 0..5 {
        add(&ctx, &mut t).unwrap();
        copy(&ctx, &mut t).unwrap();
    }
    ctx.synchronize().unwrap();

    let gb = |bytes: f64, ms: f64| bytes / (ms * 1e-3) / 1e12;
    let copy_ms = median_ms(&ctx, 21, || copy(&ctx, &mut t));
    let add_ms = median_ms(&ctx, 21, || add(&ctx, &mut t));
    let bias_ms = median_ms(&ctx, 21, || bias_add(&ctx, &mut wide));
    let relu_ms = median_ms(&ctx, 21, || relu(&ctx, &mut t));
    let sigmoid_ms = median_ms(&ctx, 21, || sigmoid(&ctx, &mut t));
    let copy_tbps = gb(2.0 * 4.0 * N as f64, copy_ms);
    let info = ctx.info();
    println!(
        "device: {} (cc {}.{}, {} SMs), PTX flavour {}",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.sm_count,
        ctx.flavour().name()
    );
    println!(
        "{:<28} {:>9} {:>9} {:>14} {:>14}",
        "case (2^28 f32)", "ms", "TB/s", "% of copy", "% of 4.26 TB/s"
    );
    for (name, bytes, ms) in [
        ("device copy (cuMemcpyDtoD)", 2.0, copy_ms),
        ("add_f32 same shape", 3.0, add_ms),
        ("add_f32 [65536,4096]+[4096]", 2.0, bias_ms),
        ("relu_f32", 2.0, relu_ms),
        ("sigmoid_f32", 2.0, sigmoid_ms),
    ] {
        let tbps = gb(bytes * 4.0 * N as f64, ms);
        println!(
            "{name:<28} {ms:>9.4} {tbps:>9.3} {:>13.1}% {:>13.1}%",
            100.0 * tbps / copy_tbps,
            100.0 * tbps / H200_COPY_TBPS
        );
    }

    let mut c = Criterion::default().configure_from_args().measurement_time(Duration::from_secs(3));
    let mut g = c.benchmark_group("elementwise_2^28_f32");
    g.throughput(Throughput::Bytes(3 * 4 * N as u64));
    g.bench_function("add_f32", |bench| {
        bench.iter_custom(|iters| {
            let ms = ctx.time_device(|| (0..iters).try_for_each(|_| add(&ctx, &mut t))).unwrap();
            Duration::from_secs_f64(ms as f64 * 1e-3)
        })
    });
    g.throughput(Throughput::Bytes(2 * 4 * N as u64));
    g.bench_function("device_copy", |bench| {
        bench.iter_custom(|iters| {
            let ms = ctx.time_device(|| (0..iters).try_for_each(|_| copy(&ctx, &mut t))).unwrap();
            Duration::from_secs_f64(ms as f64 * 1e-3)
        })
    });
    g.finish();
    c.final_summary();
}
