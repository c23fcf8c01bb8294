//! The fused MLP: a chain of small-`m` GEMM layers (`h' = act(alpha h W + beta C)`, the planner's
//! Gemm / MatMul nodes with their activation epilogues) in one launch. Batch-1 inference of the
//! small MLPs of particle physics is pure latency: one launch per layer costs more than the
//! layer's arithmetic. Here every block keeps the whole activation (all `m` rows) in shared
//! memory and computes its share of the next layer's columns; on the Hopper flavour the launch is
//! one thread-block cluster and every block writes its columns into the shared memory of every
//! block of the cluster (distributed shared memory), then the cluster synchronises — no global
//! memory round trip and no launch between layers. The portable flavour (no clusters) runs the
//! same code as a single block.
//!
//! FP32 FMA on the CUDA cores in a fixed order per output (a lane's strided partial sums, then a
//! butterfly or an ordered sum over warps), so results are deterministic run to run.

use crate::abi::{Activation, MLP_MAX_ACTIVATIONS, MLP_MAX_M, MLP_THREADS, MlpLayer, MlpParams};
use crate::intrinsics::*;
use crate::math;

/// Blocks sharing one chain (the cluster size; 1 without clusters).
#[cfg(ferrofuse_hopper)]
const CLUSTER: u32 = crate::abi::MLP_CLUSTER;
#[cfg(not(ferrofuse_hopper))]
const CLUSTER: u32 = 1;

const WARPS: u32 = MLP_THREADS / 32;
/// Columns a warp accumulates at once in the k-contiguous mode (independent loads in flight).
const COLS: u32 = 4;
/// k steps whose weights a lane has in flight at once in the column-contiguous mode (the
/// `steps!` list of [`layer_rows`] names them).
const KU: usize = 16;
const BUFFER_BYTES: u32 = MLP_MAX_ACTIVATIONS * 4;

#[cfg(ferrofuse_hopper)]
fn rank() -> u32 {
    cluster_rank()
}
#[cfg(not(ferrofuse_hopper))]
fn rank() -> u32 {
    0
}

/// The two halves of a chain-wide barrier (the cluster's on Hopper, the block's otherwise), split
/// so that a layer can issue its weight loads (which do not depend on the previous layer) between
/// them.
#[cfg(ferrofuse_hopper)]
fn arrive_chain() {
    cluster_arrive()
}
#[cfg(not(ferrofuse_hopper))]
fn arrive_chain() {
    sync_threads()
}
#[cfg(ferrofuse_hopper)]
fn wait_chain() {
    cluster_wait()
}
#[cfg(not(ferrofuse_hopper))]
fn wait_chain() {}

/// Stores `v` at byte offset `at` of the activation buffer at shared-window address `buf` in
/// blocks `first, first + step, ...` of the chain (several lanes holding the same value share the
/// remote stores).
///
/// # Safety
/// `at + 4 <= BUFFER_BYTES`; `buf` is one of the two buffers; called between two chain barriers.
#[inline(always)]
unsafe fn broadcast(buf: u32, at: u32, v: f32, (first, step): (u32, u32)) {
    #[cfg(ferrofuse_hopper)]
    for r in (first..CLUSTER).step_by(step as usize) {
        // SAFETY: the caller's contract; every block of the cluster has the same buffers and runs
        // until the chain's last sync.
        unsafe { store_shared_cluster_f32(buf + at, r, v) };
    }
    #[cfg(not(ferrofuse_hopper))]
    if first == 0 {
        // SAFETY: the caller's contract; the buffer is this block's shared memory.
        unsafe { *dynamic_shared_ptr().add((buf - dynamic_shared_addr() + at) as usize).cast::<f32>() = v };
    }
    #[cfg(not(ferrofuse_hopper))]
    let _ = step;
}

