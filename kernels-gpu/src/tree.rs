//! ai.onnx.ml TreeEnsemble: each row of X walks every tree from its root to a leaf; the leaves'
//! weights are aggregated per target. Decision forests (boosted decision trees) as physics
//! analyses use them, evaluated where the rest of the model runs.

use crate::abi::{TREE_NODE_WORDS, TreeParams, tree_aggregate};
use crate::intrinsics::{global_thread_x, grid_threads_x};

/// Word `w` of branch node `i`'s table entry.
///
/// # Safety
/// `i < p.nodes`; `tables` as [`tree_ensemble_f32`] takes them.
#[inline(always)]
unsafe fn word(tables: *const f64, i: u64, w: u64) -> f64 {
    // SAFETY: the caller's contract.
    unsafe { *tables.add((i * TREE_NODE_WORDS + w) as usize) }
}

/// Whether branch node `i` sends feature value `x` to its true child (as the reference: modes
/// `<=`, `<`, `>=`, `>`, `==`, `!=`, membership; a NaN takes the true child where the node says).
///
/// # Safety
/// As [`word`], and the members of membership nodes inside `tables`.
#[inline(always)]
unsafe fn holds(p: &TreeParams, tables: *const f64, i: u64, x: f64) -> bool {
    // SAFETY: forwarded.
    let (mode, split, missing) = unsafe { (word(tables, i, 0), word(tables, i, 2), word(tables, i, 7)) };
    let cmp = match mode as u32 {
        0 => x <= split,
        1 => x < split,
        2 => x >= split,
        3 => x > split,
        4 => x == split,
        5 => x != split,
        _ => {
            // SAFETY: forwarded: the members lie after the nodes, roots and leaves.
            let (first, count) = unsafe { (word(tables, i, 8) as u64, word(tables, i, 9) as u64) };
            let base = p.nodes * TREE_NODE_WORDS + p.trees + 2 * p.leaves;
            (0..count).any(|k| unsafe { *tables.add((base + first + k) as usize) } == x)
        }
    };
    cmp || (x.is_nan() && missing != 0.0)
}

/// The ensemble's output for row `r`, target `t` ([`TreeParams`]): every tree walked (at most
/// `nodes + 1` branch steps; a malformed tree gives NaN), the weights of the leaves of target `t`
/// aggregated in f64 and rounded to f32 once, as the reference.
///
/// # Safety
/// `x` holds `rows * features` f32, `y` `rows * targets`; `tables` the ensemble in the layout
/// [`TreeParams`] documents, every index in it inside its table (the planner builds them so).
///
/// # Parameters
/// `p`; X, the tables, Y.
///
/// # Thread mapping
/// 1-D grid of 1-D blocks, any size: a grid-stride loop over the `(row, target)` outputs, a thread
/// walking every tree for its row.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn tree_ensemble_f32(
    p: TreeParams,
    x: *const f32,
    tables: *const f64,
    y: *mut f32,
) {
    let total = p.rows * p.targets;
    let (roots, leaves) = (p.nodes * TREE_NODE_WORDS, p.nodes * TREE_NODE_WORDS + p.trees);
    let (mut e, step) = (global_thread_x(), grid_threads_x());
    while e < total {
        let (r, t) = (e / p.targets, e % p.targets);
        let mut acc = p.init;
        let mut bad = false;
        for tree in 0..p.trees {
            // SAFETY (table reads below): indices from the planner's tables, inside them.
            let root = unsafe { *tables.add((roots + tree) as usize) } as u64;
            let leaf = if root >= p.nodes {
                None
            } else {
                unsafe {
                    // A root that is a leaf on both sides with one child is the leaf `root` itself.
                    if word(tables, root, 4) != 0.0
                        && word(tables, root, 6) != 0.0
                        && word(tables, root, 3) == word(tables, root, 5)
                    {
                        Some(root)
                    } else {
                        let mut i = root;
                        let mut found = None;
                        for _ in 0..=p.nodes {
                            if i >= p.nodes {
                                break;
                            }
                            let f = word(tables, i, 1) as u64;
                            if f >= p.features {
                                break;
                            }
                            let v = *x.add((r * p.features + f) as usize) as f64;
                            let (next, is_leaf) = if holds(&p, tables, i, v) {
                                (word(tables, i, 3) as u64, word(tables, i, 4) != 0.0)
                            } else {
                                (word(tables, i, 5) as u64, word(tables, i, 6) != 0.0)
                            };
                            if is_leaf {
                                found = Some(next);
                                break;
                            }
                            i = next;
                        }
                        found
                    }
                }
            };
            let Some(leaf) = leaf.filter(|&l| l < p.leaves) else {
                bad = true;
                break;
            };
            // SAFETY: leaf < leaves: inside the leaf table.
            let (target, w) = unsafe {
                (
                    *tables.add((leaves + 2 * leaf) as usize) as u64,
                    *tables.add((leaves + 2 * leaf + 1) as usize),
                )
            };
            if target != t {
                continue;
            }
            acc = match p.aggregate {
                tree_aggregate::SUM => acc + w,
                tree_aggregate::AVERAGE => acc + w / p.trees as f64,
                tree_aggregate::MIN => acc.min(w),
                _ => acc.max(w),
            };
        }
        // SAFETY: e < rows * targets: inside Y.
        unsafe { *y.add(e as usize) = if bad { f32::NAN } else { acc as f32 } };
        e += step;
    }
}
