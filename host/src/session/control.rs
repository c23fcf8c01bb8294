//! Control flow on the device: the If, Loop and Scan nodes a staged run meets
//! ([`planner::stage::Control`]).
//!
//! The session runs such a node between stages. Each body runs as a graph of its own
//! ([`planner::stage::body_graph`]: its inputs, then its captures, as graph inputs), staged like
//! the session's graph (it may hold NonZero or control flow itself), its plans cached per input
//! signature and shape. Every value lives in the session's run-time region; a body's outputs
//! become the next iteration's inputs without a copy, and Scan's slices and stacked outputs are
//! strided device-to-device copies. The host reads a device value only where the next step depends
//! on it: an If's condition, a Loop's trip count and the condition its body computes, each unless
//! the host already knows it (a run input, a constant, the condition passed through unchanged).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use planner::stage::{Captured, Control, body_graph, body_input_name, body_output_dims, body_symbol};
use planner::{Binding, ConstTensor, DType, Graph, op::Op};

use super::Session;
use super::staged::{Held, MAX_STAGE_PLANS, StageCache};
use crate::error::HostError;
use crate::reference::lanes::Lanes;
use crate::specialize::{self, Key};
use crate::tensor::HostTensor;

/// Largest input (elements) a body's plan may be specialized on (a loop counter used as a slice
/// bound).
const SPECIALIZE_MAX_ELEMS: usize = 64;

/// The plans of one body for one input signature (element type and rank of each input).
struct SignaturePlans {
    /// The body as a graph of its own.
    graph: Graph,
    /// Its stage plans by input shapes (and specialized values) and counts.
    cache: StageCache,
    /// Whether its plans are specialized on the values of small integer inputs the host knows
    /// (set when the generic plan failed to compile).
    specialize: bool,
}

/// A control-flow body and its plans.
pub(super) struct BodyPlans {
    graph: Graph,
    /// Per capture, the constant it captures (`None`: a value the run passes).
    constants: Vec<Option<ConstTensor>>,
    by_signature: HashMap<Vec<(DType, usize)>, SignaturePlans>,
}

/// A control-flow node of a stage, with its bodies' plans (compiled on first use).
pub(super) struct ControlPlan {
    control: Control,
    bodies: Vec<Mutex<BodyPlans>>,
}

impl ControlPlan {
    pub(super) fn new(control: Control) -> Self {
        let bodies = (control.op.subgraphs().into_iter().zip(&control.captures))
            .map(|(g, caps)| {
                let constants = caps
                    .iter()
                    .map(|c| match c {
                        Captured::Constant(k) => Some(k.clone()),
                        Captured::Value(_) => None,
                    })
                    .collect();
                Mutex::new(BodyPlans { graph: g.clone(), constants, by_signature: HashMap::new() })
            })
            .collect();
        ControlPlan { control, bodies }
    }
}

/// An error of a control-flow node, naming it.
fn node_error(c: &Control, detail: impl std::fmt::Display) -> HostError {
    HostError::Op { node: c.label.clone(), op: c.op.name(), detail: detail.to_string() }
}

/// Element type and shape of output `out` of `cp`'s first body had it run on inputs of `sig`:
/// from shape inference where it knows them, else from the output's declared info (`[]` when it
/// has none), as the reference executor's.
fn empty_element(
    cp: &ControlPlan,
    sig: &[(DType, Vec<usize>)],
    out: usize,
) -> Result<(DType, Vec<usize>), HostError> {
    let c = &cp.control;
    let body = cp.bodies[0].lock().map_err(|_| node_error(c, "a body's plans were poisoned"))?;
    let g = &body.graph;
    let values = match c.op {
        Op::Loop(_) => crate::reference::control::first_iteration(),
        _ => Vec::new(),
    };
    let declared = g.outputs.get(out).and_then(|&v| g.value(v)).and_then(|v| v.info.clone());
    let inferred = body_output_dims(g, &body.constants, sig, &values).ok().and_then(|o| o.get(out).cloned());
    Ok(match (inferred, declared) {
        (Some((dtype, Some(dims))), _) => (dtype, dims),
        (_, Some(i)) => (i.dtype, i.shape.as_known().unwrap_or_default()),
        (Some((dtype, None)), None) => (dtype, Vec::new()),
        (None, None) => (DType::F32, Vec::new()),
    })
}

