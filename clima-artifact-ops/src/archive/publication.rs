//! Steps 2 to 6 of [`super::publish`] as a state machine over the draft: [`Publication`]
//! holds the checked input, the verified tarball and the state file's entry for this archive
//! (saved between requests, so that a killed run resumes); each step is a method, and the
//! requests of each step are functions of their own below it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clima_artifact_fs::printable;
use serde_json::{Value, json};

use super::api::{Upload, field_errors, file_url, files_md5, http_error, record_of_urls};
use super::client::Client;
use super::input::Input;
use super::meta::record_metadata;
use super::origin::{self, checked_id, checked_key};
use super::record::{record_in_manifest, recorded_already};
use super::state::{self, ArchiveState, CLOCK_SLACK, Creating, DraftState, State, Verified};
use super::tarball::verify_tarball;
use super::{ArchiveError, ArchiveEvent, DEFAULT_TIMEOUT, PublishRequest, Published, state_path};
use clima_artifact_runtime::progress::Reporting;

/// What step 3 of [`publish`](super::publish) found: a draft to fill (with the archive's answer), or the
/// record an earlier run published just before it stopped.
pub(super) enum Opened {
    Draft(DraftState, Value),
    /// The record (its id, the archive's answer).
    Published(String, Value),
}

/// One publication of an artifact to one archive, as far as it got: the checked input, the
/// verified tarball, the state file with this archive's entry (`st`, written back into `state`
/// by [`Publication::save`] between requests, so that a killed run resumes), and the result so
/// far. Each step of [`publish`](super::publish) is a method.
pub(super) struct Publication<'a> {
    pub(super) req: &'a PublishRequest,
    pub(super) reporting: &'a Reporting,
    pub(super) input: Input,
    pub(super) client: Client<'a>,
    pub(super) verified: Verified,
    /// The tarball's file key in the record.
    pub(super) key: String,
    /// The record's metadata (InvenioRDM's schema).
    pub(super) record_meta: Value,
    pub(super) state_file: PathBuf,
    pub(super) state: State,
    /// This archive's entry of `state`, as updated so far.
    pub(super) st: ArchiveState,
    pub(super) published: Published,
}