/// Output `(i, j)` of layer `l` from its sum `acc`: the epilogue, then the store (to `y` for the
/// last layer, by the lane with `ranks.0 == 0`, else into the next activation buffer `dst` of the
/// blocks `ranks` names, see [`broadcast`]).
///
/// # Safety
/// As [`mlp_f32`]; `i < m`, `j < l.n`.
#[inline(always)]
unsafe fn emit(
    l: &MlpLayer,
    c: *const f32,
    i: u32,
    j: u32,
    acc: f32,
    dst: u32,
    y: *mut f32,
    ranks: (u32, u32),
) {
    let mut v = l.alpha * acc;
    if l.has_c != 0 {
        let at = i as u64 * l.c_rs + j as u64 * l.c_cs;
        // SAFETY: the host checked that C covers every (i, j) through its strides.
        v = math::fma(l.beta, unsafe { *c.add(at as usize) }, v);
    }
    v = math::activate(Activation::from_code(l.act), v, l.act_alpha);
    let at = i * l.n + j;
    if y.is_null() {
        // SAFETY: m * n <= MLP_MAX_ACTIVATIONS for a hidden layer (host contract).
        unsafe { broadcast(dst, at * 4, v, ranks) };
    } else if ranks.0 == 0 {
        // SAFETY: y holds m x n f32 of the last layer.
        unsafe { *y.add(at as usize) = v };
    }
}

/// Adds `v[t]` and `v[t + half]` across the lanes `offset` apart, keeping (in `v[t]`, `t < half`)
/// the upper half on lanes with the `offset` bit set and the lower half on the others: one step
/// of a transposed warp reduction.
#[inline(always)]
fn fold<const V: usize>(v: &mut [f32; V], half: usize, offset: u32) {
    // All ones on the lanes that keep the upper half (a bit select: LLVM turns an `if` here into
    // an indexed pair in local memory).
    let upper = 0u32.wrapping_sub((lane_id() & offset != 0) as u32);
    for t in 0..half {
        let (lo, hi) = (v[t].to_bits(), v[t + half].to_bits());
        let keep = f32::from_bits((hi & upper) | (lo & !upper));
        let send = f32::from_bits((lo & upper) | (hi & !upper));
        v[t] = keep + shfl_xor_f32(send, offset);
    }
}

/// Warp sums of `V` values (a power of two, at most 16) in `V - 1 + 5 - log2(V)` shuffles instead
/// of `5 V`: returns, on each lane, the full sum of value `(lane >> (5 - log2 V)) & (V - 1)`.
/// Warp-collective.
#[inline(always)]
fn warp_sums<const V: usize>(mut v: [f32; V]) -> f32 {
    const { assert!(V.is_power_of_two() && V <= 16) };
    let (mut half, mut offset) = (V / 2, 16);
    // (Four explicit folds, each skipped by a constant condition: as a loop, the array would
    // leave registers.)
    if half >= 1 {
        fold(&mut v, half, offset);
        (half, offset) = (half / 2, offset / 2);
    }
    if half >= 1 {
        fold(&mut v, half, offset);
        (half, offset) = (half / 2, offset / 2);
    }
    if half >= 1 {
        fold(&mut v, half, offset);
        (half, offset) = (half / 2, offset / 2);
    }
    if half >= 1 {
        fold(&mut v, half, offset);
        offset /= 2;
    }
    let mut s = v[0];
    while offset >= 1 {
        s += shfl_xor_f32(s, offset);
        offset /= 2;
    }
    s
}