/// Elements of `dims`.
fn elems(dims: &[usize]) -> u64 {
    dims.iter().map(|&d| d as u64).product()
}

impl Session<'_> {
    /// Runs control-flow node `c` on the values of `env`; puts its outputs there and binds the
    /// symbols of their dims in `counts`.
    pub(super) fn run_control(
        &mut self,
        cp: &ControlPlan,
        env: &mut HashMap<String, Held>,
        counts: &mut Binding,
    ) -> Result<(), HostError> {
        let c = &cp.control;
        let input = |slot: usize| -> Result<Option<Held>, HostError> {
            match c.inputs.get(slot).cloned().flatten() {
                None => Ok(None),
                Some(name) => env
                    .get(&name)
                    .cloned()
                    .map(Some)
                    .ok_or_else(|| node_error(c, format!("input `{name}` is not held by the run"))),
            }
        };
        let inputs: Vec<Option<Held>> = (0..c.inputs.len()).map(input).collect::<Result<_, _>>()?;
        let captures: Vec<Vec<Held>> = c
            .captures
            .iter()
            .map(|caps| {
                (caps.iter())
                    .filter_map(|k| match k {
                        Captured::Value(n) => Some(n),
                        Captured::Constant(_) => None,
                    })
                    .map(|n| {
                        env.get(n)
                            .cloned()
                            .ok_or_else(|| node_error(c, format!("captured `{n}` is not held by the run")))
                    })
                    .collect()
            })
            .collect::<Result<_, _>>()?;
        let outputs = match &c.op {
            Op::If(_) => {
                let cond = inputs.first().cloned().flatten().ok_or_else(|| node_error(c, "no condition"))?;
                let branch = if self.scalar(&cond).map_err(|e| node_error(c, e))? != 0.0 { 0 } else { 1 };
                self.run_body(cp, branch, captures[branch].clone(), "the taken branch")?
            }
            Op::Loop(_) => self.run_loop(cp, &inputs, &captures[0])?,
            Op::Scan(s) => self.run_scan(cp, s, &inputs, &captures[0])?,
            _ => return Err(node_error(c, "not a control-flow node")),
        };
        if outputs.len() != c.outputs.len() {
            for h in &outputs {
                self.region.free(h.offset)?;
            }
            return Err(node_error(c, format!("{} outputs for {} slots", outputs.len(), c.outputs.len())));
        }
        let mut outputs = outputs.into_iter();
        for (slot, (syms, dtype)) in c.outputs.iter().zip(&c.symbols) {
            let Some(h) = outputs.next() else { break };
            let bad = slot.is_some() && (h.dtype != *dtype || h.dims.len() != syms.len());
            match slot {
                Some(name) if !bad => {
                    for (s, &d) in syms.iter().zip(&h.dims) {
                        counts.set(s, d);
                    }
                    self.hold_as(env, name, h)?;
                }
                _ => {
                    let detail = format!(
                        "output `{}` is {} {:?}; shape inference expected {dtype} of rank {}",
                        slot.clone().unwrap_or_default(),
                        h.dtype,
                        h.dims,
                        syms.len()
                    );
                    self.region.free(h.offset)?;
                    if bad {
                        // The outputs not placed yet go too.
                        self.free_all(&outputs.collect::<Vec<_>>())?;
                        return Err(node_error(c, detail));
                    }
                }
            }
        }
        Ok(())
    }

    /// The value of a one-element held value: from the host when it knows it, else read back
    /// from the device (a wait for the stream).
    fn scalar(&mut self, h: &Held) -> Result<f64, HostError> {
        let t = match &h.known {
            Some(t) => (**t).clone(),
            None => {
                let raw = self.region.read(&self.stream, h.offset, h.bytes)?;
                self.stream.synchronize().map_err(HostError::driver("reading a condition back"))?;
                HostTensor::from_const(&planner::ConstTensor::new(h.dtype, h.dims.clone(), raw)?)?
            }
        };
        match Lanes::of(&t)?.to_f64s().as_slice() {
            [v] => Ok(*v),
            other => Err(HostError::Arena { detail: format!("a condition of {} elements", other.len()) }),
        }
    }

    /// Lets go of every value of `hs`.
    fn free_all(&mut self, hs: &[Held]) -> Result<(), HostError> {
        for h in hs {
            self.region.free(h.offset)?;
        }
        Ok(())
    }

    /// ONNX Loop: `(M?, cond?, v_initial...)` → `(v_final..., scan outputs stacked on a new axis 0)`.
    fn run_loop(
        &mut self,
        cp: &ControlPlan,
        inputs: &[Option<Held>],
        captures: &[Held],
    ) -> Result<Vec<Held>, HostError> {
        let c = &cp.control;
        let trip = match inputs.first().cloned().flatten() {
            Some(m) => Some(self.scalar(&m).map_err(|e| node_error(c, format!("M: {e}")))? as i64),
            None => None,
        };
        let cond_given = match inputs.get(1).cloned().flatten() {
            Some(h) => Some(self.scalar(&h).map_err(|e| node_error(c, format!("cond: {e}")))? != 0.0),
            None => None,
        };
        if trip.is_none() && cond_given.is_none() {
            return Err(node_error(c, "a Loop with neither trip count nor condition never ends"));
        }
        // `cond_through`: the body passes its condition through unchanged (nothing to read back).
        let (n_in, n_out, cond_through) = {
            let body = cp.bodies[0].lock().map_err(|_| node_error(c, "a body's plans were poisoned"))?;
            let g = &body.graph;
            (g.inputs.len(), g.outputs.len(), g.outputs.first().is_some_and(|o| Some(o) == g.inputs.get(1)))
        };
        let mut state: Vec<Held> = inputs.iter().skip(2).flatten().cloned().collect();
        let n = state.len();
        if n_in != 2 + n || n_out < 1 + n {
            return Err(node_error(
                c,
                format!("body has {n_in} inputs and {n_out} outputs for {n} loop-carried values"),
            ));
        }
        for h in &state {
            self.region.retain(h.offset)?;
        }
        let mut scans: Vec<Vec<Held>> = vec![Vec::new(); n_out - 1 - n];
        // The body's input signature, for the shape of a scan output no iteration produced.
        let mut sig = vec![(DType::I64, vec![]), (DType::Bool, vec![])];
        sig.extend(state.iter().chain(captures).map(|h| (h.dtype, h.dims.clone())));
        let mut cond = cond_given.unwrap_or(true);
        let mut i = 0i64;
        let ran = (|| -> Result<(), HostError> {
            while cond && trip.is_none_or(|m| i < m) {
                let max = self.options.max_loop_iterations;
                if i as u64 >= max {
                    return Err(node_error(
                        c,
                        format!("runs more than {max} iterations (the limit of one Loop)"),
                    ));
                }
                let counter = self.hold_host(&HostTensor::new(vec![], vec![i])?)?;
                let flag = match self.hold_host(&HostTensor::new(vec![], vec![cond])?) {
                    Ok(f) => f,
                    Err(e) => {
                        self.free_all(&[counter])?;
                        return Err(e);
                    }
                };
                let mut args = vec![counter.clone(), flag.clone()];
                args.extend(state.iter().cloned());
                args.extend(captures.iter().cloned());
                let outs = self.run_body(cp, 0, args, &format!("iteration {i}"));
                self.free_all(&[counter, flag])?;
                let mut outs = outs?.into_iter();
                let cond_out = outs.next().ok_or_else(|| node_error(c, "the body gave no condition"))?;
                let next_cond =
                    if cond_given.is_some() && !cond_through { Some(self.scalar(&cond_out)) } else { None };
                self.free_all(&[cond_out])?;
                let old = std::mem::replace(&mut state, outs.by_ref().take(n).collect());
                self.free_all(&old)?;
                for (s, t) in scans.iter_mut().zip(outs) {
                    s.push(t);
                }
                if let Some(next) = next_cond {
                    cond = next.map_err(|e| node_error(c, format!("the body's condition: {e}")))? != 0.0;
                }
                i += 1;
            }
            Ok(())
        })();
        self.finish_iterations(ran, state, scans, |me, j, parts| me.stack(cp, parts, 0, 1 + n + j, &sig))
    }

    /// ONNX Scan (opset 9+): `(states..., scanned...)` → `(final states..., stacked scan outputs...)`.
    fn run_scan(
        &mut self,
        cp: &ControlPlan,
        s: &planner::op::Scan,
        inputs: &[Option<Held>],
        captures: &[Held],
    ) -> Result<Vec<Held>, HostError> {
        let c = &cp.control;
        let all: Vec<Held> = inputs
            .iter()
            .enumerate()
            .map(|(i, h)| h.clone().ok_or_else(|| node_error(c, format!("input {i} is missing"))))
            .collect::<Result<_, _>>()?;
        let m = s.num_scan_inputs;
        let n = all.len().checked_sub(m).ok_or_else(|| node_error(c, "fewer inputs than num_scan_inputs"))?;
        let (init, scanned) = all.split_at(n);
        let n_out = cp.bodies[0]
            .lock()
            .map_err(|_| node_error(c, "a body's plans were poisoned"))?
            .graph
            .outputs
            .len();
        let k =
            n_out.checked_sub(n).ok_or_else(|| node_error(c, "the body has fewer outputs than states"))?;
        let mut axes = Vec::with_capacity(m);
        let mut len = None;
        for (j, x) in scanned.iter().enumerate() {
            let rank = x.dims.len() as i64;
            let a = s.scan_input_axes.get(j).copied().unwrap_or(0);
            let a = if a < 0 { a + rank } else { a };
            if !(0..rank).contains(&a) {
                return Err(node_error(c, format!("scan input {j} has no axis {a}")));
            }
            let l = x.dims[a as usize];
            if len.is_some_and(|p| p != l) {
                return Err(node_error(
                    c,
                    format!("scan input {j} has length {l} along axis {a}, others {len:?}"),
                ));
            }
            len = Some(l);
            axes.push(a as usize);
        }
        let len = len.ok_or_else(|| node_error(c, "Scan needs at least one scan input"))?;
        let mut state: Vec<Held> = init.to_vec();
        for h in &state {
            self.region.retain(h.offset)?;
        }
        let mut scans: Vec<Vec<Held>> = vec![Vec::new(); k];
        let mut sig: Vec<(DType, Vec<usize>)> = init.iter().map(|h| (h.dtype, h.dims.clone())).collect();
        for (x, &a) in scanned.iter().zip(&axes) {
            let mut d = x.dims.clone();
            d.remove(a);
            sig.push((x.dtype, d));
        }
        sig.extend(captures.iter().map(|h| (h.dtype, h.dims.clone())));
        let ran = (|| -> Result<(), HostError> {
            for t in 0..len {
                let mut args = state.clone();
                let mut slices = Vec::with_capacity(m);
                for (j, x) in scanned.iter().enumerate() {
                    let pos = if s.scan_input_directions.get(j) == Some(&1) { len - 1 - t } else { t };
                    match self.slice(x, axes[j], pos) {
                        Ok(h) => slices.push(h),
                        Err(e) => {
                            self.free_all(&slices)?;
                            return Err(e);
                        }
                    }
                }
                args.extend(slices.iter().cloned());
                args.extend(captures.iter().cloned());
                let outs = self.run_body(cp, 0, args, &format!("iteration {t}"));
                self.free_all(&slices)?;
                let mut outs = outs?.into_iter();
                let old = std::mem::replace(&mut state, outs.by_ref().take(n).collect());
                self.free_all(&old)?;
                for (acc, e) in scans.iter_mut().zip(outs) {
                    acc.push(e);
                }
            }
            Ok(())
        })();
        self.finish_iterations(ran, state, scans, |me, j, parts| {
            if s.scan_output_directions.get(j) == Some(&1) {
                parts.reverse();
            }
            let rank = match parts.first() {
                Some(p) => p.dims.len(),
                None => empty_element(cp, &sig, n + j)?.1.len(),
            } as i64
                + 1;
            let a = s.scan_output_axes.get(j).copied().unwrap_or(0);
            let a = if a < 0 { a + rank } else { a };
            if !(0..rank).contains(&a) {
                return Err(node_error(c, format!("scan output {j} has no axis {a}")));
            }
            me.stack(cp, parts, a as usize, n + j, &sig)
        })
    }

    /// The outputs of a Loop or Scan whose iterations `ran`: the final `state`, then each list of
    /// scan parts stacked by `stack(self, j, parts)`. Every part is let go; on an error, the state
    /// and the outputs already stacked too.
    fn finish_iterations(
        &mut self,
        ran: Result<(), HostError>,
        mut state: Vec<Held>,
        mut scans: Vec<Vec<Held>>,
        mut stack: impl FnMut(&mut Self, usize, &mut Vec<Held>) -> Result<Held, HostError>,
    ) -> Result<Vec<Held>, HostError> {
        let mut out = Vec::with_capacity(scans.len());
        let mut result = ran;
        if result.is_ok() {
            for (j, parts) in scans.iter_mut().enumerate() {
                match stack(self, j, parts) {
                    Ok(h) => out.push(h),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
        }
        for parts in &scans {
            self.free_all(parts)?;
        }
        match result {
            Ok(()) => {
                state.extend(out);
                Ok(state)
            }
            Err(e) => {
                self.free_all(&out)?;
                self.free_all(&state)?;
                Err(e)
            }
        }
    }

    /// Position `pos` of `x` along `axis`, copied into a block of its own.
    fn slice(&mut self, x: &Held, axis: usize, pos: usize) -> Result<Held, HostError> {
        let es = x.dtype.size_bytes() as u64;
        let (outer, extent, inner) =
            (elems(&x.dims[..axis]), x.dims[axis] as u64, elems(&x.dims[axis + 1..]) * es);
        let mut dims = x.dims.clone();
        dims.remove(axis);
        let h = self.hold(outer * inner, x.dtype, dims)?;
        self.region.copy_2d(
            &self.stream,
            (x.offset + pos as u64 * inner, extent * inner),
            (h.offset, inner),
            (inner, outer),
        )?;
        Ok(h)
    }

    /// `parts` (body output `out` of each iteration) stacked along a new `axis`; with no parts, an
    /// empty value of the element type and shape the body would give on inputs of `sig`
    /// ([`empty_element`]).
    fn stack(
        &mut self,
        cp: &ControlPlan,
        parts: &[Held],
        axis: usize,
        out: usize,
        sig: &[(DType, Vec<usize>)],
    ) -> Result<Held, HostError> {
        let c = &cp.control;
        let Some(first) = parts.first() else {
            let (dtype, mut dims) = empty_element(cp, sig, out)?;
            dims.insert(axis.min(dims.len()), 0);
            return self.hold(0, dtype, dims);
        };
        if let Some(p) = parts.iter().find(|p| p.dims != first.dims || p.dtype != first.dtype) {
            return Err(node_error(
                c,
                format!(
                    "scan output {out} is {} {:?} in one iteration and {} {:?} in another",
                    first.dtype, first.dims, p.dtype, p.dims
                ),
            ));
        }
        let es = first.dtype.size_bytes() as u64;
        let count = parts.len() as u64;
        let (outer, inner) = (elems(&first.dims[..axis]), elems(&first.dims[axis..]) * es);
        let mut dims = first.dims.clone();
        dims.insert(axis, parts.len());
        let h = self.hold(outer * inner * count, first.dtype, dims)?;
        for (t, p) in parts.iter().enumerate() {
            self.region.copy_2d(
                &self.stream,
                (p.offset, inner),
                (h.offset + t as u64 * inner, count * inner),
                (inner, outer),
            )?;
        }
        Ok(h)
    }

    /// Runs body `b` of `cp` on `args` (its inputs, then its captures); returns its outputs, each
    /// held for the caller. `what` names the run in errors (an iteration, the taken branch).
    fn run_body(
        &mut self,
        cp: &ControlPlan,
        b: usize,
        args: Vec<Held>,
        what: &str,
    ) -> Result<Vec<Held>, HostError> {
        let c = &cp.control;
        let mut body = cp.bodies[b].lock().map_err(|_| node_error(c, "a body's plans were poisoned"))?;
        let sig: Vec<(DType, usize)> = args.iter().map(|h| (h.dtype, h.dims.len())).collect();
        if !body.by_signature.contains_key(&sig) {
            let graph = body_graph(&body.graph, &body.constants, &sig).map_err(|e| node_error(c, e))?;
            body.by_signature
                .insert(sig.clone(), SignaturePlans { graph, cache: StageCache::new(), specialize: false });
        }
        let plans = body.by_signature.get_mut(&sig).expect("inserted above");
        let mut dims = Binding::new();
        for (i, h) in args.iter().enumerate() {
            for (d, &size) in h.dims.iter().enumerate() {
                dims.set(&body_symbol(i, d), size);
            }
        }
        let specializable = |args: &[Held]| -> Vec<(String, DType, Vec<usize>, Vec<u8>)> {
            (args.iter().enumerate())
                .filter_map(|(i, h)| {
                    let t = h.known.as_ref()?;
                    (t.dtype() == DType::I64 && t.len() <= SPECIALIZE_MAX_ELEMS).then(|| {
                        (body_input_name(i), t.dtype(), t.shape().to_vec(), t.to_const().bytes.into_vec())
                    })
                })
                .collect()
        };
        let mut key = Key { dims, values: if plans.specialize { specializable(&args) } else { Vec::new() } };
        let mut cache = std::mem::take(&mut plans.cache);
        let ran = (|| {
            if !cache.contains_key(&(key.clone(), Binding::new())) {
                let compiled = self.first_stage(&specialize::graph(&plans.graph, &key), &key.dims);
                let sp = match compiled {
                    Err(_) if !plans.specialize && !specializable(&args).is_empty() => {
                        // A loop counter used as a shape operand: plan for its values.
                        plans.specialize = true;
                        key.values = specializable(&args);
                        match cache.get(&(key.clone(), Binding::new())) {
                            Some(sp) => sp.clone(),
                            None => {
                                Arc::new(self.first_stage(&specialize::graph(&plans.graph, &key), &key.dims)?)
                            }
                        }
                    }
                    other => Arc::new(other?),
                };
                if cache.len() >= MAX_STAGE_PLANS {
                    // A loop counter specialized on: a plan per value; keep the cache bounded.
                    self.evict_stages(&mut cache, |_| false)?;
                }
                cache.insert((key.clone(), Binding::new()), sp);
            }
            let mut env = HashMap::new();
            for (i, h) in args.iter().enumerate() {
                self.region.retain(h.offset)?;
                env.insert(body_input_name(i), h.clone());
            }
            let outputs: Vec<String> =
                plans.graph.outputs.iter().map(|&v| plans.graph.value_name(v)).collect();
            let outcome = self.stages_into(&mut cache, &key, &outputs, &mut env);
            self.finish_graph(outcome, &outputs, env)
        })();
        plans.cache = cache;
        let outs = ran.map_err(|e| node_error(c, format!("{what}: {e}")))?;
        Ok(outs.into_iter().map(|(_, h)| h).collect())
    }
}
