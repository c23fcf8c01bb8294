//! The kernel cache: each kernel's PTX compiled once to a cubin by the driver's own linker and kept
//! on disk, so a later process loads machine code instead of JIT-compiling PTX.
//!
//! An entry is keyed by the device's compute capability, the driver version and a hash of the
//! kernel's PTX module (`ptx::kernel_module`): a new driver, a new build of the kernels or another
//! GPU generation gets entries of its own. Entries live under
//! `$FERROFUSE_CACHE_DIR`, else `$XDG_CACHE_HOME/ferrofuse`, else `$HOME/.cache/ferrofuse`;
//! `FERROFUSE_CACHE=off` (or `0`, `false`) switches the cache off (kernels are then JIT-compiled
//! from PTX by the driver on every process start, through its own cache if it has one).
//!
//! An entry is written to a temporary file in its folder and renamed into place, so concurrent
//! processes and a crash never leave a torn entry under the final name. It starts with a header
//! that repeats its whole key (as text) and gives the payload's length and hash; an entry whose
//! header, length or hash does not match (corrupt, truncated, or another key's file) is never
//! loaded: the kernel is compiled again and the entry rewritten.

use std::io::Write;
use std::path::{Path, PathBuf};

/// First bytes of every entry.
const MAGIC: &[u8; 8] = b"FFKCACHE";
/// Version of the entry layout; a change makes old entries foreign (rewritten on use).
const FORMAT: u32 = 1;
/// The environment variable naming the cache folder.
pub const DIR_VAR: &str = "FERROFUSE_CACHE_DIR";
/// The environment variable switching the cache off (`off`, `0`, `false`, `no`).
pub const SWITCH_VAR: &str = "FERROFUSE_CACHE";

pub(crate) use super::ptx_split::fnv1a;

/// Whether a switch variable's value turns its feature off (`off`, `0`, `false`, `no`, any case).
pub(crate) fn switched_off(value: &str) -> bool {
    matches!(value.to_ascii_lowercase().as_str(), "off" | "0" | "false" | "no")
}

/// Where the kernel cache lives, or that it is off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCache {
    dir: Option<PathBuf>,
}

/// What is in a cache folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Entry files.
    pub entries: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Why an entry was not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Miss {
    /// No file under the entry's name.
    Absent,
    /// A file whose header, length or hash does not match its key (corrupt, truncated, foreign).
    Invalid,
}

