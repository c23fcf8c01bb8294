//! Subcommands of the `ferrofuse` binary, one file each.

pub mod bench;
pub mod doctor;
pub mod inspect;
pub mod nvml;
pub mod run;
pub mod tensor_io;
pub mod warmup;

/// The `--precision` argument of `run` and `inspect` (an unknown name is an error listing the
/// known ones).
pub fn precision_of(name: &str) -> anyhow::Result<host::Precision> {
    name.parse().map_err(|e| anyhow::anyhow!("--precision {name}: {e}"))
}
