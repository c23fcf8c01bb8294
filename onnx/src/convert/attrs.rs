//! Typed access to a node's attributes, with errors that name the node, its op_type and the
//! attribute.
//!
//! Every accessor checks the attribute's declared `type` (an attribute whose type is UNDEFINED or
//! another kind is a [`AttrIssue::WrongType`] error, never silently reinterpreted) and converts
//! the value (ints to `usize`/`bool`, bytes to UTF-8). Absent optional attributes yield `None`
//! or the ONNX default the caller passes. Every name looked up is recorded (when the accessor was
//! made with a record): after conversion, an attribute nobody looked up is unknown to the
//! operator, and the node is refused ([`AttrIssue::Unknown`]).

use std::cell::RefCell;
use std::collections::BTreeSet;

use planner::DType;

use crate::error::{AttrIssue, OnnxError};
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};

use super::tensor;

/// The attributes of one node, with the node's display label for errors.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attrs<'a> {
    node: &'a NodeProto,
    label: &'a str,
    looked_up: Option<&'a RefCell<BTreeSet<String>>>,
}

impl<'a> Attrs<'a> {
    /// Attribute access for `node`, named `label` in errors.
    pub(crate) fn new(node: &'a NodeProto, label: &'a str) -> Self {
        Attrs { node, label, looked_up: None }
    }

    /// [`Attrs::new`], recording every name looked up in `looked_up`.
    pub(crate) fn recorded(
        node: &'a NodeProto,
        label: &'a str,
        looked_up: &'a RefCell<BTreeSet<String>>,
    ) -> Self {
        Attrs { node, label, looked_up: Some(looked_up) }
    }

    /// The first attribute of the node that is not in `looked_up`, as an [`AttrIssue::Unknown`]
    /// error.
    pub(crate) fn unknown(&self, looked_up: &BTreeSet<String>, opset: i64) -> Result<(), OnnxError> {
        match self.node.attribute.iter().find(|a| !looked_up.contains(&a.name)) {
            Some(a) => Err(self.error(&a.name, AttrIssue::Unknown { opset })),
            None => Ok(()),
        }
    }

    /// An error about attribute `attr` of this node.
    pub(crate) fn error(&self, attr: &str, issue: AttrIssue) -> OnnxError {
        OnnxError::Attribute {
            node: self.label.to_owned(),
            op_type: self.node.op_type.clone(),
            attr: attr.to_owned(),
            issue,
        }
    }

    /// An [`AttrIssue::Invalid`] error about `attr`.
    pub(crate) fn invalid(&self, attr: &str, detail: impl Into<String>) -> OnnxError {
        self.error(attr, AttrIssue::Invalid { detail: detail.into() })
    }

    /// True when the node sets `attr` (of any type).
    pub(crate) fn has(&self, attr: &str) -> bool {
        self.find(attr).is_some()
    }