impl KernelCache {
    /// The cache the environment asks for ([module docs](self)).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    /// The cache that the variables `var` returns ask for.
    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Self {
        if var(SWITCH_VAR).is_some_and(|v| switched_off(&v.to_string_lossy())) {
            return KernelCache { dir: None };
        }
        let var = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = var(DIR_VAR)
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("ferrofuse")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("ferrofuse")));
        KernelCache { dir }
    }

    /// A cache in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        KernelCache { dir: Some(dir.into()) }
    }

    /// No cache.
    pub fn off() -> Self {
        KernelCache { dir: None }
    }

    /// The cache folder; `None` when the cache is off.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Entry files and bytes under the folder (every device and driver); zero when off or absent.
    pub fn usage(&self) -> CacheUsage {
        fn walk(dir: &Path, u: &mut CacheUsage) {
            let Ok(rd) = std::fs::read_dir(dir) else { return };
            for e in rd.flatten() {
                let Ok(meta) = e.metadata() else { continue };
                if meta.is_dir() {
                    walk(&e.path(), u);
                } else if e.path().extension().is_some_and(|x| x == "cubin") {
                    u.entries += 1;
                    u.bytes += meta.len();
                }
            }
        }
        let mut u = CacheUsage::default();
        if let Some(d) = &self.dir {
            walk(d, &mut u);
        }
        u
    }

    /// The file of `key`.
    fn path(&self, key: &EntryKey) -> Option<PathBuf> {
        let (major, minor) = key.compute_capability;
        let folder = format!("{}-sm{major}{minor}-cuda{}", key.flavour, key.driver_version);
        Some(self.dir.as_ref()?.join(folder).join(format!("{}-{:016x}.cubin", key.symbol, key.ptx_hash)))
    }

    /// The cubin stored for `key`, checked against its header.
    pub(crate) fn read(&self, key: &EntryKey) -> Result<Vec<u8>, Miss> {
        let path = self.path(key).ok_or(Miss::Absent)?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Miss::Absent),
            Err(_) => return Err(Miss::Invalid),
        };
        decode(&bytes, key).ok_or(Miss::Invalid)
    }

    /// Stores `cubin` for `key`: written to a temporary file in the entry's folder, then renamed
    /// over the entry (atomic on one file system). Errors (a read-only or full disk) are returned
    /// for the caller to report; the kernel still runs.
    pub(crate) fn write(&self, key: &EntryKey, cubin: &[u8]) -> std::io::Result<()> {
        let Some(path) = self.path(key) else { return Ok(()) };
        let folder = path.parent().expect("entries sit in a folder");
        std::fs::create_dir_all(folder)?;
        let nonce =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let tmp = folder.join(format!(
            ".{}.{}.{nonce}.{:?}.tmp",
            key.symbol,
            std::process::id(),
            std::thread::current().id()
        ));
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&encode(key, cubin))?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// Everything a cubin depends on: the machine-code target, the compiler (the driver) and the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EntryKey {
    /// PTX flavour name.
    pub(crate) flavour: &'static str,
    /// Kernel symbol.
    pub(crate) symbol: &'static str,
    /// Compute capability of the device the cubin is for.
    pub(crate) compute_capability: (i32, i32),
    /// Driver API version (the driver's JIT compiler made the cubin).
    pub(crate) driver_version: i32,
    /// FNV-1a of the kernel's PTX module.
    pub(crate) ptx_hash: u64,
    /// Bytes of that module.
    pub(crate) ptx_len: usize,
}

impl EntryKey {
    /// The key as the text every entry's header repeats.
    fn text(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!(
            "ferrofuse kernel cache\nflavour={}\nsymbol={}\nsm={major}.{minor}\ncuda={}\nptx_fnv1a={:016x}\nptx_bytes={}\n",
            self.flavour, self.symbol, self.driver_version, self.ptx_hash, self.ptx_len
        )
    }
}

