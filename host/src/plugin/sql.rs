//! The host's `sql` capability (`wit/net.wit`, since 0.1.3): database
//! connections the host opens for a plugin, by the names its
//! `describe-net.sql-keys` declares.
//!
//! Grants are per call and come from the object, never from the plugin: for
//! each declared key the host looks the address up in the locator, then in
//! what `.tether/secrets.toml` gives the object (its `[objects."<key>"]`
//! entry, then `[backends.<kind>]`), then the committed `[backends.<kind>]`
//! ([`SqlGrants::resolve`]). The host keeps the address with its password;
//! the plugin's copy of the value (in its locator or configuration) has the
//! password removed. A password is taken, in this order, from the address
//! itself, from a `password` or `password_env` setting of the
//! `[uris."<prefix>"]` entry of secrets.toml whose prefix matches the address
//! without its password ([`SqlGrants::with_uri_settings`]), or for
//! PostgreSQL from `PGPASSWORD` / `~/.pgpass` as libpq would.
//!
//! Connections are sqlx's (PostgreSQL, SQLite, MySQL protocol), opened when
//! the plugin calls `connection.open` and closed when it drops the resource
//! or the call's store goes; an open transaction is rolled back then. Every
//! statement runs alone (one per call), with typed parameters, under a
//! statement timeout (server-side on PostgreSQL and MySQL, an interrupting
//! progress handler on SQLite, and a host-side bound over all) and a row
//! cap ([`SqlLimits`]). No message that leaves this module holds the
//! password: each is scrubbed of it, however the driver worded it.
//!
//! `open-uri` (since 0.1.5) opens an address the plugin got at run time: only
//! one the host learned itself, with its password, from a JSON response of an
//! origin the call's object grants, fetched by a plugin of the same kind
//! (`strip_credentials`, called by `http.rs`; kept for the process,
//! bounded), and only with the query parameters `OPEN_URI_PARAMS` lists.
//! The plugin passes the password-free URI it was given; the host supplies
//! the password, and puts it back into a handle's address for the user
//! (`with_learned_password`).
//!
//! A SQLite address is a local path from the object's configuration, which
//! a clone may control: it is opened only when it exists as a regular file,
//! not through a symlink in its last component, and never created; and a
//! plugin's statement may not `ATTACH` another file or `VACUUM INTO` one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::TryStreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Map, Value as Json};
use sqlx::mysql::{MySql, MySqlConnectOptions, MySqlConnection, MySqlRow};
use sqlx::postgres::types::Oid;
use sqlx::postgres::{
    PgArgumentBuffer, PgConnectOptions, PgConnection, PgRow, PgTypeInfo, Postgres,
};
use sqlx::sqlite::{Sqlite, SqliteConnectOptions, SqliteConnection, SqliteRow};
use sqlx::{AssertSqlSafe, Column as _, ConnectOptions as _, Connection as _, Executor as _};
use sqlx::{Row as _, SqlSafeStr as _, Statement as _, TypeInfo as _, ValueRef as _};
use wasmtime::Result as WtResult;
use wasmtime::component::Resource;

use super::bindings::tether::backend::sql;
use super::host::CallState;

/// Limits every SQL statement of a plugin runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlLimits {
    /// How long one statement (or one connect) may take.
    pub statement_timeout: Duration,
    /// How many rows one `query` may return; more is `too-many-rows`.
    pub max_rows: u64,
}

impl SqlLimits {
    /// 30 s per statement.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// 100 000 rows per query.
    pub const DEFAULT_MAX_ROWS: u64 = 100_000;

    /// The defaults, overridable by `TETHER_SQL_TIMEOUT` (seconds) and
    /// `TETHER_SQL_MAX_ROWS`.
    pub fn from_env() -> SqlLimits {
        let timeout = std::env::var("TETHER_SQL_TIMEOUT")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| *s > 0.0 && s.is_finite())
            .map(Duration::from_secs_f64)
            .unwrap_or(Self::DEFAULT_TIMEOUT);
        let max_rows = std::env::var("TETHER_SQL_MAX_ROWS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(Self::DEFAULT_MAX_ROWS);
        SqlLimits {
            statement_timeout: timeout,
            max_rows,
        }
    }
}

impl Default for SqlLimits {
    fn default() -> Self {
        SqlLimits {
            statement_timeout: Self::DEFAULT_TIMEOUT,
            max_rows: Self::DEFAULT_MAX_ROWS,
        }
    }
}

/// How long past the statement timeout the host waits for the database to
/// report it, before it gives up on the connection itself.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

/// Which protocol an address speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
    MySql,
}

impl Dialect {
    fn wit(self) -> sql::Dialect {
        match self {
            Dialect::Postgres => sql::Dialect::Postgres,
            Dialect::Sqlite => sql::Dialect::Sqlite,
            Dialect::MySql => sql::Dialect::Mysql,
        }
    }
}

