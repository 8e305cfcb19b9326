//! What `create` will do ([`Plan`]) and the metadata it writes ([`MetadataArgs`]): made by
//! `create` from its flags or by `guided` from the answers to its prompts, and carried out by
//! `create`. A module of its own, so that `create` (which asks `guided`) and `guided` (which
//! makes a plan) do not import each other.

use std::path::PathBuf;

use clima_artifact_manifest::metadata;

use crate::args::CreateArgs;

/// Everything `create` needs, from flags or from the guided prompts.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The content folder.
    pub dir: PathBuf,
    /// Artifact name.
    pub name: String,
    /// The manifest to edit.
    pub manifest: PathBuf,
    /// Download URL of the tarball, if known.
    pub url: Option<String>,
    /// Where to write the tarball (default `<name>.tar.gz`).
    pub tarball_out: Option<PathBuf>,
    /// A classic single-stream tarball instead of a seekable one.
    pub classic: bool,
    /// `lazy = true`.
    pub lazy: bool,
    /// No tarball, no downloads.
    pub external: bool,
    /// Metadata keys to write.
    pub metadata: Vec<(&'static str, String)>,
    /// JSON output.
    pub json: bool,
    /// The `recipe` key to record (the content folder is then the recipe's output).
    pub recipe: Option<String>,
}

/// The provenance metadata `create` writes, from flags or guided answers.
#[derive(Debug, Clone, Default)]
pub struct MetadataArgs {
    /// `description`.
    pub description: Option<String>,
    /// `version`.
    pub version: Option<String>,
    /// `license`.
    pub license: Option<String>,
    /// `acknowledgement`.
    pub acknowledgement: Option<String>,
    /// `citation`.
    pub citation: Option<String>,
    /// `doi`.
    pub doi: Option<String>,
    /// `source`.
    pub source: Option<String>,
    /// `maintainer`.
    pub maintainer: Option<String>,
}

impl MetadataArgs {
    /// The metadata flags of `create`.
    pub fn from_args(args: &CreateArgs) -> MetadataArgs {
        MetadataArgs {
            description: args.description.clone(),
            version: args.dataset_version.clone(),
            license: args.license.clone(),
            acknowledgement: args.acknowledgement.clone(),
            citation: args.citation.clone(),
            doi: args.doi.clone(),
            source: args.source.clone(),
            maintainer: args.maintainer.clone(),
        }
    }

    /// Metadata keys that have a value, in the order they are written (that of
    /// [`metadata::KEYS`]).
    pub fn entries(self) -> Vec<(&'static str, String)> {
        [
            (metadata::DESCRIPTION, self.description),
            (metadata::VERSION, self.version),
            (metadata::LICENSE, self.license),
            (metadata::ACKNOWLEDGEMENT, self.acknowledgement),
            (metadata::CITATION, self.citation),
            (metadata::DOI, self.doi),
            (metadata::SOURCE, self.source),
            (metadata::MAINTAINER, self.maintainer),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.filter(|v| !v.trim().is_empty()).map(|v| (k, v)))
        .collect()
    }
}
