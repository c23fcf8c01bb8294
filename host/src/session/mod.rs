//! [`Session`]: runs a graph on the GPU from compiled plans.
//!
//! `Session::new` takes the graph; the first `run` for a binding of the symbolic input dims
//! compiles a plan (`planner::plan::compile`), uploads that plan's weights, sizes the arena and the
//! input/output buffers, runs the steps eagerly once and captures them as a CUDA graph; later runs
//! with the same binding only copy the inputs in, replay the graph and copy the outputs out — no
//! device allocation. A binding that needs a larger arena reallocates it and drops the graphs of
//! the other bindings (they hold the old addresses); their next run captures them again. Errors
//! name the step and its kernel.
//!
//! The plan's hoisted steps (`Plan::hoisted`: values of the weights alone, such as masks built
//! from constant positions) run before the first execution and are not in the graph; their
//! results stay in the arena. Bindings share the arena, so a run of a binding whose hoisted
//! results another binding's steps (or a staged run, or a new arena) may have overwritten runs
//! its hoisted steps again first.
//!
//! With [`SessionOptions::stateful`], the recurrent state of sequence nodes stays on the device
//! across runs (in one allocation, `state.rs`) until [`Session::reset_state`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaGraph, CudaSlice, CudaStream, DevicePtr};
use planner::plan::{Plan, PlanOptions, compile};
use planner::{Binding, Graph, ValueId};

use crate::specialize::{self, Key};

use crate::arena::{Arena, alloc};
use crate::device::Context;
use crate::error::HostError;
use crate::state::SessionState;
use crate::tensor::HostTensor;

mod ahead;
mod launch;
mod options;
mod profile;

use launch::Addresses;
use options::within_budget;
mod control;
mod frontier;
mod region;
mod staged;

pub use ahead::{PlanAhead, binding_of, plan_options};
pub use options::{Precision, SessionOptions};
pub use region::RegionStats;
pub use staged::MAX_STAGE_PLANS;

/// One binding's weights on the device (the plan's constants packed at 256-byte offsets), shared
/// by every session forked from the same one ([`Session::fork`]).
struct Weights {
    buf: CudaSlice<u8>,
    offsets: HashMap<ValueId, u64>,
}

impl Weights {
    /// The device address of each constant.
    fn addresses(&self, stream: &Arc<CudaStream>) -> Vec<(ValueId, u64)> {
        let base = self.buf.device_ptr(stream).0;
        self.offsets.iter().map(|(&v, &off)| (v, base + off)).collect()
    }
}

// SAFETY: the buffer is written once (the upload, before the `Weights` is shared) and only read by
// kernels afterwards; the host never touches it again, and cudarc's cross-stream event tracking,
// the only host-side state a `CudaSlice` mutates, is off for this context (`Context::new`).
unsafe impl Sync for Weights {}

/// Weights by plan key, shared between forked sessions.
type WeightCache = Arc<Mutex<HashMap<Key, Arc<Weights>>>>;

/// A captured CUDA graph.
struct Graphed(CudaGraph);

// SAFETY: a graph exec is a driver object that any thread may launch once the context is current
// (cudarc's launch makes it so); the session that owns it is used by one thread at a time
// (`&mut self`), so moving it to another thread is sound.
unsafe impl Send for Graphed {}

/// Device state of one compiled binding.
struct Compiled {
    plan: Plan,
    weights: Option<Arc<Weights>>,
    inputs: Vec<CudaSlice<u8>>,
    outputs: Vec<CudaSlice<u8>>,
    graph: Option<Graphed>,
    /// Its hoisted steps have run once with a wait after each (a fault named its step): later
    /// runs of them do not wait.
    hoisted_checked: bool,
}

