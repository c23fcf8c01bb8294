//! Subcommands of the `ferrofuse` binary, one file each.

pub mod doctor;
pub mod inspect;
pub mod run;
pub mod tensor_io;
pub mod warmup;
