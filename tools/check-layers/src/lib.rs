//! The layering check run by `scripts/check_layers.sh` (and `.ci/run`).
//!
//! For every target of every package of the workspace (libraries, binaries,
//! examples, tests, benches), it reads the source files, resolves every
//! `crate::` / `super::` / `self::` path (use-trees, paths in code, paths in
//! macro tokens, through re-exports and glob imports) to the file that
//! defines what it names, and checks two rules:
//!
//! 1. **Layers**: a file names nothing of a higher layer than its own, by
//!    the target's table in `docs/architecture.md` (`## Layer tables`).
//!    Every library, and every binary or example of more than one file,
//!    has a table; every module is covered by an entry; every entry covers
//!    a module.
//! 2. **No cycles between modules**: the files' reference graph has no
//!    cycle through files of two different table entries (files of one
//!    entry may use each other). Targets without a table (tests) use their
//!    top-level modules as the entries.
//!
//! `#[cfg(test)]` items are not checked: unit tests may use the whole crate.

pub mod modtree;
pub mod refs;
pub mod resolve;
pub mod table;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use modtree::{FileId, ModTree};
use table::Entry;

/// A target of a package (what cargo builds: a library, binary, ...).
#[derive(Debug, Clone)]
pub struct Target {
    /// `lib`, `proc-macro`, `bin`, `example`, `test`, `bench` or `custom-build`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its root file, relative to the repository.
    pub root: PathBuf,
}

impl Target {
    fn needs_table(&self, files: usize) -> bool {
        match self.kind.as_str() {
            "lib" | "proc-macro" => true,
            "bin" | "example" => files > 1,
            _ => false,
        }
    }
}

/// Every target of the workspace at `repo`, from `cargo metadata`.
pub fn workspace_targets(repo: &Path) -> Result<Vec<Target>, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
            "--manifest-path",
        ])
        .arg(repo.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let root = repo.canonicalize().map_err(|e| format!("{}: {e}", repo.display()))?;
    let mut targets = Vec::new();
    for pkg in meta["packages"].as_array().into_iter().flatten() {
        for t in pkg["targets"].as_array().into_iter().flatten() {
            let src = PathBuf::from(t["src_path"].as_str().unwrap_or_default());
            let src = src.canonicalize().unwrap_or(src);
            let Ok(rel) = src.strip_prefix(&root) else { continue };
            let kind = t["kind"][0].as_str().unwrap_or_default().to_string();
            targets.push(Target {
                kind,
                name: t["name"].as_str().unwrap_or_default().to_string(),
                root: rel.to_path_buf(),
            });
        }
    }
    targets.sort_by(|a, b| a.root.cmp(&b.root));
    Ok(targets)
}

/// One reference from a file to another.
#[derive(Debug, Clone)]
struct Edge {
    from: FileId,
    to: FileId,
    line: usize,
    name: String,
}

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    /// The targets read.
    pub targets: usize,
    /// The files read.
    pub files: usize,
    /// The references between two files.
    pub edges: usize,
    /// Every broken rule, one message each, naming files and names.
    pub violations: Vec<String>,
    /// Every reference between two files, as `from -> to: name (line)`
    /// (printed by `--edges`).
    pub edge_list: Vec<String>,
}

/// Checks every target of the workspace at `repo` against the tables of
/// `doc` (the text of `docs/architecture.md`).
pub fn check_repo(repo: &Path, doc: &str) -> Result<Report, String> {
    check_targets(repo, doc, &workspace_targets(repo)?)
}

