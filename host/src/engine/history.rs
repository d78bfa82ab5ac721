//! Every visible commit's manifests, for the commands that read all of
//! history (`verify --all-history`, `gc`, `fork`, `undo`, `recover`),
//! remembered in `.tether/cache/history.bin` between runs.
//!
//! What a commit holds never changes (its id is a hash of it), so the memo
//! keeps facts, not guesses:
//!
//! - per commit, the ids of its manifest sets (`files_id`: git's tree id of
//!   `.tether/objects/`, one per side and base of a conflicted jj commit);
//! - per manifest set, its manifests, parsed (the same id is the same bytes);
//! - each distinct manifest once, however many sets hold it: most commits
//!   change a few objects, so most of a set is its parent's. Read back, the
//!   sets share one [`Manifest`] per distinct one, as they do after a walk.
//!
//! Which commits are visible, and in what order, is reused only while the
//! VCS's [`history_key`](crate::vcs::Vcs::history_key) is the one the walk was
//! made under. git's names every ref tip, every checkout's `HEAD`, the
//! shallow boundary, grafts and replace refs, so a commit, a moved branch or
//! a new worktree anywhere makes the next read walk again; jj's names its
//! operation heads, so any jj operation does. A memo that is missing,
//! damaged, written by another tether version or for another prefix is
//! ignored and replaced; it is a cache in the checkout's own
//! `.tether/cache/`, which the VCS never tracks.
//!
//! The file is `postcard`, not JSON: every history command reads all of it
//! before anything else, and decoding 200 commits x 5 manifests took 1.5 ms
//! from JSON, 0.6 ms from postcard. Locators and states stay JSON text
//! inside it (`serde_json` values need a self-describing format).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::error::{Result, TetherError};
use crate::model::manifest::{JsonMap, Origin, Pin};
use crate::model::{Layout, Manifest, Policy, fsutil};
use crate::vcs::{CommitId, FileMap, Vcs};

/// The memo's file under `.tether/cache/`.
pub const MEMO_FILE: &str = "history.bin";

/// Where tethers before the binary memo kept it: removed when the new one
/// is written, so a checkout does not carry both.
const OLD_MEMO_FILE: &str = "history.json";

/// Bumped whenever the memo's shape or meaning changes.
const FORMAT: u32 = 3;

/// One manifest set: key → manifest. Shared, not cloned: one set serves
/// every commit that holds it, and each manifest every check that reads it.
pub type ManifestSet = Arc<BTreeMap<String, Arc<Manifest>>>;

/// What history reads: the dataset's VCS and where its files are, and
/// nothing else of a [`Repo`](super::Repo) (which converts into one, so a
/// caller passes `repo`).
#[derive(Clone, Copy)]
pub(crate) struct Source<'a> {
    pub vcs: &'a dyn Vcs,
    pub layout: &'a Layout,
}

impl Source<'_> {
    /// `path` relative to the VCS root, with `/` separators.
    pub fn vcs_path(&self, path: &Path) -> String {
        let rel = path.strip_prefix(self.vcs.root()).unwrap_or(path);
        rel.to_string_lossy().replace('\\', "/")
    }

    /// Where the manifests are, as the VCS names paths.
    fn objects_prefix(&self) -> String {
        self.vcs_path(&self.layout.objects_dir())
    }
}

/// Every visible commit's manifests, newest first: a commit once per distinct
/// side and base of a conflict, a commit with no manifests left out.
pub(crate) fn history_manifests<'a>(
    source: impl Into<Source<'a>>,
) -> Result<Vec<(CommitId, ManifestSet)>> {
    let mut walk = Walk::open(source.into())?;
    if let Some(out) = walk.replay() {
        return Ok(out);
    }
    let mut out = Vec::new();
    walk.run(|commit, sets| {
        for set in sets {
            if !set.is_empty() {
                out.push((commit.id.clone(), set));
            }
        }
    })?;
    Ok(out)
}

/// One visible commit as `history_commits` reads it: the VCS's facts about
/// it, without its files.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub id: CommitId,
    /// First parent first.
    pub parents: Vec<CommitId>,
    pub author_name: String,
    pub author_email: String,
    pub authored_at: chrono::DateTime<chrono::FixedOffset>,
    pub committed_at: chrono::DateTime<chrono::FixedOffset>,
    pub message: String,
}

