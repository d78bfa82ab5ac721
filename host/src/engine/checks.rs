//! What `verify` and `repair` share: which distinct checks the selected
//! manifests ask for (`subjects`), and asking the stores about them in
//! batches (`check`). A service: it imports no command module.

use std::collections::BTreeSet;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt};
use serde::Serialize;

use super::error::{Result, TetherError};
use super::history::{self, ManifestSet};
use super::repo::Repo;
use crate::model::manifest::JsonMap;
use crate::model::{Manifest, key};
use crate::plugin::{BackendError, PinRef, VerifyReport, VerifyStatus, fan_out};

/// One label's result (`{"status", "message"}` in `--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelReport {
    pub status: VerifyStatus,
    pub message: String,
}

/// What one check is about: the same object state at any number of labels.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub key: String,
    /// Shared with the manifest set it came from: history holds thousands.
    pub manifest: Arc<Manifest>,
    /// `key`, or `<rev12>:key` per commit with `--all-history`, newest first.
    pub labels: Vec<String>,
}

/// Whether a committed manifest names anything a store could confirm.
fn verifiable(m: &Manifest) -> bool {
    m.state.is_some() && (m.pin.is_some() || m.recoverable)
}

/// What identifies one check: the same kind, locator, state and pin are the
/// same question to the store. Borrowed from the manifest and compared as
/// values (JSON maps hash and compare by content, whatever their key order):
/// `--all-history` asks this of every manifest of every commit, and
/// serialising each one cost more than the rest of the selection.
type SubjectId<'a> = (&'a str, &'a JsonMap, Option<&'a JsonMap>, Option<&'a str>);

fn subject_id(m: &Manifest) -> SubjectId<'_> {
    (
        &m.kind,
        &m.locator,
        m.state.as_ref(),
        m.pin.as_ref().map(|p| p.r#ref.as_str()),
    )
}

/// The distinct checks the selected manifests ask for: the working tree's
/// (labels `key`), one revision's, or every commit's with `all_history`
/// (labels `<rev12>:key`). `keys` selects objects as `KEY...` does.
pub(crate) fn subjects(
    repo: &Repo,
    keys: &[String],
    rev: Option<&str>,
    all_history: bool,
) -> Result<Vec<Subject>> {
    if all_history && rev.is_some() {
        return Err(
            TetherError::refused("--rev and --all-history select different manifests")
                .hint("give one"),
        );
    }
    // (label prefix, manifests): every commit's sets, one commit's (each
    // side and base of a conflict), or the working tree's.
    let sources: Vec<(String, ManifestSet)> = if all_history {
        history::history_manifests(repo)?
            .into_iter()
            .map(|(commit, set)| (format!("{}:", commit.short12()), set))
            .collect()
    } else if let Some(rev) = rev {
        let commit = repo.vcs.resolve(rev)?;
        let prefix = format!("{}:", commit.short12());
        history::manifest_sets_at(repo, &commit)?
            .into_iter()
            .map(|set| (prefix.clone(), set))
            .collect()
    } else {
        let set = repo.manifests()?.into_iter().map(|(k, m)| (k, Arc::new(m)));
        vec![(String::new(), Arc::new(set.collect()))]
    };
    let every_key: BTreeSet<&str> = sources
        .iter()
        .flat_map(|(_, set)| set.keys().map(String::as_str))
        .collect();
    let chosen: BTreeSet<String> = key::select_keys(keys, every_key)?.into_iter().collect();
    // Sized for every manifest read: grown instead, the index rehashed its
    // entries several times over, and hashing one walks its maps.
    let most: usize = sources.iter().map(|(_, set)| set.len()).sum();
    let mut subjects: Vec<Subject> = Vec::with_capacity(most);
    let mut index: HashMap<SubjectId, usize> = HashMap::with_capacity(most);
    // History's sets share one manifest among every commit that holds it
    // unchanged: one seen before is found by address, without hashing it.
    let mut by_address: HashMap<*const Manifest, usize> = HashMap::with_capacity(most);
    for (prefix, set) in &sources {
        for (k, m) in set.iter() {
            if !chosen.contains(k) || !verifiable(m) {
                continue;
            }
            if let Some(&i) = by_address.get(&Arc::as_ptr(m)) {
                subjects[i].labels.push(format!("{prefix}{k}"));
                continue;
            }
            let i = *index.entry(subject_id(m)).or_insert_with(|| {
                subjects.push(Subject {
                    key: k.clone(),
                    manifest: Arc::clone(m),
                    labels: Vec::new(),
                });
                subjects.len() - 1
            });
            by_address.insert(Arc::as_ptr(m), i);
            subjects[i].labels.push(format!("{prefix}{k}"));
        }
    }
    Ok(subjects)
}