/// A password: never printed.
#[derive(Clone, PartialEq, Eq)]
struct Password(String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// Where a grant connects, without its password.
#[derive(Debug, Clone)]
enum Address {
    Postgres(Box<PgConnectOptions>),
    Sqlite(PathBuf),
    MySql(Box<MySqlConnectOptions>),
}

impl Address {
    fn dialect(&self) -> Dialect {
        match self {
            Address::Postgres(_) => Dialect::Postgres,
            Address::Sqlite(_) => Dialect::Sqlite,
            Address::MySql(_) => Dialect::MySql,
        }
    }
}

/// One connection name a call may open.
#[derive(Debug, Clone)]
struct SqlGrant {
    key: String,
    /// The address as the plugin sees it and logs show it: no password.
    shown: String,
    /// Where to connect, or why the value cannot be used (never quoting it).
    address: Result<Address, String>,
    password: Option<Password>,
}

/// The connection names one object's calls may open. `Debug` never shows a
/// password.
#[derive(Debug, Clone, Default)]
pub struct SqlGrants {
    grants: Vec<SqlGrant>,
}

impl SqlGrants {
    /// The grants of an object whose plugin declares `keys`: each key's
    /// address looked up in `locator`, then `secret` (what secrets.toml
    /// gives the object), then `config`. The plugin's copies are rewritten:
    /// a value found in the locator is replaced there by its password-free
    /// form, and the config gets the password-free form of the value used
    /// under the same key (so an address only secrets.toml's object entry
    /// gives reaches the plugin too).
    pub fn resolve(
        keys: &[String],
        locator: &mut Json,
        config: &mut Json,
        secret: &Map<String, Json>,
    ) -> SqlGrants {
        let secret = Json::Object(secret.clone());
        let mut grants = Vec::new();
        for key in keys {
            let in_locator = dotted_get(locator, key).cloned();
            let found = in_locator
                .clone()
                .or_else(|| dotted_get(&secret, key).cloned())
                .or_else(|| dotted_get(config, key).cloned());
            let Some(found) = found else { continue };
            let Json::String(raw) = &found else {
                let grant = SqlGrant {
                    key: key.clone(),
                    shown: String::new(),
                    address: Err(format!("the value under `{key}` is not a string")),
                    password: None,
                };
                grants.push(grant);
                continue;
            };
            let grant = SqlGrant::parse(key, raw);
            if in_locator.is_some() {
                if grant.password.is_some() {
                    tracing::warn!(
                        "the database address under `{key}` in a locator holds a password, \
                         and locators are committed: move it to .tether/secrets.toml"
                    );
                }
                dotted_set(locator, key, Json::String(grant.shown.clone()));
                if let Some(Json::String(c)) = dotted_get(config, key) {
                    let shown = SqlGrant::parse(key, c).shown;
                    dotted_set(config, key, Json::String(shown));
                }
            } else {
                dotted_set(config, key, Json::String(grant.shown.clone()));
            }
            grants.push(grant);
        }
        SqlGrants { grants }
    }

    /// Fill in the passwords of addresses that hold none from the settings
    /// `uri_settings` gives for an address (secrets.toml's longest matching
    /// `[uris."<prefix>"]` entry): `password`, or `password_env` naming an
    /// environment variable `env` reads.
    pub fn with_uri_settings(
        mut self,
        uri_settings: impl Fn(&str) -> Option<Map<String, Json>>,
        env: impl Fn(&str) -> Option<String>,
    ) -> SqlGrants {
        for grant in &mut self.grants {
            if grant.password.is_some() || grant.address.is_err() {
                continue;
            }
            // A MySQL server's credentials are the server's: its entry is
            // `mysql://host:port` (or `.../database`), matched without the
            // address's user, and may name the user too.
            let mysql = match &grant.address {
                Ok(Address::MySql(options)) => Some(options.clone()),
                _ => None,
            };
            let lookup = match &mysql {
                Some(_) => mysql_without_user(&grant.shown),
                None => grant.shown.clone(),
            };
            let Some(settings) = uri_settings(&lookup) else {
                continue;
            };
            let setting =
                |plain: &str| match (settings.get(plain), settings.get(&format!("{plain}_env"))) {
                    (Some(Json::String(v)), _) => Some(v.clone()),
                    (_, Some(Json::String(var))) => env(var),
                    _ => None,
                };
            grant.password = setting("password").filter(|p| !p.is_empty()).map(Password);
            if let Some(options) = mysql
                && mysql_user(&grant.shown).is_none()
                && let Some(user) = setting("user").filter(|u| !u.is_empty())
            {
                grant.address = Ok(Address::MySql(Box::new(options.username(&user))));
            }
        }
        self
    }

    /// Give addresses that hold no password the one `other` holds for the
    /// same address (as the plugin sees it): a harness's object names its
    /// scratch database as the harness saw it.
    pub fn with_passwords_of(mut self, other: &SqlGrants) -> SqlGrants {
        for grant in self.grants.iter_mut().filter(|g| g.password.is_none()) {
            // MySQL credentials belong to the server and user, whatever the
            // database (a harness makes databases on its scratch server).
            let same = |o: &SqlGrant| {
                o.shown == grant.shown
                    || matches!(
                        (&o.address, &grant.address),
                        (Ok(Address::MySql(_)), Ok(Address::MySql(_)))
                    ) && mysql_server(&o.shown).is_some()
                        && mysql_server(&o.shown) == mysql_server(&grant.shown)
            };
            if let Some(known) = other
                .grants
                .iter()
                .find(|o| same(o) && o.password.is_some())
            {
                grant.password = known.password.clone();
            }
        }
        self
    }

    /// Whether no connection name is granted.
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// The granted names with their addresses as the plugin sees them.
    pub fn shown(&self) -> impl Iterator<Item = (&str, &str)> {
        self.grants
            .iter()
            .map(|g| (g.key.as_str(), g.shown.as_str()))
    }

    fn get(&self, key: &str) -> Option<&SqlGrant> {
        self.grants.iter().find(|g| g.key == key)
    }
}

impl SqlGrant {
    /// Parse one address: the forms `wit/net.wit` and docs/plugin-authors.md
    /// list. Errors name the form, never the value.
    fn parse(key: &str, raw: &str) -> SqlGrant {
        let raw = raw.trim();
        let body = raw.strip_prefix("ducklake:").unwrap_or(raw);
        let (shown, address, password) = match parse_address(body) {
            Ok((shown, address, password)) => (shown, Ok(address), password),
            Err(why) => (
                redact_unparsed(raw),
                Err(format!("the database address under `{key}` {why}")),
                None,
            ),
        };
        // The plugin's copy keeps a `ducklake:` prefix it gave.
        let shown = if body.len() != raw.len() && address.is_ok() {
            format!("ducklake:{shown}")
        } else {
            shown
        };
        SqlGrant {
            key: key.to_string(),
            shown,
            address,
            password,
        }
    }
}

type Parsed = (String, Address, Option<Password>);

fn parse_address(body: &str) -> Result<Parsed, String> {
    let scheme_end = body
        .find(':')
        .ok_or("is not an address (postgres://, sqlite:, mysql://)")?;
    let scheme = body[..scheme_end].to_ascii_lowercase();
    // SQLAlchemy spells a driver after `+` (`postgresql+psycopg://`).
    let family = scheme.split('+').next().unwrap_or_default();
    let rest = &body[scheme_end + 1..];
    match family {
        "postgres" | "postgresql" if !rest.starts_with("//") => parse_libpq_keywords(body, rest),
        "postgres" | "postgresql" => {
            let (shown, url, password) = split_url(body)?;
            let url = with_scheme(&url, "postgres");
            let options = PgConnectOptions::from_url(&url).map_err(|e| {
                format!(
                    "is not a PostgreSQL URL sqlx accepts: {}",
                    e.to_string().replace(url.as_str(), "<address>")
                )
            })?;
            Ok((shown, Address::Postgres(Box::new(options)), password))
        }
        "mysql" | "mariadb" => {
            let (shown, url, password) = split_url(body)?;
            let url = with_scheme(&url, "mysql");
            let options = MySqlConnectOptions::from_url(&url).map_err(|e| {
                format!(
                    "is not a MySQL URL sqlx accepts: {}",
                    e.to_string().replace(url.as_str(), "<address>")
                )
            })?;
            Ok((shown, Address::MySql(Box::new(options)), password))
        }
        "sqlite" => {
            let path = sqlite_path(rest)?;
            Ok((body.to_string(), Address::Sqlite(path), None))
        }
        _ => Err(format!(
            "has scheme `{}`, which is not postgres, sqlite or mysql",
            crate::model::display::quote(&scheme)
        )),
    }
}

/// A URL address split into the plugin's copy (no password), the host's
/// URL (no password either: it is set on the options) and the password.
fn split_url(body: &str) -> Result<(String, url::Url, Option<Password>), String> {
    let mut url = url::Url::parse(body).map_err(|e| format!("is not a valid URL ({e})"))?;
    let password = url
        .password()
        .map(|p| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        })
        .filter(|p| !p.is_empty())
        .map(Password);
    if url.password().is_some() {
        url.set_password(None)
            .map_err(|()| "is a URL that cannot hold a user".to_string())?;
    }
    Ok((url.to_string(), url, password))
}

/// `url` with its scheme replaced (`postgresql+psycopg` -> `postgres`);
/// `Url::set_scheme` refuses some changes, so this goes through text.
fn with_scheme(url: &url::Url, scheme: &str) -> url::Url {
    let text = url.as_str();
    let rest = &text[text.find(':').unwrap_or(0)..];
    url::Url::parse(&format!("{scheme}{rest}")).unwrap_or_else(|_| url.clone())
}

/// libpq's keyword form after `postgres:` (`dbname=x host=y port=5432
/// user=u password=p sslmode=disable`), values optionally single-quoted.
/// Turned into the URL form, so sqlx applies `PGPASSWORD` and `~/.pgpass`
/// as for any other address without a password.
fn parse_libpq_keywords(body: &str, rest: &str) -> Result<Parsed, String> {
    let pairs = libpq_pairs(rest)?;
    let mut url = url::Url::parse("postgres://localhost/").expect("a valid URL");
    let mut password = None;
    let mut shown = Vec::new();
    for (k, v) in &pairs {
        let ok = match k.as_str() {
            "password" => {
                password = Some(Password(v.clone())).filter(|p| !p.0.is_empty());
                continue;
            }
            "host" | "hostaddr" => url.set_host(Some(v)).is_ok(),
            "port" => v
                .parse()
                .ok()
                .is_some_and(|p| url.set_port(Some(p)).is_ok()),
            "user" => url.set_username(v).is_ok(),
            "dbname" => {
                url.set_path(v);
                true
            }
            "sslmode" | "application_name" => {
                url.query_pairs_mut().append_pair(k, v);
                true
            }
            other => {
                return Err(format!(
                    "has the keyword `{}`, which tether does not pass on (host, hostaddr, \
                     port, user, password, dbname, sslmode, application_name)",
                    crate::model::display::quote(other)
                ));
            }
        };
        if !ok {
            return Err(format!("has a `{k}` that is not valid"));
        }
        shown.push(if v.is_empty() || v.contains([' ', '\'', '\\']) {
            format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
        } else {
            format!("{k}={v}")
        });
    }
    let options = PgConnectOptions::from_url(&url)
        .map_err(|e| format!("is not a PostgreSQL address sqlx accepts: {e}"))?;
    let scheme = &body[..body.len() - rest.len()];
    Ok((
        format!("{scheme}{}", shown.join(" ")),
        Address::Postgres(Box::new(options)),
        password,
    ))
}

/// libpq's `key=value` pairs, separated by whitespace; a value in single
/// quotes may hold spaces, with `\'` and `\\` escapes.
fn libpq_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err("is not in libpq's `keyword=value` form".into());
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("has an unterminated quoted value".into()),
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        out.push((key.to_ascii_lowercase(), value));
    }
}

/// The absolute path of a `sqlite:` address: `sqlite:///abs`,
/// `sqlite:////abs` (SQLAlchemy's spelling), `sqlite:/abs`, `sqlite:abs`
/// where `abs` is absolute. No query parameters, no in-memory database.
fn sqlite_path(rest: &str) -> Result<PathBuf, String> {
    if rest.contains('?') {
        return Err("has query parameters, which a sqlite address may not".into());
    }
    let path = rest.strip_prefix("//").unwrap_or(rest);
    let trimmed = path.trim_start_matches('/');
    if trimmed.len() == path.len() || trimmed.is_empty() {
        return Err("does not name an absolute path (sqlite:///abs/path.db)".into());
    }
    let decoded = percent_encoding::percent_decode_str(trimmed).decode_utf8_lossy();
    Ok(Path::new("/").join(decoded.as_ref()))
}

