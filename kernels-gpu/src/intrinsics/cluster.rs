//! Thread-block cluster intrinsics (Hopper flavour only): the block's rank, cluster barriers,
//! distributed shared memory and the memory barriers (`mbarrier`) that count remote stores in.

use core::arch::asm;

/// Rank of this block in its thread-block cluster (`%cluster_ctarank`).
#[inline(always)]
pub fn cluster_rank() -> u32 {
    let r: u32;
    // SAFETY: reads a special register.
    unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// The arrive half of a cluster-wide barrier (release): this thread's earlier writes, also to
/// other blocks' shared memory, become visible to threads after their [`cluster_wait`]. Every
/// thread of the cluster must arrive once before waiting.
#[inline(always)]
pub fn cluster_arrive() {
    // SAFETY: a barrier phase; the contract above.
    unsafe { asm!("barrier.cluster.arrive.release.aligned;", options(nostack)) };
}

/// The wait half of a cluster-wide barrier (acquire): returns once every thread of the cluster has
/// arrived ([`cluster_arrive`]).
#[inline(always)]
pub fn cluster_wait() {
    // SAFETY: a barrier phase; the contract of [`cluster_arrive`].
    unsafe { asm!("barrier.cluster.wait.acquire.aligned;", options(nostack)) };
}

/// The arrive half of a cluster-wide barrier without memory ordering
/// (`barrier.cluster.arrive.relaxed`): only says that this thread got here. Every thread of the
/// cluster must arrive once before waiting ([`cluster_wait`]).
#[inline(always)]
pub fn cluster_arrive_relaxed() {
    // SAFETY: a barrier phase; the contract above.
    unsafe { asm!("barrier.cluster.arrive.relaxed.aligned;", options(nostack)) };
}

/// The shared-window address `addr` of this block mapped to block `rank` of the cluster (`mapa`):
/// the same offset in that block's shared memory, for [`store_async_cluster_f32`]. Offsets added
/// to the result stay in that block.
#[inline(always)]
pub fn map_shared_cluster(addr: u32, rank: u32) -> u32 {
    let r: u32;
    // SAFETY: an address computation; nothing is accessed.
    unsafe {
        asm!("mapa.shared::cluster.u32 {r}, {a}, {k};", r = out(reg32) r, a = in(reg32) addr, k = in(reg32) rank,
             options(pure, nomem, nostack))
    };
    r
}

/// Initializes the memory barrier (`mbarrier`, 8 bytes) at shared address `bar` for `count`
/// arrivals per phase, and makes the initialization visible to the other blocks of the cluster
/// once they pass a cluster barrier that this thread arrives at afterwards
/// (`fence.mbarrier_init.release.cluster`).
///
/// # Safety
/// `bar` is an 8-byte aligned address of this block's shared memory that nothing else uses while
/// the barrier is in use.
#[inline(always)]
pub unsafe fn mbarrier_init_cluster(bar: u32, count: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", "fence.mbarrier_init.release.cluster;",
             b = in(reg32) bar, c = in(reg32) count, options(nostack))
    };
}

/// Arrives at the memory barrier `bar` of this block and adds `bytes` to the transfers its current
/// phase waits for (`mbarrier.arrive.expect_tx`).
///
/// # Safety
/// `bar` is an initialized memory barrier of this block.
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar, n = in(reg32) bytes,
             options(nostack))
    };
}

/// Returns once the phase of parity `parity` of this block's memory barrier `bar` has completed;
/// the writes that completed it (also other blocks' [`store_async_cluster_f32`]) are then visible
/// (`mbarrier.try_wait.parity.acquire.cluster`).
///
/// # Safety
/// `bar` is an initialized memory barrier of this block whose phase will complete.
#[inline(always)]
pub unsafe fn mbarrier_wait_parity(bar: u32, parity: u32) {
    loop {
        let done: u32;
        // SAFETY: the caller's contract.
        unsafe {
            // One line: the host's module splitter ends a function at a `}` that starts a line.
            asm!("{{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [{b}], {q}; selp.u32 {d}, 1, 0, p; }}",
                 b = in(reg32) bar, q = in(reg32) parity, d = out(reg32) done, options(nostack))
        };
        if done != 0 {
            return;
        }
    }
}

/// Stores `v` at `remote` (a [`map_shared_cluster`] address in another block of the cluster) and
/// signals the 4 bytes' completion to that block's memory barrier `remote_bar` (`st.async` with
/// `mbarrier::complete_tx`): no fence, the barrier's phase completes once every expected byte has
/// landed.
///
/// # Safety
/// Both addresses were mapped to the same running block of the cluster; `remote .. remote + 4`
/// lies in its dynamic shared memory and `remote_bar` is its initialized memory barrier, whose
/// current phase expects these bytes.
#[inline(always)]
pub unsafe fn store_async_cluster_f32(remote: u32, v: f32, remote_bar: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [{a}], {v}, [{b}];",
             a = in(reg32) remote, v = in(reg32) v.to_bits(), b = in(reg32) remote_bar, options(nostack))
    };
}

/// Stores `v` at shared-window address `addr` (an address of this block's shared memory) in the
/// shared memory of block `rank` of the cluster (`mapa` + `st.shared::cluster`).
///
/// # Safety
/// `addr .. addr + 4` lies in the dynamic shared memory every block of the launch has, `rank` is
/// below the cluster size, and block `rank` is running (a [`cluster_wait`] after the launch's
/// start and before that block exits).
#[inline(always)]
pub unsafe fn store_shared_cluster_f32(addr: u32, rank: u32, v: f32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!("mapa.shared::cluster.u32 {a}, {a}, {r};", "st.shared::cluster.b32 [{a}], {v};",
             a = inout(reg32) addr => _, r = in(reg32) rank, v = in(reg32) v.to_bits(), options(nostack))
    };
}