/// Checks `targets` (root files relative to `repo`) against the tables of
/// `doc`; a table naming no target of the list is an error too.
pub fn check_targets(repo: &Path, doc: &str, targets: &[Target]) -> Result<Report, String> {
    let tables = table::parse(doc)?;
    let mut report = Report::default();
    let mut used_tables = BTreeSet::new();
    for target in targets {
        let dir = target.root.to_string_lossy().replace('\\', "/");
        let (tree, errors) = modtree::load(repo, &target.root);
        report.violations.extend(errors);
        report.targets += 1;
        report.files += tree.files.len();
        let table = tables.get(&dir);
        if table.is_some() {
            used_tables.insert(dir.clone());
        } else if target.needs_table(tree.files.len()) {
            report.violations.push(format!(
                "{} ({} `{}`, {} files) has no layer table: add `### `{dir}`` under `## Layer tables` in docs/architecture.md",
                target.root.display(),
                target.kind,
                target.name,
                tree.files.len()
            ));
        }
        check_target(&tree, &dir, table.map(Vec::as_slice), &mut report);
    }
    for dir in tables.keys() {
        if !used_tables.contains(dir) {
            report
                .violations
                .push(format!("docs: the layer table `{dir}` is the root file of no target"));
        }
    }
    Ok(report)
}

/// The unit (table entry, or top-level module without a table) and layer of a file.
fn units(tree: &ModTree, dir: &str, table: Option<&[Entry]>, report: &mut Report) -> Vec<(String, i64)> {
    let mut out = Vec::with_capacity(tree.files.len());
    for (f, &m) in tree.file_module.iter().enumerate() {
        if m == usize::MAX {
            out.push((String::new(), 0));
            continue;
        }
        let name = tree.module_name(m);
        match table {
            Some(entries) => match table::entry_for(entries, &name) {
                Some(e) => out.push((e.module.clone(), e.layer)),
                None => {
                    report.violations.push(format!(
                        "{}: module `{name}` has no layer: add it to the table `{dir}` in docs/architecture.md",
                        tree.files[f].display()
                    ));
                    out.push((name, i64::MAX));
                }
            },
            None => {
                let top = tree.modules[m].path.first().cloned().unwrap_or_else(|| "crate".into());
                out.push((top, 0));
            }
        }
    }
    if let Some(entries) = table {
        for e in entries {
            let covers = tree.file_module.iter().any(|&m| {
                m != usize::MAX && table::entry_for(entries, &tree.module_name(m)).is_some_and(|x| x.module == e.module)
            });
            if !covers {
                report.violations.push(format!(
                    "docs line {}: `{}` in the table `{dir}` is no module of it (or all its files have entries of their own)",
                    e.line, e.module
                ));
            }
        }
    }
    out
}

fn check_target(tree: &ModTree, dir: &str, table: Option<&[Entry]>, report: &mut Report) {
    let unit = units(tree, dir, table, report);
    // Every reference between two files, each (from, to, name) once.
    let mut edges: Vec<Edge> = Vec::new();
    let mut seen = BTreeSet::new();
    for (m, module) in tree.modules.iter().enumerate() {
        if module.file == usize::MAX || tree.file_module.get(module.file) == Some(&usize::MAX) {
            continue;
        }
        for r in &module.references {
            let t = tree.resolve(m, &r.segs);
            let Some(to) = tree.target_file(&t) else { continue };
            if to == module.file || tree.file_module[to] == usize::MAX {
                continue;
            }
            let name = r.segs.join("::") + if r.glob { "::*" } else { "" };
            if seen.insert((module.file, to, name.clone())) {
                edges.push(Edge {
                    from: module.file,
                    to,
                    line: r.line,
                    name,
                });
            }
        }
    }
    report.edges += edges.len();
    for e in &edges {
        report.edge_list.push(format!(
            "{} -> {}: {} ({})",
            tree.files[e.from].display(),
            tree.files[e.to].display(),
            e.name,
            e.line
        ));
    }
    let file = |f: FileId| tree.files[f].display().to_string();
    if table.is_some() {
        for e in &edges {
            let (fu, fl) = &unit[e.from];
            let (tu, tl) = &unit[e.to];
            if tl > fl && *tl != i64::MAX {
                report.violations.push(format!(
                    "{}:{} (layer {fl}, `{fu}`) names `{}`, defined in {} (layer {tl}, `{tu}`): a reference to a higher layer",
                    file(e.from),
                    e.line,
                    e.name,
                    file(e.to)
                ));
            }
        }
    }
    for scc in strongly_connected(tree.files.len(), &edges) {
        let units_in: BTreeSet<&str> = scc.iter().map(|&f| unit[f].0.as_str()).collect();
        if units_in.len() < 2 {
            continue;
        }
        report
            .violations
            .push(describe_cycle(tree, &scc, &units_in, &unit, &edges));
    }
}