/// A model ready to run on one device.
pub struct Session<'c> {
    ctx: &'c Context,
    stream: Arc<CudaStream>,
    graph: Graph,
    options: SessionOptions,
    arena: Arena,
    compiled: HashMap<Key, Compiled>,
    /// Stage plans of models with data-dependent shapes (`staged`).
    stages: HashMap<staged::StageKey, Arc<staged::StagePlan>>,
    /// The run-time region of those models.
    region: region::Region,
    /// The constants of their stage plans, shared between plans by content.
    stage_constants: staged::ConstPool,
    /// The last staged run's inputs (a staged [`Session::execute`] runs the stages on them again).
    staged_inputs: Vec<(String, HostTensor)>,
    weight_cache: WeightCache,
    /// Set once a compile needed the values of small integer inputs (shape operands fed as graph
    /// inputs; also the float roi / scales of Resize): from then on plans are specialized on those
    /// values too.
    specialize: bool,
    state: SessionState,
    allocations: u64,
    device_bytes: u64,
    last: Option<Key>,
    /// The binding whose hoisted steps' results the arena holds ([`Plan::hoisted`]): another
    /// binding's run, a stage, or a new arena overwrites them.
    hoisted_in_arena: Option<Key>,
    prepared: Option<PrepareReport>,
    /// A plan compiled ahead ([`Session::adopt_plan`]), taken by the first run of its binding.
    adopted: Option<PlanAhead>,
    /// The status word the kernels that check their data raise ([`planner::plan::Arg::Status`]),
    /// with its device address; allocated by the first run that needs it.
    status: Option<(CudaSlice<u32>, u64)>,
}

/// What preparing a binding's plan cost ([`Session::prepare_report`]): where a first run spends
/// its time before the first launch.
#[derive(Clone, Debug)]
pub struct PrepareReport {
    /// Compiling the plan (shape inference, fusion, lowering, memory planning).
    pub plan: std::time::Duration,
    /// Loading the plan's kernels (shipped, from the kernel cache or compiled, in parallel), on
    /// threads of their own while the weights upload.
    pub kernels: crate::device::LoadReport,
    /// Uploading the weights and allocating the arena and the input and output buffers.
    pub upload: std::time::Duration,
    /// Wall time of both: the kernel loads and the upload overlap.
    pub kernels_and_upload: std::time::Duration,
    /// The first execution, once it ran with graph capture: the eager launches (a wait after
    /// each step) and the capture with its instantiation.
    pub first_execution: Option<(std::time::Duration, std::time::Duration)>,
}

impl<'c> Session<'c> {
    /// A session for `graph` on `ctx`. Nothing is compiled or allocated until the first run.
    pub fn new(ctx: &'c Context, graph: Graph, options: SessionOptions) -> Result<Self, HostError> {
        planner::validate::graph(&graph)?;
        Ok(Session {
            ctx,
            stream: ctx.new_stream()?,
            graph,
            options,
            arena: Arena::new(ctx, 0)?,
            compiled: HashMap::new(),
            stages: HashMap::new(),
            region: region::Region::default(),
            stage_constants: staged::ConstPool::default(),
            staged_inputs: Vec::new(),
            weight_cache: WeightCache::default(),
            specialize: false,
            state: SessionState::default(),
            allocations: 0,
            device_bytes: 0,
            last: None,
            hoisted_in_arena: None,
            prepared: None,
            adopted: None,
            status: None,
        })
    }

    /// A session like [`Session::new`] whose arena is the caller's device buffer of `bytes` at
    /// `ptr` (sized with [`Session::required_arena_bytes`] on another session, or generously): the
    /// session never allocates an arena, and a binding that needs more than `bytes` is an error
    /// naming the sizes. Weights, inputs and outputs are still the session's own.
    ///
    /// # Safety
    /// `ptr` must be a device allocation of at least `bytes` bytes in `ctx`'s context, 256-byte
    /// aligned, that outlives the session and that nothing else uses while the session runs.
    /// Between runs the session keeps the results of its plans' hoisted steps in it
    /// (`Plan::hoisted`): a caller that lets something else write the buffer between two runs
    /// must call [`Session::arena_overwritten`] before the next one.
    pub unsafe fn with_external_arena(
        ctx: &'c Context,
        graph: Graph,
        options: SessionOptions,
        ptr: u64,
        bytes: u64,
    ) -> Result<Self, HostError> {
        let mut s = Session::new(ctx, graph, options)?;
        // SAFETY: forwarded from this function's contract.
        s.arena = unsafe { Arena::external(ptr, bytes) };
        Ok(s)
    }