/// A MySQL address (the plugin's copy, no password) without its user: what
/// secrets.toml's `[uris."mysql://host:port"]` entries are matched against.
fn mysql_without_user(shown: &str) -> String {
    match url::Url::parse(shown) {
        Ok(mut url) => {
            let _ = url.set_username("");
            url.to_string()
        }
        Err(_) => shown.to_string(),
    }
}

/// The user a MySQL address names, if any.
fn mysql_user(shown: &str) -> Option<String> {
    url::Url::parse(shown)
        .ok()
        .map(|u| u.username().to_string())
        .filter(|u| !u.is_empty())
}

/// A MySQL address's server and user: `(user, host, port)`.
fn mysql_server(shown: &str) -> Option<(String, String, u16)> {
    let url = url::Url::parse(shown).ok()?;
    Some((
        url.username().to_string(),
        url.host_str()?.to_string(),
        url.port().unwrap_or(3306),
    ))
}

/// The plugin's copy of a value the host cannot use: its password removed
/// when it looks like a URL with one, else nothing of it.
fn redact_unparsed(raw: &str) -> String {
    match url::Url::parse(raw) {
        Ok(mut url) => {
            let _ = url.set_password(None);
            url.to_string()
        }
        Err(_) if !raw.contains("password") && !raw.contains('@') => raw.to_string(),
        Err(_) => String::new(),
    }
}

/// The value under a dotted key: the key as one member first (`"catalog.uri"`
/// as a quoted TOML key), else the path through nested tables.
pub(crate) fn dotted_get<'a>(value: &'a Json, key: &str) -> Option<&'a Json> {
    let map = value.as_object()?;
    if let Some(v) = map.get(key) {
        return Some(v);
    }
    let (head, tail) = key.split_once('.')?;
    dotted_get(map.get(head)?, tail)
}

/// Set the value under a dotted key where [`dotted_get`] finds it, else
/// along the path, making tables as needed.
pub(crate) fn dotted_set(value: &mut Json, key: &str, new: Json) {
    let Json::Object(map) = value else { return };
    if map.contains_key(key) {
        map.insert(key.to_string(), new);
        return;
    }
    match key.split_once('.') {
        Some((head, tail)) => {
            let child = map
                .entry(head.to_string())
                .or_insert_with(|| Json::Object(Map::new()));
            if !child.is_object() {
                return;
            }
            dotted_set(child, tail, new);
        }
        None => {
            map.insert(key.to_string(), new);
        }
    }
}

/// What one call's `sql` capability may reach, and under which limits.
#[derive(Debug, Clone, Default)]
pub(crate) struct SqlAccess {
    grants: Arc<SqlGrants>,
    limits: SqlLimits,
    /// The HTTP origins this call's object grants: `open-uri` opens only
    /// addresses the host learned from one of them.
    origins: Arc<[String]>,
}

impl SqlAccess {
    pub(crate) fn new(grants: Arc<SqlGrants>, limits: SqlLimits) -> Self {
        SqlAccess {
            grants,
            limits,
            origins: Arc::new([]),
        }
    }

    /// The object's granted HTTP origins (`scheme://host:port`).
    pub(crate) fn with_origins(mut self, origins: Vec<String>) -> Self {
        self.origins = origins.into();
        self
    }
}

// ---------------------------------------------------------------------------
// Addresses learned from HTTP responses (`connection.open-uri`, since 0.1.5)

/// A database address the host took, with its password, out of a granted
/// origin's JSON response ([`strip_credentials`]), for this process.
struct Learned {
    /// The address as the plugin got it: no password.
    shown: String,
    password: Password,
    /// The plugin kind that fetched it, and the origin that sent it.
    kind: String,
    origin: String,
}

/// How many learned addresses the process keeps (the oldest go first).
const MAX_LEARNED: usize = 512;
/// Learned passwords at least this long are also cut from any later
/// response that repeats them (shorter ones would match by accident).
const MIN_ECHO_LEN: usize = 8;

fn learned_store() -> &'static Mutex<std::collections::VecDeque<Learned>> {
    static STORE: std::sync::OnceLock<Mutex<std::collections::VecDeque<Learned>>> =
        std::sync::OnceLock::new();
    STORE.get_or_init(Default::default)
}

fn remember(kind: &str, origin: &str, shown: &str, password: Password) {
    let mut store = learned_store()
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    store.retain(|l| !(l.shown == shown && l.kind == kind && l.origin == origin));
    if store.len() >= MAX_LEARNED {
        store.pop_front();
    }
    store.push_back(Learned {
        shown: shown.to_string(),
        password,
        kind: kind.to_string(),
        origin: origin.to_string(),
    });
}

/// The password the host learned for `shown`, when a plugin of `kind`
/// fetched it from one of `origins`.
fn learned_password(kind: &str, origins: &[String], shown: &str) -> Option<Password> {
    let store = learned_store()
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    store
        .iter()
        .rev()
        .find(|l| l.shown == shown && l.kind == kind && origins.contains(&l.origin))
        .map(|l| l.password.clone())
}

/// Every learned password long enough to look for in a response: a body or
/// header repeating one is cut off ([`strip_credentials`] handles the JSON
/// that carries one).
pub(crate) fn learned_secrets() -> Vec<Arc<str>> {
    let store = learned_store()
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut out: Vec<Arc<str>> = Vec::new();
    for l in store.iter().filter(|l| l.password.0.len() >= MIN_ECHO_LEN) {
        if !out.iter().any(|o| **o == *l.password.0) {
            out.push(Arc::from(l.password.0.as_str()));
        }
    }
    out
}

/// `address` with the password the host learned for it put back, when a
/// plugin of `kind` learned it from one of `origins` (a handle the user
/// asked for: the password is theirs). Anything else comes back unchanged.
pub(crate) fn with_learned_password(kind: &str, origins: &[String], address: &str) -> String {
    let grant = SqlGrant::parse("handle", address);
    if grant.password.is_some() || grant.address.is_err() {
        return address.to_string();
    }
    let Some(Password(password)) = learned_password(kind, origins, &grant.shown) else {
        return address.to_string();
    };
    match url::Url::parse(&grant.shown) {
        // `set_password` percent-encodes what a URL's userinfo cannot hold.
        Ok(mut url) => match url.set_password(Some(&password)) {
            Ok(()) => url.to_string(),
            Err(()) => address.to_string(),
        },
        Err(_) => address.to_string(),
    }
}

/// What [`strip_credentials`] did to a JSON body.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Stripped {
    /// Database addresses whose password the host now holds.
    pub learned: usize,
    /// Other credentials removed (`password` members, other URLs' passwords).
    pub removed: usize,
}

/// Remove every credential from a JSON response of `origin` to a plugin of
/// `kind`: a URL's password (`postgresql://role:PW@host/db` becomes
/// `postgresql://role@host/db`; for a PostgreSQL or MySQL address the host
/// remembers the password for `open-uri`), and every member named
/// `password` (a role's, or a `connection_parameters` object's).
pub(crate) fn strip_credentials(value: &mut Json, kind: &str, origin: &str) -> Stripped {
    let mut done = Stripped::default();
    strip_into(value, kind, origin, &mut done);
    done
}

fn strip_into(value: &mut Json, kind: &str, origin: &str, done: &mut Stripped) {
    match value {
        Json::Object(map) => {
            let before = map.len();
            map.retain(|k, _| !k.eq_ignore_ascii_case("password"));
            done.removed += before - map.len();
            for v in map.values_mut() {
                strip_into(v, kind, origin, done);
            }
        }
        Json::Array(items) => {
            for v in items {
                strip_into(v, kind, origin, done);
            }
        }
        Json::String(text) => {
            if !text.contains("://") || !text.contains('@') {
                return;
            }
            let Ok(mut url) = url::Url::parse(text.trim()) else {
                return;
            };
            if url.password().is_none() {
                return;
            }
            let grant = SqlGrant::parse("response", text);
            match (&grant.address, &grant.password) {
                (Ok(Address::Postgres(_) | Address::MySql(_)), Some(password)) => {
                    remember(kind, origin, &grant.shown, password.clone());
                    *text = grant.shown;
                    done.learned += 1;
                }
                _ => {
                    let _ = url.set_password(None);
                    *text = url.to_string();
                    done.removed += 1;
                }
            }
        }
        _ => {}
    }
}

