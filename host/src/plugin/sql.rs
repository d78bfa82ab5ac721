//! The host's `sql` capability (`wit/net.wit`, since 0.1.3): database
//! connections the host opens for a plugin, by the names its
//! `describe-net.sql-keys` declares. For now every `open` is denied.

use wasmtime::Result as WtResult;
use wasmtime::component::Resource;

use super::bindings::tether::backend::sql;
use super::host::CallState;

/// The host type behind the WIT `connection` resource.
pub struct SqlConnection;

type SqlResult<T> = WtResult<Result<T, sql::SqlError>>;

impl sql::Host for CallState {}

impl sql::HostConnection for CallState {
    async fn open(&mut self, name: String) -> SqlResult<Resource<SqlConnection>> {
        Ok(Err(sql::SqlError::Denied(format!(
            "no SQL connection is granted to this call (asked for {name:?})"
        ))))
    }

    async fn dialect(&mut self, _conn: Resource<SqlConnection>) -> WtResult<sql::Dialect> {
        Err(wasmtime::format_err!("no SQL connection exists"))
    }

    async fn query(
        &mut self,
        _conn: Resource<SqlConnection>,
        _statement: String,
        _params: Vec<sql::Value>,
    ) -> SqlResult<sql::Rows> {
        Err(wasmtime::format_err!("no SQL connection exists"))
    }

    async fn execute(
        &mut self,
        _conn: Resource<SqlConnection>,
        _statement: String,
        _params: Vec<sql::Value>,
    ) -> SqlResult<u64> {
        Err(wasmtime::format_err!("no SQL connection exists"))
    }

    async fn begin(&mut self, _conn: Resource<SqlConnection>, _read_only: bool) -> SqlResult<()> {
        Err(wasmtime::format_err!("no SQL connection exists"))
    }

    async fn commit(&mut self, _conn: Resource<SqlConnection>) -> SqlResult<()> {
        Err(wasmtime::format_err!("no SQL connection exists"))
    }

    async fn rollback(&mut self, _conn: Resource<SqlConnection>) -> SqlResult<()> {
        Err(wasmtime::format_err!("no SQL connection exists"))
    }

    async fn drop(&mut self, _conn: Resource<SqlConnection>) -> WtResult<()> {
        Ok(())
    }
}
