//! The data-dependent nodes a staged run meets ([`planner::stage::Frontier`]): NonZero and
//! NonMaxSuppression. Each runs as a launch that counts, a read-back of the counts (the one wait
//! on the device per node), a block of the run-time region sized from them, and a launch that
//! writes the result there.

use std::collections::HashMap;

use planner::plan::{Nms, NonZero, Step, UniqueSteps};
use planner::stage::{Frontier, FrontierKind};
use planner::{DType, ValueId};

use super::staged::Held;
use super::{Addresses, Session};
use crate::error::HostError;

/// The launches of one data-dependent node.
pub(super) enum Launch {
    /// NonZero's.
    NonZero(NonZero),
    /// NonMaxSuppression's.
    Nms(Nms),
    /// Unique's.
    Unique(UniqueSteps),
}

impl Launch {
    /// The launches of `f` on a device of `sm_count` multiprocessors.
    pub(super) fn new(f: &Frontier, sm_count: u32) -> Result<Launch, HostError> {
        let refused = |op: &'static str| {
            move |detail: String| HostError::Unsupported { node: f.label.clone(), op, detail }
        };
        Ok(match &f.kind {
            FrontierKind::NonZero => Launch::NonZero(
                NonZero::new(&f.label, &f.dims, f.dtype, sm_count).map_err(refused("NonZero"))?,
            ),
            FrontierKind::Unique { outer, len, inner, sorted, .. } => Launch::Unique(
                UniqueSteps::new(&f.label, (*outer, *len, *inner), f.dtype, *sorted, sm_count)
                    .map_err(refused("Unique"))?,
            ),
            FrontierKind::NonMaxSuppression { center_point_box, scores_dims, .. } => {
                if f.dtype != DType::F32 {
                    return Err(refused("NonMaxSuppression")(format!(
                        "boxes are {}; the kernel takes f32",
                        f.dtype
                    )));
                }
                Launch::Nms(
                    Nms::new(&f.label, &f.dims, scores_dims, *center_point_box, sm_count)
                        .map_err(refused("NonMaxSuppression"))?,
                )
            }
        })
    }
}

