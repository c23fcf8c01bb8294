//! The archive of shipped cubins: the machine code of every kernel of one PTX flavour, compiled at
//! build time by `ptxas` (`build.rs`, when `FERROFUSE_PTXAS` names one) and embedded in the binary,
//! so that a first run on a device it was compiled for loads machine code instead of compiling PTX.
//! `build.rs` writes it and the host reads it through this one file (`#[path]`), std only.
//!
//! Layout (little-endian): magic, format, the target architecture (`sm_90a`, `sm_80`; empty when
//! nothing was shipped), the compiler's version line, the entry count; then per entry the kernel
//! symbol, the FNV-1a of the PTX module it was compiled from, the cubin's length and FNV-1a, and the
//! cubin. A reader takes an entry only when its PTX hash is that of the module it would compile
//! itself and its cubin's hash holds, so a stale or damaged archive is never loaded.

/// First bytes of an archive.
pub(crate) const MAGIC: &[u8; 8] = b"FFCUBINS";
/// Layout version; another one reads as no archive.
pub(crate) const FORMAT: u32 = 1;

/// One kernel's shipped machine code.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry<'a> {
    /// Kernel symbol.
    pub(crate) symbol: &'a str,
    /// FNV-1a of the PTX module the cubin was compiled from.
    pub(crate) ptx_hash: u64,
    /// FNV-1a of the cubin.
    pub(crate) cubin_hash: u64,
    /// The cubin (an ELF image).
    pub(crate) cubin: &'a [u8],
}

impl Entry<'_> {
    /// Whether the cubin still hashes to what was recorded when it was archived.
    pub(crate) fn intact(&self) -> bool {
        super::ptx_split::fnv1a(self.cubin) == self.cubin_hash && self.cubin.starts_with(b"\x7fELF")
    }
}

/// A parsed archive (entries borrow the archive's bytes).
#[derive(Clone, Debug, Default)]
pub(crate) struct Archive<'a> {
    /// `ptxas -arch` of every cubin (`sm_90a`); empty when nothing was shipped.
    pub(crate) arch: &'a str,
    /// The compiler's version line.
    pub(crate) compiler: &'a str,
    /// The kernels, in archive order.
    pub(crate) entries: Vec<Entry<'a>>,
}

#[cfg_attr(
    not(test),
    allow(dead_code, reason = "archives are written by build.rs; the host only reads them")
)]
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The archive of `entries` (symbol, PTX hash, cubin), compiled for `arch` by `compiler`.
#[cfg_attr(
    not(test),
    allow(dead_code, reason = "archives are written by build.rs; the host only reads them")
)]
pub(crate) fn encode(arch: &str, compiler: &str, entries: &[(String, u64, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + entries.iter().map(|e| e.0.len() + e.2.len() + 28).sum::<usize>());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    put_str(&mut out, arch);
    put_str(&mut out, compiler);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (symbol, ptx_hash, cubin) in entries {
        put_str(&mut out, symbol);
        out.extend_from_slice(&ptx_hash.to_le_bytes());
        out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
        out.extend_from_slice(&super::ptx_split::fnv1a(cubin).to_le_bytes());
        out.extend_from_slice(cubin);
    }
    out
}

/// Reads an archive front to back.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<&'a str> {
        let len = self.u32()? as usize;
        std::str::from_utf8(self.take(len)?).ok()
    }
}

/// The archive in `bytes`; `None` when it is not one of this format, is cut short anywhere or
/// runs on past its last entry.
pub(crate) fn decode(bytes: &[u8]) -> Option<Archive<'_>> {
    let mut c = Cursor(bytes.strip_prefix(MAGIC)?);
    if c.u32()? != FORMAT {
        return None;
    }
    let arch = c.str()?;
    let compiler = c.str()?;
    let count = c.u32()? as usize;
    let mut entries = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        let symbol = c.str()?;
        let ptx_hash = c.u64()?;
        let len = usize::try_from(c.u64()?).ok()?;
        let cubin_hash = c.u64()?;
        let cubin = c.take(len)?;
        entries.push(Entry { symbol, ptx_hash, cubin_hash, cubin });
    }
    c.0.is_empty().then_some(Archive { arch, compiler, entries })
}

/// Whether a cubin for `arch` (`sm_90a`, `sm_80`, `sm_86`) runs on a device of compute capability
/// `cc`: an architecture-specific target (`a` suffix) only on exactly its version; a plain one on
/// its major version at the same or a later minor version (SASS is binary compatible there, never
/// across major versions).
pub(crate) fn runs_on(arch: &str, cc: (i32, i32)) -> bool {
    let Some(digits) = arch.strip_prefix("sm_") else { return false };
    let (digits, specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    let Ok(n) = digits.parse::<i32>() else { return false };
    let (major, minor) = (n / 10, n % 10);
    if specific { cc == (major, minor) } else { cc.0 == major && cc.1 >= minor }
}
