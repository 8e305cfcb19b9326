//! Provenance metadata keys recognised in artifact entries.
//!
//! Julia ignores extra keys in `[name]` table entries, so these keys keep a manifest loadable by
//! Julia. (In `[[name]]` platform entries Julia would read extra string keys as platform tags;
//! clima-artifact-build warns about that.) All are optional strings:
//!
//! | key | meaning |
//! |---|---|
//! | `description` | one line saying what the dataset is |
//! | `version` | the dataset's own version or release |
//! | `license` | an SPDX license expression, e.g. `CC-BY-4.0` |
//! | `acknowledgement` | text to paste into a paper's acknowledgements |
//! | `citation` | human-readable reference |
//! | `doi` | DOI of the dataset or paper, e.g. `10.5194/essd-13-4349-2021` |
//! | `bibtex` | a raw BibTeX entry |
//! | `source` | URL of the original data |
//! | `maintainer` | who to contact about this artifact |
//! | `archive-doi` | the DOI of this version's archive record (`publish --archive` writes it) |
//! | `archive-concept-doi` | the DOI of every version of that record (its parent, "concept") |
//!
//! `doi` is the source's (a paper, the original dataset) and is never replaced by an archive's:
//! `publish --archive` records the archive record's own DOIs under the two `archive-` keys.
//!
//! `recipe` ([`RECIPE`]) names the folder of the recipe that makes the artifact's content.

/// One line saying what the dataset is.
pub const DESCRIPTION: &str = "description";
/// The dataset's own version or release.
pub const VERSION: &str = "version";
/// An SPDX license expression.
pub const LICENSE: &str = "license";
/// Text to paste into a paper's acknowledgements.
pub const ACKNOWLEDGEMENT: &str = "acknowledgement";
/// Human-readable reference.
pub const CITATION: &str = "citation";
/// DOI of the dataset or its paper.
pub const DOI: &str = "doi";
/// A raw BibTeX entry.
pub const BIBTEX: &str = "bibtex";
/// URL of the original data.
pub const SOURCE: &str = "source";
/// Who to contact about this artifact.
pub const MAINTAINER: &str = "maintainer";
/// The DOI of the archive record holding this version of the artifact (InvenioRDM's
/// `pids.doi`, what `publish --archive` answers): cite it for exactly these bytes.
pub const ARCHIVE_DOI: &str = "archive-doi";
/// The DOI that resolves to the newest version of that archive record (InvenioRDM's
/// `parent.pids.doi`, Zenodo's "concept DOI"): cite it for the dataset in all its versions.
pub const ARCHIVE_CONCEPT_DOI: &str = "archive-concept-doi";

/// Where the artifact's recipe folder is, relative to the manifest's folder (`artifacts/<name>`:
/// an executable `recipe` and a `README.md`; see `clima-artifacts create --recipe`). Not in
/// [`KEYS`]: it says how to make the data again, not what to cite, and like any other extra
/// key it belongs in `[name]` entries only (Julia reads extra keys of `[[name]]` entries as
/// platform tags).
pub const RECIPE: &str = "recipe";

/// Every recognised provenance key, in the order reports show them.
pub const KEYS: [&str; 11] = [
    DESCRIPTION,
    VERSION,
    LICENSE,
    ACKNOWLEDGEMENT,
    CITATION,
    DOI,
    BIBTEX,
    SOURCE,
    MAINTAINER,
    ARCHIVE_DOI,
    ARCHIVE_CONCEPT_DOI,
];