/// An entry: magic, format, key length and key text, payload length and hash, payload.
fn encode(key: &EntryKey, cubin: &[u8]) -> Vec<u8> {
    let text = key.text();
    let mut out = Vec::with_capacity(32 + text.len() + cubin.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    out.extend_from_slice(&fnv1a(cubin).to_le_bytes());
    out.extend_from_slice(cubin);
    out
}

/// The payload of `bytes` if it is a whole, intact entry for exactly `key`.
fn decode(bytes: &[u8], key: &EntryKey) -> Option<Vec<u8>> {
    let mut rest = bytes.strip_prefix(MAGIC)?;
    let mut take = |n: usize| -> Option<&[u8]> {
        let (head, tail) = rest.split_at_checked(n)?;
        rest = tail;
        Some(head)
    };
    let u32_at = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    if u32_at(take(4)?) != FORMAT {
        return None;
    }
    let text_len = u32_at(take(4)?) as usize;
    if take(text_len)? != key.text().as_bytes() {
        return None;
    }
    let len = u64_at(take(8)?);
    let hash = u64_at(take(8)?);
    let payload = rest;
    // An ELF image (cubins are ELF) of exactly the recorded length and hash.
    (payload.len() as u64 == len && fnv1a(payload) == hash && payload.starts_with(b"\x7fELF"))
        .then(|| payload.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(symbol: &'static str) -> EntryKey {
        EntryKey {
            flavour: "hopper",
            symbol,
            compute_capability: (9, 0),
            driver_version: 13000,
            ptx_hash: fnv1a(symbol.as_bytes()),
            ptx_len: 123,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ferrofuse-cache-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn an_entry_round_trips_and_counts_in_the_usage() {
        let dir = scratch("roundtrip");
        let cache = KernelCache::at(&dir);
        let cubin = b"\x7fELF some machine code".to_vec();
        assert_eq!(cache.read(&key("k")), Err(Miss::Absent));
        cache.write(&key("k"), &cubin).unwrap();
        assert_eq!(cache.read(&key("k")), Ok(cubin.clone()));
        let u = cache.usage();
        assert_eq!(u.entries, 1);
        assert_eq!(u.bytes, encode(&key("k"), &cubin).len() as u64);
        // No temporary file is left behind.
        let folder = cache.path(&key("k")).unwrap().parent().unwrap().to_path_buf();
        assert_eq!(std::fs::read_dir(folder).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn corrupt_truncated_and_foreign_entries_are_never_loaded() {
        let dir = scratch("corrupt");
        let cache = KernelCache::at(&dir);
        let cubin = b"\x7fELF payload payload payload".to_vec();
        let k = key("k");
        cache.write(&k, &cubin).unwrap();
        let path = cache.path(&k).unwrap();
        let good = std::fs::read(&path).unwrap();
        // One flipped payload byte, a truncation, garbage, an empty file.
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        for bad in [flipped, good[..good.len() - 3].to_vec(), b"garbage".to_vec(), Vec::new()] {
            std::fs::write(&path, &bad).unwrap();
            assert_eq!(cache.read(&k), Err(Miss::Invalid));
        }
        // Another key's entry copied under this key's name (a foreign file).
        let other = key("other");
        std::fs::write(&path, encode(&other, &cubin)).unwrap();
        assert_eq!(cache.read(&k), Err(Miss::Invalid));
        // Another driver or compute capability has entries of its own.
        cache.write(&k, &cubin).unwrap();
        let newer = EntryKey { driver_version: 13010, ..k.clone() };
        assert_eq!(cache.read(&newer), Err(Miss::Absent));
        let ampere = EntryKey { compute_capability: (8, 0), ..k.clone() };
        assert_eq!(cache.read(&ampere), Err(Miss::Absent));
        assert_eq!(cache.read(&k), Ok(cubin));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_writers_leave_one_whole_entry() {
        let dir = scratch("concurrent");
        let cache = KernelCache::at(&dir);
        let k = key("k");
        let payloads: Vec<Vec<u8>> =
            (0..8u8).map(|i| [b"\x7fELF".as_slice(), &vec![i; 100_000]].concat()).collect();
        std::thread::scope(|s| {
            for p in &payloads {
                let (cache, k, payloads) = (&cache, &k, &payloads);
                s.spawn(move || {
                    for _ in 0..5 {
                        cache.write(k, p).unwrap();
                        // Whatever a reader sees is one writer's whole entry.
                        let got = cache.read(k).expect("a whole entry");
                        assert!(payloads.contains(&got));
                    }
                });
            }
        });
        assert_eq!(cache.usage().entries, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_environment_picks_the_folder_or_switches_it_off() {
        fn vars(pairs: &[(&str, &str)]) -> KernelCache {
            KernelCache::from_vars(|n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.into()))
        }
        let all = [(DIR_VAR, "/c"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(vars(&all).dir(), Some(Path::new("/c")));
        assert_eq!(vars(&all[1..]).dir(), Some(Path::new("/x/ferrofuse")));
        assert_eq!(vars(&all[2..]).dir(), Some(Path::new("/h/.cache/ferrofuse")));
        // An empty variable counts as unset.
        assert_eq!(vars(&[(DIR_VAR, ""), ("HOME", "/h")]).dir(), Some(Path::new("/h/.cache/ferrofuse")));
        for off in ["off", "0", "FALSE", "no"] {
            assert_eq!(vars(&[(SWITCH_VAR, off), (DIR_VAR, "/c")]).dir(), None, "{off}");
        }
        assert_eq!(vars(&[(SWITCH_VAR, "on"), (DIR_VAR, "/c")]).dir(), Some(Path::new("/c")));
        assert_eq!(vars(&[]).dir(), None);
        assert_eq!(KernelCache::off().dir(), None);
    }
}