    fn find(&self, attr: &str) -> Option<&'a AttributeProto> {
        if let Some(seen) = self.looked_up {
            seen.borrow_mut().insert(attr.to_owned());
        }
        self.node.attribute.iter().find(|a| a.name == attr)
    }

    /// The attribute `attr` if present, after checking that its type is `want`.
    fn typed(&self, attr: &str, want: AttributeType) -> Result<Option<&'a AttributeProto>, OnnxError> {
        let Some(a) = self.find(attr) else { return Ok(None) };
        if a.r#type == want as i32 {
            return Ok(Some(a));
        }
        let found = AttributeType::try_from(a.r#type)
            .map_or_else(|_| format!("type {}", a.r#type), |t| t.as_str_name().to_owned());
        Err(self.error(attr, AttrIssue::WrongType { expected: want.as_str_name(), found }))
    }

    /// `value` or a [`AttrIssue::Missing`] error for `attr`.
    pub(crate) fn required<T>(&self, attr: &str, value: Option<T>) -> Result<T, OnnxError> {
        value.ok_or_else(|| self.error(attr, AttrIssue::Missing))
    }

    /// An `INT` attribute.
    pub(crate) fn int(&self, attr: &str) -> Result<Option<i64>, OnnxError> {
        Ok(self.typed(attr, AttributeType::Int)?.map(|a| a.i))
    }

    /// An `INT` attribute or `default`.
    pub(crate) fn int_or(&self, attr: &str, default: i64) -> Result<i64, OnnxError> {
        Ok(self.int(attr)?.unwrap_or(default))
    }

    /// An `INT` flag (0 or 1) or `default`.
    pub(crate) fn bool_or(&self, attr: &str, default: bool) -> Result<bool, OnnxError> {
        match self.int(attr)? {
            None => Ok(default),
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => Err(self.invalid(attr, format!("{v} is not 0 or 1"))),
        }
    }

    /// A non-negative `INT` attribute.
    pub(crate) fn usize(&self, attr: &str) -> Result<Option<usize>, OnnxError> {
        self.int(attr)?.map(|v| self.non_negative(attr, v)).transpose()
    }

    /// A non-negative `INT` attribute or `default`.
    pub(crate) fn usize_or(&self, attr: &str, default: usize) -> Result<usize, OnnxError> {
        Ok(self.usize(attr)?.unwrap_or(default))
    }

    fn non_negative(&self, attr: &str, v: i64) -> Result<usize, OnnxError> {
        usize::try_from(v).map_err(|_| self.invalid(attr, format!("{v} is negative")))
    }

    /// A `FLOAT` attribute.
    pub(crate) fn float(&self, attr: &str) -> Result<Option<f32>, OnnxError> {
        Ok(self.typed(attr, AttributeType::Float)?.map(|a| a.f))
    }

    /// A `FLOAT` attribute or `default`.
    pub(crate) fn float_or(&self, attr: &str, default: f32) -> Result<f32, OnnxError> {
        Ok(self.float(attr)?.unwrap_or(default))
    }

    /// An `INTS` attribute.
    pub(crate) fn ints(&self, attr: &str) -> Result<Option<Vec<i64>>, OnnxError> {
        Ok(self.typed(attr, AttributeType::Ints)?.map(|a| a.ints.clone()))
    }

    /// A non-negative `INTS` attribute, empty when absent (the ONNX "use the default" form of
    /// per-axis lists such as `strides`).
    pub(crate) fn usizes(&self, attr: &str) -> Result<Vec<usize>, OnnxError> {
        let ints = self.ints(attr)?.unwrap_or_default();
        ints.into_iter().map(|v| self.non_negative(attr, v)).collect()
    }

    /// A `FLOATS` attribute.
    pub(crate) fn floats(&self, attr: &str) -> Result<Option<Vec<f32>>, OnnxError> {
        Ok(self.typed(attr, AttributeType::Floats)?.map(|a| a.floats.clone()))
    }

    /// A `STRING` attribute, decoded as UTF-8.
    pub(crate) fn string(&self, attr: &str) -> Result<Option<String>, OnnxError> {
        let Some(a) = self.typed(attr, AttributeType::String)? else { return Ok(None) };
        self.utf8(attr, &a.s).map(Some)
    }

    /// A `STRINGS` attribute, each decoded as UTF-8.
    pub(crate) fn strings(&self, attr: &str) -> Result<Option<Vec<String>>, OnnxError> {
        let Some(a) = self.typed(attr, AttributeType::Strings)? else { return Ok(None) };
        a.strings.iter().map(|s| self.utf8(attr, s)).collect::<Result<_, _>>().map(Some)
    }

    fn utf8(&self, attr: &str, bytes: &[u8]) -> Result<String, OnnxError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| self.invalid(attr, "not valid UTF-8"))
    }

    /// A `STRING` attribute that must be one of `choices` (compared case-insensitively), or
    /// `default` when absent.
    pub(crate) fn choice<T: Copy>(
        &self,
        attr: &str,
        default: T,
        choices: &[(&str, T)],
    ) -> Result<T, OnnxError> {
        let Some(s) = self.string(attr)? else { return Ok(default) };
        match choices.iter().find(|(name, _)| name.eq_ignore_ascii_case(&s)) {
            Some(&(_, v)) => Ok(v),
            None => {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                Err(self.invalid(attr, format!("'{s}' is not one of {names:?}")))
            }
        }
    }

    /// A `TENSOR` attribute.
    pub(crate) fn tensor(&self, attr: &str) -> Result<Option<&'a TensorProto>, OnnxError> {
        Ok(self.typed(attr, AttributeType::Tensor)?.and_then(|a| a.t.as_ref()))
    }

    /// A `GRAPH` attribute (a control-flow body).
    pub(crate) fn graph(&self, attr: &str) -> Result<Option<&'a GraphProto>, OnnxError> {
        Ok(self.typed(attr, AttributeType::Graph)?.and_then(|a| a.g.as_ref()))
    }

    /// An `INT` attribute holding an ONNX element type (as `Cast`'s `to`), mapped to a planner
    /// dtype.
    pub(crate) fn dtype(&self, attr: &str) -> Result<Option<DType>, OnnxError> {
        let Some(v) = self.int(attr)? else { return Ok(None) };
        let v = i32::try_from(v).map_err(|_| self.invalid(attr, format!("{v} is not a data type")))?;
        tensor::dtype(v).map(Some).map_err(|issue| self.invalid(attr, issue.to_string()))
    }
}
