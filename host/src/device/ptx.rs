//! The PTX that `build.rs` compiled from `kernels-gpu`, embedded in the binary, one string per
//! flavour.

/// Which PTX build a context loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PtxFlavour {
    /// `sm_80` target: any GPU of compute capability 8.0 or newer, through the driver's JIT.
    Portable,
    /// `sm_90a` target with the Hopper-only instructions (wgmma, async-proxy fences); runs only on
    /// compute capability 9.0 exactly (H100, H200).
    Hopper,
}

impl PtxFlavour {
    /// Both flavours.
    pub const ALL: [PtxFlavour; 2] = [PtxFlavour::Portable, PtxFlavour::Hopper];

    /// The flavour for a device of compute capability `major.minor`, or `None` below 8.0.
    pub fn for_compute_capability(major: i32, minor: i32) -> Option<PtxFlavour> {
        match (major, minor) {
            (9, 0) => Some(PtxFlavour::Hopper),
            (m, _) if m >= 8 => Some(PtxFlavour::Portable),
            _ => None,
        }
    }

    /// Short name, as in `kernels-{name}.ptx`.
    pub const fn name(self) -> &'static str {
        match self {
            PtxFlavour::Portable => "portable",
            PtxFlavour::Hopper => "hopper",
        }
    }

    /// The embedded PTX text.
    pub const fn source(self) -> &'static str {
        match self {
            PtxFlavour::Portable => include_str!(concat!(env!("OUT_DIR"), "/kernels-portable.ptx")),
            PtxFlavour::Hopper => include_str!(concat!(env!("OUT_DIR"), "/kernels-hopper.ptx")),
        }
    }

    /// Names of the `.entry` functions in this flavour's PTX.
    pub fn entries(self) -> Vec<&'static str> {
        super::ptx_split::entry_names(self.source()).collect()
    }

    /// This flavour's PTX split into functions (parsed on first use, once per process).
    pub(crate) fn index(self) -> &'static PtxIndex<'static> {
        static INDEX: [std::sync::OnceLock<PtxIndex<'static>>; 2] =
            [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
        INDEX[self as usize].get_or_init(|| {
            PtxIndex::parse(self.source()).expect("the embedded PTX parses (checked by the tests)")
        })
    }

    /// The `.target` line of this flavour's PTX (for `doctor`).
    pub fn target(self) -> &'static str {
        self.source().lines().find(|l| l.starts_with(".target")).unwrap_or("?")
    }
}

/// A standalone PTX module with just `entry` and the functions it calls (transitively), plus the
/// file's header and global declarations: loading it JITs one kernel instead of all of them.
/// `None` when `ptx` has no such entry. (Parses `ptx` each time: [`PtxIndex`] parses once.)
#[cfg(test)]
pub fn kernel_module(ptx: &str, entry: &str) -> Option<String> {
    PtxIndex::parse(ptx)?.module(entry)
}

pub(crate) use super::ptx_split::PtxIndex;

#[cfg(test)]
mod tests {
    use super::super::ptx_split::callees;
    use super::*;
    use kernels_gpu::abi::KernelId;

    #[test]
    fn every_kernel_id_is_an_entry_in_both_flavours() {
        for flavour in PtxFlavour::ALL {
            let entries = flavour.entries();
            for k in KernelId::ALL {
                assert!(
                    entries.contains(&k.symbol()),
                    "{} missing from the {} PTX",
                    k.symbol(),
                    flavour.name()
                );
            }
            assert_eq!(
                entries.len(),
                KernelId::ALL.len(),
                "{} PTX has entries KernelId lacks: {entries:?}",
                flavour.name()
            );
        }
    }

    #[test]
    fn flavours_target_their_architectures() {
        assert!(PtxFlavour::Portable.target().contains("sm_80"), "{}", PtxFlavour::Portable.target());
        assert!(PtxFlavour::Hopper.target().contains("sm_90a"), "{}", PtxFlavour::Hopper.target());
        let version =
            |f: PtxFlavour| f.source().lines().find(|l| l.starts_with(".version")).unwrap_or("").to_owned();
        let hopper = version(PtxFlavour::Hopper);
        let v: f32 = hopper.trim_start_matches(".version").trim().parse().unwrap_or(0.0);
        assert!(v >= 8.0, "Hopper PTX ISA must be >= 8.0, got `{hopper}`");
        assert!(PtxFlavour::Hopper.source().contains("wgmma.fence.sync.aligned"));
        assert!(!PtxFlavour::Portable.source().contains("wgmma"));
    }

    #[test]
    fn flavour_choice_follows_compute_capability() {
        assert_eq!(PtxFlavour::for_compute_capability(9, 0), Some(PtxFlavour::Hopper));
        assert_eq!(PtxFlavour::for_compute_capability(8, 6), Some(PtxFlavour::Portable));
        assert_eq!(PtxFlavour::for_compute_capability(10, 0), Some(PtxFlavour::Portable));
        assert_eq!(PtxFlavour::for_compute_capability(7, 5), None);
    }

