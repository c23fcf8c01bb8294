//! Mamba-2 SSD scan in its chunked (matrix) form (OPS.md, `ssd_minimal_discrete`): `SSD_CHUNK`
//! steps at a time, one block per `(b, h, tile of p_tile head channels)`, the block's state tile
//! carried in shared memory from chunk to chunk. With dt transformed (`ssd_dt`), `cum` the
//! cumulative `dt A` inside the chunk and `S` the state at its start, each chunk computes
//! - `G[i][j] = (C_i · B_j) exp(cum_i − cum_j) dt_j` for `j <= i`, 0 above the diagonal;
//! - `y_i = Σ_j G[i][j] x_j + exp(cum_i) S C_i + D x_i`, times `silu(z_i)` when z is given;
//! - `S <- exp(cum_last) S + Σ_j exp(cum_last − cum_j) dt_j x_j ⊗ B_j`.
//!
//! These are four products over shared memory, each computed by the block's 16 × 8 grid of threads
//! with register tiles read 16 bytes at a time ([`dots`]); the next chunk's B, C, x and dt land by
//! `cp.async` while this one is computed. The sequential time loop has `len / SSD_CHUNK`
//! iterations instead of `len`, so a prefill is bound by these products, not by a chain of
//! dependent steps. Equal to `ssd_scan_f32` up to rounding (the decays are `exp` of differences of
//! cumulative sums, at most 1); steps past the sequence have dt 0 and write nothing.
//!
//! State pointers as for every sequence kernel: `state_in` is read when a block starts its tile,
//! `state_out` and `final_state` written when it ends it; the tile's elements are read and written
//! by the same block only, so `state_in == state_out` is sound.

use super::{SLOTS, SsdOperands, load_or, ssd_dt, store_if};
use crate::abi::{
    RowView, SSD_CHUNK, SSD_CHUNK_MAX_STATE, SSD_CHUNK_MAX_TILE, SSD_CHUNK_THREADS, SsdChunkLayout,
    SsdChunkParams, ssd_chunk_spans,
};
use crate::intrinsics::{
    F32x4, block_dim_x, block_idx_x, cp_async_4_zfill, cp_async_16_zfill, cp_async_commit, cp_async_wait_all,
    dynamic_shared_addr, dynamic_shared_ptr, global_thread_x, grid_dim_x, grid_threads_x, shfl_idx_u32,
    sync_threads, thread_idx_x,
};
use crate::math;

const Q: usize = SSD_CHUNK as usize;
const THREADS: usize = SSD_CHUNK_THREADS as usize;
const _: () = assert!(Q == 32 && THREADS == 128, "one warp scans a chunk; the thread grid is 16 x 8");

/// Mamba-2 SSD scan, chunked: the semantics of `ssd_scan_f32` (see there), computed
/// `SSD_CHUNK` steps at a time (module doc).
///
/// # Safety
/// As `ssd_scan_f32` for `p.scan` (its `lanes` unused); `p.p_tile` is 8, 16, 32 or 64,
/// `p.state_pad` is `ssd_chunk_state_pad(state)` (at most `SSD_CHUNK_MAX_STATE`), their product
/// at most `SSD_CHUNK_MAX_TILE`; with `p.vector`, `state` is a multiple of 4 (B and C are then
/// read 16 bytes at a time where both pointers are 16-byte aligned and their row views' offsets and
/// rows are multiples of 4). `SSD_CHUNK_THREADS` threads a block and
/// `SsdChunkLayout::new(state_pad, p_tile).bytes()` of dynamic shared memory. Any grid: blocks
/// stride over the `(b, h, tile)` items. Launches that break the shape rules return at once.
///
/// # Parameters
/// As `ssd_scan_f32`: `p`; x, dt, A, Bm, Cm, then the optional D, z, dt_bias (null when absent);
/// the state pointers; the output y.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ssd_chunk_f32(
    p: SsdChunkParams,
    x: *const f32,
    dt: *const f32,
    a: *const f32,
    bm: *const f32,
    cm: *const f32,
    dskip: *const f32,
    z: *const f32,
    dt_bias: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    y: *mut f32,
) {
    if !launch_fits(&p) {
        return;
    }
    let ops = SsdOperands { x, a, dt, bm, cm, dskip, z, dt_bias, state_in, state_out, final_state, y };
    // SAFETY: the kernel's contract, passed on.
    unsafe { by_tile::<FULL>(&p, &ops, core::ptr::null_mut()) };
}

