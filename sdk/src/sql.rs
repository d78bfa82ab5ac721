//! A typed wrapper around the host's `sql` capability (since 0.1.3).
//!
//! The host opens database connections for a plugin, by the dotted keys the
//! plugin declares in [`DescribeNet::sql_keys`](crate::DescribeNet): the
//! value under such a key (in the locator, else the configuration) is a
//! database address, and [`Connection::open`] with that key connects to it
//! with credentials the plugin never sees; an address learned at run time
//! from a granted HTTP origin's response is opened with
//! [`Connection::open_uri`] (since 0.1.5). Every call runs one statement,
//! with typed parameters ([`Value`], with `From` impls) and typed rows
//! ([`Rows`], cells read by column name with [`Row::get`]), under the host's
//! statement timeout and row cap.
//!
//! ```no_run
//! use tether_sdk::sql::{Connection, Dialect};
//! # fn f() -> tether_sdk::Result<()> {
//! let db = Connection::open("catalog.uri")?;
//! let rows = db.query(
//!     "SELECT metadata_location FROM iceberg_tables WHERE table_name = ?",
//!     &["t".into()],
//! )?;
//! let location: Option<String> = match rows.first() {
//!     Some(row) => row.get("metadata_location")?,
//!     None => None,
//! };
//! db.transaction(false, |tx| {
//!     let changed = tx.execute(
//!         "UPDATE iceberg_tables SET metadata_location = ? WHERE metadata_location = ?",
//!         &["new".into(), location.clone().into()],
//!     )?;
//!     if changed != 1 {
//!         return Err(tether_sdk::Error::ref_moved("the table moved"));
//!     }
//!     Ok(())
//! })?;
//! # Ok(()) }
//! ```
//!
//! Placeholders are the database's own: `$1, $2` on PostgreSQL, `?` on
//! SQLite and MySQL ([`Connection::dialect`]). On PostgreSQL a parameter is
//! typed by its [`Value`] case (`integer` is `int8`, `text` is `text`): cast
//! in the statement where a column has another type (`$1::jsonb`).

use crate::bindings::tether::backend::sql as wit;
use crate::error::Error;

pub use wit::{Dialect, Value};

/// Why a SQL call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SqlError {
    /// The connection name is not granted to this call.
    #[error("SQL access denied: {0}")]
    Denied(String),
    /// The host could not connect.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The database refused the statement (`code`: SQLSTATE, or SQLite's
    /// extended result code).
    #[error("the database refused the statement{}: {message}", code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default())]
    Database {
        code: Option<String>,
        message: String,
    },
    /// The statement ran past the host's statement timeout.
    #[error("{0}")]
    Timeout(String),
    /// The result would exceed the host's row cap.
    #[error("the result has more than {0} rows, the host's cap")]
    TooManyRows(u64),
    /// A malformed call (transaction out of order, several statements).
    #[error("invalid SQL call: {0}")]
    Invalid(String),
    /// A cell that is not there or not of the type asked for.
    #[error("{0}")]
    Column(String),
}

impl SqlError {
    /// The SQLSTATE (or SQLite code) of a database error.
    pub fn code(&self) -> Option<&str> {
        match self {
            SqlError::Database { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

impl From<wit::SqlError> for SqlError {
    fn from(e: wit::SqlError) -> Self {
        match e {
            wit::SqlError::Denied(m) => SqlError::Denied(m),
            wit::SqlError::Connect(m) => SqlError::Connect(m),
            wit::SqlError::Database(d) => SqlError::Database {
                code: d.code,
                message: d.message,
            },
            wit::SqlError::Timeout(m) => SqlError::Timeout(m),
            wit::SqlError::TooManyRows(n) => SqlError::TooManyRows(n),
            wit::SqlError::Invalid(m) => SqlError::Invalid(m),
        }
    }
}

impl From<SqlError> for Error {
    fn from(e: SqlError) -> Self {
        match e {
            SqlError::Denied(m) => Error::Denied(m),
            other => Error::Backend(other.to_string()),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Boolean(a), Value::Boolean(b)) => a == b,
            (Value::Integer(a), Value::Integer(b)) => a == b,
            (Value::Real(a), Value::Real(b)) => a == b,
            (Value::Text(a), Value::Text(b)) => a == b,
            (Value::Blob(a), Value::Blob(b)) => a == b,
            _ => false,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from($v: $t) -> Value {
                $e
            }
        })*
    };
}

value_from! {
    bool => |v| Value::Boolean(v),
    i64 => |v| Value::Integer(v),
    i32 => |v| Value::Integer(v.into()),
    u32 => |v| Value::Integer(v.into()),
    f64 => |v| Value::Real(v),
    String => |v| Value::Text(v),
    &str => |v| Value::Text(v.to_string()),
    &String => |v| Value::Text(v.clone()),
    Vec<u8> => |v| Value::Blob(v),
    &[u8] => |v| Value::Blob(v.to_vec()),
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// A Rust type a cell can be read as ([`Row::get`]).
pub trait FromValue: Sized {
    /// `None` when the cell is not of this type.
    fn from_value(v: &Value) -> Option<Self>;
    /// The type's name, for errors.
    const NAME: &'static str;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Integer(n) => Some(*n),
            _ => None,
        }
    }
    const NAME: &'static str = "an integer";
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Real(x) => Some(*x),
            Value::Integer(n) => Some(*n as f64),
            _ => None,
        }
    }
    const NAME: &'static str = "a number";
}

impl FromValue for bool {
    /// A boolean, or SQLite's and MySQL's 0 and 1.
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Boolean(b) => Some(*b),
            Value::Integer(0) => Some(false),
            Value::Integer(1) => Some(true),
            _ => None,
        }
    }
    const NAME: &'static str = "a boolean";
}

