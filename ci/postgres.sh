#!/usr/bin/env bash
# Local PostgreSQL (loopback only, no Docker) for the fenced-store tests
# (stores/, docs/fenced-stores.md), for development and CI.
#
# The server is Debian's PostgreSQL 15 (/usr/lib/postgresql/15/bin),
# installed with apt-get where it is missing. It never runs as root: as root
# this script runs the server as the user `postgres` (POSTGRES_OS_USER), which
# Debian's package creates. Data, socket and log live in .postgres/ at the
# repository root (git-ignored; POSTGRES_STATE_DIR); when the server's user
# cannot reach the repository (a parent directory closed to others), in
# /tmp/krabka-postgres-PORT instead, said on stderr. Made for tests: trust
# authentication on loopback, no fsync.
#
#   ci/postgres.sh start   start (or reuse) the server; the last line on stdout
#                          is its connection URL, everything else goes to stderr
#   ci/postgres.sh url     print the URL of the running server
#   ci/postgres.sh stop    stop it (nothing if it is not running)
#
# Settings: POSTGRES_PORT (default 15432), POSTGRES_STATE_DIR, POSTGRES_BIN_DIR,
# POSTGRES_OS_USER, POSTGRES_START_TIMEOUT (seconds, default 60).
set -euo pipefail

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo_root=$(cd -- "$script_dir/.." && pwd -P)
state_dir=${POSTGRES_STATE_DIR:-$repo_root/.postgres}
port=${POSTGRES_PORT:-15432}
bin_dir=${POSTGRES_BIN_DIR:-/usr/lib/postgresql/15/bin}
os_user=${POSTGRES_OS_USER:-postgres}
start_timeout=${POSTGRES_START_TIMEOUT:-60}
db_user=krabka

die() {
    printf 'postgres.sh: error: %s\n' "$*" >&2
    exit 1
}
if ! [[ $port =~ ^[1-9][0-9]*$ ]] || ((port > 65535)); then
    die "POSTGRES_PORT must be a port number, got $port"
fi

# The server's user must reach the state directory; a repository under a
# directory closed to others gets a state directory in /tmp (unless one was
# named).
if [[ $(id -u) -eq 0 && -z ${POSTGRES_STATE_DIR:-} ]] && id "$os_user" >/dev/null 2>&1 &&
    ! runuser -u "$os_user" -- test -x "$repo_root"; then
    state_dir=/tmp/krabka-postgres-$port
    printf 'postgres.sh: %s cannot reach %s; the server state lives in %s\n' "$os_user" "$repo_root" "$state_dir" >&2
fi
data=$state_dir/data

url() {
    printf 'postgresql://%s@127.0.0.1:%s/postgres\n' "$db_user" "$port"
}

# Runs a command as the server's user (as ourselves when not root).
as_server() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u "$os_user" -- "$@"
    else
        "$@"
    fi
}

install_if_missing() {
    [[ -x $bin_dir/postgres ]] && return
    [[ $(id -u) -eq 0 ]] || die "$bin_dir/postgres is missing; install PostgreSQL 15 (apt-get install postgresql-15) or set POSTGRES_BIN_DIR"
    echo "postgres.sh: installing postgresql-15 with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2 || die "apt-get update failed"
    apt-get install -y --no-install-recommends postgresql-15 >&2 || die "apt-get install postgresql-15 failed"
    [[ -x $bin_dir/postgres ]] || die "postgresql-15 installed, but $bin_dir/postgres is still missing"
}

running() {
    [[ -f $data/postmaster.pid ]] && as_server "$bin_dir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

start() {
    install_if_missing
    if [[ $(id -u) -eq 0 ]]; then
        id "$os_user" >/dev/null 2>&1 || die "no user $os_user to run the server as (POSTGRES_OS_USER); the server refuses to run as root"
    fi
    mkdir -p "$state_dir"
    if [[ $(id -u) -eq 0 ]]; then chown "$os_user" "$state_dir"; fi
    as_server test -w "$state_dir" ||
        die "$os_user cannot write $state_dir (is every parent directory searchable by it?); set POSTGRES_STATE_DIR"
    if running; then
        echo "postgres.sh: reusing the server on port $port" >&2
        url
        return
    fi
    if [[ ! -f $data/PG_VERSION ]]; then
        rm -rf "$data"
        as_server "$bin_dir/initdb" -D "$data" --username="$db_user" --auth=trust \
            --encoding=UTF8 --locale=C --no-sync >"$state_dir/initdb.log" 2>&1 ||
            die "initdb failed; its output: $(tail -n 20 "$state_dir/initdb.log")"
    fi
    local opts="-p $port -k $state_dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
    if ! as_server "$bin_dir/pg_ctl" -D "$data" -l "$state_dir/server.log" -o "$opts" \
        -w -t "$start_timeout" start >&2; then
        die "the server did not start on port $port within ${start_timeout}s; its log: $(tail -n 20 "$state_dir/server.log" 2>/dev/null)"
    fi
    "$bin_dir/pg_isready" -h 127.0.0.1 -p "$port" -U "$db_user" -d postgres -t 10 >&2 ||
        die "the server started but does not answer on 127.0.0.1:$port"
    url
}

stop() {
    if running; then
        as_server "$bin_dir/pg_ctl" -D "$data" -m fast -w -t 30 stop >&2 || die "pg_ctl stop failed"
    fi
}

case ${1:-help} in
start) start ;;
stop) stop ;;
url)
    running || die "no server is running from $data (ci/postgres.sh start)"
    url
    ;;
help | -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "unknown command ${1}; commands: start, url, stop (ci/postgres.sh help)" ;;
esac
