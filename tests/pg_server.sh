#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server, as CI does: initdb in a temporary folder,
# listening on 127.0.0.1 only on a free port, a database owned by a role with a random password,
# RECONCILER_TEST_POSTGRES naming it for the command; server and folder are gone afterwards.
#
#   bash tests/pg_server.sh pytest -q tests/store_contract   # the store contract, PostgreSQL too
#   bash tests/pg_server.sh --install pytest                  # first install Debian's postgresql
#
# Needs PostgreSQL's server programs: PG_BINDIR, else the newest /usr/lib/postgresql/*/bin
# (Debian, Ubuntu), else initdb on PATH. --install runs apt-get (as root) when none is found.
# As root the server runs as the postgres user (created if missing): PostgreSQL refuses root.
# Exits with the command's status; prints nothing of its own after the command.
set -euo pipefail

install=no
if [ "${1:-}" = "--install" ]; then
    install=yes
    shift
fi
if [ "$#" -eq 0 ]; then
    echo "usage: bash tests/pg_server.sh [--install] COMMAND [ARG...]" >&2
    exit 2
fi

find_bindir() {
    local found=""
    if [ -n "${PG_BINDIR:-}" ]; then
        found=$PG_BINDIR
    elif compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
        found=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    elif command -v initdb >/dev/null; then
        found=$(dirname "$(command -v initdb)")
    fi
    if [ -n "$found" ] && [ -x "$found/initdb" ]; then
        printf '%s\n' "$found"
    fi
}

install_postgres() {
    if [ "$(id -u)" != 0 ]; then
        echo "pg_server.sh: PostgreSQL is not installed; as root: apt-get install postgresql" >&2
        exit 2
    fi
    # only the programs: no cluster of the package's own starts on port 5432
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/reconciler-ci.conf
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get install -y -q --no-install-recommends postgresql)
    if ! "${apt[@]}" >/tmp/reconciler-pg-install.log 2>&1; then
        apt-get update -q >>/tmp/reconciler-pg-install.log 2>&1
        "${apt[@]}" >>/tmp/reconciler-pg-install.log 2>&1 || {
            tail -n 20 /tmp/reconciler-pg-install.log >&2
            exit 2
        }
    fi
}

bindir=$(find_bindir)
if [ -z "$bindir" ] && [ "$install" = yes ]; then
    install_postgres
    bindir=$(find_bindir)
fi
if [ -z "$bindir" ]; then
    echo "pg_server.sh: no initdb found (set PG_BINDIR, or install postgresql: --install)" >&2
    exit 2
fi

owner=()
if [ "$(id -u)" = 0 ]; then
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    work=$(mktemp -d /tmp/reconciler-pg.XXXXXX) # a folder the postgres user can reach
    chown postgres "$work"
    owner=(runuser -u postgres --)
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/reconciler-pg.XXXXXX")
fi
as_owner() { (cd "$work" && "${owner[@]}" "$@"); }

stop_server() {
    if [ -f "$work/data/postmaster.pid" ]; then
        as_owner "$bindir/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

secret() { od -An -tx1 -N16 /dev/urandom | tr -d ' \n'; }
password=$(secret)
secret >"$work/pwfile" # the superuser's, never used: it connects through the private socket
[ "${#owner[@]}" -eq 0 ] || chown postgres "$work/pwfile"
as_owner "$bindir/initdb" -D "$work/data" -U postgres --pwfile="$work/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-locale --no-sync \
    >"$work/initdb.log" 2>&1 || {
    cat "$work/initdb.log" >&2
    exit 2
}

free_port() {
    "${PYTHON:-python3}" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
started=no
for _ in 1 2 3 4 5; do # another program may take the free port first
    port=$(free_port)
    if as_owner "$bindir/pg_ctl" -D "$work/data" -l "$work/server.log" -w -t 60 -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$work \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start >/dev/null 2>&1; then
        started=yes
        break
    fi
done
if [ "$started" != yes ]; then
    tail -n 20 "$work/server.log" >&2
    exit 2
fi

printf "CREATE ROLE reconciler LOGIN PASSWORD '%s';\nCREATE DATABASE reconciler_test OWNER reconciler;\n" \
    "$password" |
    as_owner "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U postgres -d postgres

export RECONCILER_TEST_POSTGRES="postgresql://reconciler:$password@127.0.0.1:$port/reconciler_test"
"$@"
