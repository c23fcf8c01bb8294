//! `Einsum` as the batched GEMMs, reductions and views it reduces to: the operands are contracted
//! left to right, two at a time; each pair is summed over the labels no later term or the output
//! needs, permuted to `[batch, free, contracted]` and `[batch, contracted, free]`, the free and the
//! contracted labels each merged into one dim (the batch dims kept), and multiplied by one
//! (batched) MatMul, whose result is reshaped back to its labels. The
//! last result is summed over what the output drops and transposed into the output's order.
//! Ellipsis dims become labels of their own (right-aligned across the operands, as NumPy
//! broadcasts them); a label of size 1 in one operand and larger in another is summed out of the
//! first (a size-1 sum is that operand's value), which is the broadcast. A label repeated within
//! one term (a diagonal) is not covered: the node stays and is refused by name.

use super::Expand;
use crate::graph::ValueId;
use crate::op::{self, Op};

/// An operand (or intermediate) with one label per dim.
#[derive(Clone)]
struct Labeled {
    v: ValueId,
    labels: Vec<char>,
    dims: Vec<usize>,
}

/// The labels of an equation: one per term, with ellipses expanded for operands of `ranks`, and
/// the output's. `None` for what this module does not cover or a malformed equation.
fn parse(equation: &str, ranks: &[usize]) -> Option<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ranks.len() {
        return None;
    }
    // Ellipsis dim `k` of the widest ellipsis (right-aligned) is label `ELL + k`.
    const ELL: u32 = 0x100;
    let explicit = |t: &str| t.replace("...", "").chars().count();
    let widest = terms
        .iter()
        .zip(ranks)
        .filter(|(t, _)| t.contains("..."))
        .map(|(t, &r)| r.checked_sub(explicit(t)))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()
        .unwrap_or(0);
    let ellipsis =
        |n: usize| (widest - n..widest).map(|k| char::from_u32(ELL + k as u32)).collect::<Option<Vec<_>>>();
    let expand = |t: &str, rank: usize| -> Option<Vec<char>> {
        let ok = |s: &str| s.chars().all(|c| c.is_ascii_alphabetic());
        let labels = match t.split_once("...") {
            Some((before, after)) if ok(before) && ok(after) => {
                let mut l: Vec<char> = before.chars().collect();
                l.extend(ellipsis(rank.checked_sub(explicit(t))?)?);
                l.extend(after.chars());
                l
            }
            None if ok(t) => t.chars().collect(),
            _ => return None,
        };
        (labels.len() == rank).then_some(labels)
    };
    let ins: Vec<Vec<char>> = terms.iter().zip(ranks).map(|(t, &r)| expand(t, r)).collect::<Option<_>>()?;
    let out = match rhs {
        Some(r) => {
            let l = expand(r, explicit(r) + if r.contains("...") { widest } else { 0 })?;
            if l.iter().any(|c| !ins.iter().any(|t| t.contains(c))) {
                return None;
            }
            l
        }
        None => {
            // Implicit: the ellipsis, then the labels that appear once, in alphabetical order.
            let mut l = ellipsis(widest)?;
            let mut once: Vec<char> = ins
                .iter()
                .flatten()
                .filter(|c| c.is_ascii_alphabetic())
                .filter(|c| ins.iter().flatten().filter(|d| d == c).count() == 1)
                .copied()
                .collect();
            once.sort_unstable();
            l.extend(once);
            l
        }
    };
    let repeated = |t: &[char]| t.iter().enumerate().any(|(i, c)| t[..i].contains(c));
    if ins.iter().any(|t| repeated(t)) || repeated(&out) {
        return None;
    }
    Some((ins, out))
}

/// `x` summed over the axes whose labels `keep` rejects (ReduceSum without keepdims).
fn sum_out(e: &mut Expand, x: Labeled, keep: impl Fn(char) -> bool) -> Labeled {
    let axes: Vec<i64> = (0..x.labels.len()).filter(|&i| !keep(x.labels[i])).map(|i| i as i64).collect();
    if axes.is_empty() {
        return x;
    }
    let reduce = op::Reduce { axes: Some(axes), keepdims: false, noop_with_empty_axes: false };
    let v = e.op(Op::ReduceSum(reduce), &[x.v]);
    let kept = (0..x.labels.len()).filter(|&i| keep(x.labels[i]));
    let (labels, dims) = kept.map(|i| (x.labels[i], x.dims[i])).unzip();
    Labeled { v, labels, dims }
}

