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
        self.source()
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
            .map(|rest| rest.split(['(', ' ']).next().unwrap_or(rest))
            .collect()
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

/// A top-level PTX function (`.func` or `.entry`) as text.
struct PtxFunction<'a> {
    name: &'a str,
    /// The forward declaration (ends with `;`), when the file has one.
    decl: Option<String>,
    /// The definition (ends with `}`).
    def: Option<String>,
    /// Where the definition stands among the file's definitions (PTX needs a function declared or
    /// defined before a call to it, so definitions keep the file's order).
    def_pos: usize,
}

/// The name of the function whose header line is `line` (`.func (.param ...) name`, `.entry name(`).
fn function_name(line: &str) -> Option<&str> {
    let at = line.find(".func").map(|i| i + 5).or_else(|| line.find(".entry").map(|i| i + 6))?;
    let mut rest = line[at..].trim_start();
    if rest.starts_with('(') {
        rest = rest[rest.find(')')? + 1..].trim_start();
    }
    let end = rest.find(|c: char| c == '(' || c.is_whitespace()).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Names of the functions `body` calls.
fn callees(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in body.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("call") else { continue };
        let rest = rest.strip_prefix(".uni").unwrap_or(rest).trim_start();
        // `call.uni (retval0), name, (params);` or `call.uni name, (params);`
        let rest = if rest.starts_with('(') {
            rest[rest.find(')').map_or(0, |i| i + 1)..].trim_start_matches([',', ' ', '\t'])
        } else {
            rest
        };
        let end = rest.find([',', ';', ' ', '(']).unwrap_or(rest.len());
        if end > 0 {
            out.push(&rest[..end]);
        }
    }
    out
}

/// A standalone PTX module with just `entry` and the functions it calls (transitively), plus the
/// file's header and global declarations: loading it JITs one kernel instead of all of them.
/// `None` when `ptx` has no such entry. (Parses `ptx` each time: [`PtxIndex`] parses once.)
#[cfg(test)]
pub fn kernel_module(ptx: &str, entry: &str) -> Option<String> {
    PtxIndex::parse(ptx)?.module(entry)
}

/// A PTX file split into its top-level functions once, to cut out one kernel's module after
/// another without parsing the file again.
pub(crate) struct PtxIndex<'a> {
    preamble: String,
    funcs: Vec<PtxFunction<'a>>,
}

impl<'a> PtxIndex<'a> {
    /// The functions of `ptx`; `None` when a function header cannot be read.
    pub(crate) fn parse(ptx: &'a str) -> Option<Self> {
        let mut preamble = String::new();
        let mut funcs: Vec<PtxFunction> = Vec::new();
        let mut defs_seen = 0;
        let mut lines = ptx.lines();
        while let Some(line) = lines.next() {
            let top = [".func", ".visible .func", ".weak .func", ".entry", ".visible .entry"]
                .iter()
                .any(|p| line.starts_with(p));
            if top {
                let name = function_name(line)?;
                let mut text = String::from(line);
                text.push('\n');
                // A declaration ends with `;` before any body opens; a definition's body runs from
                // `{` to the `}` at the start of a line (inline-asm lines inside it may also end
                // with `;` at column 0).
                let (mut is_decl, mut in_body) = (false, false);
                for l in lines.by_ref() {
                    text.push_str(l);
                    text.push('\n');
                    if !in_body && (l == ";" || (l.ends_with(';') && !l.starts_with([' ', '\t']))) {
                        is_decl = true;
                        break;
                    }
                    in_body |= l.starts_with('{');
                    if l == "}" {
                        break;
                    }
                }
                let f = match funcs.iter_mut().position(|f| f.name == name) {
                    Some(i) => &mut funcs[i],
                    None => {
                        funcs.push(PtxFunction { name, decl: None, def: None, def_pos: usize::MAX });
                        funcs.last_mut().expect("just pushed")
                    }
                };
                if is_decl {
                    f.decl = Some(text)
                } else {
                    f.def = Some(text);
                    f.def_pos = defs_seen;
                    defs_seen += 1;
                }
            } else if [".version", ".target", ".address_size", ".global", ".extern", ".const", ".shared"]
                .iter()
                .any(|p| line.starts_with(p))
            {
                preamble.push_str(line);
                preamble.push('\n');
            }
        }
        Some(PtxIndex { preamble, funcs })
    }

    fn find(&self, name: &str) -> Option<&PtxFunction<'a>> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// Bytes of `entry`'s own definition (0 when there is none): how large its compile is, without
    /// building its module.
    pub(crate) fn entry_bytes(&self, entry: &str) -> usize {
        self.find(entry).and_then(|f| f.def.as_ref()).map_or(0, String::len)
    }

    /// The module of `entry` ([`kernel_module`]); `None` when there is no such entry.
    pub(crate) fn module(&self, entry: &str) -> Option<String> {
        // Functions the entry needs, in file order.
        let mut needed = vec![entry];
        let mut i = 0;
        while i < needed.len() {
            let body = self.find(needed[i]).and_then(|f| f.def.as_deref()).unwrap_or("");
            for c in callees(body) {
                if !needed.contains(&c) {
                    needed.push(c);
                }
            }
            i += 1;
        }
        let entry_def = self.find(entry)?.def.as_deref()?;
        let mut out = self.preamble.clone();
        let callee = |f: &&PtxFunction| f.name != entry && needed.contains(&f.name);
        for f in self.funcs.iter().filter(callee) {
            if let Some(d) = &f.decl {
                out.push_str(d);
            }
        }
        let mut defs: Vec<&PtxFunction> =
            self.funcs.iter().filter(callee).filter(|f| f.def.is_some()).collect();
        defs.sort_by_key(|f| f.def_pos);
        for f in defs {
            out.push_str(f.def.as_deref().unwrap_or_default());
        }
        out.push_str(entry_def);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
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