/// Whether `body` (a response the host could not read as JSON) holds what
/// looks like a URL with a password (`scheme://user:secret@`).
pub(crate) fn holds_url_credentials(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("://") {
        rest = &rest[at + 3..];
        let end = rest
            .find(|c: char| c.is_whitespace() || "/?#\"'<>,;".contains(c))
            .unwrap_or(rest.len());
        if let Some((userinfo, _)) = rest[..end].rsplit_once('@')
            && userinfo.contains(':')
        {
            return true;
        }
    }
    false
}

/// The query parameters an `open-uri` address may carry: none that makes the
/// driver read a local file (`sslrootcert`, `sslkey`) or names another host,
/// user or password (`host`, `user`, `password`).
const OPEN_URI_PARAMS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "options",
    "application_name",
    "channel_binding",
];

/// The grant `open-uri` connects with, or why it is denied.
fn uri_grant(access: &SqlAccess, kind: &str, uri: &str) -> Result<SqlGrant, String> {
    let mut grant = SqlGrant::parse("open-uri", uri);
    if grant.password.is_some() {
        return Err(
            "the address holds a password: open-uri takes one without, and the host \
                    supplies the password it learned"
                .into(),
        );
    }
    match &grant.address {
        Ok(Address::Postgres(_) | Address::MySql(_)) => {}
        Ok(Address::Sqlite(_)) => {
            return Err(
                "open-uri opens PostgreSQL and MySQL addresses; a SQLite file is \
                        reached through a key of describe-net.sql-keys"
                    .into(),
            );
        }
        Err(why) => return Err(why.clone()),
    }
    if let Ok(url) = url::Url::parse(&grant.shown)
        && let Some((k, _)) = url
            .query_pairs()
            .find(|(k, _)| !OPEN_URI_PARAMS.contains(&k.as_ref()))
    {
        return Err(format!(
            "the address sets `{}`, which open-uri does not pass on ({})",
            crate::model::display::quote(&k),
            OPEN_URI_PARAMS.join(", ")
        ));
    }
    match learned_password(kind, &access.origins, &grant.shown) {
        Some(password) => {
            grant.password = Some(password);
            Ok(grant)
        }
        None if access.origins.is_empty() => {
            Err("this call is granted no HTTP origin, so the host learned no address for it".into())
        }
        None => Err(format!(
            "the host did not learn this address from a response of an origin this object \
             grants ({}) to the {kind} plugin in this process",
            access.origins.join(", ")
        )),
    }
}

/// The live connection behind a resource.
enum Conn {
    Postgres(PgConnection),
    Sqlite(SqliteConnection),
    MySql(MySqlConnection),
}

/// The host type behind the WIT `connection` resource.
pub struct SqlConnection {
    key: String,
    dialect: Dialect,
    /// `None` once the host gave up on it (a statement ran past the grace).
    conn: Option<Conn>,
    /// `Some(read_only)` while a transaction is open.
    transaction: Option<bool>,
    /// The texts no message may hold: the password, as given and encoded.
    secrets: Vec<String>,
    /// SQLite's progress handler interrupts a statement past this instant.
    sqlite_deadline: Option<Arc<Mutex<Option<Instant>>>>,
}

/// A failure inside this module, before it is scrubbed and typed.
enum Failure {
    Db(sqlx::Error),
    TooMany(u64),
    Invalid(String),
    Timeout,
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        Failure::Db(e)
    }
}

impl SqlConnection {
    /// `text` without any form of the password.
    fn scrub(&self, text: String) -> String {
        scrub(text, &self.secrets)
    }

    fn error(&self, failure: Failure, limits: &SqlLimits) -> sql::SqlError {
        let timeout = || {
            sql::SqlError::Timeout(format!(
                "the statement ran past the host's statement timeout of {:?}",
                limits.statement_timeout
            ))
        };
        match failure {
            Failure::TooMany(cap) => sql::SqlError::TooManyRows(cap),
            Failure::Invalid(m) => sql::SqlError::Invalid(self.scrub(m)),
            Failure::Timeout => timeout(),
            Failure::Db(sqlx::Error::Database(db)) => {
                let code = db.code().map(|c| c.into_owned());
                // PostgreSQL: query_canceled (statement_timeout); MySQL:
                // ER_QUERY_TIMEOUT; SQLite: SQLITE_INTERRUPT from the
                // progress handler.
                let timed_out = match self.dialect {
                    Dialect::Postgres => code.as_deref() == Some("57014"),
                    Dialect::MySql => db.message().contains("maximum statement execution time"),
                    Dialect::Sqlite => code.as_deref() == Some("9"),
                };
                if timed_out {
                    return timeout();
                }
                sql::SqlError::Database(sql::DbError {
                    code: code.map(|c| self.scrub(c)),
                    message: self.scrub(db.message().to_string()),
                })
            }
            Failure::Db(
                e @ (sqlx::Error::Io(_)
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::WorkerCrashed),
            ) => sql::SqlError::Connect(
                self.scrub(format!("the connection `{}` failed: {e}", self.key)),
            ),
            Failure::Db(e) => sql::SqlError::Invalid(self.scrub(e.to_string())),
        }
    }

    fn live(&mut self) -> Result<&mut Conn, Failure> {
        self.conn.as_mut().ok_or_else(|| {
            Failure::Invalid(format!(
                "the connection `{}` was closed after a statement ran past its timeout; open it again",
                self.key
            ))
        })
    }

    /// Run `op` on the connection under the statement timeout; past the
    /// grace the connection is given up (closed), whatever it was doing.
    async fn bounded<T>(
        &mut self,
        limits: &SqlLimits,
        op: impl for<'c> FnOnce(&'c mut Conn) -> futures::future::BoxFuture<'c, Result<T, Failure>>,
    ) -> Result<T, Failure> {
        if let Some(deadline) = &self.sqlite_deadline {
            *deadline.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Instant::now() + limits.statement_timeout);
        }
        let conn = self.live()?;
        let outcome =
            tokio::time::timeout(limits.statement_timeout + TIMEOUT_GRACE, op(conn)).await;
        if let Some(deadline) = &self.sqlite_deadline {
            *deadline.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        match outcome {
            Ok(result) => result,
            Err(_) => {
                self.conn = None;
                self.transaction = None;
                Err(Failure::Timeout)
            }
        }
    }
}

/// `text` with every non-empty secret replaced.
fn scrub(mut text: String, secrets: &[String]) -> String {
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), "***");
        }
    }
    text
}

/// The forms a password may take in a message.
fn secret_forms(password: &Option<Password>) -> Vec<String> {
    let Some(Password(p)) = password else {
        return Vec::new();
    };
    let encoded =
        percent_encoding::utf8_percent_encode(p, percent_encoding::NON_ALPHANUMERIC).to_string();
    let mut forms = vec![p.clone(), encoded];
    forms.dedup();
    forms
}

/// Open a connection for `grant`.
async fn connect(grant: &SqlGrant, limits: &SqlLimits) -> Result<SqlConnection, sql::SqlError> {
    let secrets = secret_forms(&grant.password);
    let address = grant
        .address
        .as_ref()
        .map_err(|why| sql::SqlError::Connect(scrub(why.clone(), &secrets)))?;
    let timeout_ms = limits.statement_timeout.as_millis().max(1).to_string();
    let mut sqlite_deadline = None;
    let connecting = async {
        Ok::<_, sqlx::Error>(match address {
            Address::Postgres(options) => {
                let mut options = (**options)
                    .clone()
                    .statement_cache_capacity(0)
                    .options([("statement_timeout", timeout_ms.as_str())]);
                if let Some(Password(p)) = &grant.password {
                    options = options.password(p);
                }
                Conn::Postgres(options.connect().await?)
            }
            Address::MySql(options) => {
                let mut options = (**options).clone().statement_cache_capacity(0);
                if let Some(Password(p)) = &grant.password {
                    options = options.password(p);
                }
                let mut conn = options.connect().await?;
                // SELECTs only: the host's own bound covers the rest.
                let set = format!("SET SESSION max_execution_time = {timeout_ms}");
                conn.execute(AssertSqlSafe(set)).await?;
                Conn::MySql(conn)
            }
            Address::Sqlite(path) => {
                let options = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(false)
                    .statement_cache_capacity(0)
                    .busy_timeout(limits.statement_timeout.min(Duration::from_secs(5)));
                let mut conn = options.connect().await?;
                let deadline: Arc<Mutex<Option<Instant>>> = Arc::default();
                let watched = deadline.clone();
                conn.lock_handle()
                    .await?
                    .set_progress_handler(1000, move || {
                        let at = *watched.lock().unwrap_or_else(PoisonError::into_inner);
                        at.is_none_or(|at| Instant::now() < at)
                    });
                sqlite_deadline = Some(deadline);
                Conn::Sqlite(conn)
            }
        })
    };
    let refuse = |m: String| sql::SqlError::Connect(scrub(m, &secrets));
    if let Address::Sqlite(path) = address {
        check_sqlite_file(path).map_err(refuse)?;
    }
    let conn = match tokio::time::timeout(limits.statement_timeout, connecting).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            return Err(refuse(format!(
                "cannot connect to `{}` ({}): {e}",
                grant.key, grant.shown
            )));
        }
        Err(_) => {
            return Err(refuse(format!(
                "connecting to `{}` ({}) took longer than {:?}",
                grant.key, grant.shown, limits.statement_timeout
            )));
        }
    };
    Ok(SqlConnection {
        key: grant.key.clone(),
        dialect: address.dialect(),
        conn: Some(conn),
        transaction: None,
        secrets,
        sqlite_deadline,
    })
}

