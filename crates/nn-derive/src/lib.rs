//! `#[derive(Module)]`: implements `ferrotorch::nn::Module` for a struct
//! with named fields by visiting every field in declaration order.
//!
//! - `Parameter`, `Buffer` and child modules are found by type: each field
//!   is handed to the nn crate's `Visitable` trait (`Option<T>` when
//!   `Some`, `Vec<M>` as a `ModuleList`); fields of other types (sizes,
//!   flags, closures) are skipped without an attribute.
//! - A field of type `ModuleState` holds the module's training flag and
//!   hooks (`train()` / `eval()` and `register_forward_hook` need one).
//! - Field attributes: `#[module(skip)]` leaves a field out;
//!   `#[module(name = "...")]` registers it under another name.
//! - Struct attributes: `#[module(name = "...")]` sets the type name shown
//!   by `Display` (default: the struct's name), `#[module(type_name =
//!   method)]` computes it (`fn(&self) -> Cow<'static, str>`); `#[module(extra_repr =
//!   method)]` names a `fn(&self) -> String` giving the text inside the
//!   parentheses of the repr (PyTorch's `extra_repr`);
//!   `#[module(crate = path)]` names the nn crate (default
//!   `::ferrotorch::nn`, or `crate` inside `ferrotorch-nn`).
//!
//! It also implements `Display` (PyTorch's module repr).
//!
//! `#[derive(Options)]`: the builder of a keyword-argument struct (see
//! [`derive_options`]).

mod options;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr, Path, Type, parse_macro_input};

/// Derives `Module` (and `Display`) for a struct with named fields; see the
/// crate docs for the attributes.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Derives the builder of a keyword-argument struct (PyTorch's keyword
/// arguments, one convention for every module and functional form):
/// `new()`, the struct's `Default` (PyTorch's defaults), and one setter per
/// field, named and documented as the field, taking the plain value (`T`
/// for an `Option<T>` field; `T` or `None` with `#[options(nullable)]`).
/// `#[options(skip)]` on a field leaves it out.
#[proc_macro_derive(Options, attributes(options))]
pub fn derive_options(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match options::expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

struct StructOptions {
    krate: Option<Path>,
    name: Option<LitStr>,
    type_name: Option<Path>,
    extra_repr: Option<Path>,
}

fn struct_options(input: &DeriveInput) -> syn::Result<StructOptions> {
    let mut o = StructOptions {
        krate: None,
        name: None,
        type_name: None,
        extra_repr: None,
    };
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("module")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                o.krate = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("name") {
                o.name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("type_name") {
                o.type_name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("extra_repr") {
                o.extra_repr = Some(meta.value()?.parse()?);
            } else {
                return Err(meta.error(
                    "expected `crate = path`, `name = \"...\"`, `type_name = method` or `extra_repr = method`",
                ));
            }
            Ok(())
        })?;
    }
    Ok(o)
}

/// The default path of the nn crate: `crate` inside it, else the facade's.
fn default_crate() -> TokenStream2 {
    if std::env::var("CARGO_CRATE_NAME").is_ok_and(|n| n == "ferrotorch_nn") {
        quote!(crate)
    } else {
        quote!(::ferrotorch::nn)
    }
}

/// Whether `ty` is a path whose last segment is `name` (`ModuleState`,
/// `nn::ModuleState`).
fn is_type(ty: &Type, name: &str) -> bool {
    match ty {
        Type::Path(p) => p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == name),
        _ => false,
    }
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let opts = struct_options(input)?;
    let krate = opts.krate.as_ref().map_or_else(default_crate, |p| quote!(#p));
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] needs a struct",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        if let Fields::Unit = data.fields {
            return Ok(with_impls(input, &krate, &opts, quote!(), None));
        }
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Module)] needs named fields (their names are the parameter names)",
        ));
    };
    let mut visits = Vec::new();
    let mut state = None;
    for f in &fields.named {
        let Some(ident) = f.ident.as_ref() else { continue };
        let mut skip = false;
        let mut name = ident.to_string();
        if let Some(stripped) = name.strip_prefix("r#") {
            name = stripped.to_string();
        }
        for attr in f.attrs.iter().filter(|a| a.path().is_ident("module")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("skip") {
                    skip = true;
                } else if meta.path.is_ident("name") {
                    name = meta.value()?.parse::<LitStr>()?.value();
                } else {
                    return Err(meta.error("expected `skip` or `name = \"...\"`"));
                }
                Ok(())
            })?;
        }
        if skip {
            continue;
        }
        if is_type(&f.ty, "ModuleState") {
            if state.is_some() {
                return Err(syn::Error::new_spanned(f, "a module has one ModuleState field"));
            }
            state = Some(ident.clone());
            continue;
        }
        visits.push(quote! {
            (&#krate::__private::Field(&self.#ident)).__visit(#name, __visitor);
        });
    }
    let body = quote! {
        #[allow(unused_imports)]
        use #krate::__private::{ViaOther as _, ViaVisitable as _};
        #(#visits)*
    };
    Ok(with_impls(input, &krate, &opts, body, state))
}

fn with_impls(
    input: &DeriveInput,
    krate: &TokenStream2,
    opts: &StructOptions,
    visit_body: TokenStream2,
    state: Option<syn::Ident>,
) -> TokenStream2 {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let type_name = match (&opts.type_name, &opts.name) {
        (Some(m), _) => quote!(self.#m()),
        (None, Some(n)) => quote!(::std::borrow::Cow::Borrowed(#n)),
        (None, None) => {
            let n = ident.to_string();
            quote!(::std::borrow::Cow::Borrowed(#n))
        }
    };
    let extra_repr = opts.extra_repr.as_ref().map(|m| {
        quote! {
            fn extra_repr(&self) -> ::std::string::String {
                self.#m()
            }
        }
    });
    let state_fn = state.map(|s| {
        quote! {
            fn state(&self) -> ::std::option::Option<&#krate::ModuleState> {
                ::std::option::Option::Some(&self.#s)
            }
        }
    });
    quote! {
        impl #impl_generics #krate::Module for #ident #ty_generics #where_clause {
            fn visit<'__a>(&'__a self, __visitor: &mut dyn #krate::Visitor<'__a>) {
                #visit_body
            }

            fn type_name(&self) -> ::std::borrow::Cow<'static, str> {
                #type_name
            }

            fn as_dyn(&self) -> &dyn #krate::Module {
                self
            }

            #extra_repr
            #state_fn
        }

        impl #impl_generics ::std::fmt::Display for #ident #ty_generics #where_clause {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&#krate::repr(self))
            }
        }
    }
}
