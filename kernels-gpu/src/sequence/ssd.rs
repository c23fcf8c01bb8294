//! The Mamba-2 SSD scan, recurrent form: a lane group per state row, sequential over time; the
//! prefill's chunked form is `ssd_chunk.rs` (helpers and conventions: the parent module).

use super::{SsdOperands, each_channel, group_sums, lanes_fit, load_or, quot, rem, ssd_dt, store_if};
use crate::abi::{RowView, SsdScanParams};
use crate::intrinsics::{lane_id, shfl_idx_u32};
use crate::math;

/// Mamba-2 SSD scan, recurrent form (`Mamba2.step`): per `(b, head h)` and step t, with group
/// `g = h / (heads / groups)`: `dt <- dt + dt_bias[h]` (softplus if `dt_softplus`, then clamped to
/// `[dt_min, dt_max]`), `S <- exp(dt A[h]) S + dt (x ⊗ B_g)` with `S` of `head_dim × state`,
/// `y = S C_g + D x`, then `y <- y silu(z)` when z is given.
///
/// # Safety
/// Shapes as [`SsdScanParams`] states, products fitting in u64: y holds
/// `batch * len * heads * head_dim` f32; x, dt, Bm, Cm and z (when non-null) hold every element
/// their [`crate::abi::SsdRows`] views reach (`heads * head_dim`, `heads`, `groups * state`,
/// `groups * state` and `heads * head_dim` values at each of `batch * len` steps), none of them
/// overlapping y; A and dt_bias (when non-null) `heads`; D (when non-null) `heads` or, with
/// `d_per_channel`, `heads * head_dim`; the states (when non-null)
/// `batch * heads * head_dim * state`. Overlaps as for [`selective_scan_f32`]; `heads` is a
/// multiple of `groups >= 1`.
///
/// # Parameters
/// `p`; inputs x, dt, A, Bm, Cm, then the optional D, z, dt_bias (null when absent); the state
/// pointers (module doc); the output y.
///
/// # Thread mapping
/// As [`selective_scan_f32`], with one channel per state row `(b, h, p)`: a group of `p.lanes`
/// lanes owns the row's `state` elements; the groups of one warp serve neighbouring rows of the
/// same head, so they read the same B and C.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn ssd_scan_f32(
    p: SsdScanParams,
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
    let (n, lanes) = (p.state, p.lanes);
    if !lanes_fit(lanes, n) || p.groups == 0 || p.heads % p.groups != 0 {
        return;
    }
    let ops = SsdOperands { x, a, dt, bm, cm, dskip, z, dt_bias, state_in, state_out, final_state, y };
    // Slots a lane holds (uniform over the grid): the rows' loop is specialized on them, so that
    // a step's operands take 3 + 2·slots registers and `U` steps' fit twice over.
    // SAFETY: the kernel's contract, passed on.
    unsafe {
        match n.div_ceil(lanes) {
            1 => ssd_rows::<1, 8>(&p, &ops),
            2 => ssd_rows::<2, 8>(&p, &ops),
            3 | 4 => ssd_rows::<4, 4>(&p, &ops),
            _ => ssd_rows::<8, 2>(&p, &ops),
        }
    }
}

/// Every row of [`ssd_scan_f32`], `S` slots a lane, `U` steps at a time.
///
/// # Safety
/// As [`ssd_scan_f32`]; `S * lanes >= state`.
#[inline(always)]
unsafe fn ssd_rows<const S: usize, const U: usize>(p: &SsdScanParams, o: &SsdOperands) {
    let (heads, pd) = (p.heads as u64, p.head_dim as u64);
    let per_group = quot(heads, p.groups as u64);
    let rows = p.batch as u64 * heads * pd;
    each_channel(rows, p.lanes, |ch, active, sub| {
        let pi = rem(ch, pd);
        let h = rem(quot(ch, pd), heads);
        let (av, bias, dv) = if active {
            let di = if p.d_per_channel != 0 { h * pd + pi } else { h };
            // SAFETY: h < heads and h * head_dim + pi < heads * head_dim (only read when active).
            unsafe { (*o.a.add(h as usize), load_or(o.dt_bias, h, 0.0), load_or(o.dskip, di, 0.0)) }
        } else {
            (0.0, 0.0, 0.0)
        };
        let b = quot(ch, pd * heads);
        let row = SsdRow { ch, b, h, g: quot(h, per_group), pi, active, sub, av, bias, dv };
        // SAFETY: as this function's.
        unsafe { ssd_row::<S, U>(p, o, &row) }
    });
}

/// One state row `(b, h, pi)` of [`ssd_scan_f32`] as a lane group serves it.
struct SsdRow {
    ch: u64,
    b: u64,
    h: u64,
    g: u64,
    pi: u64,
    active: bool,
    sub: u32,
    /// `A[h]`, `dt_bias[h]` (0 when absent) and the row's `D` (0 when absent).
    av: f32,
    bias: f32,
    dv: f32,
}

/// What a lane of [`SsdRow`] reads for one step: x, dt, z (0 when absent) and its `S` slots of B
/// and C (0 past the state or the sequence).
#[derive(Clone, Copy)]
struct SsdStep<const S: usize> {
    x: f32,
    dt: f32,
    z: f32,
    b: [f32; S],
    c: [f32; S],
}

