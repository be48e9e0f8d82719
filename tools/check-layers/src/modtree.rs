//! A target's module tree, read from its source files: which file holds
//! each module, what each module defines and imports, and the references
//! each module's code makes through `crate::` / `super::` / `self::` paths
//! (use-trees, paths in code, paths inside macro tokens).
//!
//! Items under `#[cfg(test)]` are left out: unit tests may use the whole
//! crate.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::refs::{Reference, collect_references, use_leaves};
pub use crate::refs::{Segs, is_test_only};

/// An index into [`ModTree::files`].
pub type FileId = usize;
/// An index into [`ModTree::modules`].
pub type ModId = usize;

/// One module: a file, or an inline `mod name { ... }` inside one.
#[derive(Debug, Default)]
pub struct Module {
    /// The path from the crate root (empty for the root).
    pub path: Vec<String>,
    /// The file that holds the module's items.
    pub file: FileId,
    /// The enclosing module (none for the root).
    pub parent: Option<ModId>,
    /// Child modules by name.
    pub children: HashMap<String, ModId>,
    /// Items defined here, by name, with the file that defines them.
    pub defs: HashMap<String, FileId>,
    /// `use` imports by the name they bind, with the paths they name.
    pub imports: HashMap<String, Vec<Segs>>,
    /// `use path::*` glob imports.
    pub globs: Vec<Segs>,
    /// The references made by this module's own code (not its children's).
    pub references: Vec<Reference>,
}

/// The modules of one target (a library, binary, example or test).
#[derive(Debug, Default)]
pub struct ModTree {
    /// Every file read, relative to the repository root.
    pub files: Vec<PathBuf>,
    /// For each file, the module whose file it is.
    pub file_module: Vec<ModId>,
    /// Every module, the root first.
    pub modules: Vec<Module>,
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        if !a.path().is_ident("path") {
            return None;
        }
        match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        }
    })
}

fn has_macro_export(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("macro_export"))
}

/// The name an item defines in its module's namespace, if any.
fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

struct Loader<'a> {
    repo: &'a Path,
    tree: ModTree,
    errors: Vec<String>,
}

