#!/usr/bin/env bash
# testserver.sh: a private PostgreSQL server for the PostgreSQL ledger's
# tests, on loopback, in a temporary folder, on a free port.
#
#   eval "$(ledger/postgres/testserver.sh start)"   # exports TRANCHE_POSTGRES_URL and TRANCHE_POSTGRES_DIR
#   go test github.com/tranche-dev/tranche/ledger/postgres/...
#   ledger/postgres/testserver.sh restart            # what the server-restart test does (fast shutdown)
#   ledger/postgres/testserver.sh restart "" immediate  # the same after an immediate shutdown (a crash)
#   ledger/postgres/testserver.sh stop               # stops the server and removes its folder
#
# start prints shell assignments on stdout and everything else on stderr.
# restart and stop take the folder from TRANCHE_POSTGRES_DIR, or as their
# argument. The server trusts every connection from loopback: it is a
# test server, for this machine's tests only, and holds nothing else.
#
# When no PostgreSQL is installed and the script runs as root with
# apt-get (CI, a container), it installs Debian's postgresql package.
# initdb refuses to run as root, so as root the server runs as the
# postgres user (runuser, or su).
set -euo pipefail

say() { printf 'testserver.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# bindir finds the folder of initdb and pg_ctl: pg_config's, Debian's
# newest /usr/lib/postgresql/N/bin, or the PATH's.
bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir 2>/dev/null || true)
    if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  fi
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return
  fi
  return 1
}

install_postgres() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    die "PostgreSQL's initdb and pg_ctl were not found; install PostgreSQL (Debian: apt-get install postgresql), or put its bin folder on the PATH"
  fi
  say "installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
}

# as_owner runs a command as the server's owner: the postgres user when
# this script runs as root, this user otherwise.
as_owner() {
  if [ "$(id -u)" != 0 ]; then "$@"; return; fi
  if command -v runuser >/dev/null 2>&1; then
    runuser -u postgres -- "$@"
  else
    su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
  fi
}

free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
  die "no free port found"
}

start() {
  local bin dir port url
  bin=$(bindir) || { install_postgres; bin=$(bindir) || die "initdb still not found after installing postgresql"; }
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/tranche-postgres.XXXXXX")
  chmod 755 "$dir"
  [ "$(id -u)" != 0 ] || chown postgres "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 128MB
fsync = on
synchronous_commit = on
log_min_messages = warning
EOF
  for try in 1 2 3 4 5; do
    port=$(free_port)
    echo "$port" >"$dir/port"
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -w -t 60 start >&2; then break; fi
    [ "$try" != 5 ] || { cat "$dir/server.log" >&2; die "the server did not start"; }
  done
  echo "$bin" >"$dir/bin"
  as_owner "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE tranche" >&2
  url="postgres://postgres@127.0.0.1:$port/tranche?sslmode=disable"
  say "PostgreSQL $("$bin/pg_ctl" --version | awk '{print $3}') on 127.0.0.1:$port, folder $dir"
  printf 'export TRANCHE_POSTGRES_URL=%q\nexport TRANCHE_POSTGRES_DIR=%q\n' "$url" "$dir"
}

folder() {
  local dir=${1:-${TRANCHE_POSTGRES_DIR:-}}
  [ -n "$dir" ] && [ -f "$dir/bin" ] || die "no server folder: give it as an argument or in TRANCHE_POSTGRES_DIR"
  echo "$dir"
}

restart() {
  local dir bin port mode=${2:-fast}
  case "$mode" in fast | immediate) ;; *) die "restart: shutdown mode $mode; accepted: fast, immediate" ;; esac
  dir=$(folder "${1:-}"); bin=$(cat "$dir/bin"); port=$(cat "$dir/port")
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -m "$mode" -w -t 60 restart >&2
}

stop() {
  local dir bin
  dir=$(folder "$@"); bin=$(cat "$dir/bin")
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >&2 || say "pg_ctl stop failed; removing the folder anyway"
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  restart) shift; restart "$@" ;;
  stop) shift; stop "$@" ;;
  *) die "usage: testserver.sh start | restart [folder [fast|immediate]] | stop [folder]" ;;
esac
