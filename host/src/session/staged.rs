//! Staged runs: graphs whose shapes depend on the data (NonZero and what it feeds).
//!
//! `planner::stage::split` cuts such a graph into a head (an ordinary plan), a frontier of
//! NonZero nodes, and the rest. A run executes the head's plan, then each NonZero: a count launch,
//! a read-back of its per-block counts (the one wait on the device per frontier), and a write
//! launch into a block sized from the count; then it binds the counts and goes on with the rest,
//! cut again where it holds further NonZero nodes. Each part's plan is cached under the run's key
//! and the counts bound so far (at most [`MAX_STAGE_PLANS`] such plans are kept); their constants
//! come from a pool keyed by their bytes, so the plans of a new count upload nothing new (a
//! weight is the same whatever the count).
//!
//! Every tensor that crosses a stage boundary (the run's inputs, stage outputs, NonZero results)
//! lives in the session's run-time region (`region.rs`), one device buffer handed out by a free list
//! that splits and merges blocks: a value's block is freed as soon as no later stage reads it. The
//! region grows (keeping its contents) only when a run needs more than it has, so a warm session
//! runs data-dependent models without device allocations; each stage's intermediates use the
//! session's planned arena like any plan. Staged runs launch eagerly (no CUDA graph: the counts
//! decide what follows).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use planner::plan::{Plan, compile};
use planner::stage::{Control, Frontier, split};
use planner::{Binding, DType, Graph, ValueId};

use super::control::ControlPlan;
use super::frontier::Launch;
use super::region::RegionStats;
use super::{Addresses, Session};
use crate::error::HostError;
use crate::specialize::Key;
use crate::tensor::HostTensor;

/// Stage plans a session keeps (beyond those of the first stage of each key, which stay); a new
/// count compiles the stages after it anew, so a stream of distinct counts cycles through these.
pub const MAX_STAGE_PLANS: usize = 256;

/// Largest value (elements) a held value keeps a host copy of (a condition, a trip count).
const KNOWN_MAX_ELEMS: usize = 64;

/// A constant of the stage plans on the device, shared by every stage plan whose constant has the
/// same bytes (a weight, and its packed form, are the same whatever the counts).
pub(super) struct DeviceConst {
    buf: CudaSlice<u8>,
}

// SAFETY: the buffer is written once (the upload, before it is shared) and only read by kernels
// afterwards, as `Weights`.
unsafe impl Sync for DeviceConst {}

/// Stage-plan constants by the hash of their bytes (the bytes kept, so that a hash collision is
/// told apart).
pub(super) type ConstPool = HashMap<u64, Vec<(planner::constant::Bytes, Arc<DeviceConst>)>>;

/// One compiled stage.
pub(super) struct StagePlan {
    /// The head's plan (its constants' bytes dropped once on the device).
    plan: Plan,
    /// Its constants on the device.
    constants: Vec<(ValueId, Arc<DeviceConst>)>,
    /// The data-dependent nodes after the head, with their launches.
    frontier: Vec<(Frontier, Launch)>,
    /// The control-flow nodes after the head, with their bodies' plans.
    pub(super) controls: Vec<ControlPlan>,
    /// What runs after them, its data-dependent dims still symbols.
    rest: Option<Graph>,
}

impl StagePlan {
    /// Arena bytes of the stage's plan.
    pub(super) fn arena_bytes(&self) -> u64 {
        self.plan.memory.arena_bytes
    }
}

/// Stage plans by the run's key and the counts bound before the stage.
pub(super) type StageKey = (Key, Binding);

/// The stage plans of one graph (the session's, or a control-flow body's).
pub(super) type StageCache = HashMap<StageKey, Arc<StagePlan>>;

/// A value held in the region during a staged run.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) offset: u64,
    pub(super) bytes: u64,
    pub(super) dtype: DType,
    pub(super) dims: Vec<usize>,
    /// Its value, when the host knows it without reading the device (an input, a loop counter).
    pub(super) known: Option<Arc<HostTensor>>,
}

