//! Attribute structs of the string operators (CPU reference only): `StringNormalizer`,
//! `StringSplit`, `RegexFullMatch`, and `ai.onnx.ml`'s `LabelEncoder`. (`StringConcat` has none.)

use serde::{Deserialize, Serialize};

/// The case change of a [`StringNormalizer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaseChange {
    /// Leave the case.
    None,
    /// To lower case.
    Lower,
    /// To upper case.
    Upper,
}

/// `StringNormalizer` (opset 10): stop words removed (whole space-separated words), the case
/// changed, and on a `[C]` or `[1, C]` input the strings left empty dropped (all dropped: one
/// empty string).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StringNormalizer {
    /// The case change (`case_change_action`, default none).
    pub case_change: CaseChange,
    /// Stop words match in the input's case (default false: in the changed case).
    pub case_sensitive: bool,
    /// The stop words.
    pub stopwords: Vec<String>,
}

/// `StringSplit` (opset 20): each string split at `delimiter` (absent or empty: at runs of
/// whitespace), at most `maxsplit` times (absent: unlimited), padded with empty strings to the
/// most pieces any has; the second output counts the pieces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StringSplit {
    /// The delimiter; `None` splits at whitespace.
    pub delimiter: Option<String>,
    /// The most splits per string.
    pub maxsplit: Option<usize>,
}

/// `RegexFullMatch` (opset 20): whether each string matches `pattern` (RE2 syntax) whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegexFullMatch {
    /// The pattern.
    pub pattern: String,
}

/// A key or value of a [`LabelEncoder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Label {
    /// An integer.
    Int(i64),
    /// A float (compared by value; NaN matches NaN).
    Float(f64),
    /// A string.
    Str(String),
}

/// `LabelEncoder` (ai.onnx.ml, opsets 1–4): each element looked up among `keys` and replaced by
/// the value at the same position, or by `default` when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelEncoder {
    /// The keys.
    pub keys: Vec<Label>,
    /// The values, one per key.
    pub values: Vec<Label>,
    /// The value of an element that no key matches.
    pub default: Label,
    /// The output dtype (of the values).
    pub output_dtype: crate::DType,
}