/// Whether a launch of [`ssd_chunk_f32`] or [`ssd_chunk_states_f32`] keeps the shape rules (the
/// tile itself is checked by [`by_tile`]).
#[inline(always)]
fn launch_fits(p: &SsdChunkParams) -> bool {
    let (s, np) = (&p.scan, p.state_pad);
    s.groups != 0
        && s.heads % s.groups == 0
        && s.state >= 1
        && np % 32 == 0
        && np >= s.state
        && np <= SSD_CHUNK_MAX_STATE
        && p.p_tile * np <= SSD_CHUNK_MAX_TILE
        && p.span >= 1
        && block_dim_x() == SSD_CHUNK_THREADS
}

/// [`tiles`] for the launch's tile (8, 16, 32 or 64 head channels).
///
/// # Safety
/// As [`tiles`].
#[inline(always)]
unsafe fn by_tile<const MODE: u32>(p: &SsdChunkParams, o: &SsdOperands, decays: *mut f32) {
    // SAFETY: the caller's contract, passed on; the tile's column count is `8 * C`.
    unsafe {
        match p.p_tile {
            8 => tiles::<1, MODE>(p, o, decays),
            16 => tiles::<2, MODE>(p, o, decays),
            32 => tiles::<4, MODE>(p, o, decays),
            64 => tiles::<8, MODE>(p, o, decays),
            _ => {}
        }
    }
}

/// [`tiles`] computes y and the state (`ssd_chunk_f32`).
const FULL: u32 = 0;
/// [`tiles`] computes only each span's state change from a zero state, and its decay
/// (`ssd_chunk_states_f32`).
const STATES: u32 = 1;

/// The first phase of a scan in several spans (`SsdChunkParams::span`): per `(b, h, tile, span)`,
/// the state the span's chunks leave from a zero state (`deltas`, `[spans, batch, heads,
/// head_dim, state]`) and `exp(Σ dt A)` over its steps (`decays`, `[spans, batch, heads]`,
/// written by the blocks of tile 0).
///
/// # Safety
/// As [`ssd_chunk_f32`] for its inputs x, dt, A, Bm and dt_bias (C is not read); deltas
/// and decays hold `spans` states and `spans * batch * heads` f32, overlapping nothing read.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ssd_chunk_states_f32(
    p: SsdChunkParams,
    x: *const f32,
    dt: *const f32,
    a: *const f32,
    bm: *const f32,
    dt_bias: *const f32,
    deltas: *mut f32,
    decays: *mut f32,
) {
    if !launch_fits(&p) || deltas.is_null() || decays.is_null() {
        return;
    }
    let null = core::ptr::null::<f32>();
    let ops = SsdOperands {
        x,
        a,
        dt,
        bm,
        cm: null,
        dskip: null,
        z: null,
        dt_bias,
        state_in: null,
        state_out: deltas,
        final_state: core::ptr::null_mut(),
        y: core::ptr::null_mut(),
    };
    // SAFETY: the kernel's contract, passed on.
    unsafe { by_tile::<STATES>(&p, &ops, decays) };
}

