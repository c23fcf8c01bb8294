//! Timing and profiling of a session's steps: whole executions, each step launched alone, and what
//! each step adds to the replayed CUDA graph.

use cudarc::driver::result;
use planner::ValueId;

use super::Session;
use crate::error::HostError;
use crate::specialize::Key;
use crate::tensor::HostTensor;

impl Session<'_> {
    /// Device time in microseconds of each of `iters` executions of the last binding (graph
    /// replay or step launches, per `cuda_graph`), measured with CUDA events.
    pub fn time_executions(&mut self, iters: usize, cuda_graph: bool) -> Result<Vec<f64>, HostError> {
        let saved = self.options.cuda_graph;
        self.options.cuda_graph = cuda_graph;
        let mut times = Vec::with_capacity(iters);
        let mut outcome = Ok(());
        for _ in 0..iters {
            let (ctx, stream) = (self.ctx, self.stream.clone());
            match ctx.time_on(&stream, || self.execute()) {
                Ok(ms) => times.push(ms as f64 * 1e3),
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        self.options.cuda_graph = saved;
        outcome.map(|()| times)
    }

    /// Device time of each step of the last run's binding: the steps are launched eagerly one
    /// after another with an event recorded between every two of them (one wait per execution,
    /// so the cost is linear in the steps), and each step's time is the median over `iters`
    /// executions of the time between its two events, in microseconds, in step order. A step
    /// shorter than a launch may show the launch's time (the host enqueues slower than the device
    /// runs it). The hoisted steps (which a run does not launch) are timed too: they write the
    /// same values again.
    pub fn profile_steps(&mut self, iters: usize) -> Result<Vec<f64>, HostError> {
        let binding = self.plan_binding()?;
        // Every step runs, the hoisted ones too: the arena is this binding's after it.
        self.hoisted_in_arena = None;
        let c = &self.compiled[&binding];
        let at = self.addresses(c);
        let n = c.plan.steps.len();
        let events = (0..=n).map(|_| self.ctx.event()).collect::<Result<Vec<_>, _>>()?;
        let record = |e: &cudarc::driver::CudaEvent| {
            e.record(&self.stream).map_err(HostError::driver("recording an event"))
        };
        let mut samples = vec![Vec::with_capacity(iters); n];
        for _ in 0..iters.max(1) {
            record(&events[0])?;
            for (i, step) in c.plan.steps.iter().enumerate() {
                self.launch_step(&at, i, step)?;
                record(&events[i + 1])?;
            }
            events[n].synchronize().map_err(HostError::driver("waiting for an event"))?;
            for (i, s) in samples.iter_mut().enumerate() {
                let ms =
                    events[i].elapsed_ms(&events[i + 1]).map_err(HostError::driver("reading event times"))?;
                s.push(ms as f64 * 1e3);
            }
        }
        self.hoisted_in_arena = Some(binding);
        Ok(samples.into_iter().map(median).collect())
    }

    /// What each step of the last run's binding costs inside the replayed CUDA graph: for step
    /// `i`, the median replay time of the whole graph minus that of the graph captured without
    /// step `i` (`iters` replays each, microseconds, in step order; 0 for a hoisted step, which
    /// is not in the graph). Unlike [`Self::profile_steps`]
    /// this counts what overlaps (programmatic dependent launch, a kernel's prologue under the
    /// previous one) and what does not, so the numbers say what removing or fusing a step would
    /// save. The runs it makes leave the outputs and any recurrent state undefined: run the
    /// session again (or [`Self::reset_state`]) before using its results.
    pub fn profile_steps_in_graph(&mut self, iters: usize) -> Result<Vec<f64>, HostError> {
        let binding = self.plan_binding()?;
        self.run_hoisted(&binding)?;
        let replay = |skip: Option<usize>| -> Result<f64, HostError> {
            let Some(graph) = self.capture(&binding, skip)? else { return Ok(0.0) };
            let mut t = Vec::with_capacity(iters.max(1));
            for k in 0..iters.max(1) + 3 {
                let ms = self.ctx.time_on(&self.stream, || {
                    graph.launch().map_err(HostError::driver("replaying a CUDA graph"))
                })?;
                // The first replays warm the graph up.
                if k >= 3 {
                    t.push(ms as f64 * 1e3);
                }
            }
            Ok(median(t))
        };
        let whole = replay(None)?;
        let plan = &self.compiled[&binding].plan;
        // The hoisted steps are not in the graph.
        (0..plan.steps.len())
            .map(|i| if i < plan.hoisted { Ok(0.0) } else { replay(Some(i)).map(|t| whole - t) })
            .collect()
    }

    /// Device time in microseconds of copying `inputs` to the device and of copying the outputs
    /// back, each `iters` times, for the last run's binding: CUDA events around each direction's
    /// copies on the session's stream, from and to pageable host memory as [`Self::run`] copies.
    /// The inputs must have the shapes of that run. Staged models copy inside their stages: for
    /// them this is an error.
    pub fn time_copies(
        &mut self,
        inputs: &[(String, HostTensor)],
        iters: usize,
    ) -> Result<(Vec<f64>, Vec<f64>), HostError> {
        let binding = self.plan_binding()?;
        let c = self.compiled.get_mut(&binding).expect("checked by plan_binding");
        let mut feeds = Vec::with_capacity(c.plan.inputs.len());
        for (v, buf) in c.plan.inputs.iter().zip(&c.inputs) {
            let name = &c.plan.values[v.index()].name;
            let t = inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t.to_const()).ok_or_else(|| {
                HostError::Arena { detail: format!("time_copies: input `{name}` not given") }
            })?;
            if t.bytes.len() as u64 > buf.len() as u64 {
                return Err(HostError::Arena {
                    detail: format!("time_copies: input `{name}` is larger than in the last run"),
                });
            }
            feeds.push(t);
        }
        let mut host_out: Vec<Vec<u8>> = c.outputs.iter().map(|o| vec![0u8; o.len()]).collect();
        let (ctx, stream) = (self.ctx, self.stream.clone());
        let (mut h2d, mut d2h) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
        for _ in 0..iters {
            let c = self.compiled.get_mut(&binding).expect("checked by plan_binding");
            let ms = ctx.time_on(&stream, || {
                for (t, buf) in feeds.iter().zip(c.inputs.iter_mut()) {
                    stream
                        .memcpy_htod(&t.bytes[..], &mut buf.slice_mut(..t.bytes.len()))
                        .map_err(HostError::driver("copying an input to the device"))?;
                }
                Ok(())
            })?;
            h2d.push(ms as f64 * 1e3);
            let ms = ctx.time_on(&stream, || {
                for (o, dst) in c.outputs.iter().zip(host_out.iter_mut()) {
                    stream.memcpy_dtoh(o, dst).map_err(HostError::driver("copying an output to the host"))?;
                }
                Ok(())
            })?;
            d2h.push(ms as f64 * 1e3);
        }
        Ok((h2d, d2h))
    }

    /// The values each step of the last run's binding writes, as that step leaves them, in step
    /// order as (step index, value name, tensor): every step (the hoisted ones too) is launched
    /// alone and waited for, and what it wrote is copied to the host before a later step can
    /// reuse the memory. It finds the first step where two runs part (`ferrofuse run
    /// --dump-steps`: two session options, or the GPU against values computed elsewhere). The
    /// steps run as an execution does: the outputs end as a run leaves them, and the recurrent
    /// state of a stateful plan advances once.
    ///
    /// A value several steps write (a Concat's parts, one copy each) is dumped after the last of
    /// them, whole; a GEMM result written in the layout of the transpose that reads it
    /// ([`planner::plan::Plan::stored_as`]) is dumped as that transpose's value, under its name,
    /// since that is what its buffer holds. Either way each dumped tensor is its named value.
    pub fn dump_steps(&mut self) -> Result<Vec<(usize, String, HostTensor)>, HostError> {
        let binding = self.plan_binding()?;
        // Every step runs, the hoisted ones too: the arena is this binding's after it.
        self.hoisted_in_arena = None;
        let c = &self.compiled[&binding];
        let at = self.addresses(c);
        // What each step writes (the plan was validated: its arguments cover it), and the last
        // step that writes each value.
        let writes: Vec<Vec<ValueId>> =
            c.plan.steps.iter().map(|s| s.reads_writes().map(|(_, w)| w).unwrap_or_default()).collect();
        let last_write: std::collections::HashMap<ValueId, usize> =
            writes.iter().enumerate().flat_map(|(i, w)| w.iter().map(move |&v| (v, i))).collect();
        let mut out = Vec::new();
        for (i, step) in c.plan.steps.iter().enumerate() {
            self.launch_step(&at, i, step)?;
            let wait = self.stream.synchronize();
            wait.map_err(|source| {
                super::launch::step_error(i, step, HostError::Driver { action: "", source })
            })?;
            for &v in writes[i].iter().filter(|v| last_write.get(v) == Some(&i)) {
                let pv = &c.plan.values[c.plan.stored_as.get(&v).unwrap_or(&v).index()];
                let (Some(dims), Some(bytes)) = (pv.dims.clone(), pv.bytes()) else { continue };
                let ptr = self.address(&at, v)?;
                let mut host = vec![0u8; bytes as usize];
                if !host.is_empty() {
                    // SAFETY: `ptr` addresses the value's buffer of at least `bytes` (the plan's
                    // sizes); the copy is ordered on the session's stream and waited for.
                    unsafe { result::memcpy_dtoh_async(&mut host, ptr, self.stream.cu_stream()) }
                        .map_err(HostError::driver("copying a step's value to the host"))?;
                    self.stream
                        .synchronize()
                        .map_err(HostError::driver("synchronizing the session stream"))?;
                }
                let t = HostTensor::from_const(&planner::ConstTensor::new(pv.dtype, dims, host)?)?;
                out.push((i, pv.name.clone(), t));
            }
        }
        self.hoisted_in_arena = Some(binding);
        Ok(out)
    }

    /// The last run's binding when it compiled to one plan (not a staged model).
    fn plan_binding(&self) -> Result<Key, HostError> {
        let binding = self.last_binding()?;
        if !self.compiled.contains_key(&binding) {
            return Err(HostError::Arena {
                detail: "this model runs in stages (data-dependent shapes): its steps are not one plan"
                    .into(),
            });
        }
        Ok(binding)
    }
}

/// The median of non-empty `t`.
fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}