/// `x` with its dims in the order of `labels` (a permutation of its own).
fn permute(e: &mut Expand, x: Labeled, labels: &[char]) -> Labeled {
    let perm: Vec<usize> =
        labels.iter().map(|c| x.labels.iter().position(|d| d == c).expect("a permutation")).collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return x;
    }
    let dims = perm.iter().map(|&p| x.dims[p]).collect();
    let v = e.op(Op::Transpose(op::Transpose { perm: Some(perm) }), &[x.v]);
    Labeled { v, labels: labels.to_vec(), dims }
}

/// `v` reshaped to `dims` (nothing when it has them).
fn reshape(e: &mut Expand, v: ValueId, from: &[usize], dims: &[usize]) -> ValueId {
    if from == dims {
        return v;
    }
    let shape = e.i64s(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>());
    e.op(Op::Reshape(Default::default()), &[v, shape])
}

/// `a · b` over their common labels that `keep` rejects; the common ones it keeps are batch dims.
fn contract(e: &mut Expand, a: Labeled, b: Labeled, keep: &dyn Fn(char) -> bool) -> Labeled {
    // A label of size 1 against a larger one broadcasts: summing it out of the size-1 side leaves
    // that side's values unchanged.
    let size = |x: &Labeled, c: char| x.labels.iter().position(|&d| d == c).map(|i| x.dims[i]);
    let broadcast_in =
        |x: &Labeled, y: &Labeled, c: char| size(x, c) == Some(1) && size(y, c).is_some_and(|n| n > 1);
    let (a0, b0) = (a.clone(), b.clone());
    let a = sum_out(e, a, |c| !broadcast_in(&a0, &b0, c) && (keep(c) || b0.labels.contains(&c)));
    let b = sum_out(e, b, |c| !broadcast_in(&b0, &a0, c) && (keep(c) || a0.labels.contains(&c)));
    let both = |c: &char| a.labels.contains(c) && b.labels.contains(c);
    let batch: Vec<char> = a.labels.iter().filter(|c| both(c) && keep(**c)).copied().collect();
    let summed: Vec<char> = a.labels.iter().filter(|c| both(c) && !keep(**c)).copied().collect();
    let a_free: Vec<char> = a.labels.iter().filter(|c| !both(c)).copied().collect();
    let b_free: Vec<char> = b.labels.iter().filter(|c| !both(c)).copied().collect();
    let a = permute(e, a, &[batch.clone(), a_free.clone(), summed.clone()].concat());
    let b = permute(e, b, &[batch.clone(), summed.clone(), b_free.clone()].concat());
    let product =
        |x: &Labeled, l: &[char]| l.iter().map(|c| size(x, *c).expect("its label")).product::<usize>();
    // The batch dims stay as they are (MatMul broadcasts them): a side whose free and summed
    // labels are one each is then the permuted operand itself, a Transpose the GEMM reads through
    // strides where its batch dims collapse to one (`fuse::transposes`), not a copy.
    let batch_dims: Vec<usize> = batch.iter().map(|&c| size(&a, c).expect("its label")).collect();
    let (pa, pk, pn) = (product(&a, &a_free), product(&a, &summed), product(&b, &b_free));
    let with = |tail: [usize; 2]| [batch_dims.as_slice(), &tail].concat();
    let av = reshape(e, a.v, &a.dims, &with([pa, pk]));
    let bv = reshape(e, b.v, &b.dims, &with([pk, pn]));
    let y = e.op(Op::MatMul, &[av, bv]);
    let labels: Vec<char> = [batch, a_free, b_free].concat();
    let dims: Vec<usize> =
        labels.iter().map(|&c| size(&a, c).or_else(|| size(&b, c)).expect("its label")).collect();
    let v = reshape(e, y, &with([pa, pn]), &dims);
    Labeled { v, labels, dims }
}

