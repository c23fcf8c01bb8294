//! Reference `Einsum`: every label becomes a loop index; the output labels index the result and
//! the remaining labels are summed over. Repeated labels within one operand take diagonals.
//!
//! Invariant: a letter has one size across all operands; ellipsis dims broadcast NumPy-style
//! (right-aligned, size 1 stretches).

use planner::op::Einsum;

use super::operand::{Floats, count, numbers, required, strides, tensor, unravel};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// One position in a subscript term: a letter or the ellipsis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sub {
    Letter(char),
    Ellipsis,
}

fn parse_term(node: &NodeCtx, term: &str) -> Result<Vec<Sub>, HostError> {
    let mut out = Vec::new();
    let mut rest = term;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("...") {
            if out.contains(&Sub::Ellipsis) {
                return Err(node.err(format!("term `{term}` has more than one ellipsis")));
            }
            out.push(Sub::Ellipsis);
            rest = &rest[3..];
        } else if c.is_ascii_alphabetic() {
            out.push(Sub::Letter(c));
            rest = &rest[1..];
        } else {
            return Err(node.err(format!("unexpected character `{c}` in einsum term `{term}`")));
        }
    }
    Ok(out)
}

/// Label ids of one operand's dims: ellipsis dims are ids `0..ell_rank` (right-aligned), letter
/// `c` is `ell_rank + position of c in letters`.
fn label_ids(subs: &[Sub], rank: usize, ell_rank: usize, letters: &[char]) -> Vec<usize> {
    let n_letters = subs.iter().filter(|s| matches!(s, Sub::Letter(_))).count();
    let own_ell = rank.saturating_sub(n_letters);
    let mut ids = Vec::with_capacity(rank);
    for s in subs {
        match s {
            Sub::Letter(c) => ids.push(ell_rank + letters.iter().position(|l| l == c).unwrap_or(0)),
            Sub::Ellipsis => ids.extend((ell_rank - own_ell)..ell_rank),
        }
    }
    ids
}