impl<'a> Publication<'a> {
    /// Step 2 of [`publish`](super::publish): the tarball's hashes (checked against the entry, or remembered
    /// from an earlier run), the state file, and the client.
    pub(super) fn start(
        req: &'a PublishRequest,
        input: Input,
        reporting: &'a Reporting,
    ) -> Result<Publication<'a>, ArchiveError> {
        let state_file = state_path(&req.manifest, &req.name);
        let mut state = state::load(&state_file)?;
        state.bind(
            &state_file,
            &req.name,
            &state::manifest_identity(&req.manifest),
        )?;
        let verified = verify_tarball(
            &input.tarball,
            input.size,
            &input.tree,
            state.verified.as_ref(),
            reporting,
        )?;
        state.verified = Some(verified.clone());
        let mut st = state
            .archives
            .get(&input.archive)
            .cloned()
            .unwrap_or_default();
        st.archive = Some(input.archive.clone());
        let key = input
            .tarball
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|k| !k.is_empty() && !k.contains('/'))
            .unwrap_or_else(|| format!("{}.tar.gz", req.name));
        let published = Published {
            name: req.name.clone(),
            archive: input.archive.clone(),
            record: String::new(),
            parent: st.parent.clone(),
            doi: st.doi.clone(),
            concept_doi: st.concept_doi.clone(),
            url: None,
            draft_url: None,
            draft: req.draft_only,
            new_version: false,
            resumed: false,
            unchanged: false,
            tarball: input.tarball.clone(),
            bytes: input.size,
            sha256: verified.sha256.clone(),
            md5: verified.md5.clone(),
            index_sha256: verified.index_sha256.clone(),
            uploaded: Vec::new(),
            manifest: req.manifest.clone(),
            edit: None,
            state_file: state_file.clone(),
            warnings: Vec::new(),
        };
        let client = Client::new(
            &input.archive,
            &input.token,
            req.timeout.unwrap_or(DEFAULT_TIMEOUT),
            reporting,
        )?;
        let own_dois: Vec<String> = st.doi.iter().chain(&st.concept_doi).cloned().collect();
        let (record_meta, warning) = record_metadata(
            req,
            &input.variant.metadata,
            &input.license,
            &input.creators,
            input.readme.as_ref().map(|(_, t)| t.as_str()),
            &own_dois,
        );
        let mut published = published;
        if let Some(w) = warning {
            reporting.emit(ArchiveEvent::RecordWarning(w.clone()));
            published.warnings.push(w);
        }
        Ok(Publication {
            req,
            reporting,
            input,
            client,
            verified,
            key,
            record_meta,
            state_file,
            state,
            st,
            published,
        })
    }

    /// The record a new draft is a new version of: the one the state file names (published
    /// by an earlier run), else the one the entry's download URL names.
    pub(super) fn previous(&self) -> Option<String> {
        self.st
            .record
            .clone()
            .or_else(|| record_of_urls(&self.input.archive, &self.input.variant.downloads))
    }

    /// Writes this archive's entry into the state and the state file.
    pub(super) fn save(&mut self) -> Result<(), ArchiveError> {
        self.state
            .archives
            .insert(self.input.archive.clone(), self.st.clone());
        state::save(&self.state_file, &self.state)
    }

    /// [`Publication::save`] with `draft` as the draft in progress.
    pub(super) fn save_draft(&mut self, draft: &DraftState) -> Result<(), ArchiveError> {
        self.st.draft = Some(draft.clone());
        self.save()
    }

    /// The record already published with this content (not with `--draft`).
    pub(super) fn already_published(&self) -> Option<String> {
        let same = self.st.published_sha256.as_deref() == Some(self.verified.sha256.as_str())
            && self.st.published_tree.as_deref() == Some(self.input.tree.as_str());
        self.st
            .record
            .clone()
            .filter(|_| same && !self.req.draft_only)
    }

    /// Nothing to send: `record` goes into the manifest if it is not there yet, once the
    /// archive shows that it is the state file's record and holds this tarball.
    pub(super) fn unchanged(mut self, record: String) -> Result<Published, ArchiveError> {
        self.published.url = Some(file_url(&self.input.archive, &record, &self.key));
        self.published.record = record.clone();
        self.published.unchanged = true;
        if !recorded_already(self.req, &self.input.tree, &self.published) {
            let body = self.read_published(&record)?;
            state::check_record(
                &self.state_file,
                &self.input.archive,
                &record,
                self.st.parent.as_deref(),
                self.st.doi.as_deref(),
                &body,
            )?;
        }
        self.record_in_manifest()?;
        self.save()?;
        Ok(self.published)
    }

    /// Checks that `record`, named by the state file as published by an earlier run, is on the
    /// archive with the parent and DOI the state file recorded ([`state::check_record`]), before
    /// it gets a new version.
    pub(super) fn check_previous(&self, record: &str) -> Result<(), ArchiveError> {
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{record}"), None)?;
        if status != 200 && status != 404 && status != 410 {
            return Err(http_error(
                &format!("GET {}/api/records/{record}", self.input.archive),
                status,
                &body,
            ));
        }
        state::check_record(
            &self.state_file,
            &self.input.archive,
            record,
            self.st.parent.as_deref(),
            self.st.doi.as_deref(),
            &body,
        )
    }

    /// Reads the published record `id` back: its DOIs (this version's, and every version's),
    /// and its file list, which must show our tarball complete with our MD5; the download URL
    /// is that file's in the published record, never a link of the archive's answers. The
    /// record as the archive answered it.
    pub(super) fn read_published(&mut self, id: &str) -> Result<Value, ArchiveError> {
        let archive = self.input.archive.clone();
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{id}"), None)?;
        if status != 200 || body["is_published"].as_bool() != Some(true) {
            return Err(http_error(
                &format!("reading the published record {id} back"),
                status,
                &body,
            ));
        }
        let (status, files) = self
            .client
            .call("GET", &format!("/api/records/{id}/files"), None)?;
        if status != 200 {
            return Err(http_error(
                &format!("listing the files of the published record {id}"),
                status,
                &files,
            ));
        }
        let record =
            origin::published_record(&archive, id, &self.key, &self.verified.md5, &body, &files)?;
        self.published.doi = record.doi;
        self.published.concept_doi = record.concept_doi;
        self.published.parent = record.parent.or(self.published.parent.take());
        self.published.url = Some(file_url(&archive, id, &self.key));
        Ok(body)
    }

    /// Step 3 of [`publish`](super::publish): the draft of the state file, else one an earlier run created
    /// without recording it, else a new version of the record published before, else a new
    /// record; or the record itself when an earlier run published that draft.
    pub(super) fn open_draft(&mut self) -> Result<Opened, ArchiveError> {
        let resumed = match self.st.draft.clone() {
            Some(d) => self.resume(d)?,
            None => None,
        };
        let (mut draft, body) = match resumed {
            Some(Opened::Published(id, body)) => return Ok(Opened::Published(id, body)),
            Some(Opened::Draft(d, body)) => (d, body),
            None => match self.created_unrecorded()? {
                Some(found) => found,
                None => self.create_draft()?,
            },
        };
        self.published.record = draft.id.clone();
        self.published.new_version = draft.new_version;
        self.published.parent = draft.parent.clone().or(self.published.parent.take());
        if draft.sha256 != self.verified.sha256 {
            // The artifact changed since the draft was started: its files are stale (replaced
            // by `keep_complete_files`, which checks them against `done` first).
            draft.sha256 = self.verified.sha256.clone();
            draft.tree = Some(self.input.tree.clone());
        }
        Ok(Opened::Draft(draft, body))
    }

    /// The draft `d` of the state file: still a draft (continued), published by the earlier
    /// run (with this content: that record; else the record a new version continues), or gone.
    pub(super) fn resume(&mut self, d: DraftState) -> Result<Option<Opened>, ArchiveError> {
        let (status, body) =
            self.client
                .call("GET", &format!("/api/records/{}/draft", d.id), None)?;
        if status == 200 {
            state::check_draft(&self.state_file, &self.input.archive, &d, &body)?;
            self.reporting
                .emit(ArchiveEvent::ContinuingDraft { id: d.id.clone() });
            self.published.resumed = true;
            return Ok(Some(Opened::Draft(d, body)));
        }
        if status != 404 {
            return Err(http_error(
                &format!("GET {}/api/records/{}/draft", self.input.archive, d.id),
                status,
                &body,
            ));
        }
        // Published by the earlier run just before it stopped?
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{}", d.id), None)?;
        if status == 200 && body["is_published"].as_bool() == Some(true) {
            state::check_record(
                &self.state_file,
                &self.input.archive,
                &d.id,
                d.parent.as_deref(),
                None,
                &body,
            )?;
            if d.sha256 == self.verified.sha256 {
                self.reporting
                    .emit(ArchiveEvent::PublishedEarlier { id: d.id.clone() });
                return Ok(Some(Opened::Published(d.id, body)));
            }
            // Published with other content: this content is its next version.
            self.st.record = Some(d.id.clone());
            self.st.parent.clone_from(&d.parent);
            self.st.doi = None;
        }
        self.st.draft = None;
        Ok(None)
    }

    /// A new draft: a new version of the previous record, else a new record. Before a new
    /// record is asked for, the state file says so (`creating`), so that a run killed before
    /// the archive's answer is saved finds that draft again ([`Self::created_unrecorded`]);
    /// a new version needs no such note, the archive answers the parent's existing draft.
    pub(super) fn create_draft(&mut self) -> Result<(DraftState, Value), ArchiveError> {
        let intent = Creating {
            sha256: self.verified.sha256.clone(),
            title: self.record_meta["metadata"]["title"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            publication_date: self.record_meta["metadata"]["publication_date"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            not_before: clima_artifact_fs::utc_timestamp(
                std::time::SystemTime::now()
                    .checked_sub(CLOCK_SLACK)
                    .unwrap_or(std::time::UNIX_EPOCH),
            ),
        };
        let previous = self.previous();
        if let Some(record) = &self.st.record {
            self.check_previous(record)?;
        }
        if previous.is_none() {
            self.st.creating = Some(intent.clone());
            self.save()?;
        }
        // A try whose answer was lost may have made the draft: found, it is the answer.
        // (Asked only after such a try: once asked, a later refusal does not prove that
        // nothing was made.)
        let asked = std::cell::Cell::new(false);
        let made = || {
            asked.set(true);
            let (id, body) = self.find_draft(&intent).ok().flatten()?;
            self.reporting
                .emit(ArchiveEvent::DraftAnswerLost { id: id.clone() });
            Some(body)
        };
        let created = new_draft(
            &self.client,
            &self.input.archive,
            previous.as_deref(),
            &self.record_meta,
            (&self.verified, &self.input.tree),
            &made,
        );
        if let Err(e) = &created
            && self.st.creating.is_some()
            && !asked.get()
            && refused(e)
        {
            // The archive answered every try, and made nothing.
            self.st.creating = None;
            self.save()?;
        }
        let (d, body) = created?;
        self.st.creating = None;
        self.save_draft(&d)?;
        self.reporting.emit(ArchiveEvent::NewDraft {
            new_version: d.new_version,
            id: d.id.clone(),
            archive: self.input.archive.clone(),
        });
        Ok((d, body))
    }

    /// The draft of a new record that an earlier run asked for (the state file's `creating`)
    /// but was killed before it saved the archive's answer: the newest of the user's records
    /// (`GET /api/user/records`) that is a draft never published, of a first version, with the
    /// title and publication date that run sent ([`Self::find_draft`]). `None` when there is no
    /// such note or draft.
    pub(super) fn created_unrecorded(
        &mut self,
    ) -> Result<Option<(DraftState, Value)>, ArchiveError> {
        let Some(intent) = self.st.creating.clone() else {
            return Ok(None);
        };
        if self.previous().is_some() {
            return Ok(None);
        }
        let Some((id, body)) = self.find_draft(&intent)? else {
            return Ok(None);
        };
        self.reporting
            .emit(ArchiveEvent::ContinuingInterrupted { id: id.clone() });
        self.published.resumed = true;
        let d = DraftState {
            id,
            sha256: intent.sha256,
            tree: Some(self.input.tree.clone()),
            parent: state::parent_of(&body)
                .filter(|p| origin::is_record_id(p))
                .map(str::to_owned),
            new_version: false,
            done: BTreeMap::new(),
        };
        self.st.creating = None;
        self.save_draft(&d)?;
        Ok(Some((d, body)))
    }

    /// The draft `intent` describes among the user's records (`GET /api/user/records`, newest
    /// first): never published, a first version, no files yet, created after the note, with
    /// the title and publication date sent; its id and the draft as read (`GET
    /// /api/records/{id}/draft`, not the search index's copy). Several such drafts (another
    /// checkout publishing the same name the same day) are none: which is ours cannot be told,
    /// so none is taken over, and the user is told their ids.
    pub(super) fn find_draft(
        &self,
        intent: &Creating,
    ) -> Result<Option<(String, Value)>, ArchiveError> {
        let (status, listing) =
            self.client
                .call("GET", "/api/user/records?sort=newest&size=25", None)?;
        if status != 200 {
            return Ok(None);
        }
        // Both UTC, compared to the second (`YYYY-MM-DDTHH:MM:SS`).
        let created_after = |r: &Value| {
            let created = r["created"].as_str().and_then(|c| c.get(..19));
            matches!((created, intent.not_before.get(..19)), (Some(c), Some(n)) if c >= n)
        };
        let ids: Vec<&str> = listing["hits"]["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| {
                r["is_published"].as_bool() == Some(false)
                    && r["versions"]["index"].as_u64() == Some(1)
                    && r["files"]["count"].as_u64().unwrap_or(0) == 0
                    && r["metadata"]["title"].as_str() == Some(intent.title.as_str())
                    && r["metadata"]["publication_date"].as_str()
                        == Some(intent.publication_date.as_str())
                    && created_after(r)
            })
            .filter_map(|r| r["id"].as_str())
            .filter(|id| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
            .collect();
        let id = match ids[..] {
            [id] => id.to_owned(),
            [] => return Ok(None),
            _ => {
                self.reporting.emit(ArchiveEvent::AmbiguousDrafts {
                    ids: ids.iter().map(|id| (*id).to_owned()).collect(),
                });
                return Ok(None);
            }
        };
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{id}/draft"), None)?;
        Ok((status == 200).then_some((id, body)))
    }

    /// Step 5 of [`publish`](super::publish): the tarball and the recipe README into `draft`, each file
    /// recorded in the state file once committed with the right checksum.
    pub(super) fn upload_files(&mut self, draft: &mut DraftState) -> Result<(), ArchiveError> {
        let mut files: Vec<(String, Upload)> = vec![(
            self.key.clone(),
            Upload::File {
                path: self.input.tarball.clone(),
                size: self.input.size,
                md5: self.verified.md5.clone(),
            },
        )];
        if let Some((_, text)) = &self.input.readme {
            files.push((
                crate::recipe::README_FILE.to_owned(),
                Upload::Bytes(text.clone().into_bytes()),
            ));
        }
        keep_complete_files(&self.client, &self.state_file, draft, &files)?;
        for (k, upload) in &files {
            if draft.done.get(k).is_some_and(|m| *m == upload.md5()) {
                self.reporting
                    .emit(ArchiveEvent::AlreadyInDraft { key: k.clone() });
                continue;
            }
            let theirs = send_file(&self.client, &draft.id, k, upload)?;
            let sent_md5 = upload.md5();
            let ours = format!("md5:{sent_md5}");
            if theirs != ours {
                self.client.delete_file(&draft.id, k)?;
                draft.done.remove(k);
                self.save_draft(draft)?;
                return Err(ArchiveError::Checksum {
                    key: k.clone(),
                    ours: format!("md5:{}", upload.md5()),
                    theirs: printable(&theirs).into_owned(),
                    draft: draft.id.clone(),
                });
            }
            self.reporting.emit(ArchiveEvent::Committed {
                key: k.clone(),
                checksum: ours,
            });
            draft.done.insert(k.clone(), sent_md5);
            self.published.uploaded.push(k.clone());
            self.save_draft(draft)?;
        }
        Ok(())
    }

    /// Step 6 of [`publish`](super::publish) with `--draft`: the draft stays for review, at its web page.
    pub(super) fn stop_at_draft(
        mut self,
        draft: &DraftState,
        draft_body: &Value,
    ) -> Result<Published, ArchiveError> {
        self.published.draft_url = Some(origin::review_page(
            &self.input.archive,
            &draft.id,
            draft_body,
        ));
        self.save_draft(draft)?;
        Ok(self.published)
    }

    /// After a publish answered `body` for draft `id` (now or by an earlier run): the record
    /// read back ([`Self::read_published`]), the state, the manifest.
    pub(super) fn finish_published(
        mut self,
        id: &str,
        body: &Value,
    ) -> Result<Published, ArchiveError> {
        let answered = checked_id(&self.input.archive, "the publish", &body["id"])?;
        if answered != id {
            return Err(ArchiveError::Untrusted(format!(
                "{} answered record {answered} to the publish of draft {id}; the manifest was \
                 not changed: look at both in the archive's web page",
                self.input.archive
            )));
        }
        self.published.record = id.to_owned();
        self.published.draft = false;
        self.st.record = Some(id.to_owned());
        self.st.parent.clone_from(&self.published.parent);
        self.st.published_sha256 = Some(self.published.sha256.clone());
        self.st.published_tree = Some(self.input.tree.clone());
        self.st.draft = None;
        self.save()?;
        self.read_published(id)?;
        self.st.parent.clone_from(&self.published.parent);
        self.st.doi.clone_from(&self.published.doi);
        self.st.concept_doi.clone_from(&self.published.concept_doi);
        self.save()?;
        self.record_in_manifest()?;
        Ok(self.published)
    }

    /// The edit of the manifest that records the published tarball (`Published::edit`).
    pub(super) fn record_in_manifest(&mut self) -> Result<(), ArchiveError> {
        let edit = record_in_manifest(
            self.req,
            &self.input.text,
            &self.input.tree,
            &self.published,
        )?;
        self.published.edit = Some(edit);
        Ok(())
    }
}

/// Whether the archive answered `e` to a request, refusing it (so it did nothing), rather than
/// failing to answer.
pub(super) fn refused(e: &ArchiveError) -> bool {
    match e {
        ArchiveError::Unauthorized { .. } | ArchiveError::Rejected { .. } => true,
        ArchiveError::Http { status, .. } => (400..500).contains(status),
        _ => false,
    }
}

/// Step 3 of [`publish`](super::publish) without a draft to continue: a new version of the `previous` record,
/// else a new record with `record_meta` (`made`: the draft a try whose answer was lost made, see
/// [`Client::call_making`]); the draft's state for the artifact `verified` of tree `tree`, and
/// the archive's answer.
pub(super) fn new_draft(
    client: &Client<'_>,
    archive: &str,
    previous: Option<&str>,
    record_meta: &Value,
    (verified, tree): (&Verified, &str),
    made: &dyn Fn() -> Option<Value>,
) -> Result<(DraftState, Value), ArchiveError> {
    let (status, body, new_version) = match previous {
        Some(prev) => {
            let (s, b) = client.call(
                "POST",
                &format!("/api/records/{prev}/versions"),
                Some(&json!({})),
            )?;
            (s, b, true)
        }
        None => {
            let (s, b) = client.call_making("POST", "/api/records", Some(record_meta), made)?;
            (s, b, false)
        }
    };
    if status != 201 && status != 200 {
        return Err(http_error(
            &format!("creating a draft on {archive}"),
            status,
            &body,
        ));
    }
    let id = checked_id(archive, "the new draft", &body["id"])?;
    let parent = checked_id(archive, "the new draft's parent", &body["parent"]["id"])?;
    let d = DraftState {
        id,
        sha256: verified.sha256.clone(),
        tree: Some(tree.to_owned()),
        parent: Some(parent),
        new_version,
        done: BTreeMap::new(),
    };
    Ok((d, body))
}

/// Step 4 of [`publish`](super::publish): sets the metadata of draft `draft_id`, which the archive checks
/// before any upload.
pub(super) fn put_metadata(
    client: &Client<'_>,
    archive: &str,
    draft_id: &str,
    record_meta: &Value,
) -> Result<(), ArchiveError> {
    let (status, body) = client.call(
        "PUT",
        &format!("/api/records/{draft_id}/draft"),
        Some(record_meta),
    )?;
    if status != 200 {
        return Err(http_error(
            &format!("setting the metadata of draft {draft_id}"),
            status,
            &body,
        ));
    }
    let errors = field_errors(&body);
    if !errors.is_empty() {
        return Err(ArchiveError::Rejected {
            archive: archive.to_owned(),
            errors,
        });
    }
    Ok(())
}

/// Step 5 of [`publish`](super::publish), before uploading: the files already in the draft, once checked
/// against the state file `state_file` ([`state::check_files`]: none that this run does not
/// upload and the state file never recorded), that are complete and are one of `files` with
/// the same MD5 are marked done; any other is deleted.
pub(super) fn keep_complete_files(
    client: &Client<'_>,
    state_file: &Path,
    draft: &mut DraftState,
    files: &[(String, Upload)],
) -> Result<(), ArchiveError> {
    let (status, listing) = client.call(
        "GET",
        &format!("/api/records/{}/draft/files", draft.id),
        None,
    )?;
    if status != 200 {
        return Err(http_error(
            &format!("listing the files of draft {}", draft.id),
            status,
            &listing,
        ));
    }
    let present: BTreeMap<String, (String, Option<String>)> = listing["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["key"].as_str()?.to_owned(),
                (
                    e["status"].as_str().unwrap_or("").to_owned(),
                    e["checksum"].as_str().map(str::to_owned),
                ),
            ))
        })
        .collect();
    for k in present.keys() {
        checked_key(&client.base, &draft.id, k)?;
    }
    let ours: Vec<&str> = files.iter().map(|(k, _)| k.as_str()).collect();
    state::check_files(state_file, &client.base, draft, &present, &ours)?;
    draft.done.retain(|k, _| present.contains_key(k));
    for (k, (status, checksum)) in &present {
        let wanted = files.iter().find(|(w, _)| w == k);
        let good = wanted.is_some_and(|(_, u)| {
            status == "completed" && checksum.as_deref() == Some(&format!("md5:{}", u.md5()))
        });
        if good {
            draft.done.insert(k.clone(), files_md5(files, k));
        } else {
            client.delete_file(&draft.id, k)?;
            draft.done.remove(k);
        }
    }
    Ok(())
}