/// Names a cycle between modules: its modules, then each reference that
/// does not go down a layer (one of them closes every cycle) with a path
/// of references back to where it starts.
fn describe_cycle(
    tree: &ModTree,
    scc: &[FileId],
    units_in: &BTreeSet<&str>,
    unit: &[(String, i64)],
    edges: &[Edge],
) -> String {
    let file = |f: FileId| tree.files[f].display().to_string();
    let members: BTreeSet<FileId> = scc.iter().copied().collect();
    let inside: Vec<&Edge> = edges
        .iter()
        .filter(|e| members.contains(&e.from) && members.contains(&e.to))
        .collect();
    let mut next: BTreeMap<FileId, Vec<&Edge>> = BTreeMap::new();
    for e in &inside {
        next.entry(e.from).or_default().push(e);
    }
    // References between two entries that do not go down a layer, by file pair.
    let mut closing: BTreeMap<(FileId, FileId), Vec<&Edge>> = BTreeMap::new();
    for e in &inside {
        if unit[e.from].0 != unit[e.to].0 && unit[e.to].1 >= unit[e.from].1 {
            closing.entry((e.from, e.to)).or_default().push(e);
        }
    }
    let mut msg = format!(
        "a cycle through {} files of the modules {}; the references in it that do not go down a layer, each with a way back:",
        scc.len(),
        units_in.iter().map(|u| format!("`{u}`")).collect::<Vec<_>>().join(", ")
    );
    const SHOWN: usize = 12;
    for ((from, to), es) in closing.iter().take(SHOWN) {
        let names: Vec<String> = es
            .iter()
            .take(4)
            .map(|e| format!("`{}` (line {})", e.name, e.line))
            .collect();
        msg.push_str(&format!("\n    {} -> {}: {}", file(*from), file(*to), names.join(", ")));
        // The shortest way back from `to` to `from` (breadth-first).
        let mut prev: BTreeMap<FileId, &Edge> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([*to]);
        let mut reached = BTreeSet::from([*to]);
        while let Some(v) = queue.pop_front() {
            if v == *from {
                break;
            }
            for e in next.get(&v).map(Vec::as_slice).unwrap_or(&[]) {
                if reached.insert(e.to) {
                    prev.insert(e.to, e);
                    queue.push_back(e.to);
                }
            }
        }
        let mut path = Vec::new();
        let mut at = *from;
        while at != *to {
            let Some(e) = prev.get(&at) else { break };
            path.push(format!("{} (`{}`)", file(e.to), e.name));
            at = e.from;
        }
        path.reverse();
        if !path.is_empty() {
            msg.push_str(&format!("\n        back: {} -> {}", file(*to), path.join(" -> ")));
        }
    }
    if closing.len() > SHOWN {
        msg.push_str(&format!("\n    ... and {} more file pairs", closing.len() - SHOWN));
    }
    msg
}

/// Tarjan's strongly connected components of the file graph, those of two
/// or more files.
fn strongly_connected(n: usize, edges: &[Edge]) -> Vec<Vec<FileId>> {
    let mut adj: HashMap<FileId, Vec<FileId>> = HashMap::new();
    for e in edges {
        adj.entry(e.from).or_default().push(e.to);
    }
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut out = Vec::new();
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // Iterative DFS: (node, next neighbour position).
        let mut work: Vec<(FileId, usize)> = vec![(start, 0)];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            let neighbours = adj.get(&v).map(Vec::as_slice).unwrap_or(&[]);
            if *pos < neighbours.len() {
                let w = neighbours[*pos];
                *pos += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if comp.len() > 1 {
                        comp.sort_unstable();
                        out.push(comp);
                    }
                }
            }
        }
    }
    out
}
