//! Subcommands of the `ferrofuse` binary, one file each.

pub mod doctor;
