//! The plan printed one line per step (`ferrofuse inspect --plan`): each step's label, kernel,
//! launch shape and arguments with where they live (arena offset, input, output, weights).

use std::fmt;

use super::{Arg, Plan, StateSlot, Step};
use crate::graph::ValueId;

impl Plan {
    /// One line per step, in step order: `#i label kernel grid block [arguments and where they
    /// live]`, or `#i copy ...`, with `once` after the index of a hoisted step (the step lines of
    /// the plan's `Display`, without the lifted patterns before them and the arena line after).
    pub fn step_lines(&self) -> Vec<String> {
        let place = |v: ValueId| match self.memory.slots.get(v.index()).copied().flatten() {
            Some(s) => format!("{v}@arena+{:#x}", s.offset),
            None if self.inputs.contains(&self.memory.home(v)) => format!("{v}@input"),
            None if self.outputs.contains(&v) => format!("{v}@output"),
            None => format!("{v}@weights"),
        };
        // Hoisted steps run once per binding, not every run.
        let once = |i: usize| if i < self.hoisted { "once " } else { "" };
        let line = |(i, step): (usize, &Step)| match step {
            Step::Kernel { label, kernel, grid, block, args, .. } => {
                let vals: Vec<String> = args
                    .iter()
                    .filter_map(|a| match a {
                        Arg::Value(v) => Some(place(*v)),
                        Arg::Output(v) => Some(format!("out:{}", place(*v))),
                        Arg::State(name) => Some(format!("state:{name}")),
                        Arg::Status => Some("status".into()),
                        Arg::Null | Arg::Params(_) => None,
                    })
                    .collect();
                format!(
                    "#{i} {}{label} {} grid={grid:?} block={block:?} [{}]",
                    once(i),
                    kernel.symbol(),
                    vals.join(", ")
                )
            }
            Step::Copy { src, dst, bytes, .. } => {
                format!("#{i} {}copy {bytes} bytes {} -> {}", once(i), place(*src), place(*dst))
            }
        };
        self.steps.iter().enumerate().map(line).collect()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lifted {
            writeln!(f, "lifted {l}")?;
        }
        for l in self.step_lines() {
            writeln!(f, "{l}")?;
        }
        write!(f, "arena {} bytes", self.memory.arena_bytes)?;
        if self.hoisted > 0 {
            let kept: u64 = (self.hoisted_results().iter())
                .filter(|v| self.memory.slots.get(v.index()).copied().flatten().is_some())
                .filter_map(|v| self.values[v.index()].bytes())
                .sum();
            write!(f, ", {} steps once per binding (their results kept: {kept} bytes)", self.hoisted)?;
        }
        if !self.states.is_empty() {
            let bytes: u64 = self.states.iter().map(StateSlot::bytes).sum();
            write!(f, ", state {bytes} bytes in {} slots", self.states.len())?;
        }
        Ok(())
    }
}