impl Session<'_> {
    /// Runs data-dependent node `f`; returns its output's data-dependent length.
    pub(super) fn run_frontier(
        &mut self,
        f: &Frontier,
        launch: &Launch,
        env: &mut HashMap<String, Held>,
    ) -> Result<usize, HostError> {
        match (launch, &f.kind) {
            (Launch::NonZero(nz), _) => self.run_non_zero(f, nz, env),
            (Launch::Nms(nms), FrontierKind::NonMaxSuppression { scores, scalars, .. }) => {
                self.run_nms(f, nms, (scores, scalars), env)
            }
            (Launch::Unique(u), FrontierKind::Unique { axis, outer, inner, len, outputs, .. }) => {
                self.run_unique(f, u, (*axis, *outer, *len, *inner), outputs, env)
            }
            _ => Err(HostError::Arena {
                detail: format!("`{}`: its launches are not its operator's", f.label),
            }),
        }
    }

    /// Launches the counting `step` (at `at`), then reads the `bytes` at region `offset` back:
    /// the one wait on the device of a data-dependent node. A fault names the step's kernel.
    fn count_back(
        &mut self,
        at: &Addresses,
        step: &Step,
        (offset, bytes): (u64, u64),
    ) -> Result<Vec<u8>, HostError> {
        self.launch_step(at, 0, step)?;
        let raw = self.region.read(&self.stream, offset, bytes)?;
        self.stream.synchronize().map_err(|e| match step {
            Step::Kernel { label, kernel, .. } => HostError::Step {
                step: 0,
                label: label.clone(),
                kernel: kernel.symbol(),
                detail: e.to_string(),
            },
            Step::Copy { .. } => HostError::driver("reading a count back")(e),
        })?;
        Ok(raw)
    }

    /// Runs one Unique: groups the slices, reads the distinct count back, places and writes the
    /// outputs. Returns the distinct count.
    fn run_unique(
        &mut self,
        f: &Frontier,
        u: &UniqueSteps,
        (axis, outer, len, inner): (Option<usize>, usize, usize, usize),
        outputs: &[Option<String>; 4],
        env: &mut HashMap<String, Held>,
    ) -> Result<usize, HostError> {
        let x = env.get(&f.input).map(|h| h.offset).ok_or_else(|| HostError::Arena {
            detail: format!("Unique `{}` input `{}` is not held by the run", f.label, f.input),
        })?;
        let scratch = self.hold(u.scratch_bytes(), DType::I64, Vec::new())?.offset;
        let ids = ValueId;
        let run = (|| {
            let base = self.region.base(&self.stream);
            let at = Addresses::bare(vec![(ids(0), base + x), (ids(1), base + scratch)], Vec::new());
            let raw = self.count_back(&at, &u.count_step(ids(0), ids(1)), (scratch, 8))?;
            let count = raw.as_chunks::<8>().0.first().map_or(0, |c| i64::from_le_bytes(*c).max(0) as usize);
            // Y keeps the input's dims with the axis' extent the count (flattened: 1-D).
            let y_dims = match axis {
                None => vec![count],
                Some(a) => {
                    let mut d = f.dims.clone();
                    d[a] = count;
                    d
                }
            };
            let es = f.dtype.size_bytes() as u64;
            // Each output is held by the run as soon as it is placed (freed with it should a later
            // step fail).
            let mut keep = |me: &mut Self, k: usize, h: Held| -> Result<(usize, u64), HostError> {
                let at = h.offset;
                if let Some(name) = &outputs[k] {
                    me.hold_as(env, name, h)?;
                }
                Ok((k, at))
            };
            let y = self.hold((outer * count * inner) as u64 * es, f.dtype, y_dims)?;
            let mut held = vec![keep(self, 0, y)?];
            for (k, n) in [(1usize, count), (2, len), (3, count)] {
                if outputs[k].is_some() {
                    let h = self.hold(8 * n as u64, DType::I64, vec![n])?;
                    held.push(keep(self, k, h)?);
                }
            }
            let base = self.region.base(&self.stream);
            let slot = |k: usize| held.iter().find(|(j, _)| *j == k).map(|_| ids(2 + k as u32));
            let at = Addresses::bare(
                vec![(ids(0), base + x), (ids(1), base + scratch)],
                held.iter().map(|(k, off)| (ids(2 + *k as u32), base + off)).collect(),
            );
            if count > 0 || len > 0 {
                let step = u.write_step((ids(0), ids(1)), ids(2), [slot(1), slot(2), slot(3)], count as u64);
                self.launch_step(&at, 1, &step)?;
            }
            Ok(count)
        })();
        // The write launch is queued before this free; a later reuse is ordered after it.
        self.region.free(scratch)?;
        run
    }

    /// Runs one NonMaxSuppression: keeps and counts, reads the counts back, places and writes the
    /// `(batch, class, box)` rows. Returns their number.
    fn run_nms(
        &mut self,
        f: &Frontier,
        nms: &Nms,
        (scores, scalars): (&String, &[Option<String>; 3]),
        env: &mut HashMap<String, Held>,
    ) -> Result<usize, HostError> {
        let held = |name: &String| {
            env.get(name).map(|h| h.offset).ok_or_else(|| HostError::Arena {
                detail: format!("NonMaxSuppression `{}` input `{name}` is not held by the run", f.label),
            })
        };
        let (boxes, scores) = (held(&f.input)?, held(scores)?);
        // An empty scalar is one not given (as the reference reads it).
        let given = |name: &String| env.get(name).is_none_or(|h| h.bytes > 0);
        let scalars: Vec<Option<u64>> = scalars
            .iter()
            .map(|s| s.as_ref().filter(|n| given(n)).map(held).transpose())
            .collect::<Result<_, _>>()?;
        let slots = self.hold(nms.slots_bytes(), DType::I32, Vec::new())?.offset;
        let counted = self.hold(nms.counts_bytes(), DType::I64, Vec::new())?.offset;
        let ids = |k: u32| ValueId(k);
        let run = (|| {
            let base = self.region.base(&self.stream);
            let mut inputs = vec![(ids(0), base + boxes), (ids(1), base + scores)];
            let mut scalar_ids = [None; 3];
            for (k, s) in scalars.iter().enumerate() {
                if let Some(off) = s {
                    inputs.push((ids(2 + k as u32), base + off));
                    scalar_ids[k] = Some(ids(2 + k as u32));
                }
            }
            inputs.extend([(ids(5), base + slots), (ids(6), base + counted)]);
            let at = Addresses::bare(inputs.clone(), Vec::new());
            let select = nms.select_step(ids(0), ids(1), scalar_ids, (ids(5), ids(6)));
            let raw = self.count_back(&at, &select, (counted, nms.counts_bytes()))?;
            let rows = Nms::count(&raw);
            let bytes = rows * 3 * 8;
            let y = self.hold(bytes, DType::I64, vec![rows as usize, 3])?;
            // Held by the run from here on (freed with it should the launch fail).
            let y_at = y.offset;
            self.hold_as(env, &f.output, y)?;
            if rows > 0 {
                let base = self.region.base(&self.stream);
                let at = Addresses::bare(
                    vec![(ids(5), base + slots), (ids(6), base + counted)],
                    vec![(ids(7), base + y_at)],
                );
                self.launch_step(&at, 1, &nms.write_step(ids(5), ids(6), ids(7)))?;
            }
            Ok(rows as usize)
        })();
        // The write launch is queued before these frees; a later reuse is ordered after it.
        self.region.free(slots)?;
        self.region.free(counted)?;
        run
    }

    /// Runs one NonZero: counts, reads the count back, places and writes the result. Returns the
    /// count.
    fn run_non_zero(
        &mut self,
        f: &Frontier,
        nz: &NonZero,
        env: &mut HashMap<String, Held>,
    ) -> Result<usize, HostError> {
        let x = env.get(&f.input).map(|h| h.offset).ok_or_else(|| HostError::Arena {
            detail: format!("NonZero `{}` input `{}` is not held by the run", f.label, f.input),
        })?;
        let partials = self.hold(nz.partials_bytes(), DType::I64, Vec::new())?.offset;
        let (xv, pv, yv) = (ValueId(0), ValueId(1), ValueId(2));
        let counted = (|| {
            let base = self.region.base(&self.stream);
            let at = Addresses::bare(vec![(xv, base + x), (pv, base + partials)], Vec::new());
            let raw = self.count_back(&at, &nz.count_step(xv, pv), (partials, nz.partials_bytes()))?;
            let count = NonZero::count(&raw);
            let rank = f.dims.len() as u64;
            let bytes = rank.checked_mul(count).and_then(|n| n.checked_mul(8)).ok_or_else(|| {
                HostError::Arena { detail: format!("NonZero `{}` output size overflows", f.label) }
            })?;
            let y = self.hold(bytes, DType::I64, vec![rank as usize, count as usize])?;
            // Held by the run from here on (freed with it should the launch fail).
            let y_at = y.offset;
            self.hold_as(env, &f.output, y)?;
            if bytes > 0 {
                let base = self.region.base(&self.stream);
                let at =
                    Addresses::bare(vec![(xv, base + x), (pv, base + partials)], vec![(yv, base + y_at)]);
                self.launch_step(&at, 1, &nz.write_step(xv, pv, yv, count))?;
            }
            Ok(count as usize)
        })();
        // The write launch is queued before this free; a later block reuse is ordered after it.
        self.region.free(partials)?;
        counted
    }
}