/// The second phase of a scan in several spans: per state element (a thread each, grid-striding),
/// each span's first state, `starts[0] = state_in` (zero when null) and
/// `starts[s + 1] = decays[s] starts[s] + deltas[s]`, into `starts` (`[spans, batch, heads,
/// head_dim, state]`); the state after the last span into `state_out` and `final_state` (each
/// skipped when null). A thread reads and writes its own elements only, so `state_in ==
/// state_out` is sound.
///
/// # Safety
/// deltas and starts hold `spans` states, decays `spans * batch * heads` f32, the states (when
/// non-null) one; starts overlaps nothing else.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ssd_chunk_pass_f32(
    p: SsdChunkParams,
    deltas: *const f32,
    decays: *const f32,
    state_in: *const f32,
    state_out: *mut f32,
    final_state: *mut f32,
    starts: *mut f32,
) {
    let s = &p.scan;
    let per_head = s.head_dim as u64 * s.state as u64;
    let (bh, elems) = (s.batch as u64 * s.heads as u64, s.batch as u64 * s.heads as u64 * per_head);
    let spans = ssd_chunk_spans((s.len as u64).div_ceil(Q as u64), p.span);
    let mut e = global_thread_x();
    while e < elems {
        let head = e / per_head;
        // SAFETY: e < one state's elements.
        let mut st = unsafe { load_or(state_in, e, 0.0) };
        let mut sp = 0u64;
        while sp < spans {
            // Eight spans' loads ahead of their chain of FMAs.
            let (mut dl, mut dc) = ([0.0f32; SLOTS], [1.0f32; SLOTS]);
            unroll!(k in SLOTS => {
                let q = sp + k as u64;
                if q < spans {
                    // SAFETY: q < spans: inside deltas and decays.
                    unsafe {
                        dl[k] = *deltas.add((q * elems + e) as usize);
                        dc[k] = *decays.add((q * bh + head) as usize);
                    }
                }
            });
            unroll!(k in SLOTS => {
                let q = sp + k as u64;
                if q < spans {
                    // SAFETY: q < spans: inside starts.
                    unsafe { *starts.add((q * elems + e) as usize) = st };
                    st = math::fma(dc[k], st, dl[k]);
                }
            });
            sp += SLOTS as u64;
        }
        // SAFETY: e < one state's elements.
        unsafe {
            store_if(state_out, e, st);
            store_if(final_state, e, st);
        }
        e += grid_threads_x();
    }
}

/// `acc[r][c] = Σ_k a[r][k] b[c][k]` over `k` (a multiple of 4) values of shared-memory rows,
/// 16 bytes at a time.
///
/// # Safety
/// Every row pointer is 16-byte aligned with `k` values written before (and ordered by a barrier
/// with) this call.
#[inline(always)]
unsafe fn dots<const R: usize, const C: usize>(
    a: [*const f32; R],
    b: [*const f32; C],
    k: usize,
) -> [[f32; C]; R] {
    let mut acc = [[0.0f32; C]; R];
    let mut kk = 0;
    while kk < k {
        let (mut av, mut bv) = ([[0.0f32; 4]; R], [[0.0f32; 4]; C]);
        unroll!(r in SLOTS => {
            if r < R {
                // SAFETY: kk + 4 <= k values of an aligned row (contract above).
                av[r] = unsafe { *a[r].add(kk).cast::<F32x4>() }.0;
            }
        });
        unroll!(c in SLOTS => {
            if c < C {
                // SAFETY: as above.
                bv[c] = unsafe { *b[c].add(kk).cast::<F32x4>() }.0;
            }
        });
        unroll!(e in SLOTS => {
            unroll!(r in SLOTS => {
                unroll!(c in SLOTS => {
                    if e < 4 && r < R && c < C {
                        acc[r][c] = math::fma(av[r][e], bv[c][e], acc[r][c]);
                    }
                });
            });
        });
        kk += 4;
    }
    acc
}

