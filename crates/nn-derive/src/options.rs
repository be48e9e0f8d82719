//! `#[derive(Options)]`: the builder of a keyword-argument struct.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Data, DeriveInput, Fields, GenericArgument, PathArguments, Type};

/// `T` when `ty` is `Option<T>`.
fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    }
}

/// `new()` (the `Default`: PyTorch's defaults) and one setter per field,
/// named as the field, documented with the field's doc comment; an
/// `Option<T>` field's setter takes the plain `T`, or with
/// `#[options(nullable)]` (a keyword whose default is not `None`) `T` or
/// `None`. Fields marked `#[options(skip)]` get none.
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(input, "Options derives only for structs"));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(input, "Options needs named fields"));
    };
    let mut setters = Vec::new();
    for f in &fields.named {
        let (mut skip, mut nullable) = (false, false);
        for a in f.attrs.iter().filter(|a| a.path().is_ident("options")) {
            a.parse_nested_meta(|m| {
                if m.path.is_ident("skip") {
                    skip = true;
                    Ok(())
                } else if m.path.is_ident("nullable") {
                    nullable = true;
                    Ok(())
                } else {
                    Err(m.error("expected `skip` or `nullable`"))
                }
            })?;
        }
        if skip {
            continue;
        }
        let name = f.ident.as_ref().expect("named field");
        let docs: Vec<_> = f.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
        let setter = match option_inner(&f.ty) {
            Some(inner) if nullable => quote! {
                #(#docs)*
                pub fn #name(mut self, value: impl ::std::convert::Into<::std::option::Option<#inner>>) -> Self {
                    self.#name = value.into();
                    self
                }
            },
            Some(inner) => quote! {
                #(#docs)*
                pub fn #name(mut self, value: #inner) -> Self {
                    self.#name = ::std::option::Option::Some(value);
                    self
                }
            },
            None => {
                let ty = &f.ty;
                quote! {
                    #(#docs)*
                    pub fn #name(mut self, value: #ty) -> Self {
                        self.#name = value;
                        self
                    }
                }
            }
        };
        setters.push(setter);
    }
    let ident = &input.ident;
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_g #ident #ty_g #where_g {
            /// PyTorch's defaults; each method below sets one keyword
            /// argument (`X::new().kw(value)`).
            pub fn new() -> Self {
                <Self as ::std::default::Default>::default()
            }

            #(#setters)*
        }
    })
}
