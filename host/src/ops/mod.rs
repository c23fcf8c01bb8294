//! Typed, checked launches of the kernel families. Each function validates shapes against its
//! operands before the (unsafe) launch, so the kernels' contracts hold by construction.

pub mod elementwise;
