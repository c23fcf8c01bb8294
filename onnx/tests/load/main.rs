//! Loader tests: builder round trips, external data (happy path and every rejection), limits,
//! and robustness against truncated, garbage and random bytes. No GPU needed.

mod common;
mod external_data;
mod fuzz;
mod rejects;
mod roundtrip;
