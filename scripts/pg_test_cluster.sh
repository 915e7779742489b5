#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for grag's tests: no system service, no TCP port.
#
#   scripts/pg_test_cluster.sh start [DIR]   initdb (first time) and start; prints the URL
#   scripts/pg_test_cluster.sh url [DIR]     prints the URL of the running cluster (exit 1: none)
#   scripts/pg_test_cluster.sh stop [DIR]    stops it and deletes DIR
#   scripts/pg_test_cluster.sh replica DIR PRIMARY_DIR
#                                             a streaming replica (hot standby) of the cluster
#                                             running in PRIMARY_DIR, started in DIR; prints
#                                             its URL (stop it with stop DIR)
#
# DIR (default $GRAG_PG_DIR, else /tmp/grag-pg-test) holds the data, the log and the Unix socket
# the server listens on (listen_addresses is empty: nothing else can reach it). fsync is off: the
# cluster is for tests and dies with them. Idempotent: start on a running cluster only prints its
# URL, stop on a stopped one only removes DIR. initdb refuses to run as root, so as root the
# cluster runs as the `postgres` user (Debian's postgresql package creates it) and DIR is its.
# Exits 1, saying why, when the PostgreSQL server programs are not installed.
set -euo pipefail

cmd="${1:-}"
dir="${2:-${GRAG_PG_DIR:-/tmp/grag-pg-test}}"
db=grag_test

usage() {
  echo "usage: $0 start|stop|url [DIR] | replica DIR PRIMARY_DIR" >&2
  exit 2
}
[ -n "$cmd" ] || usage
case "$dir" in
  /*) ;;
  *) dir="$PWD/$dir" ;;
esac
# A Unix socket path holds at most 107 bytes.
if [ "${#dir}" -gt 80 ]; then
  echo "pg_test_cluster: $dir is too long for a Unix socket path (80 characters at most)" >&2
  exit 2
fi

# The newest installed server's programs (Debian keeps them out of PATH).
bindir=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
    bindir="$d"
    break
  fi
done
if [ -z "$bindir" ] && command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
  bindir="$(dirname "$(command -v pg_ctl)")"
fi

user="$(id -un)"
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}
if [ "$(id -u)" -eq 0 ]; then user=postgres; fi

url() { echo "postgresql:///$db?host=$dir&user=$user"; }

running() {
  [ -n "$bindir" ] && [ -f "$dir/data/PG_VERSION" ] &&
    as_owner "$bindir/pg_ctl" status -D "$dir/data" >/dev/null 2>&1
}

# Checks that a cluster can be made here, creates DIR for it (owned by whoever runs it); exits
# with the URL when one already runs there.
prepare() {
  if [ -z "$bindir" ]; then
    echo "pg_test_cluster: PostgreSQL server programs (initdb, pg_ctl) not found: install" \
      "Debian's postgresql package (scripts/setup.sh does)" >&2
    exit 1
  fi
  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "pg_test_cluster: running as root needs the postgres user (initdb refuses root)" >&2
    exit 1
  fi
  if running; then
    url
    exit 0
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  chmod 700 "$dir"
}

# Starts the server of DIR/data with the extra settings given (one string).
start_server() {
  if ! as_owner "$bindir/pg_ctl" start -w -t 30 -D "$dir/data" -l "$dir/server.log" \
    -o "-k $dir -c listen_addresses= -c fsync=off -c max_connections=200 $1" >/dev/null; then
    echo "pg_test_cluster: the server did not start:" >&2
    tail -n 20 "$dir/server.log" >&2 || true
    exit 1
  fi
}

case "$cmd" in
  start)
    prepare
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      rm -rf "$dir/data"
      if ! as_owner "$bindir/initdb" -D "$dir/data" -A trust -U "$user" -E UTF8 \
        --locale=C.UTF-8 >"$dir/initdb.log" 2>&1; then
        echo "pg_test_cluster: initdb failed:" >&2
        cat "$dir/initdb.log" >&2
        exit 1
      fi
    fi
    start_server "-c synchronous_commit=off -c full_page_writes=off"
    if ! as_owner "$bindir/psql" -h "$dir" -U "$user" -d postgres -Atqc \
      "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
      as_owner "$bindir/createdb" -h "$dir" -U "$user" "$db"
    fi
    url
    ;;
  replica)
    primary="${3:-}"
    [ -n "$primary" ] || usage
    prepare
    rm -rf "$dir/data"
    # A base backup of the primary with what a standby needs to follow it (-R: standby.signal
    # and primary_conninfo over the primary's socket).
    if ! as_owner "$bindir/pg_basebackup" -h "$primary" -U "$user" -D "$dir/data" -R -X stream \
      --checkpoint=fast >"$dir/basebackup.log" 2>&1; then
      echo "pg_test_cluster: pg_basebackup failed:" >&2
      cat "$dir/basebackup.log" >&2
      exit 1
    fi
    start_server "-c hot_standby=on"
    url
    ;;
  url)
    if running; then
      url
    else
      echo "pg_test_cluster: no cluster running in $dir" >&2
      exit 1
    fi
    ;;
  stop)
    if running; then
      as_owner "$bindir/pg_ctl" stop -D "$dir/data" -m fast -w >/dev/null
    fi
    rm -rf "$dir"
    ;;
  *)
    usage
    ;;
esac
