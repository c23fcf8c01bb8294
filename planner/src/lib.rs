//! ferrofuse planner crate (being built; see issue 3).
#![forbid(unsafe_code)]
