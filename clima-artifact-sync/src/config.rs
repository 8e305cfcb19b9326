//! [`SyncConfig`]: what a [`RunSync`](crate::RunSync) moves, and who moves it.

use clima_artifact_progress::Reporting;
use std::time::Duration;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::SyncError;
use clima_artifact_vars as vars;

/// Environment variable: `0` turns output-artifact sync off (only checkpoints move).
pub const SYNC_ARTIFACTS_ENV: &str = vars::SYNC_ARTIFACTS;
/// Environment variable: exclude globs, separated by `:`.
pub const SYNC_EXCLUDE_ENV: &str = vars::SYNC_EXCLUDE;
/// Environment variable: seconds after which a slow sync logs a warning.
pub const SYNC_WARN_AFTER_ENV: &str = vars::SYNC_WARN_AFTER;
/// Environment variable: `1` selects [`SyncMode::PerRank`].
pub const SYNC_PER_RANK_ENV: &str = vars::SYNC_PER_RANK;

/// Which ranks of the context move files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Rank 0 syncs the shared run folder once; the other ranks get its outcome.
    #[default]
    Root,
    /// Every rank `r` syncs its own subfolder `<run_dir>/rank-<r>` (node-local scratch) to
    /// `<storage>/rank-<r>`; if any rank fails, every rank returns that error.
    PerRank,
}

/// Settings of a [`RunSync`](crate::RunSync).
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// Move output artifacts (everything outside checkpoint folders). Off: no rank uploads or
    /// downloads anything but checkpoints.
    pub sync_artifacts: bool,
    /// Files never moved (for example those another component already uploads). A glob
    /// without `/` matches a file name in any folder (`*.nc`); one with `/` matches the path
    /// relative to the run folder (`diag/**/*.nc`).
    pub exclude: Vec<String>,
    /// A sync still running after this long logs a warning naming the biggest files.
    pub slow_warning_after: Duration,
    /// Which ranks move files.
    pub mode: SyncMode,
    /// Where the sync's notices (files not synced or not restored, slow syncs) go: the
    /// program's, passed down from its entry point; by default today's lines on stderr.
    pub reporting: Reporting,
}

impl Default for SyncConfig {
    fn default() -> SyncConfig {
        SyncConfig {
            sync_artifacts: true,
            exclude: Vec::new(),
            slow_warning_after: Duration::from_secs(60),
            mode: SyncMode::Root,
            reporting: Reporting::default(),
        }
    }
}

impl SyncConfig {
    /// Defaults overridden by [`SYNC_ARTIFACTS_ENV`], [`SYNC_EXCLUDE_ENV`],
    /// [`SYNC_WARN_AFTER_ENV`] and [`SYNC_PER_RANK_ENV`].
    pub fn from_env() -> Result<SyncConfig, SyncError> {
        SyncConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// Like [`SyncConfig::from_env`] with variables read through `get`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<SyncConfig, SyncError> {
        let mut c = SyncConfig::default();
        if let Some(v) = get(SYNC_ARTIFACTS_ENV) {
            c.sync_artifacts = parse_bool(SYNC_ARTIFACTS_ENV, &v)?;
        }
        if let Some(v) = get(SYNC_EXCLUDE_ENV) {
            c.exclude = v
                .split(':')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if let Some(v) = get(SYNC_WARN_AFTER_ENV) {
            let secs: f64 = v
                .trim()
                .parse()
                .ok()
                // Below 10^9 s as the runtime's seconds: larger is no duration to wait for
                // (and `Duration::from_secs_f64` would panic past its range).
                .filter(|s: &f64| (0.0..1e9).contains(s))
                .ok_or_else(|| SyncError::Config {
                    variable: SYNC_WARN_AFTER_ENV.into(),
                    value: v.clone(),
                    reason: "expected a number of seconds, e.g. 120".into(),
                })?;
            c.slow_warning_after = Duration::from_secs_f64(secs);
        }
        if let Some(v) = get(SYNC_PER_RANK_ENV)
            && parse_bool(SYNC_PER_RANK_ENV, &v)?
        {
            c.mode = SyncMode::PerRank;
        }
        c.excludes()?;
        Ok(c)
    }

    /// The compiled exclude globs; a bad glob is an error naming it.
    pub fn excludes(&self) -> Result<GlobSet, SyncError> {
        let mut set = GlobSetBuilder::new();
        for pattern in &self.exclude {
            let full = if pattern.contains('/') {
                pattern.trim_start_matches('/').to_owned()
            } else {
                format!("**/{pattern}")
            };
            let glob = GlobBuilder::new(&full)
                .literal_separator(true)
                .build()
                .map_err(|e| SyncError::BadExclude {
                    pattern: pattern.clone(),
                    reason: e.to_string(),
                })?;
            set.add(glob);
        }
        set.build().map_err(|e| SyncError::BadExclude {
            pattern: self.exclude.join(", "),
            reason: e.to_string(),
        })
    }
}

fn parse_bool(variable: &str, value: &str) -> Result<bool, SyncError> {
    vars::parse_bool(value).ok_or_else(|| SyncError::Config {
        variable: variable.into(),
        value: value.into(),
        reason: vars::BOOL_EXPECTED.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_anywhere_and_paths_from_the_root() {
        let c = SyncConfig {
            exclude: vec!["*.nc".into(), "plots/**/*.png".into()],
            ..Default::default()
        };
        let g = c.excludes().unwrap();
        assert!(g.is_match("a.nc"));
        assert!(g.is_match("diag/x/a.nc"));
        assert!(g.is_match("plots/a/b.png"));
        assert!(g.is_match("plots/b.png"));
        assert!(!g.is_match("other/b.png"));
        assert!(!g.is_match("a.nc4"));
    }

    #[test]
    fn env_vars() {
        let vars = |k: &str| match k {
            SYNC_ARTIFACTS_ENV => Some("0".to_owned()),
            SYNC_EXCLUDE_ENV => Some("*.nc: logs/*".to_owned()),
            SYNC_WARN_AFTER_ENV => Some("2.5".to_owned()),
            SYNC_PER_RANK_ENV => Some("1".to_owned()),
            _ => None,
        };
        let c = SyncConfig::from_vars(vars).unwrap();
        assert!(!c.sync_artifacts);
        assert_eq!(c.exclude, ["*.nc", "logs/*"]);
        assert_eq!(c.slow_warning_after, Duration::from_millis(2500));
        assert_eq!(c.mode, SyncMode::PerRank);
        for huge in ["1e20", "inf", "-1"] {
            let e = SyncConfig::from_vars(|k| (k == SYNC_WARN_AFTER_ENV).then(|| huge.into()))
                .unwrap_err();
            assert!(
                e.to_string().contains("CLIMA_SYNC_WARN_AFTER"),
                "{huge}: {e}"
            );
        }
        let e = SyncConfig::from_vars(|k| (k == SYNC_WARN_AFTER_ENV).then(|| "soon".into()))
            .unwrap_err();
        assert!(e.to_string().contains("CLIMA_SYNC_WARN_AFTER"), "{e}");
        let e =
            SyncConfig::from_vars(|k| (k == SYNC_EXCLUDE_ENV).then(|| "a[".into())).unwrap_err();
        assert!(e.to_string().contains("`a[` is not a valid glob"), "{e}");
    }
}
