//! Reference `TreeEnsemble` (ai.onnx.ml opset 5), following the ONNX reference implementation:
//! each row of X walks every tree from its root to a leaf, and the leaves' weights are aggregated
//! per target (sum, average over the trees, min or max).

use planner::DType;
use planner::op::{TreeAggregate, TreeEnsemble};

use super::operand::{expect_rank, input, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// Whether branch node `i` sends feature value `x` to its true child.
fn holds(t: &TreeEnsemble, i: usize, x: f64) -> bool {
    let split = t.nodes_splits.get(i).copied().unwrap_or(f64::NAN);
    let cmp = match t.nodes_modes.get(i).copied().unwrap_or(0) {
        0 => x <= split,
        1 => x < split,
        2 => x >= split,
        3 => x > split,
        4 => x == split,
        5 => x != split,
        _ => t.members.get(i).is_some_and(|m| m.contains(&x)),
    };
    cmp || (x.is_nan() && t.nodes_missing_value_tracks_true.get(i).copied().unwrap_or(false))
}

/// The leaf index `row` reaches from `root`.
fn walk(node: &NodeCtx, t: &TreeEnsemble, root: usize, row: &[f64]) -> Result<usize, HostError> {
    let bad = |what: String| node.err(format!("malformed tree: {what}"));
    let n = t.nodes_modes.len();
    let flag = |v: &[bool], i: usize| v.get(i).copied().unwrap_or(false);
    // A root that is a leaf on both sides with one child is the leaf `root` itself (as the ONNX
    // reference reads it).
    if flag(&t.nodes_trueleafs, root)
        && flag(&t.nodes_falseleafs, root)
        && t.nodes_truenodeids.get(root) == t.nodes_falsenodeids.get(root)
    {
        return Ok(root);
    }
    let mut i = root;
    for _ in 0..=n {
        let f = *t.nodes_featureids.get(i).ok_or_else(|| bad(format!("node {i} of {n}")))?;
        let x =
            *row.get(f).ok_or_else(|| node.err(format!("feature {f} is out of range for {}", row.len())))?;
        let (next, leaf) = if holds(t, i, x) {
            (t.nodes_truenodeids.get(i), flag(&t.nodes_trueleafs, i))
        } else {
            (t.nodes_falsenodeids.get(i), flag(&t.nodes_falseleafs, i))
        };
        let next = *next.ok_or_else(|| bad(format!("node {i} has no child")))?;
        if leaf {
            return Ok(next);
        }
        i = next;
    }
    Err(bad("a cycle among the branch nodes".into()))
}

/// `TreeEnsemble(X) -> Y`: X `(N, F)` float, Y `(N, n_targets)` in X's dtype.
pub fn tree_ensemble(
    node: &NodeCtx,
    attrs: &TreeEnsemble,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let x = input(node, inputs, 0, "X")?;
    expect_rank(node, &x.shape, 2, "X")?;
    let dtype = inputs.first().copied().flatten().map_or(DType::F32, HostTensor::dtype);
    let (rows, feats, k) = (x.shape[0], x.shape[1], attrs.n_targets);
    let (lowest, largest) = match dtype {
        DType::F64 => (f64::MIN, f64::MAX),
        DType::F16 => (-65504.0, 65504.0),
        _ => (f64::from(f32::MIN), f64::from(f32::MAX)),
    };
    let init = match attrs.aggregate {
        TreeAggregate::Sum | TreeAggregate::Average => 0.0,
        TreeAggregate::Min => largest,
        TreeAggregate::Max => lowest,
    };
    let mut y = vec![init; node.count(&[rows, k])?];
    let trees = attrs.tree_roots.len() as f64;
    for (r, out) in y.chunks_mut(k.max(1)).enumerate().take(rows) {
        let row = &x.data[r * feats..(r + 1) * feats];
        for &root in &attrs.tree_roots {
            let leaf = walk(node, attrs, root, row)?;
            let (Some(&target), Some(&w)) = (attrs.leaf_targetids.get(leaf), attrs.leaf_weights.get(leaf))
            else {
                return Err(node.err(format!("malformed tree: leaf {leaf} does not exist")));
            };
            let slot = out.get_mut(target).ok_or_else(|| node.err(format!("leaf target {target} >= {k}")))?;
            *slot = match attrs.aggregate {
                TreeAggregate::Sum => *slot + w,
                TreeAggregate::Average => *slot + w / trees,
                TreeAggregate::Min => slot.min(w),
                TreeAggregate::Max => slot.max(w),
            };
        }
    }
    Ok(vec![tensor(node, dtype, vec![rows, k], y)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::nn::testing::{node, tf, vals};

    /// The ONNX single-tree example (first split 3 for 3.14): node 0 `x0 <= 3`, node 1 `x0 <= 1.2`, node 2 `x0 <= 4.2`.
    fn single_tree(aggregate: TreeAggregate) -> TreeEnsemble {
        TreeEnsemble {
            n_targets: 2,
            aggregate,
            tree_roots: vec![0],
            nodes_modes: vec![0, 0, 0],
            nodes_featureids: vec![0, 0, 0],
            nodes_splits: vec![3.0, 1.2, 4.2],
            nodes_truenodeids: vec![1, 0, 1],
            nodes_trueleafs: vec![false, true, true],
            nodes_falsenodeids: vec![2, 2, 3],
            nodes_falseleafs: vec![false, true, true],
            members: vec![Vec::new(); 3],
            leaf_targetids: vec![0, 1, 0, 1],
            leaf_weights: vec![5.23, 12.12, -12.23, 7.21],
            ..TreeEnsemble::default()
        }
    }

    #[test]
    fn single_tree_by_hand() {
        let x = tf(&[3, 2], &[1.0, 3.4, -0.12, 1.66, 4.14, 1.77]);
        // 1.0 -> node 1 -> leaf 0; -0.12 -> leaf 0; 4.14 -> node 2 -> leaf 1.
        let out =
            tree_ensemble(&node("TreeEnsemble"), &single_tree(TreeAggregate::Sum), &[Some(&x)]).unwrap();
        let want = [5.23, 0., 5.23, 0., 0., 12.12];
        let got = vals(&out[0]);
        assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-5), "{got:?}");
        let mut cyclic = single_tree(TreeAggregate::Sum);
        cyclic.nodes_trueleafs = vec![false; 3];
        cyclic.nodes_falseleafs = vec![false; 3];
        cyclic.nodes_falsenodeids = vec![2, 2, 1];
        assert!(tree_ensemble(&node("TreeEnsemble"), &cyclic, &[Some(&x)]).is_err());
    }
}
