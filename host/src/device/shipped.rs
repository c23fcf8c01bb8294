//! Cubins shipped in the binary: each flavour's kernels compiled by `ptxas` when the binary was
//! built (the `cubin_archive` format; `build.rs` with `FERROFUSE_PTXAS`). A kernel
//! loads from here before the kernel cache is looked at when the archive holds it for this device
//! (its architecture runs on the device's compute capability), compiled from exactly the PTX
//! module this binary would compile (same hash) and intact; a cubin the driver refuses (a driver
//! older than the compiler) falls back to the cache or the driver's compile, counted in the load
//! report. `FERROFUSE_SHIPPED_CUBINS=off` (or `0`, `false`, `no`) switches them off.

use std::sync::OnceLock;

use super::cubin_archive::{self, Archive};
use super::ptx::PtxFlavour;

/// The environment variable switching shipped cubins off.
pub const SWITCH_VAR: &str = "FERROFUSE_SHIPPED_CUBINS";

/// The archive bytes `build.rs` wrote for `flavour` (an empty archive when it had no `ptxas`).
fn bytes(flavour: PtxFlavour) -> &'static [u8] {
    match flavour {
        PtxFlavour::Portable => include_bytes!(concat!(env!("OUT_DIR"), "/cubins-portable.bin")),
        PtxFlavour::Hopper => include_bytes!(concat!(env!("OUT_DIR"), "/cubins-hopper.bin")),
    }
}

/// `flavour`'s archive, parsed once per process (empty when it does not parse).
fn archive(flavour: PtxFlavour) -> &'static Archive<'static> {
    static ARCHIVES: [OnceLock<Archive<'static>>; 2] = [OnceLock::new(), OnceLock::new()];
    ARCHIVES[flavour as usize].get_or_init(|| cubin_archive::decode(bytes(flavour)).unwrap_or_default())
}

/// What a flavour ships (for `doctor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShippedCubins {
    /// The architecture they were compiled for (`sm_90a`); empty when none were shipped.
    pub arch: &'static str,
    /// The compiler's version line.
    pub compiler: &'static str,
    /// Kernels shipped.
    pub kernels: usize,
    /// Bytes of their cubins.
    pub bytes: usize,
}

/// What `flavour` ships.
pub fn shipped(flavour: PtxFlavour) -> ShippedCubins {
    let a = archive(flavour);
    ShippedCubins {
        arch: a.arch,
        compiler: a.compiler,
        kernels: a.entries.len(),
        bytes: a.entries.iter().map(|e| e.cubin.len()).sum(),
    }
}

/// Whether the environment leaves shipped cubins on (the default).
pub fn enabled_from_env() -> bool {
    !std::env::var(SWITCH_VAR).is_ok_and(|v| super::cache::switched_off(&v))
}

/// The shipped cubin of `symbol` for a device of compute capability `cc`, when `flavour`'s archive
/// has one compiled from the PTX module hashing to `ptx_hash` and it is intact.
pub(crate) fn find(
    flavour: PtxFlavour,
    symbol: &str,
    ptx_hash: u64,
    cc: (i32, i32),
) -> Option<&'static [u8]> {
    let a = archive(flavour);
    if !cubin_archive::runs_on(a.arch, cc) {
        return None;
    }
    a.entries.iter().find(|e| e.symbol == symbol && e.ptx_hash == ptx_hash && e.intact()).map(|e| e.cubin)
}

#[cfg(test)]
mod tests {
    use super::super::ptx_split::fnv1a;
    use super::cubin_archive::{decode, encode, runs_on};
    use super::*;

    fn elf(tag: u8) -> Vec<u8> {
        let mut v = b"\x7fELF".to_vec();
        v.extend([tag; 37]);
        v
    }

    #[test]
    fn an_archive_reads_back_and_refuses_what_is_cut_short_or_damaged() {
        let entries = vec![("k_a".to_string(), 11u64, elf(1)), ("k_b".to_string(), 22, elf(2))];
        let bytes = encode("sm_90a", "release 13.0, V13.0.88", &entries);
        let a = decode(&bytes).expect("reads back");
        assert_eq!((a.arch, a.compiler, a.entries.len()), ("sm_90a", "release 13.0, V13.0.88", 2));
        for (e, (symbol, hash, cubin)) in a.entries.iter().zip(&entries) {
            assert_eq!((e.symbol, e.ptx_hash, e.cubin), (symbol.as_str(), *hash, cubin.as_slice()));
            assert!(e.intact());
            assert_eq!(e.cubin_hash, fnv1a(cubin));
        }
        // Every truncation, trailing bytes, another format or magic: no archive.
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
        let mut format = bytes.clone();
        format[8] ^= 1;
        assert!(decode(&format).is_none());
        // A flipped cubin byte parses but is not intact (so never loaded).
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x40;
        let a = decode(&flipped).expect("parses");
        assert!(a.entries[0].intact() && !a.entries[1].intact());
        // Nothing shipped: an empty archive.
        let none = encode("", "", &[]);
        let a = decode(&none).expect("reads back");
        assert!(a.arch.is_empty() && a.entries.is_empty());
    }

    #[test]
    fn a_cubin_runs_only_where_its_machine_code_is_compatible() {
        assert!(runs_on("sm_90a", (9, 0)));
        assert!(!runs_on("sm_90a", (9, 1)) && !runs_on("sm_90a", (10, 0)) && !runs_on("sm_90a", (8, 9)));
        assert!(runs_on("sm_80", (8, 0)) && runs_on("sm_80", (8, 6)) && runs_on("sm_80", (8, 9)));
        assert!(!runs_on("sm_80", (9, 0)) && !runs_on("sm_80", (12, 0)) && !runs_on("sm_86", (8, 0)));
        assert!(!runs_on("", (9, 0)) && !runs_on("compute_90", (9, 0)) && !runs_on("sm_x", (9, 0)));
    }

    #[test]
    fn the_embedded_archives_match_their_flavours() {
        for flavour in PtxFlavour::ALL {
            let s = shipped(flavour);
            if s.kernels == 0 {
                // Built without ptxas: nothing shipped, and no device finds anything.
                assert!(s.arch.is_empty(), "{s:?}");
                continue;
            }
            // Built with ptxas: every kernel of the flavour, for the flavour's architecture, each
            // compiled from the module this binary cuts (so a device of that architecture finds it).
            let (arch, cc) = match flavour {
                PtxFlavour::Hopper => ("sm_90a", (9, 0)),
                PtxFlavour::Portable => ("sm_80", (8, 0)),
            };
            assert_eq!(s.arch, arch);
            assert_eq!(s.kernels, flavour.entries().len());
            for entry in flavour.entries() {
                let module = flavour.index().module(entry).expect("an entry's module");
                let hash = fnv1a(module.as_bytes());
                assert!(find(flavour, entry, hash, cc).is_some(), "{entry}");
                assert!(find(flavour, entry, hash ^ 1, cc).is_none(), "{entry}: another module's hash");
            }
        }
    }
}
