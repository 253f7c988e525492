//! The server's layers point one way (docs/ARCHITECTURE.md, "The server's layers"): every path a
//! file under `src/` names with `crate::` or `super::` — in a `use` line or inline — lands in a
//! module of the file's own layer or of a lower one, and no files import each other in a loop.
//! A reader can then take the crate from the bottom up, and a low module never needs to know what
//! runs above it.
//!
//! A new file must be given a layer in `LAYERS`. Paths reached through a name a `use` brought in
//! (`use crate::snapshot; snapshot::create::…`) are seen only as far as the `use` line goes: name
//! the module you take things from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first. A file belongs to the layer of the longest prefix of its path (under
/// `src/`) listed here.
const LAYERS: &[(&str, &[&str])] = &[
    ("the process", &["lib.rs", "node.rs", "fuzzing/"]),
    ("front ends", &["resp/", "admin/"]),
    ("host", &["host.rs", "boot.rs", "snapshot/create.rs", "snapshot/schedule.rs"]),
    ("vnode driver", &["driver.rs"]),
    ("links", &["router.rs", "net/"]),
    ("vnode commands", &["vnode.rs"]),
    ("snapshot files", &["snapshot/"]),
    ("storage", &["storage/", "snapshot/manifest.rs"]),
    (
        "base",
        &[
            "config.rs",
            "clock.rs",
            "topology.rs",
            "status.rs",
            "telemetry.rs",
            "memory.rs",
            "tls.rs",
            "acl.rs",
            "clients.rs",
            "blocked.rs",
            "command_stats.rs",
            "encoding_hints.rs",
            "cpu.rs",
        ],
    ),
];

#[test]
fn every_import_points_to_the_same_layer_or_a_lower_one() {
    let crate_ = Crate::read();
    let mut upward = vec![];
    for (file, imports) in &crate_.imports {
        let from = layer_of(file);
        for import in imports {
            let to = layer_of(&import.file);
            if to < from {
                upward.push(format!(
                    "src/{file}: `{}` points up, from {} to {} (src/{})",
                    import.path, LAYERS[from].0, LAYERS[to].0, import.file
                ));
            }
        }
    }
    assert!(upward.is_empty(), "imports that point up a layer:\n{}", upward.join("\n"));
}

#[test]
fn no_files_import_each_other_in_a_loop() {
    let crate_ = Crate::read();
    let graph: BTreeMap<&str, BTreeSet<&str>> = crate_
        .imports
        .iter()
        .map(|(file, imports)| (file.as_str(), imports.iter().map(|i| i.file.as_str()).collect()))
        .collect();
    if let Some(cycle) = find_cycle(&graph) {
        panic!("files that import each other in a loop: {}", cycle.join(" → "));
    }
}

#[test]
fn every_file_has_a_layer() {
    let crate_ = Crate::read();
    let missing: Vec<&String> = crate_.files.iter().filter(|f| try_layer_of(f).is_none()).collect();
    assert!(missing.is_empty(), "give these files a layer in tests/layers.rs: {missing:?}");
}

/// The reader of use trees, on the shapes the crate writes.
#[test]
fn use_trees_are_read_into_every_path_they_name() {
    let paths = crate_paths("use crate::{a::{b, c::D}, e::*};\nfn f() { crate::g::h(1); } // crate::no", &[]);
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["a::b", "a::c::D", "e", "g::h"]);
    let in_tests = "use super::x::Y;\nmod tests {\n    const C: char = '}';\n    use super::*;\n}\nuse super::z;";
    let in_tests = crate_paths(in_tests, &module_of("s/m.rs"));
    let in_tests: Vec<String> = in_tests.iter().map(|p| p.join("::")).collect();
    assert_eq!(in_tests, ["s::x::Y", "s::m", "s::z"]);
    let quoted = crate_paths("let a = \"crate::no {\"; let b = r#\"crate::no\"#; let c: &'static str = \"\";", &[]);
    assert!(quoted.is_empty(), "{quoted:?}");
}

struct Import {
    /// As written after `crate::`, resolved for `super::`.
    path: String,
    /// The file of the module it lands in.
    file: String,
}

struct Crate {
    /// Every file under `src/`, relative to it.
    files: Vec<String>,
    /// Per file, the other files it imports from.
    imports: BTreeMap<String, Vec<Import>>,
}