impl FromValue for String {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Text(s) => Some(s.clone()),
            _ => None,
        }
    }
    const NAME: &'static str = "text";
}

impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Blob(b) => Some(b.clone()),
            _ => None,
        }
    }
    const NAME: &'static str = "a blob";
}

impl FromValue for Value {
    fn from_value(v: &Value) -> Option<Self> {
        Some(v.clone())
    }
    const NAME: &'static str = "a value";
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Null => Some(None),
            other => T::from_value(other).map(Some),
        }
    }
    const NAME: &'static str = T::NAME;
}

/// A result set.
#[derive(Debug, Clone)]
pub struct Rows {
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
}

impl Rows {
    /// The column names, in order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The first row, if any.
    pub fn first(&self) -> Option<Row<'_>> {
        self.iter().next()
    }

    pub fn iter(&self) -> impl Iterator<Item = Row<'_>> {
        self.rows.iter().map(|cells| Row {
            columns: &self.columns,
            cells,
        })
    }
}

/// One row of [`Rows`].
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    columns: &'a [String],
    cells: &'a [Value],
}

impl Row<'_> {
    /// The cell in `column`, as `T` (`Option<T>` for a nullable column).
    pub fn get<T: FromValue>(&self, column: &str) -> Result<T, SqlError> {
        let cell = self
            .columns
            .iter()
            .position(|c| c == column)
            .and_then(|i| self.cells.get(i))
            .ok_or_else(|| {
                SqlError::Column(format!(
                    "no column `{column}` (the columns are {})",
                    self.columns.join(", ")
                ))
            })?;
        T::from_value(cell).ok_or_else(|| {
            SqlError::Column(format!("column `{column}` holds {cell:?}, not {}", T::NAME))
        })
    }

    /// The cells in column order.
    pub fn cells(&self) -> &[Value] {
        self.cells
    }
}

/// A connection the host opened (closed when dropped; an open transaction
/// is rolled back then).
#[derive(Debug)]
pub struct Connection {
    inner: wit::Connection,
}

impl Connection {
    /// Open the connection granted under `name` (one of the plugin's
    /// `sql_keys`); anything else is [`SqlError::Denied`].
    pub fn open(name: &str) -> Result<Connection, SqlError> {
        Ok(Connection {
            inner: wit::Connection::open(name)?,
        })
    }

    /// Open `uri` (`postgresql://role@host:port/db?sslmode=require`, no
    /// password), an address the plugin got at run time from an HTTP
    /// response rather than from its locator (a Neon branch's compute
    /// endpoint; since 0.1.5). The host removes every database password
    /// from the JSON responses of the origins it grants, keeps it, and
    /// allows this only for an address it learned that way (for this
    /// plugin's kind, from an origin this object grants), supplying the
    /// password; anything else is [`SqlError::Denied`]. Query parameters
    /// other than `sslmode`, `options`, `application_name` and
    /// `channel_binding` are denied too.
    pub fn open_uri(uri: &str) -> Result<Connection, SqlError> {
        Ok(Connection {
            inner: wit::Connection::open_uri(uri)?,
        })
    }

    /// Which protocol it speaks (placeholders: `$1` on PostgreSQL, `?` else).
    pub fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    /// `statement`, written with `?` placeholders, in this connection's
    /// dialect: `$1`, `$2`, ... on PostgreSQL, unchanged elsewhere. For
    /// statements that hold no `?` inside a literal or an identifier (a
    /// plugin's own fixed SQL), so one text serves every dialect.
    pub fn placeholders(&self, statement: &str) -> String {
        numbered_placeholders(statement, self.dialect())
    }

    /// One statement that returns rows.
    pub fn query(&self, statement: &str, params: &[Value]) -> Result<Rows, SqlError> {
        let rows = self.inner.query(statement, params)?;
        Ok(Rows {
            columns: rows.columns,
            rows: rows.rows,
        })
    }

    /// One statement; the number of rows it changed.
    pub fn execute(&self, statement: &str, params: &[Value]) -> Result<u64, SqlError> {
        Ok(self.inner.execute(statement, params)?)
    }

    /// Run `f` in a transaction (read-only when asked): committed when `f`
    /// returns `Ok`, rolled back when it returns `Err` (whose error is
    /// returned, not the rollback's).
    pub fn transaction<T, E: From<SqlError>>(
        &self,
        read_only: bool,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        self.inner.begin(read_only).map_err(SqlError::from)?;
        match f(self) {
            Ok(v) => {
                self.inner.commit().map_err(SqlError::from)?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.inner.rollback();
                Err(e)
            }
        }
    }

    /// Start a transaction by hand (prefer [`Connection::transaction`]).
    pub fn begin(&self, read_only: bool) -> Result<(), SqlError> {
        Ok(self.inner.begin(read_only)?)
    }

    pub fn commit(&self) -> Result<(), SqlError> {
        Ok(self.inner.commit()?)
    }

    pub fn rollback(&self) -> Result<(), SqlError> {
        Ok(self.inner.rollback()?)
    }
}

/// [`Connection::placeholders`] for a given dialect.
pub fn numbered_placeholders(statement: &str, dialect: Dialect) -> String {
    if dialect != Dialect::Postgres {
        return statement.to_owned();
    }
    let mut out = String::with_capacity(statement.len() + 8);
    let mut n = 0;
    for c in statement.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_on_postgres_only() {
        let q = "UPDATE t SET a = ? WHERE b = ? AND c = ?";
        assert_eq!(
            numbered_placeholders(q, Dialect::Postgres),
            "UPDATE t SET a = $1 WHERE b = $2 AND c = $3"
        );
        assert_eq!(numbered_placeholders(q, Dialect::Sqlite), q);
        assert_eq!(numbered_placeholders(q, Dialect::Mysql), q);
    }
}
