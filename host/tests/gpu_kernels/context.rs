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