/// Every visible commit, newest first, with what it says about itself and
/// its manifest sets (its own, then each distinct side and base of a
/// conflict; none for a commit without manifests). For the commands that
/// need the commits too (`export`): the VCS is walked every time, but each
/// manifest set the memo holds is reused, and each one it lacks is parsed
/// once, so no manifest is parsed twice however many commits repeat it.
pub(crate) fn history_commits<'a>(
    source: impl Into<Source<'a>>,
) -> Result<Vec<(CommitInfo, Vec<ManifestSet>)>> {
    let mut walk = Walk::open(source.into())?;
    let mut out = Vec::new();
    walk.run(|commit, sets| out.push((CommitInfo::from(commit), sets)))?;
    Ok(out)
}

impl From<&crate::vcs::HistoryCommit> for CommitInfo {
    fn from(commit: &crate::vcs::HistoryCommit) -> Self {
        CommitInfo {
            id: commit.id.clone(),
            parents: commit.parents.clone(),
            author_name: commit.author_name.clone(),
            author_email: commit.author_email.clone(),
            authored_at: commit.authored_at,
            committed_at: commit.committed_at,
            message: commit.message.clone(),
        }
    }
}

/// One commit as `history_commits` reads each (`export --rev`).
pub(crate) fn commit_at<'a>(
    source: impl Into<Source<'a>>,
    commit: &CommitId,
) -> Result<(CommitInfo, Vec<ManifestSet>)> {
    let repo: Source = source.into();
    let prefix = repo.objects_prefix();
    let read = repo.vcs.commit_files(commit, &prefix)?;
    let sets = read
        .all_files()
        .into_iter()
        .map(|(_, files)| Ok(Arc::new(parse_manifest_files(&prefix, files)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok((CommitInfo::from(&read), sets))
}

/// Manifests parsed from VCS bytes by history reads in this process. The
/// walk logs it (`parsed`), so a test can count parses instead of timing.
static PARSED: AtomicU64 = AtomicU64::new(0);

/// How many manifests history reads have parsed in this process so far.
pub fn manifests_parsed() -> u64 {
    PARSED.load(Ordering::Relaxed)
}

/// One read of visible history: the memo as found, and what the VCS says
/// history is now.
struct Walk<'a> {
    repo: Source<'a>,
    prefix: String,
    path: std::path::PathBuf,
    key: Option<String>,
    memo: Option<Memo>,
    sets: HashMap<String, ManifestSet>,
}

impl<'a> Walk<'a> {
    fn open(repo: Source<'a>) -> Result<Walk<'a>> {
        let prefix = repo.objects_prefix();
        let path = repo.layout.cache_dir().join(MEMO_FILE);
        let key = repo.vcs.history_key()?;
        let (memo, sets) = match Memo::read(&path, &prefix) {
            Some((memo, sets)) => (Some(memo), sets),
            None => (None, HashMap::new()),
        };
        Ok(Walk {
            repo,
            prefix,
            path,
            key,
            memo,
            sets,
        })
    }

    /// The remembered walk, when the memo was made under the VCS's key now.
    fn replay(&self) -> Option<Vec<(CommitId, ManifestSet)>> {
        let (Some(memo), Some(key)) = (&self.memo, &self.key) else {
            return None;
        };
        if memo.key.as_deref() != Some(key.as_str()) {
            return None;
        }
        let out = memo.replay(&self.sets)?;
        tracing::debug!(commits = memo.commits.len(), "history memo replayed");
        Some(out)
    }

    /// Walk the VCS, handing `each` every commit with its manifest sets
    /// (each distinct one once), then remember the walk when it told
    /// anything new.
    fn run(
        &mut self,
        mut each: impl FnMut(&crate::vcs::HistoryCommit, Vec<ManifestSet>),
    ) -> Result<()> {
        let repo = self.repo;
        let parsed_before = manifests_parsed();
        let mut commits: Vec<(String, Vec<String>)> = Vec::new();
        let mut parsed_any = false;
        let mut shared = Interner::default();
        for commit in repo.vcs.history(&self.prefix)? {
            let commit = commit?;
            let mut ids = Vec::new();
            let mut found = Vec::new();
            for (files_id, files) in commit.all_files() {
                let set = match self.sets.get(files_id) {
                    Some(set) => Arc::clone(set),
                    None => {
                        let set = Arc::new(shared.parse(&self.prefix, files)?);
                        self.sets.insert(files_id.to_owned(), Arc::clone(&set));
                        parsed_any = true;
                        set
                    }
                };
                ids.push(files_id.to_owned());
                found.push(set);
            }
            each(&commit, found);
            commits.push((commit.id.as_str().to_owned(), ids));
        }
        tracing::debug!(
            commits = commits.len(),
            parsed_any,
            parsed = manifests_parsed() - parsed_before,
            "history walked"
        );
        let changed = parsed_any || self.memo.as_ref().is_none_or(|m| m.key != self.key);
        if changed {
            // Sets no visible commit holds any more are not kept.
            let keep: BTreeMap<String, &ManifestSet> = commits
                .iter()
                .flat_map(|(_, ids)| ids.iter())
                .filter_map(|id| self.sets.get(id).map(|s| (id.clone(), s)))
                .collect();
            // A cache: failing to write it costs the next run a walk, nothing more.
            match Memo::new(self.prefix.clone(), self.key.clone(), commits, keep)
                .and_then(|memo| memo.write(&self.path))
            {
                Ok(()) => {
                    let _ = std::fs::remove_file(repo.layout.cache_dir().join(OLD_MEMO_FILE));
                }
                Err(e) => tracing::debug!("history memo not written: {e}"),
            }
        }
        Ok(())
    }
}

/// The manifest sets one commit records: its own, and each side and base of
/// a conflicted jj commit, each distinct set once.
pub(crate) fn manifest_sets_at<'a>(
    source: impl Into<Source<'a>>,
    commit: &CommitId,
) -> Result<Vec<ManifestSet>> {
    let repo: Source = source.into();
    let prefix = repo.objects_prefix();
    let read = repo.vcs.commit_files(commit, &prefix)?;
    read.all_files()
        .into_iter()
        .map(|(_, files)| Ok(Arc::new(parse_manifest_files(&prefix, files)?)))
        .collect()
}

/// The manifests a commit records. A conflicted jj commit whose sides
/// disagree on a manifest is refused: it names several states of one object,
/// and reading any one of them (git shows the first side) would hand back
/// data under a commit that does not settle on it. Sides that agree are one
/// answer, whatever the conflict elsewhere.
pub(crate) fn manifests_at<'a>(
    source: impl Into<Source<'a>>,
    commit: &CommitId,
) -> Result<BTreeMap<String, Manifest>> {
    let repo: Source = source.into();
    let prefix = repo.objects_prefix();
    let read = repo.vcs.commit_files(commit, &prefix)?;
    let conflicted = read.conflicted_paths();
    if !conflicted.is_empty() {
        return Err(TetherError::refused(format!(
            "commit {} has a conflict in the dataset's files ({}): its sides record different \
             states, so which one the commit names is not settled",
            commit.short12(),
            conflicted.join(", ")
        ))
        .hint(
            "resolve it (`jj resolve`, or edit the files and `tether commit`) and name the \
             commit that resolves it",
        ));
    }
    parse_manifests(&prefix, &read.files)
}

/// Manifests from `path → bytes` under the objects prefix, shared.
fn parse_manifest_files(prefix: &str, files: &FileMap) -> Result<BTreeMap<String, Arc<Manifest>>> {
    Ok(parse_manifests(prefix, files)?
        .into_iter()
        .map(|(k, m)| (k, Arc::new(m)))
        .collect())
}

/// Manifests from `path → bytes` under the objects prefix.
fn parse_manifests(prefix: &str, files: &FileMap) -> Result<BTreeMap<String, Manifest>> {
    let mut out = BTreeMap::new();
    for (path, bytes) in files {
        if let Some(key) = manifest_key(prefix, path) {
            out.insert(key.to_string(), parse_manifest(key, path, bytes)?);
        }
    }
    Ok(out)
}

/// The object key of a manifest's VCS path, `None` for any other file.
fn manifest_key<'a>(prefix: &str, path: &'a str) -> Option<&'a str> {
    path.strip_prefix(prefix)?
        .strip_prefix('/')?
        .strip_suffix(".toml")
}