/// Step 5 of [`publish`](super::publish) for one file: starts its upload to draft `draft_id`, sends `upload`
/// and commits it; the checksum the archive answers (`md5:...`, empty without one).
pub(super) fn send_file(
    client: &Client<'_>,
    draft_id: &str,
    k: &str,
    upload: &Upload,
) -> Result<String, ArchiveError> {
    let (status, body) = client.call(
        "POST",
        &format!("/api/records/{draft_id}/draft/files"),
        Some(&json!([{ "key": k }])),
    )?;
    if status != 201 && status != 200 {
        return Err(http_error(
            &format!("starting the upload of `{k}`"),
            status,
            &body,
        ));
    }
    client.upload(draft_id, k, upload)?;
    let (status, body) = client.call(
        "POST",
        &format!("/api/records/{draft_id}/draft/files/{k}/commit"),
        None,
    )?;
    if status != 200 && status != 201 {
        return Err(http_error(
            &format!("committing `{k}` to draft {draft_id}"),
            status,
            &body,
        ));
    }
    Ok(body["checksum"].as_str().unwrap_or("").to_owned())
}

/// Step 6 of [`publish`](super::publish): publishes draft `draft_id`; the archive's answer (the record).
pub(super) fn publish_draft(
    client: &Client<'_>,
    archive: &str,
    draft_id: &str,
) -> Result<Value, ArchiveError> {
    let (status, body) = client.call(
        "POST",
        &format!("/api/records/{draft_id}/draft/actions/publish"),
        None,
    )?;
    if status == 400 {
        let errors = field_errors(&body);
        if !errors.is_empty() {
            return Err(ArchiveError::Rejected {
                archive: archive.to_owned(),
                errors,
            });
        }
    }
    if status != 202 && status != 200 {
        return Err(http_error(
            &format!("publishing draft {draft_id}"),
            status,
            &body,
        ));
    }
    Ok(body)
}
