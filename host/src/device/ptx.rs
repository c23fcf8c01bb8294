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

    /// The `.target` line of this flavour's PTX (for `doctor`).
    pub fn target(self) -> &'static str {
        self.source().lines().find(|l| l.starts_with(".target")).unwrap_or("?")
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
}
