//! Strings on the reference: what only string-capable ops may read, and their text counted
//! against the memory budget.

use planner::op::{self, Op};
use planner::{DType, Dim, Graph};

use super::{run1, t};
use crate::error::HostError;
use crate::reference::{Limits, eval_with};
use crate::tensor::{HostTensor, TensorData};

fn strings(v: &[&str]) -> HostTensor {
    t(&[v.len()], v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// Numeric ops refuse string operands by node; Cast parses them (exactly for integers) and
/// writes numbers as Python's repr.
#[test]
fn strings_are_no_numbers_except_to_cast() {
    let s = strings(&["1.5", "2"]);
    let add = run1(Op::Add, &[&s, &s]);
    assert!(matches!(&add, Err(HostError::Unsupported { op: "Add", .. })), "{add:?}");
    let f = run1(Op::Cast(op::Cast::to(DType::F32)), &[&s]).unwrap();
    assert_eq!(f.data(), &TensorData::F32(vec![1.5, 2.0]));
    let big = run1(Op::Cast(op::Cast::to(DType::I64)), &[&strings(&["9007199254740993"])]).unwrap();
    assert_eq!(big.data(), &TensorData::I64(vec![9_007_199_254_740_993]));
    assert!(run1(Op::Cast(op::Cast::to(DType::I64)), &[&strings(&["x"])]).is_err());
    let x = t(&[5], vec![1.0f32, 1e-5, f32::NAN, f32::INFINITY, 1e20]);
    let text = run1(Op::Cast(op::Cast::to(DType::String)), &[&x]).unwrap();
    let want = ["1.0", "1e-05", "nan", "inf", "1e+20"].map(String::from).to_vec();
    assert_eq!(text.data(), &TensorData::String(want));
}

/// An Expand of one long string to many copies is refused by the budget before it copies (the
/// text counts, not only the string headers).
#[test]
fn string_text_counts_against_the_memory_budget() {
    let mut g = Graph::new();
    let x = g.input("x", DType::String, [Dim::Known(1)]);
    let shape = g.const_i64("shape", &[1], &[4096]);
    let y = g.op1(Op::Expand, &[x, shape]);
    g.output(y);
    let long = "x".repeat(1 << 20);
    let limits = Limits { max_total_bytes: 64 << 20, ..Limits::default() };
    let r = eval_with(&g, &[("x".into(), strings(&[&long]))], limits);
    assert!(matches!(&r, Err(HostError::Limit { op: "Expand", .. })), "{r:?}");
    // A short string fits.
    assert!(eval_with(&g, &[("x".into(), strings(&["ok"]))], limits).is_ok());
}
