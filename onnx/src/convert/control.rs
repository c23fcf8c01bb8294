//! Constructors of the control-flow operators `If`, `Loop` and `Scan`.
//!
//! Bodies are converted recursively as nested scopes (see `Converter::graph`): a body's read of an
//! enclosing graph's value becomes a `Capture`, so the planner sees each body as a closed graph.
//! Slot counts against the bodies are checked afterwards by `planner::validate::graph`.

use planner::op::{self, Op};

use crate::error::OnnxError;

use super::lower::Lower;

/// `If(cond)` with `then_branch` and `else_branch`.
pub(crate) fn if_(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let then_branch = l.subgraph("then_branch")?;
    let else_branch = l.subgraph("else_branch")?;
    l.emit(Op::If(op::If { then_branch, else_branch }))
}

/// `Loop(M?, cond?, v...)` with `body`.
pub(crate) fn loop_(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let body = l.subgraph("body")?;
    l.emit(Op::Loop(op::Loop { body }))
}

/// `Scan(states..., scan inputs...)` with `body` and the per-input/output axis and direction
/// lists (absent lists are empty, meaning axis 0 and forward).
pub(crate) fn scan(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let a = l.attrs();
    let num_scan_inputs = a.required("num_scan_inputs", a.usize("num_scan_inputs")?)?;
    let list = |name: &str| a.ints(name).map(Option::unwrap_or_default);
    let (scan_input_axes, scan_input_directions) = (list("scan_input_axes")?, list("scan_input_directions")?);
    let (scan_output_axes, scan_output_directions) =
        (list("scan_output_axes")?, list("scan_output_directions")?);
    for (name, dirs) in [
        ("scan_input_directions", &scan_input_directions),
        ("scan_output_directions", &scan_output_directions),
    ] {
        if dirs.iter().any(|&d| d != 0 && d != 1) {
            return Err(a.invalid(name, format!("{dirs:?} holds values other than 0 and 1")));
        }
    }
    let body = l.subgraph("body")?;
    l.emit(Op::Scan(op::Scan {
        body,
        num_scan_inputs,
        scan_input_axes,
        scan_input_directions,
        scan_output_axes,
        scan_output_directions,
    }))
}