/// The recurrence of [`ssd_scan_f32`] over one row, `U` steps at a time: the next `U` steps'
/// operands are loaded before the current ones are computed, the state chain is one FMA a slot
/// and step, and the `U` outputs' lane sums shuffle together, so a step costs a fraction of a
/// load's latency instead of a load and a reduction in sequence. Offsets advance by each
/// operand's stride a step (x / y / z `heads · head_dim`, dt `heads`, B / C `groups · state`):
/// no index is unravelled in the loop.
///
/// # Safety
/// As [`ssd_scan_f32`]; `S * lanes >= state` (the slots hold the row's state).
#[inline(always)]
unsafe fn ssd_row<const S: usize, const U: usize>(p: &SsdScanParams, o: &SsdOperands, r: &SsdRow) {
    let (len, heads, pd, nn) = (p.len as u64, p.heads as u64, p.head_dim as u64, p.state as u64);
    let lanes = p.lanes as u64;
    let slot = |k: usize| r.sub as u64 + k as u64 * lanes;
    // Each operand's offset at step 0 and its step (`p.rows`); y is dense.
    let first = |v: RowView, inner: u64| (v.offset as u64 + r.b * len * v.row as u64 + inner, v.row as u64);
    let rows = &p.rows;
    let ((x0, xs), (z0, zs)) = (first(rows.x, r.h * pd + r.pi), first(rows.z, r.h * pd + r.pi));
    let ((dt0, dts), (b0, bs), (c0, cs)) =
        (first(rows.dt, r.h), first(rows.bm, r.g * nn), first(rows.cm, r.g * nn));
    let (y0, ys) = ((r.b * len * heads + r.h) * pd + r.pi, heads * pd);
    let zero = SsdStep { x: 0.0, dt: 0.0, z: 0.0, b: [0.0; S], c: [0.0; S] };
    // Steps `t0 .. t0 + U` (0 past the sequence).
    let load = |t0: u64| -> [SsdStep<S>; U] {
        let mut steps = [zero; U];
        if !r.active {
            return steps;
        }
        unroll!(u in SLOTS => {
            let t = t0 + u as u64;
            if u < U && t < len {
                let st = &mut steps[u];
                let (bo, co) = (b0 + t * bs, c0 + t * cs);
                // SAFETY: (b, t, h, pi) lies inside x, z and dt; (b, t, g, i < state) inside Bm,
                // Cm, each through its row view.
                unsafe {
                    st.x = *o.x.add((x0 + t * xs) as usize);
                    st.dt = *o.dt.add((dt0 + t * dts) as usize);
                    st.z = load_or(o.z, z0 + t * zs, 0.0);
                    unroll!(k in SLOTS => {
                        if k < S && slot(k) < nn {
                            st.b[k] = *o.bm.add((bo + slot(k)) as usize);
                            st.c[k] = *o.cm.add((co + slot(k)) as usize);
                        }
                    });
                }
            }
        });
        steps
    };
    let mut s = [0.0f32; S];
    unroll!(k in SLOTS => {
        if k < S && r.active && slot(k) < nn {
            // SAFETY: ch < batch * heads * head_dim, slot < state: inside the states.
            s[k] = unsafe { load_or(o.state_in, r.ch * nn + slot(k), 0.0) };
        }
    });
    let transform = |raw: f32| ssd_dt(p, raw, r.bias);
    let shared = lanes >= U as u64;
    let first_lane = lane_id() - r.sub;
    let mut cur = load(0);
    let mut t = 0;
    while t < len {
        let next = load(t + U as u64);
        // With at least `U` lanes a row, lane `sub` transforms step `sub % U`'s dt and takes its
        // decay (a softplus and an exp a lane and block, not a step), and the row's lanes read
        // them from there.
        let (mut d_mine, mut decay_mine) = (0.0f32, 1.0f32);
        if shared {
            let mine = r.sub as usize % U;
            let mut raw = 0.0f32;
            unroll!(u in SLOTS => {
                if u < U && mine == u {
                    raw = cur[u].dt;
                }
            });
            d_mine = transform(raw);
            decay_mine = math::exp(d_mine * r.av);
        }
        let mut acc = [0.0f32; U];
        unroll!(u in SLOTS => {
            // (Past the sequence the state is left as it is; the test is uniform over the warp.)
            if u < U && t + (u as u64) < len {
                let st = &cur[u];
                let (d, decay) = if shared {
                    let from = first_lane + u as u32;
                    (f32::from_bits(shfl_idx_u32(d_mine.to_bits(), from)),
                     f32::from_bits(shfl_idx_u32(decay_mine.to_bits(), from)))
                } else {
                    let d = transform(st.dt);
                    (d, math::exp(d * r.av))
                };
                let dx = d * st.x;
                unroll!(k in SLOTS => {
                    if k < S {
                        s[k] = math::fma(decay, s[k], dx * st.b[k]);
                        acc[u] = math::fma(s[k], st.c[k], acc[u]);
                    }
                });
            }
        });
        group_sums(&mut acc, p.lanes);
        if r.active && r.sub == 0 {
            let yb = y0 + t * ys;
            unroll!(u in SLOTS => {
                if u < U && t + (u as u64) < len {
                    let st = &cur[u];
                    let mut out = math::fma(r.dv, st.x, acc[u]);
                    if !o.z.is_null() {
                        out *= math::silu(st.z);
                    }
                    // SAFETY: y holds batch * len * heads * head_dim values.
                    unsafe { *o.y.add((yb + u as u64 * ys) as usize) = out };
                }
            });
        }
        cur = next;
        t += U as u64;
    }
    unroll!(k in SLOTS => {
        if k < S && r.active && slot(k) < nn {
            // SAFETY: inside the states.
            unsafe {
                store_if(o.state_out, r.ch * nn + slot(k), s[k]);
                store_if(o.final_state, r.ch * nn + slot(k), s[k]);
            }
        }
    });
}
