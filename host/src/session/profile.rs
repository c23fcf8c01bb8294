//! Timing and profiling of a session's steps: whole executions, each step launched alone, and what
//! each step adds to the replayed CUDA graph.

use super::Session;
use crate::error::HostError;
use cudarc::driver::sys;

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

    /// Device time of each step of the last run's binding, launched alone (eagerly, between two
    /// events on the session's stream): the median over `iters` executions, in microseconds, in
    /// step order. Launch gaps between steps are not included, so the sum is below the eager total.
    pub fn profile_steps(&mut self, iters: usize) -> Result<Vec<f64>, HostError> {
        let binding = self
            .last
            .clone()
            .ok_or_else(|| HostError::Arena { detail: "no run has bound the inputs yet".into() })?;
        let c = self.compiled.get(&binding).ok_or_else(|| HostError::Arena {
            detail: "this model runs in stages (data-dependent shapes): its steps are not one plan".into(),
        })?;
        let at = self.addresses(c);
        let mut samples = vec![Vec::with_capacity(iters); c.plan.steps.len()];
        for _ in 0..iters.max(1) {
            for (i, step) in c.plan.steps.iter().enumerate() {
                let ms = self.ctx.time_on(&self.stream, || self.launch_step(&at, i, step))?;
                samples[i].push(ms as f64 * 1e3);
            }
        }
        Ok(samples
            .into_iter()
            .map(|mut t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
            .collect())
    }
    /// What each step of the last run's binding costs inside the replayed CUDA graph: for step
    /// `i`, the median replay time of the whole graph minus that of the graph captured without
    /// step `i` (`iters` replays each, microseconds, in step order). Unlike [`Self::profile_steps`]
    /// this counts what overlaps (programmatic dependent launch, a kernel's prologue under the
    /// previous one) and what does not, so the numbers say what removing or fusing a step would
    /// save. The runs it makes leave the outputs and any recurrent state undefined: run the
    /// session again (or [`Self::reset_state`]) before using its results.
    pub fn profile_steps_in_graph(&mut self, iters: usize) -> Result<Vec<f64>, HostError> {
        let binding = self
            .last
            .clone()
            .ok_or_else(|| HostError::Arena { detail: "no run has bound the inputs yet".into() })?;
        let steps = match self.compiled.get(&binding) {
            Some(c) => c.plan.steps.len(),
            None => {
                return Err(HostError::Arena {
                    detail: "this model runs in stages (data-dependent shapes): its steps are not one plan"
                        .into(),
                });
            }
        };
        let replay = |skip: Option<usize>| -> Result<f64, HostError> {
            self.stream
                .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(HostError::driver("starting CUDA graph capture"))?;
            let launched = self.launch_steps_except(&binding, skip);
            let graph = self
                .stream
                .end_capture(sys::CUgraphInstantiate_flags(0))
                .map_err(HostError::driver("ending CUDA graph capture"))?;
            launched?;
            let Some(graph) = graph else { return Ok(0.0) };
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
            t.sort_by(f64::total_cmp);
            Ok(t[t.len() / 2])
        };
        let whole = replay(None)?;
        (0..steps).map(|i| replay(Some(i)).map(|t| whole - t)).collect()
    }
}