    /// Arena bytes the plan for `dims` (a size for each symbolic input dim) needs: what to give
    /// [`Session::with_external_arena`]. Compiles that plan (and keeps it, with its weights and
    /// input/output buffers, as a run would). For a model run in stages it is the first stage's
    /// need; the later stages' depends on the counts.
    pub fn required_arena_bytes(&mut self, dims: &Binding) -> Result<u64, HostError> {
        let key = Key { dims: dims.clone(), values: Vec::new() };
        self.prepare(&key)?;
        Ok(match self.compiled.get(&key) {
            Some(c) => c.plan.memory.arena_bytes,
            None => self.stages.get(&(key, Binding::new())).map_or(0, |sp| sp.arena_bytes()),
        })
    }

    /// A new session for the same model that shares this one's weights on the device (for every
    /// binding either has compiled, or compiles later) but has its own stream, arena, input and
    /// output buffers and recurrent state: one copy of the weights serves several sessions, e.g.
    /// one per thread (a `Session` is `Send`). Nothing else is allocated until its first run.
    pub fn fork(&self) -> Result<Session<'c>, HostError> {
        let mut s = Session::new(self.ctx, self.graph.clone(), self.options)?;
        s.weight_cache = self.weight_cache.clone();
        s.specialize = self.specialize;
        Ok(s)
    }

    /// Device allocations made so far (arena, weights, input and output buffers): constant across
    /// runs once every binding in use has been seen.
    pub fn allocation_count(&self) -> u64 {
        self.allocations
            + self.arena.allocation_count()
            + self.state.allocation_count()
            + self.region.allocation_count()
    }

    /// Device bytes the session holds (weights, arena, input and output buffers).
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes + self.arena.bytes() + self.state.bytes() + self.region.bytes()
    }

    /// Checks that `bytes` more device memory for `what` stays within
    /// [`SessionOptions::max_memory`]; called before each allocation.
    pub(crate) fn charge(&self, what: impl FnOnce() -> String, bytes: u64) -> Result<(), HostError> {
        within_budget(self.options.max_memory, self.device_bytes(), bytes)
            .map_err(|(held, max)| HostError::Budget { what: what(), bytes, held, max })
    }

    /// Tells the session that something else wrote its arena (an external one shared between
    /// sessions, [`Session::with_external_arena`]): the next run computes its plan's hoisted
    /// steps (the values of the weights alone it keeps there between runs) again.
    pub fn arena_overwritten(&mut self) {
        self.hoisted_in_arena = None;
    }

    /// Zeroes the recurrent state of a stateful session: the next run starts a new sequence.
    pub fn reset_state(&mut self) -> Result<(), HostError> {
        self.state.reset(self.ctx, &self.stream)
    }

    /// The recurrent state slots of a stateful session (empty before its first run).
    pub fn state_slots(&self) -> &[planner::plan::StateSlot] {
        self.state.slots()
    }

    /// The current recurrent state named `name` (a node name), as f32.
    pub fn state(&self, name: &str) -> Result<HostTensor, HostError> {
        self.state.read(self.ctx, &self.stream, name)
    }

    /// Overwrites the recurrent state named `name` (restoring a checkpoint).
    pub fn load_state(&mut self, name: &str, t: &HostTensor) -> Result<(), HostError> {
        self.state.load(self.ctx, &self.stream, name, t)
    }

    /// Gives device memory back between runs: the arena shrinks to what the most recent binding
    /// needs (0 for a staged model, whose stages size it again on their next run) and the run-time
    /// region is freed. The captured CUDA graphs hold the old addresses and are dropped (captured
    /// again on their next run). Returns the bytes freed.
    pub fn shrink(&mut self) -> Result<u64, HostError> {
        self.stream.synchronize().map_err(HostError::driver("synchronizing the session stream"))?;
        let before = self.device_bytes();
        let need =
            self.last.as_ref().and_then(|k| self.compiled.get(k)).map_or(0, |c| c.plan.memory.arena_bytes);
        self.arena.shrink_to(self.ctx, need)?;
        self.hoisted_in_arena = None;
        self.region.release()?;
        self.compiled.values_mut().for_each(|c| c.graph = None);
        Ok(before - self.device_bytes())
    }

    /// Hands the session a plan of its graph compiled ahead ([`PlanAhead::compile`], for example
    /// while the context was being created): the first run of its binding uses it instead of
    /// folding and compiling again. A plan compiled with other options than this session's (other
    /// session options, another device) is refused (returns false) and the run compiles its own.
    pub fn adopt_plan(&mut self, ahead: PlanAhead) -> bool {
        if ahead.options != self.plan_options() {
            return false;
        }
        self.adopted = Some(ahead);
        true
    }

    /// What preparing the most recently compiled (single-plan) binding cost.
    pub fn prepare_report(&self) -> Option<&PrepareReport> {
        self.prepared.as_ref()
    }

    /// Compiles the plan for `dims` and loads its kernels (filling the kernel cache) without
    /// running it: `ferrofuse warmup`. Returns what the kernel loads did (for a model run in
    /// stages, the first stage's).
    pub fn warmup(&mut self, dims: &Binding) -> Result<crate::device::LoadReport, HostError> {
        let (before, start) = (self.ctx.load_history().loads.len(), std::time::Instant::now());
        self.required_arena_bytes(dims)?;
        let mut report = self.ctx.load_history();
        report.loads.drain(..before.min(report.loads.len()));
        report.wall = start.elapsed();
        report.threads = Context::compile_threads();
        Ok(report)
    }

    /// Bindings whose steps are captured as a CUDA graph (replayed by their next run).
    pub fn captured_graphs(&self) -> usize {
        self.compiled.values().filter(|c| c.graph.is_some()).count()
    }

    /// The plan of the most recent run's binding.
    pub fn last_plan(&self) -> Option<&Plan> {
        self.compiled.get(self.last.as_ref()?).map(|c| &c.plan)
    }

    /// The binding of symbolic dims that `inputs` imply, after checking names, dtypes and shapes.
    /// The plan key of a run: `dims`, plus the values of the small integer inputs when the session
    /// specializes.
    fn key(&self, dims: Binding, inputs: &[(String, HostTensor)]) -> Key {
        let values = if self.specialize { specialize::values(&self.graph, inputs) } else { Vec::new() };
        Key { dims, values }
    }

    /// Whether some input is a small tensor a plan could be specialized on.
    fn can_specialize(&self, inputs: &[(String, HostTensor)]) -> bool {
        inputs.iter().any(|(n, t)| specialize::specializable(&self.graph, n, t))
    }

    /// The graph a plan for `key` compiles: its specialized inputs become constants.
    fn specialized(&self, key: &Key) -> Graph {
        specialize::fold_constants(specialize::graph(&self.graph, key))
    }

    fn bind(&self, inputs: &[(String, HostTensor)]) -> Result<Binding, HostError> {
        binding_of(&self.graph, inputs)
    }

    /// The plan options this session compiles with.
    fn plan_options(&self) -> PlanOptions {
        let hopper = self.ctx.flavour() == crate::PtxFlavour::Hopper;
        plan_options(&self.options, self.ctx.info().sm_count, hopper)
    }

    /// Uploads `plan`'s constants, packed at 256-byte offsets, in one allocation (none without
    /// constants).
    fn upload_weights(&mut self, plan: &Plan) -> Result<Option<Arc<Weights>>, HostError> {
        if plan.constants.is_empty() {
            return Ok(None);
        }
        let mut offsets = HashMap::new();
        let mut packed = Vec::new();
        for (v, c) in &plan.constants {
            let at = packed.len().div_ceil(256) * 256;
            packed.resize(at, 0);
            packed.extend_from_slice(&c.bytes);
            offsets.insert(*v, at as u64);
        }
        self.charge(|| "the weights".into(), packed.len() as u64)?;
        self.allocations += 1;
        self.device_bytes += packed.len() as u64;
        let buf = self.ctx.stream().clone_htod(&packed).map_err(|source| HostError::OutOfMemory {
            what: "the weights".into(),
            bytes: packed.len() as u64,
            source,
        })?;
        Ok(Some(Arc::new(Weights { buf, offsets })))
    }

    /// Makes the arena at least `bytes` large. Growing frees the old arena on the context's
    /// stream, which does not wait for this session's stream (`execute` returns before the work
    /// ends), so this waits first; and the CUDA graphs of earlier bindings, which hold the freed
    /// arena's addresses, are dropped (replaying one would write into memory the pool may already
    /// have handed to another buffer).
    fn fit_arena(&mut self, bytes: u64) -> Result<(), HostError> {
        let grow = bytes.saturating_sub(self.arena.bytes());
        self.charge(|| format!("the arena ({bytes} bytes, planned from the tensors' lifetimes)"), grow)?;
        if bytes > self.arena.bytes() {
            self.stream.synchronize().map_err(HostError::driver("synchronizing the session stream"))?;
        }
        if self.arena.ensure(self.ctx, bytes)? {
            self.compiled.values_mut().for_each(|c| c.graph = None);
            self.hoisted_in_arena = None;
        }
        Ok(())
    }

    /// Whether `key`'s model runs in stages (it has data-dependent shapes).
    fn is_staged(&self, key: &Key) -> bool {
        self.stages.contains_key(&(key.clone(), Binding::new()))
    }

    fn prepare(&mut self, binding: &Key) -> Result<(), HostError> {
        if self.compiled.contains_key(binding) || self.is_staged(binding) {
            return Ok(());
        }
        // A plan compiled ahead for this binding comes with its folded graph: nothing is done twice.
        let ahead = self.adopted.take().filter(|a| binding.values.is_empty() && a.dims == binding.dims);
        let (graph, ahead) = match ahead {
            Some(a) => (a.graph, Some((a.plan, a.took))),
            None => (self.specialized(binding), None),
        };
        if self.prepare_staged(binding, &graph)? {
            // Stage plans upload through the context's stream; the session's stream uses them.
            self.ctx.synchronize()?;
            return Ok(());
        }
        let started = std::time::Instant::now();
        let (plan, planned) = match ahead {
            Some(compiled) => compiled,
            None => (compile(&graph, &binding.dims, &self.plan_options())?, started.elapsed()),
        };
        // The plan's kernels load on threads of their own while this one uploads the weights.
        let uploading = std::time::Instant::now();
        let ctx = self.ctx;
        let wanted = plan.kernels();
        let (kernels, weights) = std::thread::scope(|s| {
            let loading = s.spawn(|| ctx.preload(&wanted));
            let cached = self.weight_cache.lock().ok().and_then(|m| m.get(binding).cloned());
            let weights = match cached {
                Some(w) => Ok(Some(w)),
                None => self.upload_weights(&plan).inspect(|w| {
                    if let (Some(w), Ok(mut m)) = (w, self.weight_cache.lock()) {
                        m.insert(binding.clone(), w.clone());
                    }
                }),
            };
            let upload = uploading.elapsed();
            let kernels = loading.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            (kernels, weights.map(|w| (w, upload)))
        });
        let together = uploading.elapsed();
        let kernels = kernels?;
        let (weights, upload) = weights?;
        // Input and output buffers; counted only once all of them are allocated (a failure frees
        // the ones made so far and leaves the session as it was).
        let (mut count, mut held) = (0u64, 0u64);
        let (budget, before) = (self.options.max_memory, self.device_bytes());
        let mut io =
            |vs: &[ValueId], kind: &str| -> Result<Vec<CudaSlice<u8>>, HostError> {
                vs.iter()
                    .map(|v| {
                        let name = &plan.values[v.index()].name;
                        let bytes = plan.values[v.index()].bytes().ok_or_else(|| HostError::Unsupported {
                            node: name.clone(),
                            op: "output",
                            detail: "graph outputs of data-dependent size are not supported on the GPU yet"
                                .into(),
                        })?;
                        let what = format!("the buffer of {kind} `{name}`");
                        within_budget(budget, before + held, bytes).map_err(|(held, max)| {
                            HostError::Budget { what: what.clone(), bytes, held, max }
                        })?;
                        count += 1;
                        held += bytes;
                        alloc(self.ctx, bytes.max(1), &what)
                    })
                    .collect()
            };
        let inputs = io(&plan.inputs, "input")?;
        let outputs = io(&plan.outputs, "output")?;
        self.allocations += count;
        self.device_bytes += held;
        self.fit_arena(plan.memory.arena_bytes)?;
        // Allocations and uploads went through the context's stream; the session's stream uses
        // them from now on.
        self.ctx.synchronize()?;
        self.prepared = Some(PrepareReport {
            plan: planned,
            kernels,
            // The weights' upload, then the buffers and the arena (after both).
            upload: upload + uploading.elapsed().saturating_sub(together),
            kernels_and_upload: uploading.elapsed(),
            first_execution: None,
        });
        let compiled = Compiled { plan, weights, inputs, outputs, graph: None, hoisted_checked: false };
        self.compiled.insert(binding.clone(), compiled);
        Ok(())
    }

    /// Runs the graph on `inputs` (name, tensor) and returns the outputs in graph order.
    pub fn run(&mut self, inputs: &[(String, HostTensor)]) -> Result<Vec<(String, HostTensor)>, HostError> {
        let binding = self.key(self.bind(inputs)?, inputs);
        let binding = match self.prepare(&binding) {
            Err(e) if !self.specialize && self.can_specialize(inputs) => {
                // Shape operands fed as graph inputs (axes, sizes, pads...): plan for their values.
                // (If that fails too, its error is the one to report: it is about the plan for
                // these values.)
                let _ = e;
                self.specialize = true;
                let key = self.key(binding.dims, inputs);
                self.prepare(&key)?;
                key
            }
            other => other.map(|()| binding)?,
        };
        if self.is_staged(&binding) {
            self.last = Some(binding.clone());
            self.staged_inputs = inputs.to_vec();
            // (Whether a stage checks its data is known only once its plan is compiled.)
            self.clear_status()?;
            let held = self.run_stages(&binding, inputs)?;
            let out = self.take_outputs(held)?;
            self.read_status(&self.stage_checks())?;
            return Ok(out);
        }
        let states: u64 = self.compiled[&binding].plan.states.iter().map(|s| s.bytes()).sum();
        if states > self.state.bytes() {
            self.charge(|| "the recurrent state".into(), states - self.state.bytes())?;
        }
        if self.state.fit(self.ctx, &self.stream, &self.compiled[&binding].plan)? {
            // Captured graphs hold the old state addresses.
            self.compiled.values_mut().for_each(|c| c.graph = None);
        }
        let c = self.compiled.get_mut(&binding).expect("prepared above");
        for (i, v) in c.plan.inputs.iter().enumerate() {
            let name = &c.plan.values[v.index()].name;
            let t = inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t).expect("checked by bind");
            self.stream
                .memcpy_htod(&t.to_const().bytes[..], &mut c.inputs[i])
                .map_err(HostError::driver("copying an input to the device"))?;
        }
        self.last = Some(binding.clone());
        let checks = self.compiled[&binding].plan.checks.clone();
        if !checks.is_empty() {
            self.clear_status()?;
        }
        self.execute()?;
        let c = &self.compiled[&binding];
        // The copies are ordered after the steps on the session's stream; the host reads the bytes
        // only after waiting for that stream (an async copy to pageable memory may return early).
        let raw = c
            .outputs
            .iter()
            .map(|o| self.stream.clone_dtoh(o).map_err(HostError::driver("copying an output to the host")))
            .collect::<Result<Vec<Vec<u8>>, _>>()?;
        self.stream.synchronize().map_err(HostError::driver("synchronizing the session stream"))?;
        let mut out = Vec::with_capacity(raw.len());
        for (v, bytes) in c.plan.outputs.iter().zip(raw) {
            let pv = &c.plan.values[v.index()];
            let dims = pv.dims.clone().unwrap_or_default();
            let want = pv.bytes().unwrap_or(0) as usize;
            let constant =
                planner::ConstTensor::new(pv.dtype, dims, bytes[..want.min(bytes.len())].to_vec())?;
            out.push((pv.name.clone(), HostTensor::from_const(&constant)?));
        }
        if !checks.is_empty() {
            self.read_status(&checks)?;
        }
        Ok(out)
    }

    /// Zeroes the status word on the session's stream (allocating it first).
    fn clear_status(&mut self) -> Result<(), HostError> {
        if self.status.is_none() {
            self.charge(|| "the status word".into(), 4)?;
            let buf = self.stream.alloc_zeros::<u32>(1).map_err(|source| HostError::OutOfMemory {
                what: "the status word".into(),
                bytes: 4,
                source,
            })?;
            self.allocations += 1;
            self.device_bytes += 4;
            let ptr = buf.device_ptr(&self.stream).0;
            self.status = Some((buf, ptr));
        }
        let (buf, _) = self.status.as_mut().expect("allocated above");
        self.stream.memset_zeros(buf).map_err(HostError::driver("clearing the status word"))
    }

    /// The device address of the status word.
    fn status_ptr(&self) -> Result<u64, HostError> {
        self.status.as_ref().map(|s| s.1).ok_or_else(|| HostError::Arena {
            detail: "a step checks its data but the session has no status word (run the model first)".into(),
        })
    }

    /// Fails with the error of the check whose code the status word holds, after the stream's
    /// work (does nothing before a run allocated the word).
    fn read_status(&self, checks: &[planner::plan::Check]) -> Result<(), HostError> {
        let Some((buf, _)) = self.status.as_ref() else { return Ok(()) };
        let word = self.stream.clone_dtoh(buf).map_err(HostError::driver("reading the status word"))?;
        self.stream.synchronize().map_err(HostError::driver("synchronizing the session stream"))?;
        match word.first().copied().unwrap_or(0) {
            0 => Ok(()),
            code => Err(match checks.iter().find(|c| c.code == code) {
                Some(c) => {
                    HostError::Data { node: c.node.clone(), op: c.op.clone(), detail: c.detail.clone() }
                }
                None => HostError::Data {
                    node: format!("#{}", code - 1),
                    op: "a control-flow body's".into(),
                    detail: "a GPU kernel found bad data (an integer divisor of 0)".into(),
                },
            }),
        }
    }

    /// The binding of the last run.
    fn last_binding(&self) -> Result<Key, HostError> {
        self.last.clone().ok_or_else(|| HostError::Arena { detail: "no run has bound the inputs yet".into() })
    }

    /// Executes the last run's binding on the inputs already on the device: replays its CUDA graph
    /// (capturing it on first use) or launches the steps one by one, after the plan's hoisted
    /// steps when the arena does not hold their results. Does not wait (but for the first run of a
    /// binding's hoisted steps, which waits after each so that a fault names its step).
    pub fn execute(&mut self) -> Result<(), HostError> {
        let binding = self.last_binding()?;
        if self.is_staged(&binding) {
            let inputs = std::mem::take(&mut self.staged_inputs);
            let ran = self.run_stages(&binding, &inputs).and_then(|held| self.take_outputs(held));
            self.staged_inputs = inputs;
            return ran.map(|_| ());
        }
        let use_graph = self.options.cuda_graph;
        self.run_hoisted(&binding)?;
        self.state.advance();
        let c = self.compiled.get(&binding).expect("prepared by run");
        if use_graph && c.graph.is_none() {
            // Eager once, waiting after every step so that a fault names its step, then capture;
            // the eager launch is this execution (running twice would advance recurrent state twice).
            let started = std::time::Instant::now();
            self.launch_steps(&binding, None, true)?;
            let eager = started.elapsed();
            let graph = self.capture(&binding, None)?;
            if let Some(p) = &mut self.prepared
                && p.first_execution.is_none()
            {
                p.first_execution = Some((eager, started.elapsed() - eager));
            }
            self.compiled.get_mut(&binding).expect("prepared").graph = graph.map(Graphed);
            return Ok(());
        }
        let c = &self.compiled[&binding];
        match (&c.graph, use_graph) {
            (Some(g), true) => g.0.launch().map_err(HostError::driver("replaying the CUDA graph")),
            _ => self.launch_steps(&binding, None, false),
        }
    }

    /// Turns programmatic dependent launch ([`SessionOptions::programmatic_launch`]) on or off; a
    /// change drops the captured CUDA graphs, which are captured again on their next execution.
    pub fn set_programmatic_launch(&mut self, on: bool) {
        if self.options.programmatic_launch != on {
            self.options.programmatic_launch = on;
            for c in self.compiled.values_mut() {
                c.graph = None;
            }
        }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // Buffers are freed on the context's stream; let this session's work finish first.
        let _ = self.stream.synchronize();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_session_can_move_to_another_thread() {
        fn send<T: Send>() {}
        send::<super::Session<'static>>();
    }
}