impl Session<'_> {
    /// Sizes of the run-time region that holds the tensors crossing the stages of data-dependent
    /// models (empty for other models).
    pub fn region_stats(&self) -> RegionStats {
        self.region.stats()
    }

    /// Compiles a stage: the head's plan (with its weights uploaded) and the frontier's launches.
    fn compile_stage(
        &mut self,
        head: &Graph,
        binding: &Binding,
        frontier: Vec<Frontier>,
        controls: Vec<Control>,
        rest: Option<Graph>,
    ) -> Result<StagePlan, HostError> {
        let mut plan = compile(head, binding, &self.plan_options())?;
        self.ctx.preload(&plan.kernels())?;
        if let Some(s) = plan.states.first() {
            return Err(HostError::Unsupported {
                node: s.name.clone(),
                op: "state",
                detail: "a stateful sequence node in a model with data-dependent shapes".into(),
            });
        }
        let constants = self.pool_constants(&plan)?;
        plan.constants.clear();
        let sm_count = self.ctx.info().sm_count;
        let frontier = frontier
            .into_iter()
            .map(|f| Ok((Launch::new(&f, sm_count)?, f)).map(|(l, f)| (f, l)))
            .collect::<Result<_, HostError>>()?;
        let controls = controls.into_iter().map(ControlPlan::new).collect();
        Ok(StagePlan { plan, constants, frontier, controls, rest })
    }

    /// The device copies of `plan`'s constants, from the pool (uploaded when new). A new count
    /// plans the later stages again, but their weights are the same bytes: no upload, no
    /// allocation.
    fn pool_constants(&mut self, plan: &Plan) -> Result<Vec<(ValueId, Arc<DeviceConst>)>, HostError> {
        use std::hash::{Hash, Hasher};
        let mut out = Vec::with_capacity(plan.constants.len());
        let mut uploaded = false;
        for (&v, c) in &plan.constants {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            c.bytes.hash(&mut h);
            let key = h.finish();
            let found = self.stage_constants.get(&key).and_then(|list| {
                list.iter().find(|(bytes, _)| bytes[..] == c.bytes[..]).map(|(_, d)| d.clone())
            });
            let d = match found {
                Some(d) => d,
                None => {
                    let bytes: &[u8] = if c.bytes.is_empty() { &[0] } else { &c.bytes };
                    self.charge(|| "a stage's constant".into(), bytes.len() as u64)?;
                    let buf =
                        self.ctx.stream().clone_htod(bytes).map_err(|source| HostError::OutOfMemory {
                            what: "a stage's constant".into(),
                            bytes: bytes.len() as u64,
                            source,
                        })?;
                    (self.allocations, self.device_bytes, uploaded) =
                        (self.allocations + 1, self.device_bytes + bytes.len() as u64, true);
                    let d = Arc::new(DeviceConst { buf });
                    self.stage_constants.entry(key).or_default().push((c.bytes.clone(), d.clone()));
                    d
                }
            };
            out.push((v, d));
        }
        if uploaded {
            // The uploads went through the context's stream; the session's stream reads them.
            self.ctx.synchronize()?;
        }
        Ok(out)
    }

    /// Compiles the first stage of `key` when its graph has data-dependent shapes or control flow;
    /// false (nothing done) when it has neither.
    pub(super) fn prepare_staged(&mut self, key: &Key, graph: &Graph) -> Result<bool, HostError> {
        let Some(stage) = split(graph, &key.dims)? else { return Ok(false) };
        let sp =
            self.compile_stage(&stage.head, &Binding::new(), stage.frontier, stage.controls, stage.rest)?;
        self.stages.insert((key.clone(), Binding::new()), Arc::new(sp));
        Ok(true)
    }

    /// The plan of `graph` bound by `dims` as a first stage: cut at its data-dependent and
    /// control-flow nodes, or whole when it has none.
    pub(super) fn first_stage(&mut self, graph: &Graph, dims: &Binding) -> Result<StagePlan, HostError> {
        match split(graph, dims)? {
            Some(stage) => {
                self.compile_stage(&stage.head, &Binding::new(), stage.frontier, stage.controls, stage.rest)
            }
            None => self.compile_stage(graph, dims, Vec::new(), Vec::new(), None),
        }
    }

    /// The stage that follows once `counts` are bound (compiled on first use), from `cache`.
    fn next_stage(
        &mut self,
        cache: &mut StageCache,
        key: &Key,
        counts: &Binding,
        rest: &Graph,
    ) -> Result<Arc<StagePlan>, HostError> {
        let sk = (key.clone(), counts.clone());
        if let Some(sp) = cache.get(&sk) {
            return Ok(sp.clone());
        }
        let sp = self.first_stage(rest, counts)?;
        if cache.len() >= MAX_STAGE_PLANS {
            self.evict_stages(cache, |(_, c)| c.0.is_empty())?;
        }
        let sp = Arc::new(sp);
        cache.insert(sk, sp.clone());
        Ok(sp)
    }

    /// Drops the plans of `cache` that `keep` does not keep, and the pooled constants no plan
    /// shares any more. Nothing of theirs is queued after the wait here.
    pub(super) fn evict_stages(
        &mut self,
        cache: &mut StageCache,
        keep: impl Fn(&StageKey) -> bool,
    ) -> Result<(), HostError> {
        self.stream.synchronize().map_err(HostError::driver("synchronizing the session stream"))?;
        cache.retain(|k, _| keep(k));
        for list in self.stage_constants.values_mut() {
            list.retain(|(_, d)| Arc::strong_count(d) > 1);
        }
        self.stage_constants.retain(|_, list| !list.is_empty());
        Ok(())
    }

    /// Puts `h` in `env` as `name`, letting go of the value it replaces.
    pub(super) fn hold_as(
        &mut self,
        env: &mut HashMap<String, Held>,
        name: &str,
        h: Held,
    ) -> Result<(), HostError> {
        match env.insert(name.to_string(), h) {
            Some(old) => self.region.free(old.offset),
            None => Ok(()),
        }
    }

    /// A region block of `bytes` for a value of `dtype` and `dims`.
    pub(super) fn hold(&mut self, bytes: u64, dtype: DType, dims: Vec<usize>) -> Result<Held, HostError> {
        self.charge(|| format!("a tensor of data-dependent size {dims:?}"), self.region.growth_for(bytes))?;
        let offset = self.region.alloc(self.ctx, &self.stream, bytes)?;
        Ok(Held { offset, bytes, dtype, dims, known: None })
    }

    /// Runs every stage of `key` on `inputs`; returns the graph's outputs, held in the region (the
    /// caller reads and frees them). On an error every block is freed.
    pub(super) fn run_stages(
        &mut self,
        key: &Key,
        inputs: &[(String, HostTensor)],
    ) -> Result<Vec<(String, Held)>, HostError> {
        let mut env: HashMap<String, Held> = HashMap::new();
        let outputs: Vec<String> = self.graph.outputs.iter().map(|&v| self.graph.value_name(v)).collect();
        // Stage plans run every step, hoisted ones too, in the arena the single plans share.
        self.hoisted_in_arena = None;
        let mut cache = std::mem::take(&mut self.stages);
        let outcome = self
            .hold_inputs(inputs, &mut env)
            .and_then(|()| self.stages_into(&mut cache, key, &outputs, &mut env));
        self.stages = cache;
        self.finish_graph(outcome, &outputs, env)
    }

    /// The run's outputs of a graph that ran into `env`: each held once more for the caller; then
    /// every value of `env` is let go (on an error, only that).
    pub(super) fn finish_graph(
        &mut self,
        outcome: Result<(), HostError>,
        outputs: &[String],
        env: HashMap<String, Held>,
    ) -> Result<Vec<(String, Held)>, HostError> {
        let picked = outcome.and_then(|()| {
            outputs
                .iter()
                .map(|name| {
                    let h = env.get(name).cloned().ok_or_else(|| HostError::Arena {
                        detail: format!("output `{name}` was not computed by any stage"),
                    })?;
                    Ok((name.clone(), h))
                })
                .collect::<Result<Vec<_>, HostError>>()
        });
        if let Ok(picked) = &picked {
            for (_, h) in picked {
                self.region.retain(h.offset)?;
            }
        }
        for h in env.values() {
            self.region.free(h.offset)?;
        }
        picked
    }

    /// The checks of every stage plan compiled so far (a control-flow body's are not among them:
    /// the session reports a code of theirs without naming the node).
    pub(super) fn stage_checks(&self) -> Vec<planner::plan::Check> {
        self.stages.values().flat_map(|sp| sp.plan.checks.iter().cloned()).collect()
    }

    /// Copies the held outputs to the host and frees their blocks.
    pub(super) fn take_outputs(
        &mut self,
        held: Vec<(String, Held)>,
    ) -> Result<Vec<(String, HostTensor)>, HostError> {
        let raw = held
            .iter()
            .map(|(_, h)| self.region.read(&self.stream, h.offset, h.bytes))
            .collect::<Result<Vec<_>, _>>();
        let synced = self.stream.synchronize().map_err(HostError::driver("synchronizing the session stream"));
        for (_, h) in &held {
            self.region.free(h.offset)?;
        }
        let (raw, ()) = (raw?, synced?);
        held.into_iter()
            .zip(raw)
            .map(|((name, h), bytes)| {
                let c = planner::ConstTensor::new(h.dtype, h.dims, bytes)?;
                Ok((name, HostTensor::from_const(&c)?))
            })
            .collect()
    }

    /// Copies the run's inputs into the region, into `env` (the small ones also known on the host).
    fn hold_inputs(
        &mut self,
        inputs: &[(String, HostTensor)],
        env: &mut HashMap<String, Held>,
    ) -> Result<(), HostError> {
        for (name, t) in inputs {
            let h = self.hold_host(t)?;
            env.insert(name.clone(), h);
        }
        Ok(())
    }

    /// A region block holding `t` (known on the host when small).
    pub(super) fn hold_host(&mut self, t: &HostTensor) -> Result<Held, HostError> {
        let c = t.to_const();
        let mut h = self.hold(c.bytes.len() as u64, t.dtype(), t.shape().to_vec())?;
        self.region.write(&self.stream, h.offset, &c.bytes)?;
        if t.len() <= KNOWN_MAX_ELEMS {
            h.known = Some(Arc::new(t.clone()));
        }
        Ok(h)
    }

    /// Runs the stages of a graph whose first stage `cache` holds under `key`, on the values of
    /// `env` (its inputs by name); its values stay in `env`, those no later stage reads and that
    /// are not among `outputs` let go as the stages go.
    pub(super) fn stages_into(
        &mut self,
        cache: &mut StageCache,
        key: &Key,
        outputs: &[String],
        env: &mut HashMap<String, Held>,
    ) -> Result<(), HostError> {
        let outputs: HashSet<&String> = outputs.iter().collect();
        let mut counts = Binding::new();
        let mut sp = cache
            .get(&(key.clone(), Binding::new()))
            .cloned()
            .ok_or_else(|| HostError::Arena { detail: "no staged plan for this binding".into() })?;
        loop {
            self.run_head(&sp, env)?;
            for (f, launch) in &sp.frontier {
                let count = self.run_frontier(f, launch, env)?;
                counts.set(&f.symbol, count);
            }
            for c in &sp.controls {
                self.run_control(c, env, &mut counts)?;
            }
            // Free what no later stage reads.
            let later: HashSet<String> = match &sp.rest {
                Some(rest) => rest.inputs.iter().map(|&v| rest.value_name(v)).collect(),
                None => HashSet::new(),
            };
            let dead: Vec<String> =
                env.keys().filter(|n| !later.contains(*n) && !outputs.contains(n)).cloned().collect();
            for name in dead {
                if let Some(h) = env.remove(&name) {
                    self.region.free(h.offset)?;
                }
            }
            let Some(rest) = &sp.rest else { return Ok(()) };
            let next = self.next_stage(cache, key, &counts, rest)?;
            sp = next;
        }
    }

    /// Places the head's outputs in the region and launches its steps.
    fn run_head(&mut self, sp: &StagePlan, env: &mut HashMap<String, Held>) -> Result<(), HostError> {
        let plan = &sp.plan;
        for &v in &plan.outputs {
            let pv = &plan.values[v.index()];
            if env.contains_key(&pv.name) {
                continue; // an input passed through: its block already holds it
            }
            let (Some(bytes), Some(dims)) = (pv.bytes(), pv.dims.clone()) else {
                return Err(HostError::Arena { detail: format!("stage output `{}` has no size", pv.name) });
            };
            let h = self.hold(bytes, pv.dtype, dims)?;
            env.insert(pv.name.clone(), h);
        }
        self.fit_arena(plan.memory.arena_bytes)?;
        let base = self.region.base(&self.stream);
        let place = |vs: &[ValueId]| -> Result<Vec<(ValueId, u64)>, HostError> {
            vs.iter()
                .map(|&v| {
                    let name = &plan.values[v.index()].name;
                    let h = env.get(name).ok_or_else(|| HostError::Arena {
                        detail: format!("stage input `{name}` is not held by the run"),
                    })?;
                    Ok((v, base + h.offset))
                })
                .collect()
        };
        let at = Addresses {
            inputs: place(&plan.inputs)?,
            outputs: place(&plan.outputs)?,
            weights: sp.constants.iter().map(|(v, d)| (*v, d.buf.device_ptr(&self.stream).0)).collect(),
            memory: Some(&plan.memory),
            window: None,
        };
        for (i, step) in plan.steps.iter().enumerate() {
            self.launch_step(&at, i, step)?;
        }
        Ok(())
    }
}
