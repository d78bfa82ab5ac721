//! The subset of the Neon API v2 this backend uses, over `wasi:http`:
//! branches (list, create at a parent LSN, restore, rename, delete),
//! compute endpoints (list, create), connection URIs and operations.
//!
//! The host adds `authorization: Bearer <api key>` to every request to the
//! API's origin; this module never sees the key. Neon answers a mutation
//! with the operations it started; each is polled until it finishes before
//! the call returns, so the next call sees the branch or endpoint ready.
//! 423 (another operation is running on the project), 429 and 503 are
//! retried with backoff for about a minute (spec/14, "Neon").

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tether_sdk::http::{Request, Response};
use tether_sdk::{Error, Result};

/// How long the control plane's transient refusals are retried.
const RETRY_BUDGET: Duration = Duration::from_secs(60);
/// How long an operation may run before the call gives up on it.
const OPERATION_BUDGET: Duration = Duration::from_secs(120);

/// A branch as `GET /projects/{id}/branches` lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct Branch {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub parent_lsn: Option<String>,
}

/// A compute endpoint.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoint {
    pub id: String,
    pub branch_id: String,
    #[serde(rename = "type")]
    pub kind: String,
}

/// `read_write` or `read_only`.
pub const READ_WRITE: &str = "read_write";
pub const READ_ONLY: &str = "read_only";

/// One project's API.
pub struct Api {
    base: String,
    project: String,
}

/// Percent-encode a query or path value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The message of an API error body (`{"message": ...}`), else its text.
fn message(r: &Response) -> String {
    r.json::<Value>()
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| r.text().chars().take(300).collect())
}

/// Send `req()` until it is not a transient refusal, or the budget is spent.
fn with_retries(what: &str, req: impl Fn() -> Request) -> Result<Response> {
    let start = std::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        let r = req().send()?;
        if !matches!(r.status, 423 | 429 | 503) || start.elapsed() > RETRY_BUDGET {
            return Ok(r);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(5));
        let _ = what;
    }
}

