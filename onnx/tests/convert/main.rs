//! Conversion tests: ONNX models built with `ModelBuilder` (and a few exported with onnx's Python
//! helper, in `tests/fixtures/`) converted to planner graphs, checked op by op, run through
//! `planner::shape_infer::infer`, and fuzzed for panics. No GPU needed.

mod basics;
mod common;
mod control;
mod custom;
mod errors;
mod fixtures;
mod functions;
mod fuzz;
mod inspect;
mod opsets;
mod training;
