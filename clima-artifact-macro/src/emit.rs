//! Turning a checked manifest into the static data and the call of the runtime's resolver.
//! Every path in the output starts with the runtime's `$crate` (passed in by the
//! `macro_rules!` wrapper), `::core` or `::std`.

use clima_artifact_manifest::{ArtifactEntry, ArtifactVariant, Manifest};
use proc_macro2::TokenStream;
use quote::quote;
use syn::Expr;

use crate::check::Checked;

/// Expansion of a literal `"name"` / `"name/sub/path"`: embeds that artifact only.
pub(crate) fn literal(
    krate: &TokenStream,
    manifest: &Manifest,
    checked: &Checked,
    ctx: Option<&Expr>,
) -> TokenStream {
    let artifacts: Vec<TokenStream> = manifest
        .artifacts()
        .iter()
        .filter(|(n, _)| *n == checked.name)
        .map(|(n, e)| artifact(krate, n, e))
        .collect();
    let subpath = match &checked.subpath {
        Some(s) => quote!(::core::option::Option::Some(#s)),
        None => quote!(::core::option::Option::None),
    };
    let site = call_site(krate, manifest, &artifacts, true, subpath);
    let ctx = context(krate, ctx);
    quote! {{
        #site
        #krate::__private::resolve_literal(&__CLIMA_ARTIFACT_SITE, #ctx)
    }}
}

/// Expansion of a name computed at run time: embeds every artifact of the manifest.
pub(crate) fn dynamic(
    krate: &TokenStream,
    manifest: &Manifest,
    name: &Expr,
    ctx: Option<&Expr>,
) -> TokenStream {
    let artifacts: Vec<TokenStream> = manifest
        .artifacts()
        .iter()
        .map(|(n, e)| artifact(krate, n, e))
        .collect();
    let site = call_site(
        krate,
        manifest,
        &artifacts,
        false,
        quote!(::core::option::Option::None),
    );
    let ctx = context(krate, ctx);
    quote! {{
        #site
        #krate::__private::resolve_dynamic(
            &__CLIMA_ARTIFACT_SITE,
            ::core::convert::AsRef::<str>::as_ref(&#name),
            #ctx,
        )
    }}
}

/// `Option<&dyn Context>` from the optional context argument.
fn context(krate: &TokenStream, ctx: Option<&Expr>) -> TokenStream {
    match ctx {
        Some(c) => quote!(::core::option::Option::Some(
            #krate::__private::as_context(#c)
        )),
        None => quote!(::core::option::Option::None),
    }
}

/// The rebuild trigger, the `MacroSite` static and its inventory entry.
fn call_site(
    krate: &TokenStream,
    manifest: &Manifest,
    artifacts: &[TokenStream],
    literal: bool,
    subpath: TokenStream,
) -> TokenStream {
    let path = manifest.path.to_string_lossy().into_owned();
    let dir = manifest.dir().to_string_lossy().into_owned();
    quote! {
        const _: &[u8] = ::core::include_bytes!(#path);
        static __CLIMA_ARTIFACT_SITE: #krate::__private::MacroSite = #krate::__private::MacroSite {
            manifest: #krate::__private::StaticManifest {
                path: #path,
                dir: #dir,
                artifacts: &[#(#artifacts),*],
            },
            literal: #literal,
            subpath: #subpath,
            file: ::core::file!(),
            line: ::core::line!(),
            column: ::core::column!(),
            cache: #krate::__private::SiteCache::new(),
        };
        #[#krate::__private::linkme::distributed_slice(#krate::__private::CALL_SITES)]
        #[linkme(crate = #krate::__private::linkme)]
        static __CLIMA_ARTIFACT_DECLARED: &#krate::__private::MacroSite = &__CLIMA_ARTIFACT_SITE;
    }
}

fn artifact(krate: &TokenStream, name: &str, entry: &ArtifactEntry) -> TokenStream {
    let (platform_specific, variants) = match entry {
        ArtifactEntry::Single(v) => (false, std::slice::from_ref(v)),
        ArtifactEntry::PlatformSpecific(vs) => (true, vs.as_slice()),
    };
    let variants = variants.iter().map(|v| variant(krate, v));
    quote! {
        #krate::__private::StaticArtifact {
            name: #name,
            platform_specific: #platform_specific,
            variants: &[#(#variants),*],
        }
    }
}

fn variant(krate: &TokenStream, v: &ArtifactVariant) -> TokenStream {
    let hash = v.git_tree_sha1.0;
    let hash_sha256 = match v.git_tree_sha256 {
        Some(h) => {
            let h = h.0;
            quote!(::core::option::Option::Some([#(#h),*]))
        }
        None => quote!(::core::option::Option::None),
    };
    let lazy = v.lazy;
    let line = v.line;
    let downloads = v.downloads.iter().map(|d| {
        let url = &d.url;
        let sha = d.sha256.0;
        let size = match d.size {
            Some(s) => quote!(::core::option::Option::Some(#s)),
            None => quote!(::core::option::Option::None),
        };
        let index_sha256 = match d.index_sha256 {
            Some(h) => {
                let h = h.0;
                quote!(::core::option::Option::Some([#(#h),*]))
            }
            None => quote!(::core::option::Option::None),
        };
        quote! {
            #krate::__private::StaticDownload {
                url: #url, sha256: [#(#sha),*], size: #size, index_sha256: #index_sha256
            }
        }
    });
    let tags: Vec<(&String, &String)> = v.platform.iter().flat_map(|p| p.tags.iter()).collect();
    let tags = tags.iter().map(|(k, v)| quote!((#k, #v)));
    let metadata = v.metadata.iter().map(|(k, v)| quote!((#k, #v)));
    quote! {
        #krate::__private::StaticVariant {
            git_tree_sha1: [#(#hash),*],
            git_tree_sha256: #hash_sha256,
            lazy: #lazy,
            downloads: &[#(#downloads),*],
            platform: &[#(#tags),*],
            metadata: &[#(#metadata),*],
            line: #line,
        }
    }
}
