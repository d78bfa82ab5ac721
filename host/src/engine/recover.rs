//! `tether recover [KEY...]`: for a dataset whose repository was lost. Lists
//! tether's refs in each object's store, grouped by the dataset id they carry
//! (pins, bookmarks with working branches and their generations, legacy
//! per-workspace branches, names tether's shape that carry no readable id),
//! and prints the next steps as shell commands whose options end with `--`.
//! It writes nothing; a store that cannot be listed makes it exit 1.
//! spec/15 ("Recovering a lost dataset repo") is the whole procedure; `init
//! --dataset-id` and `new --adopt` complete it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::error::Result;
use super::repo::Repo;
use crate::model::{ids, key};
use crate::plugin::{BackendError, PinRef, fan_out};

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct BookmarkRefs {
    pub bookmark: String,
    pub branch: String,
    pub generation: Option<u32>,
    pub branches: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct LegacyRefs {
    pub workspace: String,
    pub branches: Vec<String>,
}

/// One dataset id's refs (`D` in spec/09's JSON).
#[derive(Debug, Clone, Serialize, Default)]
pub struct DatasetRefs {
    pub dataset_id: String,
    pub current: bool,
    pub pins: usize,
    pub bookmarks: Vec<BookmarkRefs>,
    pub legacy: Vec<LegacyRefs>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct ObjectRefs {
    pub key: String,
    pub kind: String,
    pub holds_refs: bool,
    pub error: Option<String>,
    pub missing_pin: Option<String>,
    pub unrecognized: Vec<String>,
    pub datasets: Vec<DatasetRefs>,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Step {
    pub command: Option<String>,
    pub note: String,
}

/// The `--json` shape of spec/09.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RecoverReport {
    pub dataset_id: String,
    pub trunk: String,
    pub pinned: bool,
    pub suggested_dataset_id: Option<String>,
    pub scoped: bool,
    pub objects: Vec<ObjectRefs>,
    pub datasets: Vec<DatasetRefs>,
    pub steps: Vec<Step>,
}

impl RecoverReport {
    pub fn any_error(&self) -> bool {
        self.objects.iter().any(|o| o.error.is_some())
    }
}

/// A value quoted for a POSIX shell (as is when nothing in it is special).
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+-,".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

struct Listed {
    pins: Vec<String>,
    branches: Vec<String>,
    missing_pin: Option<String>,
}

/// Group one store's refs by dataset id.
fn group(listed: &Listed) -> (Vec<DatasetRefs>, Vec<String>) {
    let mut by_id: BTreeMap<String, DatasetRefs> = BTreeMap::new();
    let mut unrecognized = Vec::new();
    let entry = |by_id: &mut BTreeMap<String, DatasetRefs>, id: &str| {
        by_id
            .entry(id.to_string())
            .or_insert_with(|| DatasetRefs {
                dataset_id: id.to_string(),
                ..DatasetRefs::default()
            })
            .dataset_id
            .clone()
    };
    for p in &listed.pins {
        match ids::parse_pin_ref(&format!("{}{p}", ids::REF_PREFIX)) {
            Some(pr) => {
                let id = entry(&mut by_id, &pr.dataset_id);
                // Generations of one pin count once.
                if pr.generation <= 1 || !listed.pins.contains(&pr.pin_id()) {
                    by_id.get_mut(&id).expect("inserted").pins += 1;
                }
            }
            None => unrecognized.push(format!("{}{p}", ids::REF_PREFIX)),
        }
    }
    for b in &listed.branches {
        match ids::parse_working_ref(b) {
            Some(ids::WorkingRef::Bookmark {
                dataset_id,
                slug,
                generation,
            }) => {
                let id = entry(&mut by_id, &dataset_id);
                let d = by_id.get_mut(&id).expect("inserted");
                match d.bookmarks.iter_mut().find(|x| x.bookmark == slug) {
                    Some(x) => {
                        x.branches.push(b.clone());
                        if generation > x.generation.unwrap_or(1) {
                            x.generation = Some(generation);
                            x.branch = b.clone();
                        }
                    }
                    None => d.bookmarks.push(BookmarkRefs {
                        bookmark: slug.clone(),
                        branch: b.clone(),
                        generation: (generation > 1).then_some(generation),
                        branches: vec![b.clone()],
                    }),
                }
            }
            Some(ids::WorkingRef::Legacy {
                dataset_id,
                workspace,
                ..
            }) => {
                let id = entry(&mut by_id, &dataset_id);
                let d = by_id.get_mut(&id).expect("inserted");
                match d.legacy.iter_mut().find(|x| x.workspace == workspace) {
                    Some(x) => x.branches.push(b.clone()),
                    None => d.legacy.push(LegacyRefs {
                        workspace: workspace.clone(),
                        branches: vec![b.clone()],
                    }),
                }
            }
            None => unrecognized.push(b.clone()),
        }
    }
    (by_id.into_values().collect(), unrecognized)
}

pub async fn recover(repo: &Repo, selectors: &[String]) -> Result<RecoverReport> {
    let manifests = repo.manifests()?;
    let keys = key::select_keys(selectors, manifests.keys().map(String::as_str))?;
    let scoped = !selectors.is_empty();
    let dataset = repo.dataset_id().to_string();
    let trunk = repo.config.trunk.clone();
    let descriptors = repo.descriptors().await?;

    let mut calls = Vec::new();
    for k in &keys {
        let m = manifests[k].clone();
        let client = repo.client(&m).await?;
        let forks = descriptors.get(&m.kind).is_some_and(|d| d.has("FORK"));
        let pins_too = descriptors.get(&m.kind).is_some_and(|d| d.has("PIN"));
        calls.push((k.clone(), async move {
            let pins = if pins_too {
                client.list_pins().await?
            } else {
                Vec::new()
            };
            let branches = if forks {
                client.list_working_refs().await?
            } else {
                Vec::new()
            };
            let mut missing_pin = None;
            if let (Some(pin), Some(state)) = (PinRef::of(&m), &m.state) {
                let report = client
                    .verify(&serde_json::Value::Object(state.clone()), Some(&pin), false)
                    .await?;
                if report.status == crate::plugin::VerifyStatus::Missing {
                    missing_pin = Some(pin.id.clone());
                }
            }
            Ok::<_, BackendError>(Listed {
                pins,
                branches,
                missing_pin,
            })
        }));
    }
    let mut report = RecoverReport {
        dataset_id: dataset.clone(),
        trunk: trunk.clone(),
        scoped,
        ..RecoverReport::default()
    };
    let mut merged: BTreeMap<String, DatasetRefs> = BTreeMap::new();
    for (k, r) in fan_out(calls).await.results {
        let kind = manifests[&k].kind.clone();
        match r {
            Ok(listed) => {
                let (mut datasets, unrecognized) = group(&listed);
                for d in &mut datasets {
                    d.current = d.dataset_id == dataset;
                    let m = merged
                        .entry(d.dataset_id.clone())
                        .or_insert_with(|| DatasetRefs {
                            dataset_id: d.dataset_id.clone(),
                            current: d.current,
                            ..DatasetRefs::default()
                        });
                    m.pins += d.pins;
                    for b in &d.bookmarks {
                        if !m.bookmarks.iter().any(|x| x.bookmark == b.bookmark) {
                            m.bookmarks.push(b.clone());
                        }
                    }
                    for l in &d.legacy {
                        match m.legacy.iter_mut().find(|x| x.workspace == l.workspace) {
                            Some(x) => x.branches.extend(l.branches.iter().cloned()),
                            None => m.legacy.push(l.clone()),
                        }
                    }
                }
                report.objects.push(ObjectRefs {
                    key: k,
                    kind,
                    holds_refs: !listed.pins.is_empty() || !listed.branches.is_empty(),
                    error: None,
                    missing_pin: listed.missing_pin,
                    unrecognized,
                    datasets,
                });
            }
            Err(e) => report.objects.push(ObjectRefs {
                key: k,
                kind,
                error: Some(e.to_string()),
                ..ObjectRefs::default()
            }),
        }
    }
    report.datasets = merged.into_values().collect();
    if report.any_error() {
        return Ok(report);
    }

    // Is anything pinned under this dataset's id yet (in any manifest)?
    report.pinned = manifests.values().any(|m| m.pin.is_some())
        || super::history::history_manifests(repo)?
            .iter()
            .any(|(_, ms)| ms.values().any(|m| m.pin.is_some()));
    let others: Vec<&DatasetRefs> = report.datasets.iter().filter(|d| !d.current).collect();
    let has_own = report.datasets.iter().any(|d| d.current);
    let mut steps = Vec::new();
    let missing: Vec<&str> = report
        .objects
        .iter()
        .filter(|o| o.missing_pin.is_some())
        .map(|o| o.key.as_str())
        .collect();
    if !missing.is_empty() {
        steps.push(Step {
            command: Some(format!(
                "tether repair -- {}",
                missing.iter().map(|k| shell_quote(k)).collect::<Vec<_>>().join(" ")
            )),
            note: "these manifests name pins their stores lack; commit would not recreate them (the state is unchanged)".into(),
        });
    }
    let mut adopt_from: Option<&DatasetRefs> = report.datasets.iter().find(|d| d.current);
    if !scoped && !has_own && others.len() == 1 {
        let id = &others[0].dataset_id;
        if report.pinned {
            steps.push(Step {
                command: None,
                note: format!(
                    "the refs carry dataset id {id}, but this dataset already pinned under {dataset}: \
                     start a fresh repository with `tether init --dataset-id {id}`"
                ),
            });
            adopt_from = None;
        } else {
            report.suggested_dataset_id = Some(id.clone());
            steps.push(Step {
                command: None,
                note: format!(
                    "set this dataset's id in tether.toml (nothing is pinned under {dataset} yet): \
                     [dataset] id = \"{id}\""
                ),
            });
            adopt_from = Some(others[0]);
        }
    }
    if scoped {
        steps.push(Step {
            command: Some("tether recover".into()),
            note: "a scoped run suggests no id and no commit: run recover without keys last".into(),
        });
        report.steps = steps;
        return Ok(report);
    }
    steps.push(Step {
        command: Some(format!(
            "tether commit -m {}",
            shell_quote(&format!("Recover {trunk}"))
        )),
        note: format!(
            "pins each object's upstream branch on the trunk ({trunk}); a state pinned before reuses its tag"
        ),
    });
    let vcs_bookmarks: BTreeSet<String> = repo
        .vcs
        .branches()?
        .into_iter()
        .filter(|b| !b.parking)
        .map(|b| b.name)
        .collect();
    if let Some(d) = adopt_from {
        for b in &d.bookmarks {
            if b.bookmark == ids::bookmark_slug(&trunk) {
                continue;
            }
            let existing = vcs_bookmarks
                .iter()
                .find(|v| ids::bookmark_slug(v) == b.bookmark)
                .cloned();
            let message = shell_quote(&format!(
                "Recover {}",
                existing.as_deref().unwrap_or(&b.bookmark)
            ));
            let gen_note = b
                .generation
                .map(|g| format!(" (generation {g}, the highest)"))
                .unwrap_or_default();
            steps.push(match existing {
                Some(name) => Step {
                    command: Some(format!(
                        "tether new --adopt -- {} && tether commit -m {message}",
                        shell_quote(&name)
                    )),
                    note: format!(
                        "bookmark {name}: takes its branches as they are{gen_note}, uncommitted writes included, and pins them"
                    ),
                },
                None => Step {
                    command: Some(format!(
                        "tether new -b {} --adopt -- {} && tether commit -m {message}",
                        shell_quote(&b.bookmark),
                        shell_quote(&trunk)
                    )),
                    note: format!(
                        "bookmark {}, made afresh off the trunk: takes its branches as they are{gen_note}, uncommitted writes included, and pins them",
                        b.bookmark
                    ),
                },
            });
        }
        for l in &d.legacy {
            let name = format!("recover-{}", l.workspace);
            let keys: Vec<String> = report
                .objects
                .iter()
                .filter(|o| {
                    o.datasets
                        .iter()
                        .any(|x| x.legacy.iter().any(|y| y.workspace == l.workspace))
                })
                .map(|o| shell_quote(&o.key))
                .collect();
            let branch = l.branches.first().cloned().unwrap_or_default();
            let start = if vcs_bookmarks.contains(&name) {
                format!("tether new -- {}", shell_quote(&name))
            } else {
                format!(
                    "tether new -b {} -- {}",
                    shell_quote(&name),
                    shell_quote(&trunk)
                )
            };
            steps.push(Step {
                command: Some(format!(
                    "{start} && tether restore --at {} -- {} && tether commit -m {}",
                    shell_quote(&branch),
                    keys.join(" "),
                    shell_quote(&format!("Recover workspace {}", l.workspace))
                )),
                note: format!(
                    "legacy branches of workspace {} (from before bookmarks; may hold writes nobody committed)",
                    l.workspace
                ),
            });
        }
    }
    report.steps = steps;
    Ok(report)
}
