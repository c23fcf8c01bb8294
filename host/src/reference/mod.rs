//! The CPU reference executor: naive, obviously correct loops, accumulating in f64 where it matters.
//! It shares no code with the GPU launchers beyond the broadcast-shape rule, so comparing the two
//! tests the kernels and their launch parameters together.

pub mod elementwise;