/// One layer for `R` rows (`m <= R`; rows past `m` repeat the last one, so that every loop has a
/// constant trip count and the arrays stay in registers; their sums are never stored): reads the
/// activation `h` (this block's shared memory, `m` rows of `l.k`), writes this block's columns of
/// the output through [`emit`].
///
/// # Safety
/// As [`mlp_f32`]; every thread of the block calls it (the column-contiguous mode synchronises the
/// block).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn layer_rows<const R: usize, const V: usize, const UNROLL: usize, const W: usize>(
    l: &MlpLayer,
    m: u32,
    w: *const f32,
    c: *const f32,
    h: *const f32,
    dst: u32,
    y: *mut f32,
    wait: bool,
) {
    // UNROLL: k steps of 32 a lane loads before it consumes them (loads in flight: a 256-wide k
    // in one round for one row; fewer with more rows, whose accumulators take the registers).
    const { assert!(V == R * COLS as usize && W == COLS as usize * UNROLL) };
    let per = l.n.div_ceil(CLUSTER);
    let j0 = rank() * per;
    let j1 = (j0 + per).min(l.n);
    let (warp, lane) = (thread_idx_x() / 32, lane_id());
    if l.b_rs == 1 {
        // k contiguous in W (nn.Linear weights): lanes walk k, a warp owns COLS columns at a time.
        // The previous layer's output is awaited (when `wait`) only after the first weights are
        // in flight: they do not depend on it.
        let mut waiting = wait;
        let mut j = j0 + warp * COLS;
        while j < j1 {
            // acc[q * R + i]: column j + q, row i.
            let mut acc = [0.0f32; V];
            // The k loop is warp-uniform (every lane takes each step, past l.k as zeros), so that
            // the whole warp reaches the cluster wait together.
            let mut kb = 0;
            while kb < l.k {
                let k = kb + lane;
                // Weights of this k step; k indices past l.k read the last one and count as zero
                // (no condition around the loop bodies: LLVM would roll them and move the arrays
                // to local memory).
                let mut wv = [0.0f32; W];
                for u in 0..UNROLL {
                    let valid = k + (u as u32) * 32 < l.k;
                    let kk = (k + u as u32 * 32).min(l.k - 1);
                    for q in 0..COLS as usize {
                        // Columns past j1 repeat the last one, like the rows (never stored).
                        let jq = (j + q as u32).min(j1 - 1);
                        // SAFETY: jq < n, kk < k; the host checked W's extent.
                        let v = unsafe { *w.add((jq as u64 * l.b_cs + kk as u64) as usize) };
                        wv[u * COLS as usize + q] = if valid { v } else { 0.0 };
                    }
                }
                if waiting {
                    wait_chain();
                    waiting = false;
                }
                for u in 0..UNROLL {
                    let valid = k + (u as u32) * 32 < l.k;
                    let kk = (k + u as u32 * 32).min(l.k - 1);
                    let mut x = [0.0f32; R];
                    for (i, xi) in x.iter_mut().enumerate() {
                        let row = (i as u32).min(m - 1);
                        // SAFETY: row < m, kk < k: inside the activation buffer.
                        let v = unsafe { *h.add((row * l.k + kk) as usize) };
                        // (Zeroed, not multiplied by a zero weight: an infinite activation would
                        // make a NaN.)
                        *xi = if valid { v } else { 0.0 };
                    }
                    for q in 0..COLS as usize {
                        for i in 0..R {
                            acc[q * R + i] = math::fma(x[i], wv[u * COLS as usize + q], acc[q * R + i]);
                        }
                    }
                }
                kb += 32 * UNROLL as u32;
            }
            let sum = warp_sums(acc);
            let shift = 5 - V.trailing_zeros();
            let idx = (lane >> shift) as usize & (V - 1);
            let (q, i) = ((idx / R) as u32, (idx % R) as u32);
            // The 32 / V lanes holding each sum share its remote stores: copy `lane % copies`
            // stores to the blocks of that residue.
            let copies = 1u32 << shift;
            if i < m && j + q < j1 {
                // SAFETY: i < m, j + q < n.
                unsafe { emit(l, c, i, j + q, sum, dst, y, (lane & (copies - 1), copies)) };
            }
            j += WARPS * COLS;
        }
        if waiting {
            // A warp without columns in this block still takes part in the barrier.
            wait_chain();
        }
    } else {
        // Columns contiguous in W: lanes own 32 adjacent columns, warps split k, and the partial
        // sums meet in shared memory after the two activation buffers.
        // SAFETY: the partial sums follow the two buffers inside MLP_SHARED_BYTES.
        let red = unsafe { dynamic_shared_ptr().add(2 * BUFFER_BYTES as usize).cast::<f32>() };
        // As in the k-contiguous mode, the previous layer's output is awaited only after the
        // first weights are in flight.
        let mut waiting = wait;
        let mut jc = j0;
        while jc < j1 {
            let j = jc + lane;
            // Lanes past j1 read the last column (valid memory); their sums are never read.
            let jj = j.min(j1 - 1);
            let mut acc = [0.0f32; R];
            // The k steps of this warp (k = warp, warp + WARPS, ...), KU weights in flight at a
            // time (one loaded per step, the latency of each exposed, made the layer a chain of
            // L2 round trips); the sum runs over k in the same order.
            let mut k = warp;
            while k < l.k {
                let mut wv = [0.0f32; KU];
                for (u, x) in wv.iter_mut().enumerate() {
                    let kk = (k + u as u32 * WARPS).min(l.k - 1);
                    // SAFETY: kk < l.k, jj < n; the host checked W's extent.
                    *x = unsafe { *w.add((kk as u64 * l.b_rs + jj as u64 * l.b_cs) as usize) };
                }
                if waiting {
                    wait_chain();
                    waiting = false;
                }
                // Steps by literal, so that `wv` stays in registers (a loop LLVM leaves rolled
                // would index it at run time from local memory); steps past l.k are skipped.
                macro_rules! steps {
                    ($($u:literal)*) => {$(
                        let kk = k + $u * WARPS;
                        if kk < l.k {
                            for (i, a) in acc.iter_mut().enumerate() {
                                let row = (i as u32).min(m - 1);
                                // SAFETY: row < m, kk < l.k.
                                *a = math::fma(unsafe { *h.add((row * l.k + kk) as usize) }, wv[$u], *a);
                            }
                        }
                    )*};
                }
                steps!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
                k += KU as u32 * WARPS;
            }
            if waiting {
                // A warp without k steps still takes part in the chain's barrier.
                wait_chain();
                waiting = false;
            }
            for (i, &a) in acc.iter().enumerate() {
                // SAFETY: (warp * 32 + lane) * MLP_MAX_M + i < WARPS * 32 * MLP_MAX_M.
                unsafe { *red.add(((warp * 32 + lane) * MLP_MAX_M) as usize + i) = a };
            }
            sync_threads();
            let t = thread_idx_x();
            let (i, jj) = (t / 32, jc + t % 32);
            if i < m && jj < j1 {
                let mut s = 0.0f32;
                for wi in 0..WARPS {
                    // SAFETY: as above.
                    s += unsafe { *red.add(((wi * 32 + t % 32) * MLP_MAX_M + i) as usize) };
                }
                // SAFETY: i < m, jj < n.
                unsafe { emit(l, c, i, jj, s, dst, y, (0, 1)) };
            }
            sync_threads();
            jc += 32;
        }
        if waiting {
            // A block without columns in this layer still takes part in the barrier.
            wait_chain();
        }
    }
}