/// Every `(b, h, tile, span)` item of [`ssd_chunk_f32`] (`MODE` [`FULL`]) or
/// [`ssd_chunk_states_f32`] ([`STATES`]: no y, a zero initial state, the span's end state into
/// `o.state_out` at its span's place and its decay into `decays`) with tiles of `8 * C` head
/// channels. A full span starts from `o.state_in`'s state of its span (`spans` of them: the
/// pass's starts, or the scan's initial state with one span); only the last span writes the
/// final state.
///
/// # Safety
/// As [`ssd_chunk_f32`] or [`ssd_chunk_states_f32`], whose shape checks passed; `p.p_tile == 8 * C`.
#[inline(always)]
unsafe fn tiles<const C: usize, const MODE: u32>(p: &SsdChunkParams, o: &SsdOperands, decays: *mut f32) {
    let s = &p.scan;
    let (batch, len, heads, pd) = (s.batch as u64, s.len as u64, s.heads as u64, s.head_dim as u64);
    let (groups, nn, np, pt) = (s.groups as u64, s.state as u64, p.state_pad as usize, 8 * C);
    let lay = SsdChunkLayout::new(p.state_pad, pt as u32);
    let (sn, qs) = (lay.sn as usize, lay.qs as usize);
    let (sm, sa) = (dynamic_shared_ptr().cast::<f32>(), dynamic_shared_addr());
    // Shared memory at f32 offset `off`.
    let at = |off: usize| sm.wrapping_add(off);
    let tid = thread_idx_x() as usize;
    // The thread's place in the 16 x 8 grid: rows `ti + 16 r`, columns `tj + 8 c` of every tile.
    let (ti, tj) = (tid / 8, tid % 8);
    let tiles = pd.div_ceil(pt as u64);
    let chunks = len.div_ceil(Q as u64);
    let spans = ssd_chunk_spans(chunks, p.span);
    let elems = batch * heads * pd * nn;
    let per_group = heads / groups;
    let mut item = block_idx_x() as u64;
    while item < batch * heads * tiles * spans {
        let (span, rest) = (item % spans, item / spans);
        let (tile, h, b) = (rest % tiles, (rest / tiles) % heads, rest / (tiles * heads));
        let c_lo = span * p.span as u64;
        let c_hi = if c_lo + (p.span as u64) < chunks { c_lo + p.span as u64 } else { chunks };
        let (g, p0) = (h / per_group, tile * pt as u64);
        // SAFETY: h < heads: inside A and dt_bias.
        let (av, bias) = unsafe { (*o.a.add(h as usize), load_or(o.dt_bias, h, 0.0)) };
        // D of the thread's y columns.
        let mut dv = [0.0f32; C];
        unroll!(cc in SLOTS => {
            let gp = p0 + (tj + 8 * cc) as u64;
            if cc < C && gp < pd {
                let di = if s.d_per_channel != 0 { h * pd + gp } else { h };
                // SAFETY: di < heads * head_dim (or heads): inside D when it is given.
                dv[cc] = unsafe { load_or(o.dskip, di, 0.0) };
            }
        });
        // State row of head channel `gp`: `(state_row + gp) * state`.
        let state_row = (b * heads + h) * pd;
        // The initial state into state buffer 0 (zero past the state and the head channels).
        let mut e = tid;
        while e < pt * np {
            let (pp, n) = (e / np, e % np);
            let gp = p0 + pp as u64;
            let v = if MODE == FULL && (n as u64) < nn && gp < pd {
                // SAFETY: (b, h, gp, n) of the span's state lies inside the states.
                unsafe { load_or(o.state_in, span * elems + (state_row + gp) * nn + n as u64, 0.0) }
            } else {
                0.0
            };
            // SAFETY: pp < p_tile, n < state_pad: inside state buffer 0.
            unsafe { *at(lay.s as usize + pp * sn + n) = v };
            e += THREADS;
        }
        // Chunk `c`'s B, C, x (transposed) and raw dt into buffer `k`, zero past the sequence,
        // the state and the head channels; one `cp.async` group.
        let issue = |c: u64, k: usize| {
            let t0 = c * Q as u64;
            let (bdst, cdst) = (
                sa + 4 * (lay.b as usize + k * Q * sn) as u32,
                sa + 4 * (lay.c as usize + k * Q * sn) as u32,
            );
            let (rb, rc) = (&s.rows.bm, &s.rows.cm);
            // Step t's B and C rows of group g, through their row views.
            let row = |v: &RowView, t: u64| v.offset as u64 + (b * len + t) * v.row as u64 + g * nn;
            let aligned = (o.bm as usize | o.cm as usize) % 16 == 0
                && (rb.offset | rb.row | rc.offset | rc.row) % 4 == 0;
            let width = if p.vector != 0 && aligned { 4 } else { 1 };
            let per_row = np / width;
            let mut e = tid;
            while e < Q * per_row {
                let (t, n) = (e / per_row, width * (e % per_row));
                let ok = t0 + (t as u64) < len && (n as u64) < nn;
                let (bsrc, csrc) = if ok {
                    (row(rb, t0 + t as u64) + n as u64, row(rc, t0 + t as u64) + n as u64)
                } else {
                    (0, 0)
                };
                let d = 4 * (t * sn + n) as u32;
                // SAFETY: when `ok`, (b, t0 + t, g, n .. n + width) lies inside Bm and Cm (width 4
                // only with a state that is a multiple of 4 and 16-byte aligned rows); the
                // destinations lie inside buffer k; nothing is read when not `ok`.
                // C only for y (`FULL`; the states kernel has none).
                unsafe {
                    if width == 4 {
                        let bytes = if ok { 16 } else { 0 };
                        cp_async_16_zfill(bdst + d, o.bm.add(bsrc as usize).cast(), bytes);
                        if MODE == FULL {
                            cp_async_16_zfill(cdst + d, o.cm.add(csrc as usize).cast(), bytes);
                        }
                    } else {
                        let bytes = if ok { 4 } else { 0 };
                        cp_async_4_zfill(bdst + d, o.bm.add(bsrc as usize).cast(), bytes);
                        if MODE == FULL {
                            cp_async_4_zfill(cdst + d, o.cm.add(csrc as usize).cast(), bytes);
                        }
                    }
                }
                e += THREADS;
            }
            let xdst = sa + 4 * (lay.xt as usize + k * pt * qs) as u32;
            let mut e = tid;
            while e < Q * pt {
                let (t, pp) = (e / pt, e % pt);
                let ok = t0 + (t as u64) < len && p0 + (pp as u64) < pd;
                let rx = &s.rows.x;
                let src = if ok {
                    rx.offset as u64 + (b * len + t0 + t as u64) * rx.row as u64 + h * pd + p0 + pp as u64
                } else {
                    0
                };
                // SAFETY: when `ok`, (b, t0 + t, h, p0 + pp) lies inside x; the destination
                // inside buffer k.
                unsafe {
                    cp_async_4_zfill(
                        xdst + 4 * (pp * qs + t) as u32,
                        o.x.add(src as usize).cast(),
                        4 * ok as u32,
                    )
                };
                e += THREADS;
            }
            if tid < Q {
                let ok = t0 + (tid as u64) < len;
                let rd = &s.rows.dt;
                let src =
                    if ok { rd.offset as u64 + (b * len + t0 + tid as u64) * rd.row as u64 + h } else { 0 };
                let d = sa + 4 * (lay.dt_raw as usize + k * Q + tid) as u32;
                // SAFETY: when `ok`, (b, t0 + tid, h) lies inside dt.
                unsafe { cp_async_4_zfill(d, o.dt.add(src as usize).cast(), 4 * ok as u32) };
            }
            cp_async_commit();
        };
        if c_lo < c_hi {
            issue(c_lo, 0);
        }
        // Σ dt A over the span (`STATES`).
        let mut log_decay = 0.0f32;
        let (gs, bw) = (at(lay.g as usize), at(lay.bw as usize));
        let (dts, cum, ecum, w) =
            (at(lay.dt as usize), at(lay.cum as usize), at(lay.ecum as usize), at(lay.w as usize));
        let mut c = c_lo;
        while c < c_hi {
            let k = ((c - c_lo) % 2) as usize;
            let t0 = c * Q as u64;
            // Chunk c has landed (its group is the only one in flight) and every thread is done
            // with chunk c - 1, whose buffers the next copies overwrite.
            cp_async_wait_all();
            sync_threads();
            if c + 1 < c_hi {
                issue(c + 1, 1 - k);
            }
            let (bs, cs) = (at(lay.b as usize + k * Q * sn), at(lay.c as usize + k * Q * sn));
            let xt = at(lay.xt as usize + k * pt * qs);
            let (s_cur, s_next) = (at(lay.s as usize + k * pt * sn), at(lay.s as usize + (1 - k) * pt * sn));
            // Warp 0: dt, the cumulative dt A (a warp scan), its exp, each step's weight to the end.
            if tid < Q {
                // SAFETY: tid < SSD_CHUNK: inside the raw dt buffer k.
                let raw = unsafe { *at(lay.dt_raw as usize + k * Q + tid) };
                let d = if t0 + (tid as u64) < len { ssd_dt(s, raw, bias) } else { 0.0 };
                let mut v = d * av;
                let mut off = 1u32;
                while off < Q as u32 {
                    let from = f32::from_bits(shfl_idx_u32(v.to_bits(), (tid as u32).wrapping_sub(off) & 31));
                    if tid as u32 >= off {
                        v += from;
                    }
                    off *= 2;
                }
                let last = f32::from_bits(shfl_idx_u32(v.to_bits(), Q as u32 - 1));
                // SAFETY: tid < SSD_CHUNK: inside the four step arrays.
                unsafe {
                    *dts.add(tid) = d;
                    *cum.add(tid) = v;
                    *ecum.add(tid) = math::exp(v);
                    *w.add(tid) = math::exp(last - v) * d;
                }
            }
            // C_i · B_j for the thread's rows i and columns j.
            let mut brows = [cs.cast_const(); 4];
            for (jc, r) in brows.iter_mut().enumerate() {
                *r = bs.wrapping_add((tj + 8 * jc) * sn);
            }
            let cb = if MODE == FULL {
                // SAFETY: rows < SSD_CHUNK of the landed buffer k, state_pad values each.
                unsafe { dots::<2, 4>([cs.add(ti * sn), cs.add((ti + 16) * sn)], brows, np) }
            } else {
                [[0.0; 4]; 2]
            };
            sync_threads();
            // G, masked and decayed; B transposed and weighted.
            unroll!(r in SLOTS => {
                if MODE == FULL && r < 2 {
                    let i = ti + 16 * r;
                    // SAFETY: i, j < SSD_CHUNK: inside the step arrays and G.
                    unsafe {
                        let ci = *cum.add(i);
                        unroll!(jc in SLOTS => {
                            if jc < 4 {
                                let j = tj + 8 * jc;
                                let v = cb[r][jc];
                                let gv = if j <= i { v * math::exp(ci - *cum.add(j)) * *dts.add(j) } else { 0.0 };
                                *gs.add(i * qs + j) = gv;
                            }
                        });
                    }
                }
            });
            let mut e = tid;
            while e < np * Q {
                let (n, j) = (e / Q, e % Q);
                // SAFETY: n < state_pad, j < SSD_CHUNK: inside B's buffer k and the weighted copy.
                unsafe { *bw.add(n * qs + j) = *w.add(j) * *bs.add(j * sn + n) };
                e += THREADS;
            }
            sync_threads();
            // y of the thread's steps i and head channels: the chunk's own part, the carried
            // state's, D x, the gate.
            let mut xrows = [xt.cast_const(); C];
            let mut srows = [s_cur.cast_const(); C];
            for cc in 0..C {
                xrows[cc] = xt.wrapping_add((tj + 8 * cc) * qs);
                srows[cc] = s_cur.wrapping_add((tj + 8 * cc) * sn);
            }
            // SAFETY: rows of G, C (buffer k), x (buffer k) and the state (buffer k), written
            // before the last barrier.
            let (diag, carried) = if MODE == FULL {
                unsafe {
                    (
                        dots::<2, C>([gs.add(ti * qs), gs.add((ti + 16) * qs)], xrows, Q),
                        dots::<2, C>([cs.add(ti * sn), cs.add((ti + 16) * sn)], srows, np),
                    )
                }
            } else {
                ([[0.0; C]; 2], [[0.0; C]; 2])
            };
            unroll!(r in SLOTS => {
                let i = ti + 16 * r;
                let t = t0 + i as u64;
                // SAFETY: i < SSD_CHUNK (r < 2).
                let decay = if r < 2 { unsafe { *ecum.add(i) } } else { 0.0 };
                unroll!(cc in SLOTS => {
                    let pp = tj + 8 * cc;
                    let gp = p0 + pp as u64;
                    if MODE == FULL && r < 2 && cc < C && t < len && gp < pd {
                        let at_y = ((b * len + t) * heads + h) * pd + gp;
                        let rz = &s.rows.z;
                        let at_z = rz.offset as u64 + (b * len + t) * rz.row as u64 + h * pd + gp;
                        // SAFETY: pp < p_tile, i < SSD_CHUNK: inside x's buffer k; (b, t, h, gp)
                        // lies inside y and, through its row view, z.
                        unsafe {
                            let mut out = math::fma(decay, carried[r][cc], diag[r][cc]);
                            out = math::fma(dv[cc], *xt.add(pp * qs + i), out);
                            if !o.z.is_null() {
                                out *= math::silu(*o.z.add(at_z as usize));
                            }
                            *o.y.add(at_y as usize) = out;
                        }
                    }
                });
            });
            // The state at the chunk's end, into the other buffer.
            // SAFETY: Q - 1 < SSD_CHUNK.
            let (end_decay, end_cum) = unsafe { (*ecum.add(Q - 1), *cum.add(Q - 1)) };
            log_decay += end_cum;
            let mut n0 = ti;
            while n0 < np {
                // SAFETY: rows n0, n0 + 16 < state_pad of the weighted B; rows of x.
                let acc = unsafe { dots::<2, C>([bw.add(n0 * qs), bw.add((n0 + 16) * qs)], xrows, Q) };
                unroll!(r in SLOTS => {
                    unroll!(cc in SLOTS => {
                        if r < 2 && cc < C {
                            let at_s = (tj + 8 * cc) * sn + n0 + 16 * r;
                            // SAFETY: inside both state buffers.
                            unsafe { *s_next.add(at_s) = math::fma(end_decay, *s_cur.add(at_s), acc[r][cc]) };
                        }
                    });
                });
                n0 += 32;
            }
            c += 1;
        }
        // The span's end state, from the buffer its last chunk wrote: the final state (full, last
        // span), or the span's state change at its place (`STATES`, with its decay).
        sync_threads();
        let s_end = at(lay.s as usize + ((c_hi - c_lo) % 2) as usize * pt * sn);
        let (to, at_span) = match MODE {
            FULL if span + 1 == spans => (o.final_state, 0),
            FULL => (core::ptr::null_mut(), 0),
            _ => (core::ptr::null_mut(), span * elems),
        };
        let state_out = if MODE == FULL && span + 1 < spans { core::ptr::null_mut() } else { o.state_out };
        let mut e = tid;
        while e < pt * np {
            let (pp, n) = (e / np, e % np);
            let gp = p0 + pp as u64;
            if (n as u64) < nn && gp < pd {
                let i = at_span + (state_row + gp) * nn + n as u64;
                // SAFETY: inside the state buffer and (b, h, gp, n) inside the states (of the
                // span's place in the state changes, `STATES`).
                unsafe {
                    let v = *s_end.add(pp * sn + n);
                    store_if(state_out, i, v);
                    store_if(to, i, v);
                }
            }
            e += THREADS;
        }
        if MODE == STATES && tile == 0 && tid == 0 {
            // SAFETY: span < spans, b * heads + h < batch * heads: inside the decays.
            unsafe { *decays.add((span * batch * heads + b * heads + h) as usize) = math::exp(log_decay) };
        }
        // Every thread is done with the shared memory before the next item's state lands.
        sync_threads();
        item += grid_dim_x() as u64;
    }
}