fn parse_manifest(key: &str, path: &str, bytes: &[u8]) -> Result<Manifest> {
    PARSED.fetch_add(1, Ordering::Relaxed);
    let text = String::from_utf8_lossy(bytes);
    Ok(Manifest::parse(&text, key, Path::new(path))?)
}

/// The manifests of one walk, shared by content: a commit that changes one
/// object repeats its parent's other manifests byte for byte, and each of
/// those is parsed once and held once however many sets hold it.
#[derive(Default)]
struct Interner {
    seen: HashMap<(String, Arc<[u8]>), Arc<Manifest>>,
}

impl Interner {
    /// [`parse_manifest_files`], sharing what an earlier set parsed.
    fn parse(&mut self, prefix: &str, files: &FileMap) -> Result<BTreeMap<String, Arc<Manifest>>> {
        let mut out = BTreeMap::new();
        for (path, bytes) in files {
            let Some(key) = manifest_key(prefix, path) else {
                continue;
            };
            let m = match self.seen.entry((path.clone(), Arc::clone(bytes))) {
                Entry::Occupied(e) => Arc::clone(e.get()),
                Entry::Vacant(e) => {
                    Arc::clone(e.insert(Arc::new(parse_manifest(key, path, bytes)?)))
                }
            };
            out.insert(key.to_string(), m);
        }
        Ok(out)
    }
}