/// One layer, its code specialised for 1, 2 or 4 rows (one copy of each, shared by the layer
/// slots).
///
/// # Safety
/// As [`layer_rows`].
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn layer(
    k: u32,
    n: u32,
    act: u32,
    has_c: u32,
    alpha: f32,
    beta: f32,
    act_alpha: f32,
    b_rs: u64,
    b_cs: u64,
    c_rs: u64,
    c_cs: u64,
    m: u32,
    w: *const f32,
    c: *const f32,
    h: *const f32,
    dst: u32,
    y: *mut f32,
    wait: bool,
) {
    // (The fields arrive as scalars: an aggregate or tuple argument is staged in local memory.)
    let l = MlpLayer { k, n, act, has_c, alpha, beta, act_alpha, _pad: 0, b_rs, b_cs, c_rs, c_cs };
    // SAFETY: the caller's contract; m <= MLP_MAX_M = 4 picks a specialisation with R >= m.
    unsafe {
        match m {
            1 => layer_rows::<1, 4, 8, 32>(&l, m, w, c, h, dst, y, wait),
            2 => layer_rows::<2, 8, 4, 16>(&l, m, w, c, h, dst, y, wait),
            _ => layer_rows::<4, 16, 4, 16>(&l, m, w, c, h, dst, y, wait),
        }
    }
}

