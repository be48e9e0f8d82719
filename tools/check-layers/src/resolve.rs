//! Name resolution over a [`ModTree`]: a path, as written in a module, to
//! the file that defines what it names, through child modules, `use`
//! imports and re-exports, and glob imports.

use crate::modtree::{FileId, ModId, ModTree};

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A module (its file is the target).
    Module(ModId),
    /// An item defined in a file.
    Item(FileId),
    /// Something outside the crate (`std::`, another crate), or a local
    /// name (a variable, a generic) that no module binds.
    Outside,
}

/// How deep re-export chains are followed before giving up.
const MAX_DEPTH: u32 = 24;

impl ModTree {
    fn parent_of(&self, m: ModId) -> ModId {
        self.modules[m].parent.unwrap_or(0)
    }

    /// Resolves `segs`, written in module `from`.
    pub fn resolve(&self, from: ModId, segs: &[String]) -> Target {
        self.resolve_depth(from, segs, 0)
    }

    fn resolve_depth(&self, from: ModId, segs: &[String], depth: u32) -> Target {
        if segs.is_empty() || depth > MAX_DEPTH {
            return Target::Outside;
        }
        let (mut cur, start) = match segs[0].as_str() {
            "crate" => (0, 1),
            "super" => (self.parent_of(from), 1),
            "self" => (from, 1),
            "Self" => return Target::Outside,
            _ => (from, 0),
        };
        for (i, seg) in segs.iter().enumerate().skip(start) {
            match seg.as_str() {
                "super" => {
                    cur = self.parent_of(cur);
                    continue;
                }
                "self" => continue,
                _ => {}
            }
            match self.lookup(cur, seg, depth) {
                Some(Target::Module(m)) => cur = m,
                Some(item @ Target::Item(_)) => return item,
                // An import of another crate's item (`pub use half;`).
                Some(Target::Outside) => return Target::Outside,
                None => {
                    // A first segment no module binds is a local name or
                    // another crate; past the first, a name the tree does not
                    // show (made by a macro): the module reached is the target.
                    return if i == 0 { Target::Outside } else { Target::Module(cur) };
                }
            }
        }
        Target::Module(cur)
    }

    /// Looks `name` up in module `m`'s namespace: its child modules, its
    /// items, its imports, then its glob imports.
    fn lookup(&self, m: ModId, name: &str, depth: u32) -> Option<Target> {
        let module = &self.modules[m];
        if let Some(&c) = module.children.get(name) {
            return Some(Target::Module(c));
        }
        if let Some(&f) = module.defs.get(name) {
            return Some(Target::Item(f));
        }
        if let Some(paths) = module.imports.get(name) {
            for p in paths {
                if p.len() == 1 && p[0] == name {
                    continue; // `use half;`: the crate of that name
                }
                let t = self.resolve_depth(m, p, depth + 1);
                if t != Target::Outside {
                    return Some(t);
                }
            }
            return Some(Target::Outside);
        }
        for g in &module.globs {
            if let Target::Module(gm) = self.resolve_depth(m, g, depth + 1)
                && gm != m
                && depth < MAX_DEPTH
                && let Some(t) = self.lookup(gm, name, depth + 1)
            {
                return Some(t);
            }
        }
        None
    }

    /// The file a target lives in.
    pub fn target_file(&self, t: &Target) -> Option<FileId> {
        match t {
            Target::Module(m) => Some(self.modules[*m].file),
            Target::Item(f) => Some(*f),
            Target::Outside => None,
        }
    }
}
