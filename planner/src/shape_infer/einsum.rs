//! `Einsum`: parses the equation (explicit `->` or implicit form, with `...`) and derives the output.
//!
//! Labeled dims must agree across operands; ellipsis dims broadcast like NumPy.

use std::collections::BTreeMap;

use super::Ctx;
use super::elementwise::broadcast;
use crate::error::PlanError;
use crate::tensor_info::{Dim, Shape, TensorInfo};

/// One operand term: labels, with the ellipsis (if any) at `ellipsis` among them.
struct Term {
    labels: Vec<char>,
    ellipsis: Option<usize>,
}

fn parse_term(t: &str) -> Option<Term> {
    let (before, after, ellipsis) = match t.split_once("...") {
        Some((b, a)) => (b, a, true),
        None => (t, "", false),
    };
    let ok = |s: &str| s.chars().all(|c| c.is_ascii_alphabetic());
    if !ok(before) || !ok(after) {
        return None;
    }
    let mut labels: Vec<char> = before.chars().collect();
    let pos = ellipsis.then_some(labels.len());
    labels.extend(after.chars());
    Some(Term { labels, ellipsis: pos })
}

fn bad(ctx: &Ctx, equation: &str, why: &str) -> PlanError {
    ctx.attr(format!("equation {equation:?}: {why}"))
}

/// Output info of `Einsum` with `equation`.
pub(crate) fn einsum(ctx: &mut Ctx, equation: &str) -> Result<Vec<TensorInfo>, PlanError> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Term> = lhs
        .split(',')
        .map(parse_term)
        .collect::<Option<_>>()
        .ok_or_else(|| bad(ctx, equation, "bad term"))?;
    let ins = ctx.all_inputs();
    if terms.len() != ins.len() {
        return Err(bad(ctx, equation, &format!("{} terms for {} inputs", terms.len(), ins.len())));
    }
    let dtype = ctx.same_dtype(&ins)?;
    let mut label_dims: BTreeMap<char, Dim> = BTreeMap::new();
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut ellipsis_shapes: Vec<Shape> = Vec::new();
    for (term, t) in terms.iter().zip(&ins) {
        let n_labels = term.labels.len();
        let ell_rank = match term.ellipsis {
            Some(_) => {
                t.rank().checked_sub(n_labels).ok_or_else(|| bad(ctx, equation, "operand rank too small"))?
            }
            None if t.rank() == n_labels => 0,
            None => return Err(ctx.mismatch(format!("term of {n_labels} labels for operand {t}"))),
        };
        let at = term.ellipsis.unwrap_or(n_labels);
        let dims = t.shape.dims();
        for (i, &c) in term.labels.iter().enumerate() {
            let d = &dims[if i < at { i } else { i + ell_rank }];
            let merged = match label_dims.get(&c) {
                Some(prev) => ctx.unify(prev, d, &format!("label {c}"))?,
                None => d.clone(),
            };
            label_dims.insert(c, merged);
            *counts.entry(c).or_default() += 1;
        }
        ellipsis_shapes.push(Shape(dims[at..at + ell_rank].to_vec()));
    }
    let shapes: Vec<&Shape> = ellipsis_shapes.iter().collect();
    let syms = &mut *ctx.syms;
    let ell = broadcast(&shapes, &mut || syms.fresh()).map_err(|d| ctx.mismatch(d))?;
    let any_ellipsis = terms.iter().any(|t| t.ellipsis.is_some());
    let out = match rhs {
        Some(r) => parse_term(r).ok_or_else(|| bad(ctx, equation, "bad output term"))?,
        None => Term {
            labels: counts.iter().filter(|(_, n)| **n == 1).map(|(c, _)| *c).collect(),
            ellipsis: any_ellipsis.then_some(0),
        },
    };
    let mut dims = Vec::new();
    for (i, c) in out.labels.iter().enumerate() {
        if out.ellipsis == Some(i) {
            dims.extend(ell.0.iter().cloned());
        }
        dims.push(
            label_dims
                .get(c)
                .cloned()
                .ok_or_else(|| bad(ctx, equation, &format!("output label {c} not in inputs")))?,
        );
    }
    if out.ellipsis == Some(out.labels.len()) {
        dims.extend(ell.0.iter().cloned());
    }
    Ok(vec![TensorInfo { dtype, shape: Shape(dims) }])
}