/// The memo file's content.
#[derive(Serialize, Deserialize)]
struct Memo {
    format: u32,
    /// The tether that wrote it: another one may parse manifests differently.
    tether: String,
    /// The VCS path of the objects directory the sets were read under.
    prefix: String,
    /// The VCS's history key when `commits` was walked.
    key: Option<String>,
    /// Visible commits in walk order, each with its manifest set ids.
    commits: Vec<(String, Vec<String>)>,
    /// Every distinct manifest the sets hold, once.
    manifests: Vec<MemoManifest>,
    /// Manifest set id → key → index into `manifests`.
    sets: BTreeMap<String, BTreeMap<String, u32>>,
}

/// A manifest as the memo keeps it: its fields, read back without the
/// validation [`Manifest::parse`] gave them when the VCS's bytes were parsed.
/// The locator and state are JSON text.
#[derive(Serialize, Deserialize)]
struct MemoManifest {
    kind: String,
    locator: String,
    policy: Policy,
    state: Option<String>,
    /// `(id, ref, created)`.
    pin: Option<(String, String, bool)>,
    recoverable: bool,
    captured_at: Option<String>,
    created: bool,
}

impl From<&Manifest> for MemoManifest {
    fn from(m: &Manifest) -> Self {
        let json = |map: &JsonMap| serde_json::to_string(map).unwrap_or_default();
        MemoManifest {
            kind: m.kind.clone(),
            locator: json(&m.locator),
            policy: m.policy,
            state: m.state.as_ref().map(json),
            pin: m
                .pin
                .as_ref()
                .map(|p| (p.id.clone(), p.r#ref.clone(), p.created)),
            recoverable: m.recoverable,
            captured_at: m.captured_at.clone(),
            created: m.origin == Origin::Created,
        }
    }
}

impl MemoManifest {
    /// The manifest back, its locator parsed once per distinct text in
    /// `locators` (an object's manifests across history share it) and
    /// cloned after: parsing was most of reading a long history's memo.
    fn into_manifest(
        self,
        locators: &mut HashMap<String, JsonMap>,
    ) -> std::result::Result<Manifest, serde_json::Error> {
        let locator = match locators.get(&self.locator) {
            Some(parsed) => parsed.clone(),
            None => {
                let parsed: JsonMap = serde_json::from_str(&self.locator)?;
                locators.insert(self.locator, parsed.clone());
                parsed
            }
        };
        Ok(Manifest {
            kind: self.kind,
            locator,
            policy: self.policy,
            state: self
                .state
                .as_deref()
                .map(serde_json::from_str)
                .transpose()?,
            pin: self
                .pin
                .map(|(id, r#ref, created)| Pin { id, r#ref, created }),
            recoverable: self.recoverable,
            captured_at: self.captured_at,
            origin: if self.created {
                Origin::Created
            } else {
                Origin::Adopted
            },
        })
    }
}

impl Memo {
    /// The memo of a walk: `sets` are those its commits name, each distinct
    /// manifest stored once.
    fn new(
        prefix: String,
        key: Option<String>,
        commits: Vec<(String, Vec<String>)>,
        sets: BTreeMap<String, &ManifestSet>,
    ) -> std::result::Result<Memo, String> {
        let mut manifests = Vec::new();
        // Told apart by their encoding, so equal manifests from different
        // reads (an older memo's and this walk's) are one entry too.
        let mut index: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut memo_sets = BTreeMap::new();
        for (id, set) in sets {
            let mut entries = BTreeMap::new();
            for (k, m) in set.iter() {
                let m = MemoManifest::from(&**m);
                let bytes = postcard::to_allocvec(&m).map_err(|e| e.to_string())?;
                let next = u32::try_from(manifests.len()).map_err(|e| e.to_string())?;
                let i = *index.entry(bytes).or_insert_with(|| {
                    manifests.push(m);
                    next
                });
                entries.insert(k.clone(), i);
            }
            memo_sets.insert(id, entries);
        }
        tracing::debug!(manifests = manifests.len(), "history memo made");
        Ok(Memo {
            format: FORMAT,
            tether: env!("CARGO_PKG_VERSION").to_owned(),
            prefix,
            key,
            commits,
            manifests,
            sets: memo_sets,
        })
    }

    /// The memo at `path` when it is this tether's, for `prefix`, and whole,
    /// with its sets as manifests (taken out of it), each distinct manifest
    /// parsed once and shared.
    fn read(path: &Path, prefix: &str) -> Option<(Memo, HashMap<String, ManifestSet>)> {
        // Never through a link: `.tether/cache/` is clone-controlled ground.
        let bytes = crate::model::fsutil::read_nofollow(path).ok()?;
        Memo::decode(&bytes, prefix, path)
    }

    /// [`Memo::read`] of the file's bytes; `path` names it in the log.
    fn decode(
        bytes: &[u8],
        prefix: &str,
        path: &Path,
    ) -> Option<(Memo, HashMap<String, ManifestSet>)> {
        let ignore = |e: &dyn std::fmt::Display| {
            tracing::debug!("ignoring history memo {}: {e}", path.display());
        };
        let mut memo: Memo = match postcard::from_bytes(bytes) {
            Ok(m) => m,
            Err(e) => {
                ignore(&e);
                return None;
            }
        };
        if !(memo.format == FORMAT
            && memo.tether == env!("CARGO_PKG_VERSION")
            && memo.prefix == prefix)
        {
            return None;
        }
        let mut shared = Vec::with_capacity(memo.manifests.len());
        let mut locators = HashMap::new();
        for m in std::mem::take(&mut memo.manifests) {
            match m.into_manifest(&mut locators) {
                Ok(m) => shared.push(Arc::new(m)),
                Err(e) => {
                    ignore(&e);
                    return None;
                }
            }
        }
        let mut sets = HashMap::with_capacity(memo.sets.len());
        for (id, set) in std::mem::take(&mut memo.sets) {
            let mut manifests = BTreeMap::new();
            for (k, i) in set {
                let Some(m) = usize::try_from(i).ok().and_then(|i| shared.get(i)) else {
                    ignore(&format!("set {id} names manifest {i} of {}", shared.len()));
                    return None;
                };
                manifests.insert(k, Arc::clone(m));
            }
            sets.insert(id, Arc::new(manifests));
        }
        tracing::debug!(manifests = shared.len(), "history memo read");
        Some((memo, sets))
    }

    /// The walk as remembered, `None` when a set it names is not at hand.
    fn replay(&self, sets: &HashMap<String, ManifestSet>) -> Option<Vec<(CommitId, ManifestSet)>> {
        let mut out = Vec::new();
        for (commit, ids) in &self.commits {
            for id in ids {
                let set = sets.get(id)?;
                if !set.is_empty() {
                    out.push((CommitId::new(commit.clone()), Arc::clone(set)));
                }
            }
        }
        Some(out)
    }

    fn write(&self, path: &Path) -> std::result::Result<(), String> {
        let bytes = postcard::to_allocvec(self).map_err(|e| e.to_string())?;
        fsutil::write_atomic(path, &bytes).map_err(|e| e.to_string())
    }
}

/// The memo's bytes for `sets` (each set also a commit of the same name),
/// as a walk under `prefix` writes them. For the property tests and fuzz
/// targets of the memo's decoding; tether itself writes through the walk.
#[doc(hidden)]
pub fn encode_memo(prefix: &str, sets: &BTreeMap<String, ManifestSet>) -> Vec<u8> {
    let commits = sets
        .keys()
        .map(|id| (id.clone(), vec![id.clone()]))
        .collect();
    let by_ref = sets.iter().map(|(id, s)| (id.clone(), s)).collect();
    Memo::new(prefix.to_owned(), None, commits, by_ref)
        .and_then(|m| postcard::to_allocvec(&m).map_err(|e| e.to_string()))
        .unwrap_or_default()
}

/// The manifest sets of memo `bytes` read as a walk under `prefix` reads
/// them: `None` when they are not this tether's whole memo. For the property
/// tests and fuzz targets: any bytes may be in the checkout's cache.
#[doc(hidden)]
pub fn decode_memo(bytes: &[u8], prefix: &str) -> Option<HashMap<String, ManifestSet>> {
    Memo::decode(bytes, prefix, Path::new(MEMO_FILE)).map(|(_, sets)| sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(system: &str, snapshot: &str) -> Arc<Manifest> {
        let locator = serde_json::json!({ "system": system });
        let mut m = Manifest::new(
            "memory",
            locator.as_object().unwrap().clone(),
            Policy::default(),
        );
        let state = serde_json::json!({ "snapshot_id": snapshot });
        m.state = Some(state.as_object().unwrap().clone());
        Arc::new(m)
    }

    fn set(entries: &[(&str, &Arc<Manifest>)]) -> ManifestSet {
        Arc::new(
            entries
                .iter()
                .map(|(k, m)| (k.to_string(), Arc::clone(m)))
                .collect(),
        )
    }

    #[test]
    fn the_memo_keeps_a_manifest_once_and_its_sets_share_it_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MEMO_FILE);
        let (a1, a2) = (manifest("/a", "1"), manifest("/a", "2"));
        // `b` as a second, separately parsed copy: equal content, not the same Arc.
        let (b, b_again) = (manifest("/b", "1"), manifest("/b", "1"));
        let (s1, s2) = (
            set(&[("a", &a1), ("b", &b)]),
            set(&[("a", &a2), ("b", &b_again)]),
        );
        let sets = BTreeMap::from([("t1".to_string(), &s1), ("t2".to_string(), &s2)]);
        let commits = vec![
            ("c2".into(), vec!["t2".into()]),
            ("c1".into(), vec!["t1".into()]),
        ];
        let memo = Memo::new("p".into(), Some("k".into()), commits, sets).unwrap();
        assert_eq!(memo.manifests.len(), 3, "a1, a2 and b once");
        memo.write(&path).unwrap();

        let (memo, read) = Memo::read(&path, "p").expect("this tether's memo");
        let (t1, t2) = (&read["t1"], &read["t2"]);
        assert!(Arc::ptr_eq(&t1["b"], &t2["b"]), "one `b`, shared");
        assert_eq!(*t1["a"], *a1);
        assert_eq!(*t2["a"], *a2);
        assert_eq!(*t2["b"], *b);
        let replayed = memo.replay(&read).expect("every set at hand");
        let order: Vec<&str> = replayed.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(order, ["c2", "c1"]);

        // A set naming a manifest the memo does not hold: damaged, ignored.
        let mut damaged = memo;
        damaged.manifests = Vec::new();
        damaged
            .sets
            .insert("t3".into(), BTreeMap::from([("a".to_string(), 7)]));
        damaged.write(&path).unwrap();
        assert!(Memo::read(&path, "p").is_none());
    }
}
