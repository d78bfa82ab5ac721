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

/// At most this many calls of one fan-out run at once. Each plugin call holds
/// an instance from the runtime's pool (256 by default) while it runs, and a
/// dataset may have more objects than that.
pub const MAX_IN_FLIGHT: usize = 64;

/// Fan-outs of fewer calls than this report no progress: they are quick.
const PROGRESS_FROM: usize = 100;

/// Whoever shows how far a large fan-out has got (the CLI's progress line:
/// `status --snapshot` of 10,000 objects takes seconds). Process-wide, as
/// the hashing watcher is (`tree::progress`); with none installed nothing
/// is reported.
pub trait FanOutWatcher: Send + Sync {
    /// `total` calls are about to run; the task lives until they are done.
    fn start(&self, total: usize) -> Box<dyn FanOutTask>;
}

/// One fan-out's progress; dropped when it is over.
pub trait FanOutTask: Send + Sync {
    /// One more call finished.
    fn advance(&self);
}

static WATCHER: std::sync::RwLock<Option<std::sync::Arc<dyn FanOutWatcher>>> =
    std::sync::RwLock::new(None);

/// Report every large fan-out from now on to `watcher`.
pub fn watch_fan_outs(watcher: std::sync::Arc<dyn FanOutWatcher>) {
    *WATCHER.write().unwrap_or_else(|e| e.into_inner()) = Some(watcher);
}

fn progress(total: usize) -> Option<Box<dyn FanOutTask>> {
    if total < PROGRESS_FROM {
        return None;
    }
    let watcher = WATCHER.read().unwrap_or_else(|e| e.into_inner()).clone()?;
    Some(watcher.start(total))
}

/// Run one future per object concurrently on the tokio runtime, at most
/// `MAX_IN_FLIGHT` at a time.
pub async fn fan_out<K, T, F>(calls: impl IntoIterator<Item = (K, F)>) -> FanOut<K, T>
where
    K: Send + 'static,
    T: Send + 'static,
    F: Future<Output = Result<T, BackendError>> + Send + 'static,
{
    let mut set = JoinSet::new();
    let mut keys = Vec::new();
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
    for (i, (key, fut)) in calls.into_iter().enumerate() {
        keys.push(Some(key));
        let permits = permits.clone();
        set.spawn(async move {
            // The semaphore is never closed, so acquiring cannot fail.
            let _permit = permits
                .acquire_owned()
                .await
                .expect("fan-out semaphore is never closed");
            (i, fut.await)
        });
    }
    let mut slots: Vec<Option<Result<T, BackendError>>> = (0..keys.len()).map(|_| None).collect();
    let progress = progress(keys.len());
    while let Some(joined) = set.join_next().await {
        if let Some(p) = &progress {
            p.advance();
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn results_keep_their_order_and_concurrency_is_bounded() {
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let calls = (0..300).map(|i| {
            let (now, peak) = (now.clone(), peak.clone());
            (i, async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(n, Ordering::SeqCst);
                tokio::task::yield_now().await;
                now.fetch_sub(1, Ordering::SeqCst);
                if i % 7 == 0 {
                    Err(BackendError::Other(format!("no {i}")))
                } else {
                    Ok(i * 2)
                }
            })
        });
        let out = fan_out(calls).await;
        assert!(peak.load(Ordering::SeqCst) <= MAX_IN_FLIGHT);
        for (i, (k, r)) in out.results.iter().enumerate() {
            assert_eq!(*k, i);
            match r {
                Ok(v) => assert_eq!(*v, i * 2),
                Err(e) => assert_eq!(e.to_string(), format!("no {i}")),
            }
        }
        let err = out.into_result().unwrap_err();
        assert_eq!(err.failures.len(), 43);
    }
}