impl Api {
    pub fn new(base: &str, project: &str) -> Api {
        Api {
            base: base.trim_end_matches('/').to_owned(),
            project: project.to_owned(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/projects/{}{path}", self.base, encode(&self.project))
    }

    /// A request to the project; its JSON body on success, the API's
    /// message on failure (a 404 is `not-found`).
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let url = self.url(path);
        let what = format!("{method} {path}");
        let r = with_retries(&what, || {
            let req = Request::new(method, &url).header("accept", "application/json");
            match &body {
                Some(b) => req.json(b),
                // An explicit empty body (`content-length: 0`): without one a
                // body-less DELETE goes out chunked, which some servers
                // answer badly.
                None if method != "GET" => req.body(Vec::new()),
                None => req,
            }
        })?;
        if r.status == 404 {
            return Err(Error::not_found(format!(
                "Neon project {}: {what}: {}",
                self.project,
                message(&r)
            )));
        }
        if !r.is_success() {
            return Err(Error::backend(format!(
                "Neon API {what}: HTTP {}: {}",
                r.status,
                message(&r)
            )));
        }
        let value: Value = r.json()?;
        self.finish_operations(&value)?;
        Ok(value)
    }

    /// Wait for the operations a mutation started.
    fn finish_operations(&self, reply: &Value) -> Result<()> {
        let Some(ops) = reply.get("operations").and_then(Value::as_array) else {
            return Ok(());
        };
        for op in ops {
            let Some(id) = op.get("id").and_then(Value::as_str) else {
                continue;
            };
            let start = std::time::Instant::now();
            let mut status = op.get("status").and_then(Value::as_str).map(str::to_owned);
            let mut pause = Duration::from_millis(50);
            loop {
                match status.as_deref() {
                    Some("finished" | "skipped" | "cancelled") => break,
                    Some("failed" | "error") => {
                        return Err(Error::backend(format!(
                            "Neon operation {id} failed: {}",
                            op.get("error").and_then(Value::as_str).unwrap_or("")
                        )));
                    }
                    _ => {}
                }
                if start.elapsed() > OPERATION_BUDGET {
                    return Err(Error::backend(format!(
                        "Neon operation {id} did not finish in {}s",
                        OPERATION_BUDGET.as_secs()
                    )));
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(2));
                let now = self.call_plain("GET", &format!("/operations/{}", encode(id)))?;
                status = now
                    .pointer("/operation/status")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        Ok(())
    }

    /// [`Api::call`] without waiting on operations (for polling them).
    fn call_plain(&self, method: &str, path: &str) -> Result<Value> {
        let url = self.url(path);
        let r = with_retries(path, || Request::new(method, &url))?;
        if !r.is_success() {
            return Err(Error::backend(format!(
                "Neon API {method} {path}: HTTP {}: {}",
                r.status,
                message(&r)
            )));
        }
        r.json()
    }

    pub fn branches(&self) -> Result<Vec<Branch>> {
        let v = self.call("GET", "/branches", None)?;
        serde_json::from_value(v.get("branches").cloned().unwrap_or(json!([])))
            .map_err(|e| Error::backend(format!("Neon's branch list is not as documented: {e}")))
    }

    /// Create a branch `name` off `parent_id` (at `parent_lsn`, else its head).
    /// `None` when a branch of that name appeared meanwhile (409).
    pub fn create_branch(
        &self,
        name: &str,
        parent_id: &str,
        parent_lsn: Option<&str>,
        protected: bool,
    ) -> Result<Option<Branch>> {
        let mut branch = json!({"name": name, "parent_id": parent_id});
        if let Some(lsn) = parent_lsn {
            branch["parent_lsn"] = json!(lsn);
        }
        if protected {
            branch["protected"] = json!(true);
        }
        let url = self.url("/branches");
        let body = json!({"branch": branch});
        let r = with_retries("POST /branches", || Request::new("POST", &url).json(&body))?;
        if r.status == 409 {
            return Ok(None);
        }
        if !r.is_success() {
            return Err(Error::backend(format!(
                "Neon API: creating branch {name}: HTTP {}: {}",
                r.status,
                message(&r)
            )));
        }
        let v: Value = r.json()?;
        self.finish_operations(&v)?;
        serde_json::from_value(v.get("branch").cloned().unwrap_or_default())
            .map(Some)
            .map_err(|e| Error::backend(format!("Neon's new branch is not as documented: {e}")))
    }

    /// Restore branch `id` onto `source_id` (at `source_lsn`, else its head).
    pub fn restore_branch(
        &self,
        id: &str,
        source_id: &str,
        source_lsn: Option<&str>,
    ) -> Result<()> {
        let mut body = json!({"source_branch_id": source_id});
        if let Some(lsn) = source_lsn {
            body["source_lsn"] = json!(lsn);
        }
        self.call(
            "POST",
            &format!("/branches/{}/restore", encode(id)),
            Some(body),
        )?;
        Ok(())
    }

    pub fn rename_branch(&self, id: &str, name: &str) -> Result<()> {
        self.call(
            "PATCH",
            &format!("/branches/{}", encode(id)),
            Some(json!({"branch": {"name": name}})),
        )?;
        Ok(())
    }

    /// Delete a branch; already gone is success.
    pub fn delete_branch(&self, id: &str) -> Result<()> {
        match self.call("DELETE", &format!("/branches/{}", encode(id)), None) {
            Err(Error::NotFound(_)) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    pub fn endpoints(&self) -> Result<Vec<Endpoint>> {
        let v = self.call("GET", "/endpoints", None)?;
        serde_json::from_value(v.get("endpoints").cloned().unwrap_or(json!([])))
            .map_err(|e| Error::backend(format!("Neon's endpoint list is not as documented: {e}")))
    }

    /// The branch's endpoint of `kind`, created when it has none. Neon
    /// allows one `read_write` endpoint per branch: when another caller
    /// created it first (409, or 422 for the limit), that one is used.
    pub fn endpoint(&self, branch_id: &str, kind: &str) -> Result<Endpoint> {
        let find = |eps: Vec<Endpoint>| {
            eps.into_iter()
                .find(|e| e.branch_id == branch_id && e.kind == kind)
        };
        if let Some(e) = find(self.endpoints()?) {
            return Ok(e);
        }
        let url = self.url("/endpoints");
        let body = json!({"endpoint": {"branch_id": branch_id, "type": kind}});
        let r = with_retries("POST /endpoints", || Request::new("POST", &url).json(&body))?;
        if r.is_success() {
            let v: Value = r.json()?;
            self.finish_operations(&v)?;
            return serde_json::from_value(v.get("endpoint").cloned().unwrap_or_default()).map_err(
                |e| Error::backend(format!("Neon's new endpoint is not as documented: {e}")),
            );
        }
        if matches!(r.status, 409 | 422)
            && let Some(e) = find(self.endpoints()?)
        {
            return Ok(e);
        }
        Err(Error::backend(format!(
            "Neon API: creating a {kind} endpoint on branch {branch_id}: HTTP {}: {}",
            r.status,
            message(&r)
        )))
    }

    /// The connection URI of `database` as `role` through `endpoint_id`.
    /// Neon puts the role's password in it; the host takes it out before
    /// this plugin reads the response, and supplies it again when the URI
    /// is opened over `sql` (`open-uri`) or handed to the user (`open`).
    pub fn connection_uri(
        &self,
        branch_id: &str,
        endpoint_id: &str,
        database: &str,
        role: &str,
    ) -> Result<String> {
        let path = format!(
            "/connection_uri?branch_id={}&endpoint_id={}&database_name={}&role_name={}",
            encode(branch_id),
            encode(endpoint_id),
            encode(database),
            encode(role)
        );
        let v = self.call("GET", &path, None)?;
        v.get("uri")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Error::backend("Neon returned no connection URI"))
    }
}

/// Create a project (the harness): its id, and the default database and
/// role Neon made in it.
pub fn create_project(base: &str, name: &str) -> Result<(String, String, String)> {
    let url = format!("{}/projects", base.trim_end_matches('/'));
    let body = json!({"project": {"name": name}});
    let r = with_retries("POST /projects", || Request::new("POST", &url).json(&body))?;
    if !r.is_success() {
        return Err(Error::backend(format!(
            "Neon API: creating a project: HTTP {}: {}",
            r.status,
            message(&r)
        )));
    }
    let v: Value = r.json()?;
    let id = v
        .pointer("/project/id")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::backend("Neon's new project has no id"))?
        .to_owned();
    Api::new(base, &id).finish_operations(&v)?;
    let first = |list: &str| {
        v.get(list)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|d| d.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Error::backend(format!("Neon's new project lists no {list}")))
    };
    Ok((id, first("databases")?, first("roles")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        assert_eq!(encode("br-a_b.c~"), "br-a_b.c~");
        assert_eq!(encode("a b/c&d"), "a%20b%2Fc%26d");
    }
}
