#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for Nexus: for the tests, and for trying the PostgreSQL ledger.
#
#   scripts/postgres.sh start [DIR]   initdb (if DIR has no cluster yet) and start it on a free port (a
#                                     restart after `stop` keeps the port it had, while that port is free);
#                                     prints the URL to use, e.g.
#                                     NEXUS_DATABASE_URL=postgresql://nexus@127.0.0.1:PORT/nexus
#   scripts/postgres.sh stop [DIR]    stop it (the files stay; `rm -rf DIR` removes them)
#   scripts/postgres.sh url [DIR]     print the URL of a running one
#   scripts/postgres.sh crash-restart [DIR]  pg_ctl restart -m immediate (a server crash, for fault tests)
#
# DIR defaults to $NEXUS_PG_DIR or $TMPDIR/nexus-postgres-UID (as root, a directory the postgres user can
# reach: not under /root). Uses Debian's postgresql package (PG_BIN overrides where
# initdb and pg_ctl are). initdb refuses to run as root, so as root the cluster belongs to the `postgres`
# user (made by the package) and the commands run as that user. Authentication is `trust` on 127.0.0.1
# and the socket in DIR: a cluster for one machine's tests, not for a server.
set -euo pipefail

cmd=${1:-start}
dir=${2:-${NEXUS_PG_DIR:-${TMPDIR:-/tmp}/nexus-postgres-$(id -u)}}
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
if [ -z "$bin" ] || [ ! -x "$bin/pg_ctl" ]; then
  echo "postgres.sh: PostgreSQL is not installed (apt-get install postgresql), or set PG_BIN" >&2
  exit 2
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

url_of() {
  echo "postgresql://nexus@127.0.0.1:$(cat "$dir/port")/nexus"
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_owner "$bin/initdb" -D "$dir/data" -U nexus -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log"
    fi
    if as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      url_of
      exit 0
    fi
    # a restarted cluster keeps its port (its URL is in users' environments and running servers); a new
    # one, or one whose port another program took meanwhile, gets a free port (said on stderr)
    free_port='import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); print(s.getsockname()[1])'
    old_port=$(cat "$dir/port" 2>/dev/null || true)
    if [ -n "$old_port" ] && port=$(python3 -c "$free_port" "$old_port" 2>/dev/null); then
      :
    else
      port=$(python3 -c "$free_port" 0)
      [ -n "$old_port" ] && echo "postgres.sh: port $old_port is taken now; the cluster moves to $port" >&2
    fi
    echo "$port" >"$dir/port"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off -c full_page_writes=off" \
      start >/dev/null
    as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U nexus -d postgres -qtAc \
      "SELECT 1 FROM pg_database WHERE datname = 'nexus'" | grep -q 1 ||
      as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U nexus nexus
    url_of
    ;;
  stop)
    [ -f "$dir/data/PG_VERSION" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    ;;
  crash-restart)
    # the server dies at once (no shutdown checkpoint: it recovers from its WAL) and starts again, same port
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 60 restart >/dev/null
    ;;
  url)
    url_of
    ;;
  *)
    echo "usage: scripts/postgres.sh start|stop|crash-restart|url [DIR]" >&2
    exit 2
    ;;
esac
