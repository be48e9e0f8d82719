//! The paths a module's code names: `use` trees (leaf by leaf), paths in
//! items, types, expressions and patterns, and paths inside macro tokens
//! (`$crate::` included), each with its line.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::visit::Visit;

/// A path as written, segment by segment (`crate`, `super`, `self` kept).
pub type Segs = Vec<String>;

/// Whether an attribute list holds `#[cfg(test)]` (or `cfg(all(test, ..))`).
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let Ok(meta) = a.parse_args::<syn::Meta>() else {
            return false;
        };
        match &meta {
            syn::Meta::Path(p) => p.is_ident("test"),
            syn::Meta::List(l) if l.path.is_ident("all") => {
                let mut test = false;
                let _ = l.parse_nested_meta(|m| {
                    test |= m.path.is_ident("test");
                    Ok(())
                });
                test
            }
            _ => false,
        }
    })
}

/// One path named by a module's code.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The path, segment by segment (`$crate` written as `crate`).
    pub segs: Segs,
    /// The line it is on.
    pub line: usize,
    /// A glob import (`use path::*`): `segs` is the module.
    pub glob: bool,
}

/// One leaf of a use-tree: the full path and the name it binds (`None` for a glob).
pub struct UseLeaf {
    /// The full path of the leaf (`a::b::c` for `use a::b::{c}`).
    pub segs: Segs,
    /// The name bound (`c`, or the `as` name; `None` for `*`).
    pub alias: Option<String>,
    /// Where the leaf is.
    pub line: usize,
}

/// Every leaf of a use-tree.
pub fn use_leaves(tree: &syn::UseTree) -> Vec<UseLeaf> {
    let mut out = Vec::new();
    walk_use(tree, &mut Vec::new(), &mut out);
    out
}

fn walk_use(tree: &syn::UseTree, prefix: &mut Segs, out: &mut Vec<UseLeaf>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            walk_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                // `use a::b::{self}` binds `b`.
                if let Some(last) = prefix.last() {
                    out.push(UseLeaf {
                        segs: prefix.clone(),
                        alias: Some(last.clone()),
                        line: n.ident.span().start().line,
                    });
                }
            } else {
                let mut segs = prefix.clone();
                segs.push(name.clone());
                out.push(UseLeaf {
                    segs,
                    alias: Some(name),
                    line: n.ident.span().start().line,
                });
            }
        }
        syn::UseTree::Rename(r) => {
            let mut segs = prefix.clone();
            let name = r.ident.to_string();
            if name != "self" {
                segs.push(name);
            }
            out.push(UseLeaf {
                segs,
                alias: Some(r.rename.to_string()),
                line: r.ident.span().start().line,
            });
        }
        syn::UseTree::Glob(g) => out.push(UseLeaf {
            segs: prefix.clone(),
            alias: None,
            line: g.star_token.spans[0].start().line,
        }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                walk_use(t, prefix, out);
            }
        }
    }
}

/// Every path named by `items`, nested inline modules left out (they are
/// modules of their own) and `#[cfg(test)]` items skipped.
pub fn collect_references(items: &[syn::Item]) -> Vec<Reference> {
    let mut v = Collector { refs: Vec::new() };
    for item in items {
        if matches!(item, syn::Item::Mod(_)) {
            continue;
        }
        v.visit_item(item);
    }
    v.refs
}

struct Collector {
    refs: Vec<Reference>,
}

impl Collector {
    fn push_path(&mut self, path: &syn::Path) {
        let segs: Segs = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if path.leading_colon.is_some() || segs.is_empty() {
            return;
        }
        let line = path.segments[0].ident.span().start().line;
        self.refs.push(Reference {
            segs,
            line,
            glob: false,
        });
    }

    fn scan_tokens(&mut self, tokens: TokenStream) {
        let toks: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(id) => {
                    // A path: ident (:: ident)* [:: {group}]
                    let preceded_by_sep = i >= 2 && is_sep(&toks, i - 2);
                    let dollar = i >= 1 && matches!(&toks[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    if preceded_by_sep {
                        i += 1;
                        continue;
                    }
                    let line = id.span().start().line;
                    let mut segs = vec![id.to_string()];
                    if dollar && segs[0] == "crate" {
                        // `$crate`: the crate the macro is defined in.
                    } else if dollar {
                        i += 1;
                        continue;
                    }
                    let mut j = i + 1;
                    let mut group = None;
                    while is_sep(&toks, j) {
                        match toks.get(j + 2) {
                            Some(TokenTree::Ident(next)) => {
                                segs.push(next.to_string());
                                j += 3;
                            }
                            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                                group = Some(g.stream());
                                j += 3;
                                break;
                            }
                            _ => break,
                        }
                    }
                    if let Some(stream) = group {
                        let parser = syn::punctuated::Punctuated::<syn::UseTree, syn::Token![,]>::parse_terminated;
                        if let Ok(list) = syn::parse::Parser::parse2(parser, stream) {
                            for t in &list {
                                for leaf in use_leaves(t) {
                                    let mut full = segs.clone();
                                    full.extend(leaf.segs);
                                    self.refs.push(Reference {
                                        segs: full,
                                        line: leaf.line,
                                        glob: leaf.alias.is_none(),
                                    });
                                }
                            }
                        }
                    } else if segs.len() >= 2 {
                        self.refs.push(Reference {
                            segs,
                            line,
                            glob: false,
                        });
                    }
                    i = j.max(i + 1);
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => i += 1,
            }
        }
    }
}

/// Whether `toks[j]`, `toks[j + 1]` are the two colons of `::`.
fn is_sep(toks: &[TokenTree], j: usize) -> bool {
    matches!(
        (toks.get(j), toks.get(j + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':' && a.spacing() == proc_macro2::Spacing::Joint
    )
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let skip = match item {
            syn::Item::Const(i) => is_test_only(&i.attrs),
            syn::Item::Enum(i) => is_test_only(&i.attrs),
            syn::Item::Fn(i) => is_test_only(&i.attrs),
            syn::Item::Impl(i) => is_test_only(&i.attrs),
            syn::Item::Macro(i) => is_test_only(&i.attrs),
            syn::Item::Mod(i) => is_test_only(&i.attrs),
            syn::Item::Static(i) => is_test_only(&i.attrs),
            syn::Item::Struct(i) => is_test_only(&i.attrs),
            syn::Item::Trait(i) => is_test_only(&i.attrs),
            syn::Item::Type(i) => is_test_only(&i.attrs),
            syn::Item::Union(i) => is_test_only(&i.attrs),
            syn::Item::Use(i) => is_test_only(&i.attrs),
            _ => false,
        };
        if !skip {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if u.leading_colon.is_some() {
            return;
        }
        for leaf in use_leaves(&u.tree) {
            self.refs.push(Reference {
                segs: leaf.segs,
                line: leaf.line,
                glob: leaf.alias.is_none(),
            });
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.push_path(path);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.scan_tokens(mac.tokens.clone());
    }

    fn visit_visibility(&mut self, _vis: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`: a visibility, not a reference.
    }

    fn visit_attribute(&mut self, _attr: &'ast syn::Attribute) {
        // Attributes (docs, cfgs, derives) name no module of the crate.
    }
}
