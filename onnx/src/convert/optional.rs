//! `OptionalHasElement` and `OptionalGetElement` (opset 18) for the inputs the planner can hold.
//!
//! The planner has no optional value type (the converter rejects optional-typed values), so every
//! value reaching these operators is a plain tensor (or sequence): such a value always "has an
//! element", getting the element is the identity, and a missing input is an empty optional.

use planner::{ConstTensor, DType, Op, op};

use crate::error::OnnxError;

use super::lower::Lower;

/// `OptionalHasElement(input?)`: a bool scalar, true when the input is present.
pub(crate) fn has_element(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let present = l.input(0).is_some();
    let value = ConstTensor::new(DType::Bool, Vec::new(), vec![u8::from(present)])
        .map_err(|e| l.invalid(e.to_string()))?;
    l.emit_with_inputs(Op::Constant(op::Constant { value }), Vec::new())
}

/// `OptionalGetElement(input)`: the identity on a tensor or sequence input.
pub(crate) fn get_element(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let x = l.required_input(0)?;
    l.emit_with_inputs(Op::Identity, vec![Some(x)])
}