/// Ask the stores about every subject: in batches of one object's pins, each
/// batch verified in one plugin instance, and the batches run concurrently.
/// A plugin exporting `verify-many` (since 0.1.5) answers a batch in one
/// call, reading its system and tags once; one without it is asked pin by
/// pin in that instance. An object's pins are split into several batches
/// when there are too few objects to keep every worker thread busy (see
/// [`batch_size`] and [`batch_size_many`]). Each subject comes back with its
/// report.
pub(crate) async fn check(
    repo: &Repo,
    subjects: Vec<Subject>,
    deep: bool,
) -> Result<Vec<(Subject, LabelReport)>> {
    let mut out = Vec::new();
    let groups = by_object(subjects);
    // The runtime's workers are the threads the fan-out runs on (one per
    // core), and asking it costs nothing, unlike re-reading the cgroup limits.
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let total: usize = groups.iter().map(Vec::len).sum();
    let objects = groups.len();
    let mut calls = Vec::new();
    let mut grouped = Vec::new();
    for group in groups {
        // Per key: a git object's `remote` may come from its secrets.toml entry.
        let client = match repo
            .client_for_object(&group[0].key, &group[0].manifest)
            .await
        {
            Ok(client) => client,
            // A kind this tether cannot run is an answer for its labels,
            // not a failure of the whole report.
            Err(e @ TetherError::UnknownKind { .. }) => {
                let report = LabelReport {
                    status: VerifyStatus::Unknown,
                    message: e.to_string(),
                };
                out.extend(group.into_iter().map(|s| (s, report.clone())));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut rest = group;
        let many = client.plugin().has_verify_many();
        let size = if many {
            batch_size_many(total, objects, workers)
        } else {
            batch_size(total, workers, MIN_BATCH)
        };
        let lengths = batch_lengths(rest.len(), size);
        tracing::debug!(
            key = %rest[0].key,
            checks = rest.len(),
            batches = lengths.len(),
            verify_many = many,
            "verifying an object's pins"
        );
        for length in lengths {
            let batch: Vec<Subject> = rest.drain(..length).collect();
            // The batch's own manifests, shared: their states are sent as
            // they are, not copied (every subject has one: `verifiable`).
            let manifests: Vec<Arc<Manifest>> =
                batch.iter().map(|s| Arc::clone(&s.manifest)).collect();
            let client = client.clone();
            calls.push(((), async move {
                let empty = JsonMap::new();
                let items: Vec<(&JsonMap, Option<PinRef>)> = manifests
                    .iter()
                    .map(|m| (m.state.as_ref().unwrap_or(&empty), PinRef::of(m)))
                    .collect();
                client.verify_batch(&items, deep).await
            }));
            grouped.push(batch);
        }
    }
    for ((_, outcome), group) in fan_out(calls).await.results.into_iter().zip(grouped) {
        let outcomes: Vec<std::result::Result<VerifyReport, BackendError>> = match outcome {
            Ok(each) => each,
            Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
        };
        for (subject, outcome) in group.into_iter().zip(outcomes) {
            let report = to_label_report(&subject.key, outcome);
            out.push((subject, report));
        }
    }
    Ok(out)
}

/// Subjects grouped by object (kind and locator), in the order each object
/// first appears: one plugin client serves each group.
fn by_object(subjects: Vec<Subject>) -> Vec<Vec<Subject>> {
    let mut index: HashMap<(&str, &JsonMap), usize> = HashMap::new();
    let slots: Vec<usize> = subjects
        .iter()
        .map(|s| {
            let next = index.len();
            *index
                .entry((s.manifest.kind.as_str(), &s.manifest.locator))
                .or_insert(next)
        })
        .collect();
    let mut groups: Vec<Vec<Subject>> = (0..index.len()).map(|_| Vec::new()).collect();
    for (subject, slot) in subjects.into_iter().zip(slots) {
        groups[slot].push(subject);
    }
    groups
}

/// How many subjects one plugin instance verifies, of `total` on `workers`
/// threads (one per core).
///
/// One batch per object would leave cores idle whenever there are fewer
/// objects than cores (one object with a long history ran on one core), or
/// a few more (five objects on two cores ran the fifth alone). Four batches
/// per worker keep them busy to the end; a batch is never smaller than
/// `least`, since each pays for an instance of its own.
fn batch_size(total: usize, workers: usize, least: usize) -> usize {
    total.div_ceil(workers.max(1) * 4).max(least)
}

/// [`batch_size`] for a `verify-many` plugin, whose every call opens the
/// system again (and reads its tags, when a pin is not where it was put):
/// `total` subjects of `objects` objects are split only as far as keeps the
/// `workers` equally busy. The objects take `ceil(objects / workers)`
/// rounds of calls in any case, so each worker's share of the pins is cut
/// into that many calls, the cap never below [`MIN_BATCH`] (an object of
/// at most that many pins is one call; [`batch_lengths`] evens out the
/// rest, so a batch may hold fewer). Five objects'
/// 200 pins on two cores are ten calls of 100, five per core, where one
/// call per object left one core the fifth alone.
fn batch_size_many(total: usize, objects: usize, workers: usize) -> usize {
    let workers = workers.max(1);
    let rounds = objects.div_ceil(workers).max(1);
    total.div_ceil(workers * rounds).max(MIN_BATCH)
}

/// `len` subjects in batches of at most `size`, as equal as can be: 200 in
/// batches of at most 125 are two of 100, not 125 and 75.
fn batch_lengths(len: usize, size: usize) -> Vec<usize> {
    let batches = len.div_ceil(size.max(1));
    (0..batches)
        .map(|i| len / batches + usize::from(i < len % batches))
        .collect()
}

/// The fewest pins worth an instance: instantiating and configuring one
/// costs about what verifying a few dozen local pins does.
const MIN_BATCH: usize = 64;

/// A backend's answer, or its failure as a report: a store that cannot be
/// reached at all says the pin is `missing` when it is gone, and `unknown`
/// when the question could not be asked.
fn to_label_report(
    key: &str,
    outcome: std::result::Result<VerifyReport, BackendError>,
) -> LabelReport {
    match outcome {
        Ok(r) => LabelReport {
            status: r.status,
            message: r.message,
        },
        Err(BackendError::NotFound(what)) => LabelReport {
            status: VerifyStatus::Missing,
            message: format!("not found: {what}"),
        },
        Err(e) => LabelReport {
            status: VerifyStatus::Unknown,
            message: format!("{key}: could not verify: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_history_is_split_to_keep_every_worker_busy() {
        // The bench's 200 commits x 5 objects on two cores: ten batches of 100.
        let size = batch_size(1000, 2, MIN_BATCH);
        assert_eq!(size, 125);
        assert_eq!(batch_lengths(200, size), [100, 100]);
        // One object with a long history uses every worker.
        assert_eq!(
            batch_lengths(1000, batch_size(1000, 8, MIN_BATCH)),
            [vec![63; 8], vec![62; 8]].concat()
        );
        // Few pins stay in one instance; a batch is never below the minimum
        // unless the object has fewer pins.
        assert_eq!(batch_lengths(5, batch_size(5, 8, MIN_BATCH)), [5]);
        assert_eq!(batch_lengths(70, batch_size(70, 2, MIN_BATCH)), [35, 35]);
        // A `verify-many` plugin's pins are split only to even out the
        // workers: five objects of 200 on two cores, two calls each (five
        // per core, not three on one and two on the other)...
        assert_eq!(batch_lengths(200, batch_size_many(1000, 5, 2)), [100, 100]);
        // ... 10,000 commits x 5 objects the same ...
        assert_eq!(
            batch_lengths(10_000, batch_size_many(50_000, 5, 2)),
            [5000, 5000]
        );
        // ... one object on two cores, one call per core ...
        assert_eq!(batch_lengths(1000, batch_size_many(1000, 1, 2)), [500, 500]);
        // ... and as many objects as cores, or a multiple, one call each.
        assert_eq!(batch_lengths(200, batch_size_many(800, 4, 2)), [200]);
        assert_eq!(batch_lengths(200, batch_size_many(1600, 8, 8)), [200]);
        // An object of at most the minimum is one call however many cores;
        // one above it is cut in equal halves (batches are capped, not floored).
        assert_eq!(batch_lengths(100, batch_size_many(100, 1, 8)), [50, 50]);
        assert_eq!(batch_lengths(60, batch_size_many(60, 1, 8)), [60]);
        assert_eq!(
            batch_lengths(0, batch_size_many(0, 0, 2)),
            Vec::<usize>::new()
        );
        assert_eq!(batch_lengths(0, 64), Vec::<usize>::new());
        // Every subject lands in exactly one batch.
        for (len, size) in [(1, 1), (7, 3), (129, 64), (1000, 125), (999, 64)] {
            let lengths = batch_lengths(len, size);
            assert_eq!(lengths.iter().sum::<usize>(), len);
            assert!(lengths.iter().all(|&l| l <= size && l > 0));
            assert!(lengths.iter().max().unwrap() - lengths.iter().min().unwrap() <= 1);
        }
    }
}
