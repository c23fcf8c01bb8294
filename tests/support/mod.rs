//! Paths the root package's tests read: the repository (fixtures, the demo model, the node tests)
//! and the `ferrofuse` binary. They default to this build's checkout; the GPU pack runs the test
//! binaries on a machine where the checkout sits elsewhere and sets `FERROFUSE_REPO_DIR` and
//! `FERROFUSE_BIN`.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root.
pub fn repo_dir() -> PathBuf {
    std::env::var_os("FERROFUSE_REPO_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The `ferrofuse` binary.
pub fn ferrofuse_bin() -> PathBuf {
    std::env::var_os("FERROFUSE_BIN")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ferrofuse")), PathBuf::from)
}