/// Appends the decomposition of `Einsum(equation)` of operands `ins` (f32, of dims `dims`) writing
/// `out`; false (nothing appended) when the equation is not covered.
pub(super) fn einsum(
    e: &mut Expand,
    equation: &str,
    ins: &[ValueId],
    dims: &[Vec<usize>],
    out: Option<ValueId>,
) -> bool {
    let ranks: Vec<usize> = dims.iter().map(Vec::len).collect();
    let Some((terms, out_labels)) = parse(equation, &ranks) else { return false };
    // Every label's size agrees across the terms (or is 1 against a larger one).
    for (ti, t) in terms.iter().enumerate() {
        for (uj, u) in terms.iter().enumerate().skip(ti + 1) {
            for (i, c) in t.iter().enumerate() {
                if let Some(j) = u.iter().position(|d| d == c) {
                    let (x, y) = (dims[ti][i], dims[uj][j]);
                    if x != y && x != 1 && y != 1 {
                        return false;
                    }
                }
            }
        }
    }
    let mut operands =
        terms.iter().zip(ins).zip(dims).map(|((t, &v), d)| Labeled { v, labels: t.clone(), dims: d.clone() });
    let Some(mut acc) = operands.next() else { return false };
    let rest: Vec<Labeled> = operands.collect();
    for (k, b) in rest.iter().enumerate() {
        let later: Vec<char> = rest[k + 1..].iter().flat_map(|t| t.labels.clone()).collect();
        let keep = |c: char| out_labels.contains(&c) || later.contains(&c);
        acc = contract(e, acc, b.clone(), &keep);
    }
    let acc = sum_out(e, acc, |c| out_labels.contains(&c));
    // Output labels of size 1 that no operand kept (broadcast away above) come back as size 1.
    let missing: Vec<char> = out_labels.iter().filter(|c| !acc.labels.contains(c)).copied().collect();
    let acc = if missing.is_empty() {
        acc
    } else {
        let mut labels = acc.labels.clone();
        labels.extend(&missing);
        let mut d = acc.dims.clone();
        d.extend(missing.iter().map(|_| 1));
        let v = reshape(e, acc.v, &acc.dims, &d);
        Labeled { v, labels, dims: d }
    };
    let y = permute(e, acc, &out_labels);
    // The last node appended writes the output itself (its fresh value, the last one added, goes
    // again); an equation that appends no node copies its operand.
    let last_value = e.g.values.len().checked_sub(1) == Some(y.v.index());
    match e.g.nodes.last_mut() {
        Some(n) if e.n > 0 && last_value && n.outputs == [Some(y.v)] => {
            n.outputs[0] = out;
            e.g.values.pop();
        }
        _ => {
            e.op_into(Op::Identity, &[y.v], out);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn equations_expand_their_ellipses_and_implicit_outputs() {
        let (ins, out) = parse("bij,bjk->bik", &[3, 3]).unwrap();
        assert_eq!((ins, out), (vec![vec!['b', 'i', 'j'], vec!['b', 'j', 'k']], vec!['b', 'i', 'k']));
        // Implicit output: the labels seen once, sorted.
        assert_eq!(parse("ij,jk", &[2, 2]).unwrap().1, vec!['i', 'k']);
        // Ellipses right-aligned across operands of different ranks.
        let (ins, out) = parse("...ij,...jk->...ik", &[4, 3]).unwrap();
        let (e0, e1) = (char::from_u32(0x100).unwrap(), char::from_u32(0x101).unwrap());
        assert_eq!(ins[0], vec![e0, e1, 'i', 'j']);
        assert_eq!(ins[1], vec![e1, 'j', 'k']);
        assert_eq!(out, vec![e0, e1, 'i', 'k']);
        // A diagonal, a wrong rank, an output label no operand has: not covered.
        assert!(parse("ii->i", &[2]).is_none());
        assert!(parse("ij->i", &[3]).is_none());
        assert!(parse("ij->k", &[2]).is_none());
    }
}
