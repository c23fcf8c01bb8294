//! [`SessionState`]: the persistent recurrent state of a stateful [`Session`](crate::Session)
//! (`SessionOptions::stateful`), one [`StateBuffers`] allocation holding a slot per stateful
//! sequence node of the plan (`Plan::states`), kept on the device across runs until
//! `Session::reset_state` zeroes it.
//!
//! Invariants: the slots match the layout of every plan the session has run since the last reset
//! (a binding with another layout, e.g. another batch size, is refused in the middle of a
//! sequence and reallocates, zeroed, after a reset); a reallocation is reported to the caller,
//! whose captured CUDA graphs hold the old addresses. The buffers are allocated and reset on the
//! context's stream: every operation here first waits for the session's stream, and waits for
//! the context's stream before returning, so the two streams never race over the state.

use cudarc::driver::CudaStream;
use planner::plan::{Plan, StateSlot};

use crate::arena::StateBuffers;
use crate::device::Context;
use crate::error::HostError;
use crate::tensor::HostTensor;

/// Persistent state of a session (empty for a stateless one).
#[derive(Debug, Default)]
pub(crate) struct SessionState {
    buffers: Option<StateBuffers>,
    layout: Vec<StateSlot>,
    /// No run since the buffers were allocated or reset.
    fresh: bool,
    /// Device allocations made so far.
    allocations: u64,
}

fn bad(detail: String) -> HostError {
    HostError::State { detail }
}

impl SessionState {
    /// Makes the buffers match `plan`'s state slots. Returns whether it (re)allocated them: captured
    /// CUDA graphs of earlier bindings then point at freed memory and must be recaptured.
    pub(crate) fn fit(&mut self, ctx: &Context, stream: &CudaStream, plan: &Plan) -> Result<bool, HostError> {
        if plan.states.is_empty() || plan.states == self.layout {
            return Ok(false);
        }
        if self.buffers.is_some() && !self.fresh {
            let have: Vec<String> = self.layout.iter().map(|s| format!("{} {:?}", s.name, s.dims)).collect();
            let want: Vec<String> = plan.states.iter().map(|s| format!("{} {:?}", s.name, s.dims)).collect();
            return Err(bad(format!(
                "this binding needs state [{}] but the running sequence has [{}]; call reset_state \
                 before changing the batch",
                want.join(", "),
                have.join(", ")
            )));
        }
        sync(stream)?;
        self.buffers = None;
        let entries: Vec<(String, u64)> = plan.states.iter().map(|s| (s.name.clone(), s.bytes())).collect();
        let buffers = StateBuffers::new(ctx, &entries)?;
        ctx.synchronize()?;
        self.buffers = Some(buffers);
        self.allocations += 1;
        self.layout = plan.states.clone();
        self.fresh = true;
        Ok(true)
    }

    /// Device allocations made so far.
    pub(crate) fn allocation_count(&self) -> u64 {
        self.allocations
    }

    /// Device bytes the slots occupy.
    pub(crate) fn bytes(&self) -> u64 {
        self.layout.iter().map(|s| s.bytes().div_ceil(256) * 256).sum()
    }

    /// Marks the state as part of a running sequence (a run is about to update it).
    pub(crate) fn advance(&mut self) {
        self.fresh = false;
    }

    /// Device address of the slot `name` (a step's [`planner::plan::Arg::State`]).
    pub(crate) fn ptr(&self, ctx: &Context, name: &str) -> Result<u64, HostError> {
        self.buffers
            .as_ref()
            .and_then(|b| b.ptr(ctx, name))
            .ok_or_else(|| bad(format!("no state slot `{name}` is allocated")))
    }

    /// The slots, in the order of the plan that allocated them.
    pub(crate) fn slots(&self) -> &[StateSlot] {
        &self.layout
    }

    /// Zeroes every slot: the next run starts a new sequence.
    pub(crate) fn reset(&mut self, ctx: &Context, stream: &CudaStream) -> Result<(), HostError> {
        if let Some(b) = self.buffers.as_mut() {
            sync(stream)?;
            b.reset_state(ctx)?;
            ctx.synchronize()?;
        }
        self.fresh = true;
        Ok(())
    }

    fn slot(&self, name: &str) -> Result<&StateSlot, HostError> {
        self.layout.iter().find(|s| s.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.layout.iter().map(|s| s.name.as_str()).collect();
            bad(format!("no state named `{name}` (the session has {names:?})"))
        })
    }

    /// The state `name` as an f32 tensor of its slot's dims.
    pub(crate) fn read(
        &self,
        ctx: &Context,
        stream: &CudaStream,
        name: &str,
    ) -> Result<HostTensor, HostError> {
        let slot = self.slot(name)?;
        let buffers = self.buffers.as_ref().ok_or_else(|| bad("no state is allocated".into()))?;
        sync(stream)?;
        let bytes = buffers.read(ctx, name)?;
        let c = planner::ConstTensor::new(planner::DType::F32, slot.dims.clone(), bytes)?;
        HostTensor::from_const(&c)
    }

    /// Overwrites the state `name` with `t` (f32, the slot's dims): restoring a checkpoint or
    /// starting from a given state.
    pub(crate) fn load(
        &mut self,
        ctx: &Context,
        stream: &CudaStream,
        name: &str,
        t: &HostTensor,
    ) -> Result<(), HostError> {
        let slot = self.slot(name)?.clone();
        if t.shape() != slot.dims.as_slice() || t.dtype() != planner::DType::F32 {
            return Err(bad(format!(
                "state `{name}` is f32 {:?}; got {} {:?}",
                slot.dims,
                t.dtype(),
                t.shape()
            )));
        }
        let buffers = self.buffers.as_mut().ok_or_else(|| bad("no state is allocated".into()))?;
        sync(stream)?;
        buffers.load(ctx, name, &t.to_const().bytes)?;
        ctx.synchronize()?;
        self.fresh = false;
        Ok(())
    }
}

fn sync(stream: &CudaStream) -> Result<(), HostError> {
    stream.synchronize().map_err(HostError::driver("synchronizing the session stream"))
}
