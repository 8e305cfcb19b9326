//! The proc macro behind `clima_artifact!`. Use it through `clima-artifact-runtime`, whose
//! `clima_artifact!` is a `macro_rules!` wrapper that passes its own `$crate` path here, so the
//! generated code works under any name the runtime is imported as.
//!
//! This crate stays thin: `check` finds, parses and checks the manifest with ordinary,
//! unit-tested functions; `emit` turns the result into tokens; this file parses the input and
//! turns errors into `compile_error!`s spanned on the name literal.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Lit, LitStr, Token};

mod check;
mod emit;

/// Input: `($crate) name [, ctx] [,]`.
struct Input {
    krate: TokenStream,
    name: Expr,
    ctx: Option<Expr>,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let group;
        syn::parenthesized!(group in input);
        let krate: TokenStream = group.parse()?;
        if input.is_empty() {
            return Err(input.error(
                "expected an artifact name: `clima_artifact!(\"name\")`, \
                 `clima_artifact!(\"name/sub/path\", &ctx)` or `clima_artifact!(name_expr, &ctx)`",
            ));
        }
        let name: Expr = input.parse()?;
        let mut ctx = None;
        if input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
            ctx = Some(input.parse()?);
            input.parse::<Option<Token![,]>>()?;
        }
        if !input.is_empty() {
            return Err(input.error(
                "unexpected tokens: `clima_artifact!` takes a name and an optional context",
            ));
        }
        Ok(Input { krate, name, ctx })
    }
}

/// A string literal, also when it arrives wrapped in an invisible group from another macro.
fn literal_name(expr: &Expr) -> Option<&LitStr> {
    match expr {
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => Some(s),
            _ => None,
        },
        Expr::Group(g) => literal_name(&g.expr),
        Expr::Paren(p) => literal_name(&p.expr),
        _ => None,
    }
}

#[doc(hidden)]
#[proc_macro]
pub fn clima_artifact_impl(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = syn::parse_macro_input!(input as Input);
    expand(&input).into()
}

fn expand(input: &Input) -> TokenStream {
    let krate = &input.krate;
    let literal = literal_name(&input.name);
    let span = literal.map_or_else(|| syn::spanned::Spanned::span(&input.name), LitStr::span);
    let result = std::env::var("CARGO_MANIFEST_DIR")
        .map_err(|_| {
            "CARGO_MANIFEST_DIR is not set: `clima_artifact!` must be compiled by cargo".to_owned()
        })
        .and_then(|dir| check::load_manifest(std::path::Path::new(&dir)));
    let manifest = match result {
        Ok(m) => m,
        Err(message) => return fallback(krate, input, span, message),
    };
    match literal {
        Some(lit) => match check::check_literal(&manifest, &lit.value()) {
            Ok(checked) => emit::literal(krate, &manifest, &checked, input.ctx.as_ref()),
            Err(message) => fallback(krate, input, span, message),
        },
        None => emit::dynamic(krate, &manifest, &input.name, input.ctx.as_ref()),
    }
}

/// A `compile_error!` at `span`, still an expression of type `Result<PathBuf, Error>` (the
/// context is evaluated too) so the caller sees no follow-up errors.
fn fallback(krate: &TokenStream, input: &Input, span: Span, message: String) -> TokenStream {
    let error = syn::Error::new(span, message).to_compile_error();
    let ctx = input.ctx.as_ref().map(|c| quote!(let _ = #c;));
    let name = literal_name(&input.name).is_none().then(|| {
        let n = &input.name;
        quote!(let _ = &#n;)
    });
    quote! {{
        #error
        #ctx
        #name
        #krate::__private::after_compile_error()
    }}
}