impl Loader<'_> {
    fn add_file(&mut self, rel: PathBuf) -> FileId {
        self.tree.files.push(rel);
        self.tree.file_module.push(usize::MAX);
        self.tree.files.len() - 1
    }

    /// Reads `file` as the module `module`, whose children's files live
    /// under `child_dir`.
    fn load_file(&mut self, module: ModId, file: FileId, child_dir: PathBuf) {
        let abs = self.repo.join(&self.tree.files[file]);
        let text = match std::fs::read_to_string(&abs) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push(format!("{}: cannot read: {e}", abs.display()));
                return;
            }
        };
        let parsed = match syn::parse_file(&text) {
            Ok(f) => f,
            Err(e) => {
                let at = e.span().start();
                self.errors.push(format!(
                    "{}:{}: cannot parse: {e}",
                    self.tree.files[file].display(),
                    at.line
                ));
                return;
            }
        };
        self.tree.file_module[file] = module;
        self.load_items(module, file, &parsed.items, &child_dir);
    }

    fn new_module(&mut self, parent: ModId, name: &str, file: FileId) -> ModId {
        let mut path = self.tree.modules[parent].path.clone();
        path.push(name.to_string());
        self.tree.modules.push(Module {
            path,
            file,
            parent: Some(parent),
            ..Module::default()
        });
        let id = self.tree.modules.len() - 1;
        self.tree.modules[parent].children.insert(name.to_string(), id);
        id
    }

    fn load_items(&mut self, module: ModId, file: FileId, items: &[syn::Item], child_dir: &Path) {
        for item in items {
            let attrs: &[syn::Attribute] = match item {
                syn::Item::Const(i) => &i.attrs,
                syn::Item::Enum(i) => &i.attrs,
                syn::Item::ExternCrate(i) => &i.attrs,
                syn::Item::Fn(i) => &i.attrs,
                syn::Item::ForeignMod(i) => &i.attrs,
                syn::Item::Impl(i) => &i.attrs,
                syn::Item::Macro(i) => &i.attrs,
                syn::Item::Mod(i) => &i.attrs,
                syn::Item::Static(i) => &i.attrs,
                syn::Item::Struct(i) => &i.attrs,
                syn::Item::Trait(i) => &i.attrs,
                syn::Item::TraitAlias(i) => &i.attrs,
                syn::Item::Type(i) => &i.attrs,
                syn::Item::Union(i) => &i.attrs,
                syn::Item::Use(i) => &i.attrs,
                _ => &[],
            };
            if is_test_only(attrs) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    if let Some((_, inner)) = &m.content {
                        let id = self.new_module(module, &name, file);
                        let dir = match path_attr(&m.attrs) {
                            Some(p) => child_dir.join(p),
                            None => child_dir.join(&name),
                        };
                        self.load_items(id, file, inner, &dir);
                    } else {
                        let declaring = &self.tree.files[file];
                        let (rel, dir) = if let Some(p) = path_attr(&m.attrs) {
                            let base = declaring.parent().unwrap_or(Path::new("")).to_path_buf();
                            let rel = normalize(&base.join(p));
                            let dir = rel.parent().unwrap_or(Path::new("")).to_path_buf();
                            (rel, dir)
                        } else {
                            let flat = child_dir.join(format!("{name}.rs"));
                            let nested = child_dir.join(&name).join("mod.rs");
                            if self.repo.join(&flat).exists() {
                                (normalize(&flat), normalize(&child_dir.join(&name)))
                            } else {
                                (normalize(&nested), normalize(&child_dir.join(&name)))
                            }
                        };
                        let id = self.new_module(module, &name, usize::MAX);
                        let fid = self.add_file(rel);
                        self.tree.modules[id].file = fid;
                        self.load_file(id, fid, dir);
                    }
                }
                syn::Item::Use(u) => {
                    for leaf in use_leaves(&u.tree) {
                        match leaf.alias {
                            Some(alias) if alias != "_" => {
                                self.tree.modules[module]
                                    .imports
                                    .entry(alias)
                                    .or_default()
                                    .push(leaf.segs);
                            }
                            Some(_) => {}
                            None => self.tree.modules[module].globs.push(leaf.segs),
                        }
                    }
                }
                syn::Item::Macro(m) if m.ident.is_some() && has_macro_export(&m.attrs) => {
                    let name = m.ident.as_ref().map(ToString::to_string).unwrap_or_default();
                    self.tree.modules[0].defs.insert(name, file);
                }
                other => {
                    if let Some(name) = item_name(other) {
                        self.tree.modules[module].defs.insert(name, file);
                    }
                }
            }
        }
        let refs = collect_references(items);
        self.tree.modules[module].references.extend(refs);
    }
}

/// Removes `.` and `..` components without touching the file system.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Reads the target whose root file is `root_file` (relative to `repo`).
/// Returns the tree and the errors met (unreadable or unparsable files).
pub fn load(repo: &Path, root_file: &Path) -> (ModTree, Vec<String>) {
    let mut loader = Loader {
        repo,
        tree: ModTree::default(),
        errors: Vec::new(),
    };
    loader.tree.modules.push(Module::default());
    let fid = loader.add_file(normalize(root_file));
    loader.tree.modules[0].file = fid;
    let dir = normalize(root_file).parent().unwrap_or(Path::new("")).to_path_buf();
    loader.load_file(0, fid, dir);
    (loader.tree, loader.errors)
}

impl ModTree {
    /// The module's name as written in the layer tables: `crate` for the
    /// root, else `a::b`.
    pub fn module_name(&self, m: ModId) -> String {
        let p = &self.modules[m].path;
        if p.is_empty() {
            "crate".to_string()
        } else {
            p.join("::")
        }
    }
}
