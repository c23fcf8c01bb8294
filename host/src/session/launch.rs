//! Launching a plan's steps: where each value lives ([`Addresses`]) and one launch per step.

use cudarc::driver::{CudaGraph, CudaSlice, DevicePtr, result, sys};
use planner::ValueId;
use planner::memory::MemoryPlan;
use planner::plan::{Arg, Step};

use super::{Compiled, Session};
use crate::device::{KernelArg, L2Window, LaunchShape};
use crate::error::HostError;
use crate::specialize::Key;

/// Where the values of a plan's steps live.
pub(super) struct Addresses<'a> {
    /// Device addresses of the plan's inputs.
    pub(super) inputs: Vec<(ValueId, u64)>,
    /// Device addresses of the plan's outputs.
    pub(super) outputs: Vec<(ValueId, u64)>,
    /// Device addresses of the plan's constants.
    pub(super) weights: Vec<(ValueId, u64)>,
    /// Its arena slots (none for launches outside a plan).
    pub(super) memory: Option<&'a MemoryPlan>,
    /// The L2 persistence hint for the weights' range, if any.
    pub(super) window: Option<L2Window>,
}

impl Addresses<'_> {
    /// Addresses of launches outside a plan: inputs and outputs only.
    pub(super) fn bare(inputs: Vec<(ValueId, u64)>, outputs: Vec<(ValueId, u64)>) -> Self {
        Addresses { inputs, outputs, weights: Vec::new(), memory: None, window: None }
    }

    fn input(&self, v: ValueId) -> Option<u64> {
        self.inputs.iter().find(|(x, _)| *x == v).map(|&(_, p)| p)
    }

    fn output(&self, v: ValueId) -> Option<u64> {
        self.outputs.iter().find(|(x, _)| *x == v).map(|&(_, p)| p)
    }

    fn weight(&self, v: ValueId) -> Option<u64> {
        self.weights.iter().find(|(x, _)| *x == v).map(|&(_, p)| p)
    }
}

