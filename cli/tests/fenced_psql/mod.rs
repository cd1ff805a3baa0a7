//! `examples/sql/fenced-write.sh` as the child of `krabka run`, writing to
//! the real PostgreSQL (`KRABKA_POSTGRES_URL`, from `ci/postgres.sh start`)
//! through the fence's SQL function with psql: a deposed leader's token is
//! refused by the database, and its row never lands.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{krabka, lines, stdout_json, temp_log, unique, until_lines, Runner};

/// The server's URL; fails the test loudly when it is not set.
fn postgres_url() -> String {
    std::env::var("KRABKA_POSTGRES_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .expect(
            "KRABKA_POSTGRES_URL is not set: start a server with `ci/postgres.sh start` and \
             export the URL it prints last (ci/test.sh does)",
        )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `url` with its connections' search_path set to `schema`.
fn in_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// psql on `url` running `args`; panics with its stderr when it fails.
fn psql(url: &str, args: &[&str]) -> String {
    let out = Command::new("psql")
        .arg(url)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-A", "-t"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running psql (PostgreSQL's client; ci/postgres.sh installs it)");
    assert!(
        out.status.success(),
        "psql {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The rows of `results`, in insertion order, as `item token` lines.
fn rows(url: &str) -> Vec<String> {
    psql(
        url,
        &[
            "-c",
            "SELECT item || ' ' || producer_id || '/' || epoch FROM results ORDER BY n",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

fn until_rows(url: &str, n: usize, within: Duration) -> Vec<String> {
    let started = Instant::now();
    loop {
        let r = rows(url);
        if r.len() >= n {
            return r;
        }
        assert!(
            started.elapsed() < within,
            "{} row(s) after {within:?}, wanted {n}: {r:?}",
            r.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The example, run by hand with `token` as KRABKA_TOKEN.
fn write_by_hand(url: &str, role: &str, token: &str, item: &str) -> Output {
    Command::new("sh")
        .arg(repo().join("examples/sql/fenced-write.sh"))
        .arg(item)
        .env("DATABASE_URL", url)
        .env("KRABKA_ROLE", role)
        .env("KRABKA_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .expect("running examples/sql/fenced-write.sh")
}

/// The child snippet: the example writes `item`, then the child stays (as
/// a leader's work would) until krabka stops it.
fn child(url: &str, item: &str) -> String {
    format!(
        "DATABASE_URL='{url}' sh '{}' '{item}' && exec sleep 600",
        repo().join("examples/sql/fenced-write.sh").display()
    )
}

#[test]
fn a_deposed_leaders_psql_write_is_refused_by_the_fence() {
    super::ensure_topic();
    let admin = postgres_url();
    let schema = unique("cli_psql").replace('-', "_");
    psql(&admin, &["-c", &format!("CREATE SCHEMA {schema}")]);
    let url = in_schema(&admin, &schema);
    let migration = repo().join("stores/sql/postgres.sql");
    psql(&url, &["-f", &migration.display().to_string()]);
    psql(
        &url,
        &[
            "-c",
            "CREATE TABLE results (n bigserial PRIMARY KEY, role text, \
                producer_id bigint, epoch smallint, item text)",
        ],
    );

    let role = unique("cli-psql");
    let log = temp_log("psql");
    let a = Runner::start(&role, "a", &log, &child(&url, "a-1"));
    let first = until_lines(&log, 1, Duration::from_secs(30));
    let token_a = first[0].split(' ').nth(1).unwrap().to_owned();
    until_rows(&url, 1, Duration::from_secs(10));
    let b = Runner::start(&role, "b", &log, &child(&url, "b-1"));
    let started = Instant::now();
    while stdout_json(&krabka(&["state", &role, "--json"]))["roster"]
        .as_array()
        .map_or(0, Vec::len)
        < 2
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "b never queued"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // a steps down (SIGTERM: its child stopped, the role resigned); b leads
    // with a newer token and its child writes.
    a.signal(libc::SIGTERM);
    a.wait(Duration::from_secs(30));
    let both = until_lines(&log, 2, Duration::from_secs(15));
    assert!(both[1].starts_with("b "), "{both:?}");
    let token_b = both[1].split(' ').nth(1).unwrap().to_owned();
    until_rows(&url, 2, Duration::from_secs(10));

    // a's token, used after b's first write (a zombie of a's child, or a
    // script run by hand with an old environment): refused, nothing lands.
    let stale = write_by_hand(&url, &role, &token_a, "a-late");
    let err = String::from_utf8_lossy(&stale.stderr);
    assert_eq!(
        stale.status.code(),
        Some(3),
        "the fence must refuse {token_a}: {err}"
    );
    assert!(
        err.contains("KF001") && err.contains(&token_a) && err.contains(&token_b),
        "{err}"
    );
    // The current token by hand still writes: the refusal was the fence's.
    let current = write_by_hand(&url, &role, &token_b, "b-2");
    assert!(
        current.status.success(),
        "{}",
        String::from_utf8_lossy(&current.stderr)
    );
    assert_eq!(
        rows(&url),
        [
            format!("a-1 {token_a}"),
            format!("b-1 {token_b}"),
            format!("b-2 {token_b}")
        ]
    );
    assert_eq!(lines(&log).len(), 2);

    b.signal(libc::SIGTERM);
    b.wait(Duration::from_secs(30));
    psql(&admin, &["-c", &format!("DROP SCHEMA {schema} CASCADE")]);
}
