#!/bin/sh
# A `krabka run` child that writes one row to PostgreSQL through the fence
# (docs/fenced-stores.md), with psql only: no helper library.
#
#   krabka -b HOST:PORT run --role billing --member host-a -- \
#       sh examples/sql/fenced-write.sh 'invoice 42'
#
# It splits KRABKA_TOKEN ("PRODUCER_ID/EPOCH", set by `krabka run`) and runs
# the fence function krabka_fence() and its own INSERT in one transaction, so
# both commit or neither does. A token older than one the database already
# accepted for KRABKA_ROLE is refused by the function, and the INSERT is
# rolled back with it.
#
# Environment: KRABKA_ROLE and KRABKA_TOKEN (from `krabka run`; set them by
# hand to write with a given token), DATABASE_URL (a libpq URL; PG* variables
# when unset), PSQL (the psql to run, default psql).
# The database needs the fence (`psql -f stores/sql/postgres.sql`) and
#   CREATE TABLE results (role text, producer_id bigint, epoch smallint, item text);
#
# Exit status: 0 written; 3 fenced (a newer token of the role reached the
# database: stop writing as this leader; nothing was written); 2 bad
# arguments or environment; another status is psql's (connection or SQL
# error; nothing was written).
set -u

die() {
    echo "fenced-write.sh: $*" >&2
    exit 2
}
[ $# -eq 1 ] || die "usage: fenced-write.sh ITEM (one argument, the row's item)"
[ -n "${KRABKA_ROLE:-}" ] || die "KRABKA_ROLE is not set (krabka run sets it)"
token=${KRABKA_TOKEN:-}
pid=${token%/*}
epoch=${token#*/}
case "$pid/$epoch" in
"$token") ;;
*) die "KRABKA_TOKEN must be PRODUCER_ID/EPOCH, got '$token'" ;;
esac
case "$pid$epoch" in
'' | *[!0-9]*) die "KRABKA_TOKEN must be PRODUCER_ID/EPOCH (two numbers), got '$token'" ;;
esac
[ -n "$pid" ] && [ -n "$epoch" ] || die "KRABKA_TOKEN must be PRODUCER_ID/EPOCH, got '$token'"

# psql's variables (:'role' and the like) are quoted by psql itself, so no
# value is pasted into the SQL text. VERBOSITY verbose prints the SQLSTATE:
# KF001 and KF002 are the fence's refusals.
errors=$(
    "${PSQL:-psql}" ${DATABASE_URL:+"$DATABASE_URL"} -X -q -v ON_ERROR_STOP=1 \
        -v role="$KRABKA_ROLE" -v pid="$pid" -v epoch="$epoch" -v item="$1" \
        2>&1 >/dev/null <<'SQL'
\set VERBOSITY verbose
BEGIN;
SELECT krabka_fence(:'role', :'pid'::bigint, :'epoch'::smallint);
INSERT INTO results (role, producer_id, epoch, item)
    VALUES (:'role', :'pid'::bigint, :'epoch'::smallint, :'item');
COMMIT;
SQL
)
status=$?
[ -z "$errors" ] || printf '%s\n' "$errors" >&2
case "$errors" in
*KF001* | *KF002*) exit 3 ;;
esac
exit "$status"