/// A SQLite file may be opened when it exists as a regular file, its last
/// component not a symlink (the address is clone-controlled input).
fn check_sqlite_file(path: &Path) -> Result<(), String> {
    let shown = crate::model::fsutil::shown(path);
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "the SQLite database {} is a symlink, which the host does not follow",
            shown.display()
        )),
        Ok(m) if !m.is_file() => Err(format!(
            "the SQLite database {} is not a regular file",
            shown.display()
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "the SQLite database {} does not exist (the host never creates one)",
            shown.display()
        )),
        Err(e) => Err(format!("cannot open {}: {e}", shown.display())),
    }
}

/// The first keyword of `statement` (upper-cased) and whether another
/// statement follows it, skipping comments and quoted text as SQLite reads
/// them. Used to keep SQLite to one statement per call (sqlx would run a
/// string of several) and for the statements no connection may run.
fn statement_shape(statement: &str) -> (String, bool) {
    let b = statement.as_bytes();
    let mut i = 0;
    let mut first = String::new();
    let mut seen_end = false;
    while i < b.len() {
        let c = b[i];
        match c {
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b';' => {
                seen_end = true;
                i += 1;
            }
            _ if seen_end => return (first, true),
            b'\'' | b'"' | b'`' | b'[' => {
                let close = if c == b'[' { b']' } else { c };
                i += 1;
                while i < b.len() {
                    if b[i] == close {
                        // A doubled quote is an escaped one.
                        if close != b']' && b.get(i + 1) == Some(&close) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            c if first.is_empty() && (c.is_ascii_alphabetic() || c == b'_') => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                first = statement[start..i].to_ascii_uppercase();
                if first.is_empty() {
                    i += 1;
                }
            }
            _ => {
                if first.is_empty() {
                    // Something before any keyword: remember it was not one.
                    first.push('?');
                }
                i += 1;
            }
        }
    }
    (first, false)
}

/// Refuse what a statement may not be: more than one statement (SQLite),
/// transaction control other than the interface's own, and on SQLite a
/// statement that reaches another file.
fn check_statement(dialect: Dialect, statement: &str) -> Result<(), Failure> {
    let (first, more) = statement_shape(statement);
    if more && dialect == Dialect::Sqlite {
        return Err(Failure::Invalid(
            "one statement per call: this one has more after a `;`".into(),
        ));
    }
    let rest_upper = statement.trim_start().to_ascii_uppercase();
    let savepoint_rollback = first == "ROLLBACK" && rest_upper.contains(" TO ");
    if matches!(
        first.as_str(),
        "BEGIN" | "COMMIT" | "ROLLBACK" | "END" | "ABORT" | "START"
    ) && !savepoint_rollback
    {
        return Err(Failure::Invalid(format!(
            "{first}: transactions go through the connection's begin, commit and rollback"
        )));
    }
    if dialect == Dialect::Sqlite && matches!(first.as_str(), "ATTACH" | "DETACH" | "VACUUM") {
        return Err(Failure::Invalid(format!(
            "{first} is not allowed: it reaches files other than the granted database"
        )));
    }
    Ok(())
}

/// A PostgreSQL NULL of no declared type, so the server infers it from the
/// statement (a typed NULL would not go into a column of another type).
struct PgNull;

impl sqlx::Type<Postgres> for PgNull {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(Oid(0))
    }
}

impl sqlx::Encode<'_, Postgres> for PgNull {
    fn encode_by_ref(
        &self,
        _buf: &mut PgArgumentBuffer,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        Ok(sqlx::encode::IsNull::Yes)
    }
}

/// A PostgreSQL parameter's type as bound (for preparing with the same types).
fn pg_type(v: &sql::Value) -> PgTypeInfo {
    use sqlx::Type;
    match v {
        sql::Value::Null => PgNull::type_info(),
        sql::Value::Boolean(_) => <bool as Type<Postgres>>::type_info(),
        sql::Value::Integer(_) => <i64 as Type<Postgres>>::type_info(),
        sql::Value::Real(_) => <f64 as Type<Postgres>>::type_info(),
        sql::Value::Text(_) => <String as Type<Postgres>>::type_info(),
        sql::Value::Blob(_) => <Vec<u8> as Type<Postgres>>::type_info(),
    }
}

macro_rules! bind_all {
    ($query:expr, $params:expr, $null:expr) => {{
        let mut q = $query;
        for p in $params {
            q = match p {
                sql::Value::Null => q.bind($null),
                sql::Value::Boolean(b) => q.bind(*b),
                sql::Value::Integer(n) => q.bind(*n),
                sql::Value::Real(x) => q.bind(*x),
                sql::Value::Text(s) => q.bind(s.clone()),
                sql::Value::Blob(b) => q.bind(b.clone()),
            };
        }
        q
    }};
}

/// Collect a result stream into rows of cells, stopping past the cap.
async fn collect<R: sqlx::Row>(
    mut stream: BoxStream<'_, Result<R, sqlx::Error>>,
    cell: fn(&R, usize) -> Result<sql::Value, String>,
    max_rows: u64,
) -> Result<(Vec<String>, Vec<Vec<sql::Value>>), Failure> {
    let mut columns = Vec::new();
    let mut rows = Vec::new();
    while let Some(row) = stream.try_next().await? {
        if rows.len() as u64 >= max_rows {
            return Err(Failure::TooMany(max_rows));
        }
        if rows.is_empty() {
            columns = row.columns().iter().map(|c| c.name().to_string()).collect();
        }
        let cells = (0..row.len())
            .map(|i| cell(&row, i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(Failure::Invalid)?;
        rows.push(cells);
    }
    Ok((columns, rows))
}

fn unsupported_cell(column: &str, type_name: &str) -> String {
    format!(
        "column `{column}` has type {type_name}, which sql returns only as text: \
         cast it in the statement (`{column}::text`, `CAST({column} AS TEXT)`)"
    )
}

fn pg_cell(row: &PgRow, i: usize) -> Result<sql::Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(sql::Value::Null);
    }
    let ty = raw.type_info().name().to_string();
    let err = |e: sqlx::Error| e.to_string();
    Ok(match ty.as_str() {
        "BOOL" => sql::Value::Boolean(row.try_get(i).map_err(err)?),
        "INT2" => sql::Value::Integer(row.try_get::<i16, _>(i).map_err(err)?.into()),
        "INT4" => sql::Value::Integer(row.try_get::<i32, _>(i).map_err(err)?.into()),
        "INT8" => sql::Value::Integer(row.try_get(i).map_err(err)?),
        "OID" => sql::Value::Integer(row.try_get::<Oid, _>(i).map_err(err)?.0.into()),
        "FLOAT4" => sql::Value::Real(row.try_get::<f32, _>(i).map_err(err)?.into()),
        "FLOAT8" => sql::Value::Real(row.try_get(i).map_err(err)?),
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "\"CHAR\"" | "CHAR" | "CITEXT" | "UNKNOWN" => {
            sql::Value::Text(row.try_get_unchecked(i).map_err(err)?)
        }
        "BYTEA" => sql::Value::Blob(row.try_get(i).map_err(err)?),
        "JSON" | "JSONB" => {
            let v: Json = row.try_get(i).map_err(err)?;
            sql::Value::Text(v.to_string())
        }
        other => return Err(unsupported_cell(row.columns()[i].name(), other)),
    })
}

fn sqlite_cell(row: &SqliteRow, i: usize) -> Result<sql::Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(sql::Value::Null);
    }
    // The value's own storage class: SQLite's columns are not typed.
    let ty = raw.type_info().name().to_string();
    let err = |e: sqlx::Error| e.to_string();
    Ok(match ty.as_str() {
        "INTEGER" | "BOOLEAN" | "INT8" => {
            sql::Value::Integer(row.try_get_unchecked(i).map_err(err)?)
        }
        "REAL" => sql::Value::Real(row.try_get_unchecked(i).map_err(err)?),
        "BLOB" => sql::Value::Blob(row.try_get_unchecked(i).map_err(err)?),
        _ => sql::Value::Text(row.try_get_unchecked(i).map_err(err)?),
    })
}

