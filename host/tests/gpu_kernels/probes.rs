//! The intrinsic probes: every word they write is predicted on the host.

use host::selftest;

use crate::ctx;

#[test]
fn warp_intrinsics_shared_memory_and_atomics() {
    selftest::probe_warp(ctx()).unwrap();
}

#[test]
fn cp_async_ldmatrix_and_mma_sync_bf16() {
    for seed in 0..8 {
        selftest::probe_mma(ctx(), seed).unwrap();
    }
}

#[test]
fn hopper_fences_run_in_the_hopper_flavour() {
    selftest::probe_hopper(ctx()).unwrap();
}