    #[test]
    fn the_mlp_kernel_runs_as_a_cluster_of_the_abi_size_on_hopper_only() {
        let directive = format!(".reqnctapercluster {}, 1, 1", kernels_gpu::abi::MLP_CLUSTER);
        let hopper = kernel_module(PtxFlavour::Hopper.source(), "mlp_f32").expect("mlp_f32 in hopper");
        assert!(hopper.contains(&directive), "{}", &hopper[..400]);
        let portable = kernel_module(PtxFlavour::Portable.source(), "mlp_f32").expect("mlp_f32 in portable");
        assert!(!portable.contains(".reqnctapercluster"));
    }

    #[test]
    fn hopper_kernels_release_their_dependents_before_they_exit() {
        let module = |f: PtxFlavour, k: &str| kernel_module(f.source(), k).unwrap_or_else(|| panic!("{k}"));
        const RELEASE: &str = "griddepcontrol.launch_dependents;";
        // Explicitly, once only the epilogue is left, or right after the wait the build inserts.
        for k in [
            "gemm_tc_packed_norm_f32",
            "gemm_tc_packed_program_pair_f32",
            "attention_f32",
            "gather_program_f32",
        ]
        .into_iter()
        .chain(["layer_norm_f32", "ew_program_f32", "softmax_f32"])
        {
            assert!(module(PtxFlavour::Hopper, k).contains(RELEASE), "{k}");
            assert!(!module(PtxFlavour::Portable, k).contains("griddepcontrol"), "{k}");
        }
        // Many-wave or long kernels release only as they exit.
        for k in ["gemm_f32", "conv_gemm_f32", "selective_scan_f32", "mlp_f32"] {
            assert!(!module(PtxFlavour::Hopper, k).contains(RELEASE), "{k}");
        }
        // The inserted release follows the inserted wait.
        let ln = module(PtxFlavour::Hopper, "layer_norm_f32");
        let (wait, release) = (ln.find("griddepcontrol.wait;"), ln.find(RELEASE));
        assert!(matches!((wait, release), (Some(w), Some(r)) if w < r), "{ln}");
    }

    #[test]
    fn no_kernel_writes_what_a_running_wgmma_still_reads() {
        let index = PtxFlavour::Hopper.index();
        let mut checked = 0;
        for entry in PtxFlavour::Hopper.entries() {
            let body = index.definition(entry).unwrap_or_else(|| panic!("{entry}: no definition"));
            if !body.contains("wgmma.mma_async") {
                continue;
            }
            checked += 1;
            let found = super::wgmma_check::hazards(body);
            assert!(
                found.is_empty(),
                "{entry}: writes before the wait that retires the group:\n{}",
                found.join("\n")
            );
        }
        assert!(checked >= 4, "the wgmma GEMMs were not found ({checked})");
    }

    #[test]
    fn the_wgmma_check_finds_an_operand_overwritten_around_the_loop() {
        // The shape of the first gemm_wg128_f32: the loop's A fragments carried in one register
        // set, rewritten after a wait that leaves the group reading them in flight (and again at
        // the top of the next turn).
        let asm = |a: &str| {
            format!(
                "\t// begin inline asm\n\t{{ .reg .pred p; setp.ne.b32 p, %r9, 0;\nwgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {{%f1, %f2, %f3, %f4}},\n{{{a}}}, %rd1, p, 1, 1; }}\n\t// end inline asm\n"
            )
        };
        let looped = |carried: bool| {
            let refill =
                if carried { "\tcvt.rna.tf32.f32 %r1, %f9;\n" } else { "\tcvt.rna.tf32.f32 %r5, %f9;\n" };
            format!(
                ".entry k(\n)\n{{\n$L__BB0_1:\n\t// begin inline asm\n\twgmma.fence.sync.aligned;\n\t// end inline asm\n{}\t// begin inline asm\n\twgmma.commit_group.sync.aligned;\n\t// end inline asm\n\t// begin inline asm\n\twgmma.wait_group.sync.aligned 1;\n\t// end inline asm\n{refill}\t@%p1 bra \t$L__BB0_1;\n\t// begin inline asm\n\twgmma.wait_group.sync.aligned 0;\n\t// end inline asm\n\tst.global.f32 [%rd2], %f1;\n\tret;\n",
                asm("%r1, %r2, %r3, %r4")
            )
        };
        let bad = super::wgmma_check::hazards(&looped(true));
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].contains("%r1"), "{bad:?}");
        assert!(super::wgmma_check::hazards(&looped(false)).is_empty());
        // An accumulator written by another instruction while its group runs is caught too.
        let acc = looped(false).replace("\tcvt.rna.tf32.f32 %r5, %f9;\n", "\tmov.f32 %f2, 0f00000000;\n");
        assert_eq!(super::wgmma_check::hazards(&acc).len(), 1);
    }

    #[test]
    fn every_kernel_splits_into_a_module_with_its_callees() {
        for flavour in PtxFlavour::ALL {
            let all = flavour.source();
            for &k in KernelId::ALL {
                let m =
                    kernel_module(all, k.symbol()).unwrap_or_else(|| panic!("{} has no module", k.symbol()));
                assert!(m.contains(&format!(".entry {}(", k.symbol())), "{}", k.symbol());
                assert!(m.starts_with(".version") || m.contains("\n.target"), "{}: header", k.symbol());
                // Exactly one entry, every called function defined, braces balanced.
                assert_eq!(m.matches(".entry ").count(), 1, "{}", k.symbol());
                // Every function the module calls is defined in it.
                for c in callees(&m) {
                    assert!(
                        kernel_module(&m, c).is_some(),
                        "{}: calls {c}, not defined in its module",
                        k.symbol()
                    );
                }
                assert_eq!(m.matches('{').count(), m.matches('}').count(), "{}", k.symbol());
            }
            assert!(kernel_module(all, "no_such_kernel").is_none());
        }
    }
}