fn mysql_cell(row: &MySqlRow, i: usize) -> Result<sql::Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(sql::Value::Null);
    }
    let ty = raw.type_info().name().to_string();
    let err = |e: sqlx::Error| e.to_string();
    Ok(match ty.as_str() {
        "BOOLEAN" => sql::Value::Boolean(row.try_get(i).map_err(err)?),
        "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "BIGINT" | "YEAR" => {
            sql::Value::Integer(row.try_get_unchecked(i).map_err(err)?)
        }
        t if t.ends_with("UNSIGNED") => {
            let n: u64 = row.try_get_unchecked(i).map_err(err)?;
            match i64::try_from(n) {
                Ok(n) => sql::Value::Integer(n),
                Err(_) => sql::Value::Text(n.to_string()),
            }
        }
        "FLOAT" => sql::Value::Real(row.try_get::<f32, _>(i).map_err(err)?.into()),
        "DOUBLE" => sql::Value::Real(row.try_get(i).map_err(err)?),
        "BINARY" | "VARBINARY" | "TINYBLOB" | "BLOB" | "MEDIUMBLOB" | "LONGBLOB" | "BIT" => {
            sql::Value::Blob(row.try_get_unchecked(i).map_err(err)?)
        }
        "CHAR" | "VARCHAR" | "TINYTEXT" | "TEXT" | "MEDIUMTEXT" | "LONGTEXT" | "ENUM" | "SET"
        | "DECIMAL" | "JSON" => sql::Value::Text(row.try_get_unchecked(i).map_err(err)?),
        other => return Err(unsupported_cell(row.columns()[i].name(), other)),
    })
}

fn pg_columns(stmt: &sqlx::postgres::PgStatement) -> Vec<String> {
    stmt.columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

impl Conn {
    async fn query(
        &mut self,
        statement: String,
        params: Vec<sql::Value>,
        max_rows: u64,
    ) -> Result<sql::Rows, Failure> {
        let text = statement.clone();
        let (columns, rows) = match self {
            Conn::Postgres(c) => {
                let q = sqlx::query::<Postgres>(AssertSqlSafe(statement.clone())).persistent(false);
                let got = collect(
                    bind_all!(q, &params, PgNull).fetch(&mut *c),
                    pg_cell,
                    max_rows,
                )
                .await?;
                if got.1.is_empty() {
                    // No row to read the columns from: prepare (without
                    // running) to learn them, with the same parameter types.
                    let types: Vec<PgTypeInfo> = params.iter().map(pg_type).collect();
                    let stmt = c
                        .prepare_with(AssertSqlSafe(text).into_sql_str(), &types)
                        .await?;
                    (pg_columns(&stmt), got.1)
                } else {
                    got
                }
            }
            Conn::Sqlite(c) => {
                let q = sqlx::query::<Sqlite>(AssertSqlSafe(statement.clone())).persistent(false);
                let got = collect(
                    bind_all!(q, &params, None::<i64>).fetch(&mut *c),
                    sqlite_cell,
                    max_rows,
                )
                .await?;
                if got.1.is_empty() {
                    let stmt = c.prepare(AssertSqlSafe(text).into_sql_str()).await?;
                    (
                        stmt.columns()
                            .iter()
                            .map(|c| c.name().to_string())
                            .collect(),
                        got.1,
                    )
                } else {
                    got
                }
            }
            Conn::MySql(c) => {
                let q = sqlx::query::<MySql>(AssertSqlSafe(statement.clone())).persistent(false);
                let got = collect(
                    bind_all!(q, &params, None::<String>).fetch(&mut *c),
                    mysql_cell,
                    max_rows,
                )
                .await?;
                if got.1.is_empty() {
                    let stmt = c.prepare(AssertSqlSafe(text).into_sql_str()).await?;
                    (
                        stmt.columns()
                            .iter()
                            .map(|c| c.name().to_string())
                            .collect(),
                        got.1,
                    )
                } else {
                    got
                }
            }
        };
        Ok(sql::Rows { columns, rows })
    }

    async fn execute(
        &mut self,
        statement: String,
        params: Vec<sql::Value>,
    ) -> Result<u64, Failure> {
        Ok(match self {
            Conn::Postgres(c) => {
                let q = sqlx::query::<Postgres>(AssertSqlSafe(statement)).persistent(false);
                bind_all!(q, &params, PgNull)
                    .execute(&mut *c)
                    .await?
                    .rows_affected()
            }
            Conn::Sqlite(c) => {
                let q = sqlx::query::<Sqlite>(AssertSqlSafe(statement)).persistent(false);
                bind_all!(q, &params, None::<i64>)
                    .execute(&mut *c)
                    .await?
                    .rows_affected()
            }
            Conn::MySql(c) => {
                let q = sqlx::query::<MySql>(AssertSqlSafe(statement)).persistent(false);
                bind_all!(q, &params, None::<String>)
                    .execute(&mut *c)
                    .await?
                    .rows_affected()
            }
        })
    }

    /// Run fixed statements (transaction control), in order.
    async fn control(&mut self, statements: &[&'static str]) -> Result<(), Failure> {
        for s in statements {
            match self {
                Conn::Postgres(c) => c.execute(*s).await.map(|_| ())?,
                Conn::Sqlite(c) => c.execute(*s).await.map(|_| ())?,
                Conn::MySql(c) => c.execute(*s).await.map(|_| ())?,
            }
        }
        Ok(())
    }

    async fn close(self) {
        let _ = match self {
            Conn::Postgres(c) => c.close().await,
            Conn::Sqlite(c) => c.close().await,
            Conn::MySql(c) => c.close().await,
        };
    }
}

/// The statements that start a transaction.
fn begin_statements(dialect: Dialect, read_only: bool) -> &'static [&'static str] {
    match (dialect, read_only) {
        (Dialect::Postgres, false) => &["BEGIN"],
        (Dialect::Postgres, true) => &["BEGIN READ ONLY"],
        (Dialect::MySql, false) => &["START TRANSACTION"],
        (Dialect::MySql, true) => &["START TRANSACTION READ ONLY"],
        // IMMEDIATE: a writer takes the write lock up front, so a
        // compare-and-swap inside cannot fail on upgrading it halfway.
        (Dialect::Sqlite, false) => &["BEGIN IMMEDIATE"],
        (Dialect::Sqlite, true) => &["PRAGMA query_only = ON", "BEGIN"],
    }
}

/// The statements that end one (`commit` or not), given how it began.
fn end_statements(dialect: Dialect, commit: bool, read_only: bool) -> &'static [&'static str] {
    match (dialect == Dialect::Sqlite && read_only, commit) {
        (true, true) => &["COMMIT", "PRAGMA query_only = OFF"],
        (true, false) => &["ROLLBACK", "PRAGMA query_only = OFF"],
        (false, true) => &["COMMIT"],
        (false, false) => &["ROLLBACK"],
    }
}

type SqlResult<T> = WtResult<Result<T, sql::SqlError>>;

impl CallState {
    fn connection(
        &mut self,
        handle: &Resource<SqlConnection>,
    ) -> WtResult<(&mut SqlConnection, SqlLimits)> {
        let limits = self.sql_access().limits;
        Ok((self.table_mut().get_mut(handle)?, limits))
    }
}

impl sql::Host for CallState {}

impl sql::HostConnection for CallState {
    async fn open(&mut self, name: String) -> SqlResult<Resource<SqlConnection>> {
        let access = self.sql_access().clone();
        let kind = self.kind_name();
        let Some(grant) = access.grants.get(&name) else {
            let granted: Vec<&str> = access.grants.shown().map(|(k, _)| k).collect();
            tracing::warn!(plugin = &*kind, name, "sql open refused: not granted");
            let why = if granted.is_empty() {
                "this call is granted no SQL connection".to_string()
            } else {
                format!("this call is granted only {}", granted.join(", "))
            };
            return Ok(Err(sql::SqlError::Denied(format!(
                "the connection {:?} is not granted: {why}",
                crate::model::display::quote(&name)
            ))));
        };
        match connect(grant, &access.limits).await {
            Ok(conn) => {
                tracing::info!(
                    plugin = &*kind,
                    key = name,
                    address = grant.shown,
                    "sql: connected"
                );
                Ok(Ok(self.table_mut().push(conn)?))
            }
            Err(e) => {
                tracing::info!(
                    plugin = &*kind,
                    key = name,
                    address = grant.shown,
                    "sql: connect failed: {e:?}"
                );
                Ok(Err(e))
            }
        }
    }