impl Session<'_> {
    /// The addresses of `c`'s inputs, outputs, weights and arena slots.
    pub(super) fn addresses<'a>(&self, c: &'a Compiled) -> Addresses<'a> {
        let ptrs = |vs: &[ValueId], bufs: &[CudaSlice<u8>]| -> Vec<(ValueId, u64)> {
            vs.iter().zip(bufs).map(|(&v, b)| (v, b.device_ptr(&self.stream).0)).collect()
        };
        Addresses {
            inputs: ptrs(&c.plan.inputs, &c.inputs),
            outputs: ptrs(&c.plan.outputs, &c.outputs),
            weights: c.weights.as_ref().map_or_else(Vec::new, |w| w.addresses(&self.stream)),
            memory: Some(&c.plan.memory),
            window: c
                .weights
                .as_ref()
                .filter(|_| self.options.l2_persist_weights)
                .and_then(|w| L2Window::for_range(self.ctx, w.buf.device_ptr(&self.stream).0, w.buf.len())),
        }
    }

    /// The device address of `v`: an input, an output, a weight or an arena slot (checked against
    /// the arena's size).
    pub(super) fn address(&self, at: &Addresses, v: ValueId) -> Result<u64, HostError> {
        if let Some(p) = at.input(v).or_else(|| at.output(v)).or_else(|| at.weight(v)) {
            return Ok(p);
        }
        // A view of a graph input is the input's buffer.
        if let Some(p) = at.memory.and_then(|m| at.input(m.home(v))) {
            return Ok(p);
        }
        match at.memory.and_then(|m| m.slots.get(v.index()).copied().flatten()) {
            Some(slot) => self.arena.slot_ptr(self.ctx, slot),
            None => Err(HostError::Arena { detail: format!("value {v} has no device buffer in the plan") }),
        }
    }

    /// Runs the hoisted steps of `binding` ([`planner::plan::Plan::hoisted`]: values of the
    /// weights alone) unless the arena already holds their results; the first time for the
    /// binding with a wait after each step, so that a fault names its step. Whatever the plan
    /// hoists (nothing too), the arena is `binding`'s from here on: another binding's hoisted
    /// results in it are about to be overwritten.
    pub(super) fn run_hoisted(&mut self, binding: &Key) -> Result<(), HostError> {
        if self.hoisted_in_arena.as_ref() == Some(binding) {
            return Ok(());
        }
        self.hoisted_in_arena = None;
        let c = &self.compiled[binding];
        self.launch_range(binding, 0..c.plan.hoisted, None, !c.hoisted_checked)?;
        if let Some(c) = self.compiled.get_mut(binding) {
            c.hoisted_checked = true;
        }
        self.hoisted_in_arena = Some(binding.clone());
        Ok(())
    }

    /// Launches every step after the hoisted ones but `skip` (none: all of them); with
    /// `sync_each`, waits after each so that an asynchronous fault is reported with the step that
    /// caused it. The hoisted steps' results must be in the arena ([`Self::run_hoisted`]).
    pub(super) fn launch_steps(
        &self,
        binding: &Key,
        skip: Option<usize>,
        sync_each: bool,
    ) -> Result<(), HostError> {
        let plan = &self.compiled[binding].plan;
        self.launch_range(binding, plan.hoisted..plan.steps.len(), skip, sync_each)
    }

    /// Launches the steps `range` of `binding`'s plan but `skip`, as [`Self::launch_steps`].
    fn launch_range(
        &self,
        binding: &Key,
        range: std::ops::Range<usize>,
        skip: Option<usize>,
        sync_each: bool,
    ) -> Result<(), HostError> {
        let c = &self.compiled[binding];
        let at = self.addresses(c);
        let steps = c.plan.steps.iter().enumerate().skip(range.start).take(range.len());
        for (i, step) in steps.filter(|&(i, _)| Some(i) != skip) {
            self.launch_step(&at, i, step)?;
            if sync_each {
                self.stream
                    .synchronize()
                    .map_err(|source| step_error(i, step, HostError::Driver { action: "", source }))?;
            }
        }
        Ok(())
    }

    /// The steps of `binding` but `skip` captured as a CUDA graph on the session's stream (none
    /// when nothing was captured).
    pub(super) fn capture(&self, binding: &Key, skip: Option<usize>) -> Result<Option<CudaGraph>, HostError> {
        self.stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(HostError::driver("starting CUDA graph capture"))?;
        let launched = self.launch_steps(binding, skip, false);
        let graph = self
            .stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(HostError::driver("ending CUDA graph capture"))?;
        launched.map(|()| graph)
    }

    /// Launches step `i` of a plan whose values live at `at` on the session's stream.
    pub(super) fn launch_step(&self, at: &Addresses, i: usize, step: &Step) -> Result<(), HostError> {
        match step {
            Step::Kernel { kernel, grid, block, shared_bytes, args, .. } => {
                let mut ptrs = Vec::with_capacity(args.len());
                for a in args {
                    ptrs.push(match a {
                        Arg::Value(v) | Arg::Output(v) => Some(self.address(at, *v)?),
                        Arg::State(name) => Some(self.state.ptr(self.ctx, name)?),
                        Arg::Status => Some(self.status_ptr()?),
                        Arg::Null => Some(0),
                        Arg::Params(_) => None,
                    });
                }
                let kargs: Vec<KernelArg> = args
                    .iter()
                    .zip(&ptrs)
                    .map(|(a, p)| match (a, p) {
                        (Arg::Params(bytes), _) => KernelArg::Params(bytes),
                        (_, p) => KernelArg::Ptr(p.unwrap_or(0)),
                    })
                    .collect();
                let shape = LaunchShape { grid: *grid, block: *block, shared_bytes: *shared_bytes };
                let pdl = self.options.programmatic_launch;
                // SAFETY: the step was lowered by `planner::plan` for this kernel's parameter
                // list, from the bound shapes of its operands; every value address points into
                // a buffer of at least the value's size (arena slots from the validated memory
                // plan, inputs/outputs/weights allocated from the plan's sizes).
                unsafe { self.ctx.launch_dependent(&self.stream, *kernel, shape, &kargs, pdl, at.window) }
                    .map_err(|e| step_error(i, step, e))
            }
            Step::Copy { src, dst, bytes, .. } => {
                // A graph output that is a constant or an input copies from that buffer into the
                // output buffer (`src == dst`): reads prefer inputs and weights, writes outputs.
                let s = match at.input(*src).or_else(|| at.weight(*src)) {
                    Some(p) => p,
                    None => self.address(at, *src)?,
                };
                let d = match at.output(*dst) {
                    Some(p) => p,
                    None => self.address(at, *dst)?,
                };
                if s == d {
                    return Ok(()); // a staged run keeps a passed-through value in one buffer
                }
                // SAFETY: both buffers hold at least `bytes` (the plan's sizes) and do not
                // overlap (distinct values with overlapping lifetimes never share memory).
                unsafe { result::memcpy_dtod_async(d, s, *bytes as usize, self.stream.cu_stream()) }
                    .map_err(HostError::driver("a copy step"))
            }
        }
    }
}

pub(super) fn step_error(i: usize, step: &Step, e: HostError) -> HostError {
    match step {
        Step::Kernel { label, kernel, .. } => {
            let detail = match e {
                HostError::Launch { source, .. } | HostError::Driver { source, .. } => source.to_string(),
                other => other.to_string(),
            };
            HostError::Step { step: i, label: label.clone(), kernel: kernel.symbol(), detail }
        }
        Step::Copy { .. } => e,
    }
}
