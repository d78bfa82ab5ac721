//! Fan-out: one call per object, run concurrently, every failure kept with the
//! object it belongs to. A plugin that crashes, hangs or runs out of memory
//! fails its own object; the others still answer (the spec's
//! `MultiObjectError` names every failing object together).

use std::fmt;
use std::future::Future;

use tokio::task::JoinSet;

use super::error::BackendError;

/// The results of a fan-out, in the order the calls were given.
#[derive(Debug)]
pub struct FanOut<K, T> {
    pub results: Vec<(K, Result<T, BackendError>)>,
}

impl<K: fmt::Display, T> FanOut<K, T> {
    /// The objects that failed, with their errors.
    pub fn failures(&self) -> impl Iterator<Item = (&K, &BackendError)> {
        self.results
            .iter()
            .filter_map(|(k, r)| r.as_ref().err().map(|e| (k, e)))
    }

    /// Every value, or one error naming every failing object.
    pub fn into_result(self) -> Result<Vec<(K, T)>, MultiObjectError> {
        let mut ok = Vec::with_capacity(self.results.len());
        let mut failures = Vec::new();
        for (k, r) in self.results {
            match r {
                Ok(v) => ok.push((k, v)),
                Err(e) => failures.push((k.to_string(), e)),
            }
        }
        if failures.is_empty() {
            Ok(ok)
        } else {
            Err(MultiObjectError { failures })
        }
    }
}

/// Several objects failed; each is named with its error.
#[derive(Debug, thiserror::Error)]
#[error("{} object(s) failed: {}", failures.len(), render(failures))]
pub struct MultiObjectError {
    pub failures: Vec<(String, BackendError)>,
}

fn render(failures: &[(String, BackendError)]) -> String {
    failures
        .iter()
        .map(|(k, e)| format!("{k}: {e}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Run one future per object concurrently on the tokio runtime.
pub async fn fan_out<K, T, F>(calls: impl IntoIterator<Item = (K, F)>) -> FanOut<K, T>
where
    K: Send + 'static,
    T: Send + 'static,
    F: Future<Output = Result<T, BackendError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    let mut keys = Vec::new();
    for (i, (key, fut)) in calls.into_iter().enumerate() {
        keys.push(Some(key));
        set.spawn(async move { (i, fut.await) });
    }
    let mut slots: Vec<Option<Result<T, BackendError>>> = (0..keys.len()).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, r)) => slots[i] = Some(r),
            // A panic in host code for one object; the slot is filled below.
            Err(e) => tracing::error!("a fan-out task failed: {e}"),
        }
    }
    let results = keys
        .into_iter()
        .zip(slots)
        .map(|(k, r)| {
            let r = r.unwrap_or_else(|| {
                Err(BackendError::Runtime {
                    kind: "host".into(),
                    detail: "the call's task panicked".into(),
                })
            });
            (k.expect("each key is taken once"), r)
        })
        .collect();
    FanOut { results }
}
