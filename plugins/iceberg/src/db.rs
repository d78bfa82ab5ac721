//! The host's `sql` capability, as this plugin uses it: one connection by
//! its granted name, `?` statements, typed values. A thin layer over the raw
//! bindings until the SDK carries its own wrapper.

use tether_sdk::bindings::tether::backend::sql as wit;
use tether_sdk::{Error, Result};

pub use wit::{Dialect, Rows, Value};

/// A `sql-error` as the contract's error: a refused grant stays `denied`.
fn error(e: wit::SqlError) -> Error {
    match e {
        wit::SqlError::Denied(m) => Error::Denied(m),
        wit::SqlError::Connect(m) => {
            Error::backend(format!("cannot reach the catalog database: {m}"))
        }
        wit::SqlError::Database(db) => Error::backend(match db.code {
            Some(code) => format!(
                "the catalog database refused a statement ({code}): {}",
                db.message
            ),
            None => format!("the catalog database refused a statement: {}", db.message),
        }),
        wit::SqlError::Timeout(m) => Error::backend(format!("catalog statement timed out: {m}")),
        wit::SqlError::TooManyRows(cap) => {
            Error::backend(format!("a catalog query returned more than {cap} rows"))
        }
        wit::SqlError::Invalid(m) => Error::backend(format!("invalid catalog statement: {m}")),
    }
}

/// One connection the host opened.
pub struct Connection(wit::Connection);

impl Connection {
    /// The connection granted under `name` (a `describe-net` SQL key).
    pub fn open(name: &str) -> Result<Self> {
        wit::Connection::open(name).map(Connection).map_err(error)
    }

    pub fn dialect(&self) -> Dialect {
        self.0.dialect()
    }

    /// `statement` with `?` placeholders, in this connection's dialect
    /// (`$1`, `$2`, ... on PostgreSQL). The statements here hold no `?`
    /// inside a literal.
    fn placeholders(&self, statement: &str) -> String {
        if self.dialect() != Dialect::Postgres {
            return statement.to_owned();
        }
        let mut out = String::with_capacity(statement.len() + 8);
        let mut n = 0;
        for c in statement.chars() {
            if c == '?' {
                n += 1;
                out.push_str(&format!("${n}"));
            } else {
                out.push(c);
            }
        }
        out
    }

    /// One statement that returns rows.
    pub fn query(&self, statement: &str, params: &[Value]) -> Result<Rows> {
        self.0
            .query(&self.placeholders(statement), params)
            .map_err(error)
    }

    /// One statement; how many rows it changed.
    pub fn execute(&self, statement: &str, params: &[Value]) -> Result<u64> {
        self.0
            .execute(&self.placeholders(statement), params)
            .map_err(error)
    }
}

/// A text parameter.
pub fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}
