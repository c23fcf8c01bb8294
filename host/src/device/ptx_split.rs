//! One kernel's PTX module cut out of a flavour's PTX file (its entry, the functions it calls and the
//! file's header), and the hash that keys its machine code. Used by the host at run time and by
//! `build.rs` (through `#[path]`), which compiles the same modules to shipped cubins: both must cut
//! and hash a module identically, so there is one copy of this code, with no dependency beyond std.

/// Names of the `.entry` functions in `ptx`, in file order.
pub(crate) fn entry_names(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|rest| rest.split(['(', ' ']).next().unwrap_or(rest))
}

/// 64-bit FNV-1a: a stable hash (the same on every build and platform) for keys and payloads.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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
pub(crate) fn callees(body: &str) -> Vec<&str> {
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
        self.definition(entry).map_or(0, str::len)
    }

    /// The text of `name`'s definition, when the file defines it.
    pub(crate) fn definition(&self, name: &str) -> Option<&str> {
        self.find(name).and_then(|f| f.def.as_deref())
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
