//! `tether-conformance PLUGIN.wasm [--only CAPABILITY]... [--json]`: run the
//! conformance suite against a plugin component that exports the harness.
//!
//! Exit status: 0 when every check passed (skips are fine), 1 when any failed
//! or the suite could not run, 2 on a usage error.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use tether::plugin::{Runtime, RuntimeConfig};
use tether_conformance::{Options, Scratch};

#[derive(Parser, Debug)]
#[command(
    name = "tether-conformance",
    version,
    about = "Run the tether backend conformance suite against a plugin"
)]
struct Cli {
    /// The plugin component (.wasm, wasm32-wasip2, exporting tether:backend/harness).
    plugin: PathBuf,
    /// Check only this capability (FORK, conditional-ref, ...); repeatable.
    #[arg(long = "only", value_name = "CAPABILITY", value_parser = parse_capability)]
    only: Vec<String>,
    /// Print one JSON object instead of one line per check.
    #[arg(long)]
    json: bool,
    /// Where the harness makes its systems: a storage URI (`memory://NAME`,
    /// `s3://BUCKET/prefix`, an absolute path). Default: a fresh temporary
    /// directory. An `s3://` scratch takes its credentials, region and
    /// endpoint from the environment (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL,
    /// AWS_ALLOW_HTTP), as tether's last resolution level does. Repeatable:
    /// a database address (`postgres://user:pw@host/db`, `mysql://...`,
    /// `sqlite:///abs/file.db`) is granted to the harness and its objects
    /// under each of the plugin's SQL keys (describe-net) the locator leaves
    /// unset, its password kept by the host. An `http(s)://` URL (a REST
    /// catalog, an API) is granted to the harness and its objects under each
    /// of the plugin's HTTP grant keys the configuration leaves unset, plain
    /// `http://` allowed for it.
    #[arg(long, value_name = "URI")]
    scratch: Vec<String>,
    /// The `[backends.<kind>]` configuration, as JSON.
    #[arg(long, value_name = "JSON", default_value = "{}", value_parser = parse_json)]
    config: serde_json::Value,
    /// The dataset id pin ids are computed with.
    #[arg(long, value_name = "ID", default_value = tether_conformance::DEFAULT_DATASET)]
    dataset: String,
    /// How many checks run at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    jobs: usize,
    /// How long one plugin call may run before it is stopped, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        env = "TETHER_PLUGIN_TIMEOUT",
        default_value_t = 60.0
    )]
    call_timeout: f64,
    /// How long one check may take in all, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    check_timeout: f64,
}

fn parse_capability(s: &str) -> Result<String, String> {
    tether_conformance::parse_capability(s).map_err(|e| e.to_string())
}

fn parse_json(s: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(s).map_err(|e| format!("not valid JSON: {e}"))
}

fn main() -> ExitCode {
    // clap exits with 2 on usage errors itself.
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether every check passed.
async fn run(cli: Cli) -> anyhow::Result<bool> {
    for (flag, secs) in [
        ("--call-timeout", cli.call_timeout),
        ("--check-timeout", cli.check_timeout),
    ] {
        anyhow::ensure!(
            secs.is_finite() && secs > 0.0,
            "{flag} must be a positive number of seconds"
        );
    }
    let config = RuntimeConfig {
        call_timeout: Duration::from_secs_f64(cli.call_timeout),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config).context("cannot start the plugin runtime")?;
    let plugin = runtime
        .load_file(&cli.plugin)
        .await
        .context("cannot load the plugin")?;
    let (http, rest): (Vec<String>, Vec<String>) = cli
        .scratch
        .into_iter()
        .partition(|s| tether_conformance::is_http_url(s));
    let (sql, storage): (Vec<String>, Vec<String>) = rest
        .into_iter()
        .partition(|s| tether_conformance::is_sql_address(s));
    anyhow::ensure!(storage.len() <= 1, "at most one storage --scratch");
    anyhow::ensure!(sql.len() <= 1, "at most one database --scratch");
    anyhow::ensure!(http.len() <= 1, "at most one http(s) --scratch");
    let options = Options {
        only: cli.only,
        scratch: storage
            .into_iter()
            .next()
            .map_or(Scratch::TempDir, Scratch::Uri),
        sql_scratch: sql.into_iter().next(),
        http_scratch: http.into_iter().next(),
        config: cli.config,
        dataset: cli.dataset,
        jobs: cli.jobs,
        check_timeout: Duration::from_secs_f64(cli.check_timeout),
    };

    let json = cli.json;
    let mut out = std::io::stdout().lock();
    if !json {
        let d = plugin.descriptor();
        reader_gone(writeln!(
            out,
            "{} {} ({}): {}",
            d.kind,
            plugin.digest(),
            d.maturity,
            d.capabilities.join(" ")
        ))?;
    }
    // A line per check as soon as it is known. A reader that stopped
    // reading (`| head`) ends the output, not the run: the exit status is
    // still the suite's.
    let report = tether_conformance::run_with(plugin, &options, |result| {
        if !json {
            let _ = writeln!(out, "{result}");
        }
    })
    .await?;
    if json {
        reader_gone(writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report.to_json())?
        ))?;
    } else {
        reader_gone(writeln!(out, "{}", report.summary()))?;
    }
    reader_gone(out.flush())?;
    Ok(report.success())
}

/// A write to a closed pipe is no error of the suite's: the reader has all
/// it wanted.
fn reader_gone(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