    async fn open_uri(&mut self, uri: String) -> SqlResult<Resource<SqlConnection>> {
        let access = self.sql_access().clone();
        let kind = self.kind_name();
        let grant = match uri_grant(&access, &kind, &uri) {
            Ok(grant) => grant,
            Err(why) => {
                let shown = redact_unparsed(uri.trim());
                tracing::warn!(
                    plugin = &*kind,
                    address = shown,
                    "sql open-uri refused: {why}"
                );
                return Ok(Err(sql::SqlError::Denied(format!(
                    "open-uri {}: {why}",
                    crate::model::display::quote(&shown)
                ))));
            }
        };
        match connect(&grant, &access.limits).await {
            Ok(conn) => {
                tracing::info!(
                    plugin = &*kind,
                    address = grant.shown,
                    "sql: connected (open-uri)"
                );
                Ok(Ok(self.table_mut().push(conn)?))
            }
            Err(e) => {
                tracing::info!(
                    plugin = &*kind,
                    address = grant.shown,
                    "sql: open-uri connect failed: {e:?}"
                );
                Ok(Err(e))
            }
        }
    }

    async fn dialect(&mut self, handle: Resource<SqlConnection>) -> WtResult<sql::Dialect> {
        let (conn, _) = self.connection(&handle)?;
        Ok(conn.dialect.wit())
    }

    async fn query(
        &mut self,
        handle: Resource<SqlConnection>,
        statement: String,
        params: Vec<sql::Value>,
    ) -> SqlResult<sql::Rows> {
        let kind = self.kind_name();
        let (conn, limits) = self.connection(&handle)?;
        tracing::debug!(
            plugin = &*kind,
            key = conn.key,
            statement,
            params = params.len(),
            "sql query"
        );
        if let Err(f) = check_statement(conn.dialect, &statement) {
            return Ok(Err(conn.error(f, &limits)));
        }
        let max_rows = limits.max_rows;
        let result = conn
            .bounded(&limits, move |c| {
                Box::pin(c.query(statement, params, max_rows))
            })
            .await;
        Ok(result.map_err(|f| conn.error(f, &limits)))
    }

    async fn execute(
        &mut self,
        handle: Resource<SqlConnection>,
        statement: String,
        params: Vec<sql::Value>,
    ) -> SqlResult<u64> {
        let kind = self.kind_name();
        let (conn, limits) = self.connection(&handle)?;
        tracing::debug!(
            plugin = &*kind,
            key = conn.key,
            statement,
            params = params.len(),
            "sql execute"
        );
        if let Err(f) = check_statement(conn.dialect, &statement) {
            return Ok(Err(conn.error(f, &limits)));
        }
        let result = conn
            .bounded(&limits, move |c| Box::pin(c.execute(statement, params)))
            .await;
        Ok(result.map_err(|f| conn.error(f, &limits)))
    }

    async fn begin(&mut self, handle: Resource<SqlConnection>, read_only: bool) -> SqlResult<()> {
        let kind = self.kind_name();
        let (conn, limits) = self.connection(&handle)?;
        if conn.transaction.is_some() {
            let f = Failure::Invalid("a transaction is already open on this connection".into());
            return Ok(Err(conn.error(f, &limits)));
        }
        tracing::debug!(plugin = &*kind, key = conn.key, read_only, "sql begin");
        let statements = begin_statements(conn.dialect, read_only);
        let result = conn
            .bounded(&limits, move |c| Box::pin(c.control(statements)))
            .await;
        if result.is_ok() {
            conn.transaction = Some(read_only);
        }
        Ok(result.map_err(|f| conn.error(f, &limits)))
    }

    async fn commit(&mut self, handle: Resource<SqlConnection>) -> SqlResult<()> {
        self.finish(handle, true).await
    }

    async fn rollback(&mut self, handle: Resource<SqlConnection>) -> SqlResult<()> {
        self.finish(handle, false).await
    }

    async fn drop(&mut self, handle: Resource<SqlConnection>) -> WtResult<()> {
        let limits = self.sql_access().limits;
        let kind = self.kind_name();
        let mut conn = self.table_mut().delete(handle)?;
        if let Some(read_only) = conn.transaction {
            tracing::debug!(
                plugin = &*kind,
                key = conn.key,
                "sql: rolling back the open transaction of a dropped connection"
            );
            let statements = end_statements(conn.dialect, false, read_only);
            // A failed rollback leaves nothing to do: closing the
            // connection ends the transaction on the server too.
            let _ = conn
                .bounded(&limits, move |c| Box::pin(c.control(statements)))
                .await;
        }
        if let Some(c) = conn.conn.take() {
            let _ = tokio::time::timeout(limits.statement_timeout, c.close()).await;
        }
        Ok(())
    }
}