/// The wgmma register-operand rule, checked on PTX text: a `wgmma.mma_async` reads its A fragments
/// (when they come from registers) and its accumulators until the `wgmma.wait_group` that retires
/// its group; PTX leaves a write to any of them before that undefined (ptxas may schedule it
/// ahead of the still-running group: the shipped `gemm_wg128_f32` computed wrong results that way
/// while the driver's JIT of the same PTX happened not to).
#[cfg(test)]
mod wgmma_check {
    use std::collections::{BTreeMap, BTreeSet};

    /// The successor marking a block that ends in an unconditional branch.
    const NO_FALL_THROUGH: &str = "<no fall-through>";

    /// Registers of in-flight wgmmas: `[0]` the open (uncommitted) group, `[i]` the i-th most
    /// recently committed one.
    type Pending = Vec<BTreeSet<String>>;

    /// One instruction: its text (an inline-asm block is one instruction) and its line.
    struct Instr {
        text: String,
        line: usize,
    }

    /// `body` (an entry's text) cut into basic blocks: (label, instructions, successors).
    fn blocks(body: &str) -> Vec<(Option<String>, Vec<Instr>, Vec<String>)> {
        let mut out: Vec<(Option<String>, Vec<Instr>, Vec<String>)> = vec![(None, Vec::new(), Vec::new())];
        let mut asm: Option<Instr> = None;
        let mut targets: Option<Vec<String>> = None;
        for (line, raw) in body.lines().enumerate() {
            let t = raw.split("//").next().unwrap_or("").trim();
            if raw.trim() == "// begin inline asm" {
                asm = Some(Instr { text: String::new(), line });
                continue;
            }
            if raw.trim() == "// end inline asm" {
                if let Some(i) = asm.take() {
                    out.last_mut().expect("a block").1.push(i);
                }
                continue;
            }
            if let Some(i) = asm.as_mut() {
                i.text.push_str(raw);
                i.text.push('\n');
                continue;
            }
            if t.is_empty() {
                continue;
            }
            // A `.branchtargets` list (of `brx.idx`) spans lines up to its `;`.
            if let Some(list) = targets.as_mut() {
                list.extend(
                    t.trim_end_matches(';').split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()),
                );
                if t.ends_with(';') {
                    let list = targets.take().unwrap_or_default();
                    out.last_mut().expect("a block").2.extend(list);
                }
                continue;
            }
            if let Some(label) = t.strip_suffix(':') {
                out.push((Some(label.to_owned()), Vec::new(), Vec::new()));
                continue;
            }
            if let Some(rest) = t.split_once(".branchtargets").map(|(_, r)| r) {
                targets = Some(Vec::new());
                let rest = rest.trim();
                if !rest.is_empty() {
                    let list = targets.as_mut().expect("just set");
                    list.extend(
                        rest.trim_end_matches(';')
                            .split(',')
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty()),
                    );
                    if rest.ends_with(';') {
                        out.last_mut().expect("a block").2.extend(targets.take().unwrap_or_default());
                    }
                }
                continue;
            }
            let op = t
                .trim_start_matches(|c: char| c == '@' || c == '!' || c == '%' || c.is_alphanumeric())
                .trim();
            let op = if t.starts_with('@') { op } else { t };
            if op.starts_with("bra") {
                let target = op.split_whitespace().nth(1).unwrap_or("").trim_end_matches(';').to_owned();
                let block = out.last_mut().expect("a block");
                block.2.push(target);
                // An unconditional branch ends its block without a fall-through.
                if !t.starts_with('@') {
                    block.2.push(NO_FALL_THROUGH.into());
                }
                out.push((None, Vec::new(), Vec::new()));
                continue;
            }
            out.last_mut().expect("a block").1.push(Instr { text: t.to_owned(), line });
        }
        out
    }

    /// The registers inside the `n`-th `{...}` of `text`.
    fn brace_regs(text: &str, n: usize) -> Vec<String> {
        let Some(group) = text.split('{').skip(1).filter(|g| !g.trim_start().starts_with(".reg")).nth(n)
        else {
            return Vec::new();
        };
        let inner = group.split('}').next().unwrap_or("");
        inner.split(',').map(|r| r.trim().to_owned()).filter(|r| r.starts_with('%')).collect()
    }

    /// Destination registers of an instruction line (`op dst, ...`; `{a, b}` destinations too).
    fn destinations(line: &str) -> Vec<String> {
        let line = line.trim().trim_end_matches(';');
        let line = if line.starts_with('@') {
            line.split_once(char::is_whitespace).map_or("", |x| x.1)
        } else {
            line
        };
        let Some((op, rest)) = line.trim().split_once(char::is_whitespace) else { return Vec::new() };
        if op.starts_with("st.")
            || op.starts_with("cp.")
            || op.starts_with("bar")
            || op.starts_with("red.")
            || op.starts_with("wgmma")
            || op.starts_with("fence")
            || op.starts_with("griddepcontrol")
            || op.starts_with("ret")
            || op.starts_with("exit")
            || op.starts_with("trap")
            || op.starts_with("membar")
            || op.starts_with("call")
            || op.starts_with("prefetch")
            || op.starts_with("mbarrier.init")
            || op.starts_with("brx")
        {
            return Vec::new();
        }
        let rest = rest.trim();
        if let Some(group) = rest.strip_prefix('{') {
            return group.split('}').next().unwrap_or("").split(',').map(|r| r.trim().to_owned()).collect();
        }
        rest.split(',').next().map(|r| vec![r.trim().to_owned()]).unwrap_or_default()
    }

    /// Writes to a register an in-flight wgmma still reads or writes, as "line: text" (empty when
    /// the entry keeps the rule on every path).
    pub(super) fn hazards(body: &str) -> Vec<String> {
        let blocks = blocks(body);
        let index: BTreeMap<&str, usize> =
            blocks.iter().enumerate().filter_map(|(i, b)| b.0.as_deref().map(|l| (l, i))).collect();
        let mut entry: Vec<Option<Pending>> = vec![None; blocks.len()];
        entry[0] = Some(vec![BTreeSet::new()]);
        let mut found = BTreeSet::new();
        let join = |into: &mut Option<Pending>, from: &Pending| -> bool {
            let cur = into.get_or_insert_with(Vec::new);
            let mut changed = false;
            for (i, set) in from.iter().enumerate() {
                if cur.len() <= i {
                    cur.push(BTreeSet::new());
                    changed = true;
                }
                for r in set {
                    changed |= cur[i].insert(r.clone());
                }
            }
            changed
        };
        let mut changed = true;
        while changed {
            changed = false;
            for (b, (_, instrs, succs)) in blocks.iter().enumerate() {
                let Some(mut state) = entry[b].clone() else { continue };
                for ins in instrs {
                    for part in ins.text.split(';') {
                        let part = part.trim().trim_start_matches('{').trim_end_matches('}').trim();
                        if part.is_empty() || part.starts_with(".reg") {
                            continue;
                        }
                        if part.starts_with("wgmma.mma_async") {
                            let mut regs = brace_regs(part, 0);
                            regs.extend(brace_regs(part, 1));
                            state[0].extend(regs);
                        } else if part.starts_with("wgmma.commit_group") {
                            state.insert(0, BTreeSet::new());
                            state.truncate(9);
                        } else if let Some(n) = part.strip_prefix("wgmma.wait_group.sync.aligned") {
                            let n: usize = n.trim().parse().unwrap_or(0);
                            state.truncate(n + 1);
                        } else {
                            for d in destinations(part) {
                                if state.iter().any(|s| s.contains(&d)) {
                                    found.insert(format!("line {}: {part}", ins.line));
                                }
                            }
                        }
                    }
                }
                let fall = !succs.iter().any(|s| s == NO_FALL_THROUGH);
                let mut next: Vec<usize> =
                    succs.iter().filter_map(|s| index.get(s.as_str()).copied()).collect();
                if fall && b + 1 < blocks.len() {
                    next.push(b + 1);
                }
                for n in next {
                    changed |= join(&mut entry[n], &state);
                }
            }
        }
        found.into_iter().collect()
    }
}