/// ONNX `Einsum` (opset 12): `numpy.einsum` over the operands, explicit (`->`) or implicit form
/// (output = ellipsis dims, then the letters used exactly once, in ASCII order).
pub fn einsum(
    node: &NodeCtx,
    attrs: &Einsum,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let eq: String = attrs.equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Vec<Sub>> = lhs.split(',').map(|t| parse_term(node, t)).collect::<Result<_, _>>()?;
    if terms.len() != inputs.len() {
        return Err(node.err(format!(
            "equation `{eq}` names {} operands, got {}",
            terms.len(),
            inputs.len()
        )));
    }
    let ops: Vec<Floats> = (0..inputs.len())
        .map(|i| numbers(node, required(node, inputs, i, "operand")?, "operand"))
        .collect::<Result<_, _>>()?;
    if let Some(o) = ops.iter().find(|o| o.dtype != ops[0].dtype) {
        return Err(node.err(format!("operands have different dtypes: {} and {}", ops[0].dtype, o.dtype)));
    }
    let mut letters: Vec<char> = Vec::new();
    let mut ell_rank = 0;
    for (subs, op) in terms.iter().zip(&ops) {
        let n_letters = subs.iter().filter(|s| matches!(s, Sub::Letter(_))).count();
        let has_ell = subs.contains(&Sub::Ellipsis);
        if op.shape.len() < n_letters || (!has_ell && op.shape.len() != n_letters) {
            return Err(node.err(format!("operand of shape {:?} does not fit its term", op.shape)));
        }
        ell_rank = ell_rank.max(op.shape.len() - n_letters);
        for s in subs {
            if let Sub::Letter(c) = s
                && !letters.contains(c)
            {
                letters.push(*c);
            }
        }
    }
    // Label sizes: letters must agree exactly, ellipsis dims broadcast.
    let mut sizes: Vec<Option<usize>> = vec![None; ell_rank + letters.len()];
    let mut ids_per_op = crate::tensor::try_with_capacity(ops.len(), "a working buffer")?;
    for (subs, op) in terms.iter().zip(&ops) {
        let ids = label_ids(subs, op.shape.len(), ell_rank, &letters);
        for (&id, &d) in ids.iter().zip(&op.shape) {
            sizes[id] = match sizes[id] {
                None => Some(d),
                Some(s) if s == d => Some(s),
                Some(s) if id < ell_rank && (s == 1 || d == 1) => Some(s.max(d)),
                Some(s) => return Err(node.err(format!("label sizes disagree: {s} vs {d} in `{eq}`"))),
            };
        }
        ids_per_op.push(ids);
    }
    let sizes: Vec<usize> = sizes.into_iter().map(|s| s.unwrap_or(1)).collect();
    let out_ids: Vec<usize> = match rhs {
        Some(r) => {
            let subs = parse_term(node, r)?;
            let n_letters = subs.iter().filter(|s| matches!(s, Sub::Letter(_))).count();
            for s in &subs {
                if let Sub::Letter(c) = s
                    && !letters.contains(c)
                {
                    return Err(node.err(format!("output label `{c}` is not in any operand")));
                }
            }
            let ids = label_ids(
                &subs,
                n_letters + if subs.contains(&Sub::Ellipsis) { ell_rank } else { 0 },
                ell_rank,
                &letters,
            );
            let mut seen = ids.clone();
            seen.sort_unstable();
            seen.dedup();
            if seen.len() != ids.len() {
                return Err(node.err(format!("output term `{r}` repeats a label")));
            }
            ids
        }
        None => {
            let mut once: Vec<char> = letters
                .iter()
                .copied()
                .filter(|c| terms.iter().flatten().filter(|s| **s == Sub::Letter(*c)).count() == 1)
                .collect();
            once.sort_unstable();
            (0..ell_rank)
                .chain(once.iter().map(|c| ell_rank + letters.iter().position(|l| l == c).unwrap_or(0)))
                .collect()
        }
    };
    let summed: Vec<usize> = (0..sizes.len()).filter(|id| !out_ids.contains(id)).collect();
    let out_shape: Vec<usize> = out_ids.iter().map(|&id| sizes[id]).collect();
    let sum_shape: Vec<usize> = summed.iter().map(|&id| sizes[id]).collect();
    let (n_out, n_sum) = (count(node, &out_shape)?, count(node, &sum_shape)?);
    let op_strides: Vec<Vec<usize>> = ops.iter().map(|o| strides(&o.shape)).collect();
    let mut label = vec![0usize; sizes.len()];
    let (mut oi, mut si) = (vec![0; out_shape.len()], vec![0; sum_shape.len()]);
    let mut out = crate::tensor::try_filled(n_out, 0.0, "a working buffer")?;
    for (flat, slot) in out.iter_mut().enumerate() {
        unravel(flat, &out_shape, &mut oi);
        for (k, &id) in out_ids.iter().enumerate() {
            label[id] = oi[k];
        }
        let mut acc = 0.0;
        for s in 0..n_sum {
            unravel(s, &sum_shape, &mut si);
            for (k, &id) in summed.iter().enumerate() {
                label[id] = si[k];
            }
            let mut prod = 1.0;
            for ((op, ids), st) in ops.iter().zip(&ids_per_op).zip(&op_strides) {
                let off: usize = ids
                    .iter()
                    .zip(&op.shape)
                    .zip(st)
                    .map(|((&id, &d), &stride)| if d == 1 { 0 } else { label[id] * stride })
                    .sum();
                prod *= op.data[off];
            }
            acc += prod;
        }
        *slot = acc;
    }
    Ok(vec![tensor(node, ops[0].dtype, out_shape, out)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{Rng, assert_close, node, tf, vals};

    fn run(eq: &str, ins: &[&HostTensor]) -> Result<HostTensor, HostError> {
        let inputs: Vec<Option<&HostTensor>> = ins.iter().map(|t| Some(*t)).collect();
        einsum(&node("Einsum"), &Einsum { equation: eq.into() }, &inputs).map(|mut v| v.remove(0))
    }

    #[test]
    fn batched_matmul_matches_naive() {
        let mut rng = Rng::new(3);
        let (b, i, j, k) = (2, 3, 4, 2);
        let x = rng.vec(b * i * j, -1.0, 1.0);
        let y = rng.vec(b * j * k, -1.0, 1.0);
        let out = run("bij,bjk->bik", &[&tf(&[b, i, j], &x), &tf(&[b, j, k], &y)]).unwrap();
        assert_eq!(out.shape(), &[b, i, k]);
        let mut want = vec![0.0; b * i * k];
        for bb in 0..b {
            for ii in 0..i {
                for kk in 0..k {
                    for jj in 0..j {
                        want[(bb * i + ii) * k + kk] += x[(bb * i + ii) * j + jj] * y[(bb * j + jj) * k + kk];
                    }
                }
            }
        }
        assert_close(&vals(&out), &want, 1e-6);
    }

    #[test]
    fn trace_transpose_outer_and_implicit_forms() {
        let m = tf(&[2, 2], &[1., 2., 3., 4.]);
        assert_eq!(vals(&run("ii", &[&m]).unwrap()), vec![5.]);
        assert_eq!(vals(&run("ii->i", &[&m]).unwrap()), vec![1., 4.]);
        assert_eq!(vals(&run("ij->ji", &[&m]).unwrap()), vec![1., 3., 2., 4.]);
        assert_eq!(vals(&run("ji", &[&m]).unwrap()), vec![1., 3., 2., 4.]);
        let v = tf(&[2], &[1., 10.]);
        let outer = run("i,j", &[&v, &v]).unwrap();
        assert_eq!(outer.shape(), &[2, 2]);
        assert_eq!(vals(&outer), vec![1., 10., 10., 100.]);
        assert_eq!(vals(&run("i,i", &[&v, &v]).unwrap()), vec![101.]);
    }

    #[test]
    fn ellipsis_broadcasts() {
        let x = tf(&[2, 1, 2], &[1., 2., 3., 4.]);
        let y = tf(&[3, 2], &[1., 0., 0., 1., 1., 1.]);
        let out = run("...j,...j->...", &[&x, &y]).unwrap();
        assert_eq!(out.shape(), &[2, 3]);
        assert_eq!(vals(&out), vec![1., 2., 3., 3., 4., 7.]);
    }

    #[test]
    fn rejects_bad_equations() {
        let m = tf(&[2, 3], &[0.; 6]);
        assert!(run("ii", &[&m]).is_err());
        assert!(run("ij->k", &[&m]).is_err());
        assert!(run("ij,jk->ik", &[&m]).is_err());
        assert!(run("i", &[&m]).is_err());
    }
}