impl CallState {
    /// Commit or roll back the open transaction.
    async fn finish(&mut self, handle: Resource<SqlConnection>, commit: bool) -> SqlResult<()> {
        let kind = self.kind_name();
        let (conn, limits) = self.connection(&handle)?;
        let Some(read_only) = conn.transaction else {
            let verb = if commit { "commit" } else { "rollback" };
            let f = Failure::Invalid(format!("{verb} without an open transaction"));
            return Ok(Err(conn.error(f, &limits)));
        };
        tracing::debug!(
            plugin = &*kind,
            key = conn.key,
            commit,
            "sql end transaction"
        );
        let statements = end_statements(conn.dialect, commit, read_only);
        let result = conn
            .bounded(&limits, move |c| Box::pin(c.control(statements)))
            .await;
        // Whatever the outcome, the transaction is over: a failed COMMIT
        // rolls back on every database this speaks to.
        conn.transaction = None;
        Ok(result.map_err(|f| conn.error(f, &limits)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn grants(keys: &[&str], locator: &mut Json, config: &mut Json, secret: Json) -> SqlGrants {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        SqlGrants::resolve(&keys, locator, config, secret.as_object().unwrap())
    }

    #[test]
    fn passwords_leave_the_plugins_copy_and_stay_with_the_host() {
        let mut locator = json!({"metadata": "postgres://tether:s3cr%40t@127.0.0.1:5432/lake"});
        let mut config = json!({"catalog": {"uri": "postgresql+psycopg://cat:pw2@db/cat"}});
        let g = grants(
            &["metadata", "catalog.uri", "absent"],
            &mut locator,
            &mut config,
            json!({}),
        );
        assert_eq!(
            locator,
            json!({"metadata": "postgres://tether@127.0.0.1:5432/lake"})
        );
        assert_eq!(
            config,
            json!({"catalog": {"uri": "postgresql+psycopg://cat@db/cat"}})
        );
        let meta = g.get("metadata").unwrap();
        assert_eq!(meta.password, Some(Password("s3cr@t".into())));
        assert!(matches!(meta.address, Ok(Address::Postgres(_))));
        assert_eq!(
            g.get("catalog.uri").unwrap().password,
            Some(Password("pw2".into()))
        );
        assert!(g.get("absent").is_none());
        // Debug never shows one.
        let debug = format!("{g:?}");
        assert!(!debug.contains("s3cr") && !debug.contains("pw2"), "{debug}");
    }

    #[test]
    fn an_object_entry_wins_over_the_backend_table_and_reaches_the_plugin_stripped() {
        let mut locator = json!({"identifier": "db.t"});
        let mut config = json!({"catalog.uri": "sqlite:////tmp/backend.db"});
        let secret = json!({"catalog": {"uri": "mysql://u:hunter22@h:3306/d"}});
        let g = grants(&["catalog.uri"], &mut locator, &mut config, secret);
        assert_eq!(config, json!({"catalog.uri": "mysql://u@h:3306/d"}));
        let grant = g.get("catalog.uri").unwrap();
        assert!(matches!(grant.address, Ok(Address::MySql(_))));
        assert_eq!(grant.password, Some(Password("hunter22".into())));
    }

    #[test]
    fn libpq_keywords_and_sqlite_paths_parse() {
        let g = SqlGrant::parse(
            "m",
            "ducklake:postgres:dbname=lake host=127.0.0.1 port=6543 user=t password='a b\\'c'",
        );
        assert_eq!(g.password, Some(Password("a b'c".into())));
        assert_eq!(
            g.shown,
            "ducklake:postgres:dbname=lake host=127.0.0.1 port=6543 user=t"
        );
        let Ok(Address::Postgres(o)) = &g.address else {
            panic!("{g:?}")
        };
        assert_eq!(o.get_port(), 6543);
        assert_eq!(o.get_database(), Some("lake"));
        for (raw, path) in [
            ("sqlite:///abs/c.db", "/abs/c.db"),
            ("sqlite:////abs/c.db", "/abs/c.db"),
            ("sqlite:/abs/c.db", "/abs/c.db"),
            ("ducklake:sqlite:/abs/c.db", "/abs/c.db"),
        ] {
            let g = SqlGrant::parse("k", raw);
            assert!(
                matches!(&g.address, Ok(Address::Sqlite(p)) if p == Path::new(path)),
                "{raw}: {g:?}"
            );
            assert_eq!(g.shown, raw);
        }
        for bad in [
            "sqlite:rel.db",
            "sqlite::memory:",
            "sqlite:///x.db?mode=rwc",
            "redis://h",
            "nothing",
        ] {
            assert!(SqlGrant::parse("k", bad).address.is_err(), "{bad}");
        }
        // An unusable value with a password is not handed on with it.
        let g = SqlGrant::parse("k", "redis://u:topsecret@h/0");
        assert!(
            !g.shown.contains("topsecret") && !format!("{:?}", g.address).contains("topsecret")
        );
    }

    #[test]
    fn uri_settings_give_a_password_to_an_address_without_one() {
        let mut locator =
            json!({"m": "postgres://tether@127.0.0.1:5/db", "n": "postgres://x:own@h/db"});
        let g = grants(&["m", "n"], &mut locator, &mut json!({}), json!({}));
        let g = g.with_uri_settings(
            |addr| {
                assert!(!addr.contains("own"), "matched on the stripped address");
                Some(
                    json!({"password_env": "PW_VAR"})
                        .as_object()
                        .unwrap()
                        .clone(),
                )
            },
            |var| (var == "PW_VAR").then(|| "from-env".to_string()),
        );
        assert_eq!(
            g.get("m").unwrap().password,
            Some(Password("from-env".into()))
        );
        assert_eq!(g.get("n").unwrap().password, Some(Password("own".into())));
    }

    #[test]
    fn mysql_credentials_are_the_servers() {
        let mut locator = json!({"url": "mysql://127.0.0.1:3307/db", "named": "mysql://bob@h:1/d"});
        let g = grants(&["url", "named"], &mut locator, &mut json!({}), json!({}));
        let g = g.with_uri_settings(
            |addr| {
                assert!(!addr.contains("bob"), "matched without the user: {addr}");
                Some(
                    json!({"user": "dolt", "password_env": "PW_VAR"})
                        .as_object()
                        .unwrap()
                        .clone(),
                )
            },
            |var| (var == "PW_VAR").then(|| "from-env".to_string()),
        );
        let url = g.get("url").unwrap();
        assert_eq!(url.password, Some(Password("from-env".into())));
        assert!(
            matches!(&url.address, Ok(Address::MySql(o)) if o.get_username() == "dolt"),
            "{url:?}"
        );
        let named = g.get("named").unwrap();
        assert!(
            matches!(&named.address, Ok(Address::MySql(o)) if o.get_username() == "bob"),
            "the address's own user stays: {named:?}"
        );
        // Another database on the same server and user shares the password.
        let mut other = json!({"url": "mysql://dolt@127.0.0.1:3307/other"});
        let known = grants(
            &["url"],
            &mut json!({"url": "mysql://dolt:pw@127.0.0.1:3307/db"}),
            &mut json!({}),
            json!({}),
        );
        let g = grants(&["url"], &mut other, &mut json!({}), json!({})).with_passwords_of(&known);
        assert_eq!(g.get("url").unwrap().password, Some(Password("pw".into())));
        let mut elsewhere = json!({"url": "mysql://dolt@127.0.0.1:3308/db"});
        let g =
            grants(&["url"], &mut elsewhere, &mut json!({}), json!({})).with_passwords_of(&known);
        assert_eq!(g.get("url").unwrap().password, None, "another server's");
    }

    #[test]
    fn statement_shapes() {
        assert_eq!(statement_shape("select 1"), ("SELECT".into(), false));
        assert_eq!(
            statement_shape("  -- c\n/* x; */ insert into t values (';');  "),
            ("INSERT".into(), false)
        );
        assert_eq!(
            statement_shape("select 1; select 2"),
            ("SELECT".into(), true)
        );
        assert_eq!(
            statement_shape("select 'a'';b'; -- tail\n"),
            ("SELECT".into(), false)
        );
        assert_eq!(
            statement_shape("select \"a;\", [b;] ;;"),
            ("SELECT".into(), false)
        );
        assert_eq!(statement_shape("(select 1)").0, "?");
        assert!(check_statement(Dialect::Sqlite, "ATTACH '/etc/x' AS y").is_err());
        assert!(check_statement(Dialect::Sqlite, "/**/vacuum into '/tmp/x'").is_err());
        assert!(check_statement(Dialect::Postgres, "begin").is_err());
        assert!(check_statement(Dialect::Postgres, "ROLLBACK TO SAVEPOINT a").is_ok());
        assert!(check_statement(Dialect::Postgres, "select 1; select 2").is_ok());
        assert!(check_statement(Dialect::Sqlite, "select 1; select 2").is_err());
    }

    #[test]
    fn responses_lose_their_credentials_and_the_host_keeps_database_ones() {
        let origin = "https://api.example.test:443";
        let mut body = json!({
            "uri": "postgresql://role:npg_s3cretpass@ep-1.example.test/neondb?sslmode=require",
            "roles": [{"name": "role", "password": "npg_s3cretpass"}],
            "connection_uris": [{
                "connection_uri": "mysql://u:mysqlpw12@db.example.test:3306/d",
                "connection_parameters": {"password": "npg_s3cretpass", "host": "h"},
            }],
            "other": "https://user:webpw@site.example.test/x",
            "plain": "postgresql://role@ep-1.example.test/neondb",
        });
        let done = strip_credentials(&mut body, "kind-a", origin);
        assert_eq!(
            done,
            Stripped {
                learned: 2,
                removed: 3
            }
        );
        let text = body.to_string();
        for secret in ["npg_s3cretpass", "mysqlpw12", "webpw"] {
            assert!(!text.contains(secret), "{text}");
        }
        let shown = body["uri"].as_str().unwrap().to_string();
        assert_eq!(
            shown,
            "postgresql://role@ep-1.example.test/neondb?sslmode=require"
        );
        let origins = vec![origin.to_string()];
        let access = SqlAccess::default().with_origins(origins.clone());
        // The kind and an origin granted to the object that fetched it.
        let grant = uri_grant(&access, "kind-a", &shown).unwrap();
        assert_eq!(grant.password, Some(Password("npg_s3cretpass".into())));
        assert!(
            uri_grant(&access, "kind-b", &shown).is_err(),
            "another kind"
        );
        let elsewhere = SqlAccess::default().with_origins(vec!["https://x:443".into()]);
        assert!(uri_grant(&elsewhere, "kind-a", &shown).is_err());
        assert!(uri_grant(&SqlAccess::default(), "kind-a", &shown).is_err());
        // Nothing made up, nothing with a password, no file-reading options.
        for denied in [
            "postgresql://role@ep-1.example.test/other?sslmode=require",
            "postgresql://admin@ep-1.example.test/neondb?sslmode=require",
            "postgresql://role:npg_s3cretpass@ep-1.example.test/neondb?sslmode=require",
            "postgresql://role@ep-1.example.test/neondb?sslmode=require&sslkey=/etc/x",
            "postgresql://role@ep-1.example.test/neondb?sslmode=require&host=evil",
            "sqlite:///tmp/x.db",
        ] {
            let why = uri_grant(&access, "kind-a", denied).unwrap_err();
            assert!(!why.contains("npg_s3cretpass"), "{why}");
        }
        // A handle the user asked for gets it back; another kind's does not.
        assert_eq!(
            with_learned_password("kind-a", &origins, &shown),
            "postgresql://role:npg_s3cretpass@ep-1.example.test/neondb?sslmode=require"
        );
        assert_eq!(with_learned_password("kind-b", &origins, &shown), shown);
        assert!(learned_secrets().iter().any(|s| &**s == "npg_s3cretpass"));
    }

    #[test]
    fn unparsed_bodies_are_checked_for_url_credentials() {
        assert!(holds_url_credentials(b"{\"uri\": \"postgres://u:p@h/d\""));
        assert!(!holds_url_credentials(
            b"postgres://u@h/d https://h/a?b=c:d@e"
        ));
        assert!(!holds_url_credentials(b"no url here: a@b"));
    }

    #[test]
    fn scrubbing_removes_every_form() {
        let forms = secret_forms(&Some(Password("p@ss word".into())));
        let text = scrub("a p@ss word b p%40ss%20word c".into(), &forms);
        assert_eq!(text, "a *** b *** c");
    }
}
