#!/usr/bin/env bash
# Run a command with a throwaway PostgreSQL: initdb + pg_ctl in a temp dir, loopback, free port.
# Exports CARDHOUR_TEST_PG_URL for the command and always stops and removes the server.
set -euo pipefail

PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
  echo "with-postgres: installing postgresql with apt-get" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
  PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

DIR=$(mktemp -d /tmp/cardhour-pg.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
AS=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$DIR"
  AS=(runuser -u postgres --)
fi
cleanup() {
  "${AS[@]}" "$PG_BIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
"${AS[@]}" "$PG_BIN/initdb" -D "$DIR/data" -A trust -U postgres >/dev/null
"${AS[@]}" "$PG_BIN/pg_ctl" -D "$DIR/data" -w -l "$DIR/log" \
  -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
echo "with-postgres: PostgreSQL on 127.0.0.1:$PORT" >&2
export CARDHOUR_TEST_PG_URL="postgresql://postgres@127.0.0.1:$PORT/postgres"
set +e
"$@"
status=$?
set -e
exit $status