impl Crate {
    fn read() -> Crate {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![];
        walk(&src, &mut files);
        let files: Vec<String> =
            files.iter().map(|f| f.strip_prefix(&src).expect("under src").to_string_lossy().into_owned()).collect();
        let modules: BTreeMap<Vec<String>, String> = files.iter().map(|f| (module_of(f), f.clone())).collect();
        let mut imports = BTreeMap::new();
        for file in &files {
            let text = std::fs::read_to_string(src.join(file)).expect("a readable source file");
            let mut found = vec![];
            for path in crate_paths(&text, &module_of(file)) {
                let Some(module) = (0..=path.len()).rev().map(|n| &path[..n]).find(|m| modules.contains_key(*m)) else {
                    continue;
                };
                let target = &modules[module];
                if target != file {
                    found.push(Import { path: path.join("::"), file: target.clone() });
                }
            }
            imports.insert(file.clone(), found);
        }
        Crate { files, imports }
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `resp/session.rs` is `resp::session`, `resp/mod.rs` is `resp`, `lib.rs` the crate root.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn try_layer_of(file: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (layer, (_, prefixes)) in LAYERS.iter().enumerate() {
        for prefix in prefixes.iter().filter(|p| file.starts_with(**p)) {
            if best.is_none_or(|(len, _)| prefix.len() > len) {
                best = Some((prefix.len(), layer));
            }
        }
    }
    best.map(|(_, layer)| layer)
}

fn layer_of(file: &str) -> usize {
    try_layer_of(file).unwrap_or_else(|| panic!("src/{file} has no layer in tests/layers.rs"))
}

/// Every module path named from `text` (the file of module `module`) with `crate::` or
/// `super::`, each as its segments from the crate root. Comments, strings and characters are
/// skipped; `super` is taken from the module it is written in (a `mod tests { use super::*; }`
/// names its own file).
fn crate_paths(text: &str, module: &[String]) -> Vec<Vec<String>> {
    let code = code_only(text);
    let b = code.as_bytes();
    let mut out = vec![];
    // Per open brace, the inline module it opened, if any.
    let mut braces: Vec<Option<String>> = vec![];
    // The last two words read, to see `mod name {`.
    let (mut before_last, mut last) = (String::new(), String::new());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                braces.push((before_last == "mod").then(|| last.clone()));
                i += 1;
            }
            b'}' => {
                braces.pop();
                i += 1;
            }
            c if is_ident(c) => {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &code[start..i];
                let starts_a_path = !(start >= 2 && &b[start - 2..start] == b"::") && b[i..].starts_with(b"::");
                if starts_a_path && (word == "crate" || word == "super") {
                    let mut base: Vec<String> = match word {
                        "crate" => vec![],
                        _ => {
                            let here = module.iter().cloned().chain(braces.iter().flatten().cloned());
                            let mut here: Vec<String> = here.collect();
                            here.pop();
                            here
                        }
                    };
                    i += 2;
                    while b[i..].starts_with(b"super::") {
                        base.pop();
                        i += "super::".len();
                    }
                    use_tree(b, &mut i, base, &mut out);
                }
                before_last = std::mem::replace(&mut last, word.to_string());
            }
            _ => i += 1,
        }
    }
    out
}

/// Reads one use tree at `i` (`a::b`, `a::{b, c::D}`, `a::*`), each path it names into `out`.
fn use_tree(b: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    skip_space(b, i);
    match b.get(*i) {
        Some(b'{') => {
            *i += 1;
            loop {
                skip_space(b, i);
                match b.get(*i) {
                    None => return,
                    Some(b'}') => {
                        *i += 1;
                        return;
                    }
                    Some(b',') => *i += 1,
                    Some(_) => use_tree(b, i, prefix.clone(), out),
                }
            }
        }
        Some(b'*') => {
            *i += 1;
            out.push(prefix);
        }
        _ => {
            let start = *i;
            while *i < b.len() && is_ident(b[*i]) {
                *i += 1;
            }
            let word = String::from_utf8_lossy(&b[start..*i]).into_owned();
            if word.is_empty() || word == "self" {
                out.push(prefix);
                return;
            }
            let mut path = prefix;
            path.push(word);
            if b[*i..].starts_with(b"::") && b.get(*i + 2).is_some_and(|c| is_ident(*c) || *c == b'{' || *c == b'*') {
                *i += 2;
                use_tree(b, i, path, out);
            } else {
                out.push(path);
                // `a::b as c`: the alias names nothing more.
                skip_space(b, i);
                if b[*i..].starts_with(b"as ") {
                    *i += 3;
                    skip_space(b, i);
                    while *i < b.len() && is_ident(b[*i]) {
                        *i += 1;
                    }
                }
            }
        }
    }
}

fn skip_space(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `text` with comments, string literals and character literals blanked out, byte for byte.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let after_ident = i > 0 && is_ident(b[i - 1]);
        let skipped = if rest.starts_with(b"//") {
            rest.iter().position(|c| *c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            rest.windows(2).position(|w| w == b"*/").map_or(rest.len(), |p| p + 2)
        } else if !after_ident && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) {
            let hashes = rest[1..].iter().take_while(|c| **c == b'#').count();
            let open = 1 + hashes + 1;
            let close = [b"\"".as_slice(), &vec![b'#'; hashes]].concat();
            let body = rest.get(open..).unwrap_or_default();
            open + body.windows(close.len()).position(|w| w == close).map_or(body.len(), |p| p + close.len())
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(rest.len())
        } else if rest[0] == b'\'' && !after_ident {
            // A character literal (`'x'`, `'\''`, `'é'`), not a lifetime (`'a`).
            let closing = |from: usize, within: usize| {
                rest.iter().skip(from).take(within).position(|c| *c == b'\'').map(|p| from + p + 1)
            };
            match rest.get(1) {
                Some(b'\\') => closing(3, 10).unwrap_or(1),
                Some(_) if rest.get(2) == Some(&b'\'') => 3,
                Some(c) if *c >= 0x80 => closing(2, 4).unwrap_or(1),
                _ => 1,
            }
        } else {
            0
        };
        if skipped == 0 || (rest[0] == b'\'' && skipped == 1) {
            // Whole characters, so that `out` stays valid UTF-8.
            let len = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + len]);
            i += len;
            continue;
        }
        for c in &rest[..skipped] {
            out.push(if *c == b'\n' { '\n' } else { ' ' });
        }
        i += skipped;
    }
    out
}

/// A loop in `graph`, as the files along it, if there is one.
fn find_cycle<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<Vec<&'a str>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        node: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| *n == node).expect("open nodes are on the path");
                let mut cycle = path[from..].to_vec();
                cycle.push(node);
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node, Mark::Open);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph.keys().find_map(|node| visit(node, graph, &mut marks, &mut vec![]))
}