/// A chain of `p.layers` GEMM layers ([`MlpParams`]) in one launch.
///
/// # Safety
/// `x` holds `p.m` contiguous rows of `p.layer[0].k` f32; for each used layer `l`, `w_l` is valid
/// for every offset `k * b_rs + j * b_cs` (`k < l.k`, `j < l.n`) and `c_l` (when `has_c`) for
/// every `i * c_rs + j * c_cs`; the unused `w_l`, `c_l` may be null; consecutive layers chain
/// (`layer[l + 1].k == layer[l].n`); `p.m <= MLP_MAX_M`, `p.m * width <= MLP_MAX_ACTIVATIONS` for
/// the input and every hidden width; `y` holds `p.m` rows of the last layer's `n`.
///
/// # Parameters
/// `p`, the input `x`, the weight and optional C of each of the 8 layer slots, the output `y`.
///
/// # Thread mapping
/// Blocks of [`MLP_THREADS`] threads and `MLP_SHARED_BYTES` of dynamic shared memory; the grid is
/// one cluster of `MLP_CLUSTER` blocks on the Hopper flavour (fixed at compile time by the
/// `.reqnctapercluster` directive the build adds), one block otherwise. Block `r` computes output
/// columns `[r * ceil(n / blocks), ...)` of every layer: in the k-contiguous mode a warp owns
/// 4 columns at a time and its lanes stride over k (warp-shuffle sum); otherwise the lanes own 32
/// adjacent columns and the warps split k (ordered sum in shared memory).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "ptx-kernel" fn mlp_f32(
    p: MlpParams,
    x: *const f32,
    w0: *const f32,
    c0: *const f32,
    w1: *const f32,
    c1: *const f32,
    w2: *const f32,
    c2: *const f32,
    w3: *const f32,
    c3: *const f32,
    w4: *const f32,
    c4: *const f32,
    w5: *const f32,
    c5: *const f32,
    w6: *const f32,
    c6: *const f32,
    w7: *const f32,
    c7: *const f32,
    y: *mut f32,
) {
    let base = dynamic_shared_ptr().cast::<f32>();
    let addr = dynamic_shared_addr();
    let input = p.m * p.layer[0].k;
    let mut t = thread_idx_x();
    while t < input {
        // SAFETY: t < m * k0 <= MLP_MAX_ACTIVATIONS: inside x and the first buffer.
        unsafe { *base.add(t as usize) = *x.add(t as usize) };
        t += MLP_THREADS;
    }
    // The input is in place once the block has passed the barrier; the first layer waits for it
    // (and for every block of the cluster to have started, so that its shared memory may be
    // written) after issuing its first weight loads.
    arrive_chain();
    // The layer slots unrolled, so that every parameter index is a constant (no local memory).
    macro_rules! run {
        ($l:literal, $w:ident, $c:ident) => {
            if $l < p.layers {
                let last = $l + 1 == p.layers;
                let (src, dst) = if $l % 2 == 0 { (0, BUFFER_BYTES) } else { (BUFFER_BYTES, 0) };
                // SAFETY: the launch contract; `src` holds layer $l's input (written before the
                // last sync), `dst` the buffer no block reads during this layer.
                unsafe {
                    let l = &p.layer[$l];
                    layer(
                        l.k,
                        l.n,
                        l.act,
                        l.has_c,
                        l.alpha,
                        l.beta,
                        l.act_alpha,
                        l.b_rs,
                        l.b_cs,
                        l.c_rs,
                        l.c_cs,
                        p.m,
                        $w,
                        $c,
                        base.add((src / 4) as usize),
                        addr + dst,
                        if last { y } else { core::ptr::null_mut() },
                        true,
                    )
                };
                if !last {
                    // This block's stores into the cluster are done; the next layer waits for
                    // everyone's after issuing its first weight loads.
                    arrive_chain();
                }
            }
        };
    }
    run!(0, w0, c0);
    run!(1, w1, c1);
    run!(2, w2, c2);
    run!(3, w3, c3);
    run!(4, w4, c4);
    run!(5, w5, c5);
    run!(6, w6, c6);
    run!(7, w7, c7);
}
