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

