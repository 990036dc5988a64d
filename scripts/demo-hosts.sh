#!/usr/bin/env bash
# `make demo-hosts`: the platform on the `hosts` backend with two local agents on STAND-IN GPUs
# (real Podman containers, fake /dev/nvidiaN by CDI), so you can launch and `ssh` into a real
# container on any Debian machine. Two "hosts" = two `cardhour agent` processes on 127.0.1.2
# and 127.0.1.3. Ctrl-C stops everything and removes the agents' containers and CDI specs.
#
#   scripts/demo-hosts.sh [DATA_DIR]      (default .cardhour-hosts; needs root for podman)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/.venv/bin
data=$(realpath -m "${1:-$root/.cardhour-hosts}")
port=${CARDHOUR_PORT:-8000}
url=http://127.0.0.1:$port
mkdir -p "$data"
export CARDHOUR_AGENT__CONTAINERS_CONF=$root/scripts/containers.conf
export CARDHOUR_MARKETPLACE__CONTAINERS_CONF=$root/scripts/containers.conf
pids=()

stop() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for host in box1 box2; do
    podman ps -aq --filter "label=org.cardhour.host=$host" | xargs -r podman rm -f -t 2 >/dev/null
    rm -rf "/var/run/cdi/$host.standin.cardhour-gpu.json" "/var/run/cdi/$host.standin.cardhour-gpu.d"
  done
  echo "demo-hosts: stopped (state kept in $data; rm -rf it to start afresh)" >&2
}
trap stop EXIT INT TERM

# Renters may also run their own images from localhost/cardhour (`make images` builds them).
"$bin/python" - "$data/fleet.yaml" <<'EOF'
import sys, yaml
from cardhour.settings import default_fleet_text
fleet = yaml.safe_load(default_fleet_text())
fleet["registries"] = ["localhost/cardhour"]
open(sys.argv[1], "w").write(yaml.safe_dump(fleet, sort_keys=False))
EOF
# a 2-node H100 cluster holds 30.40 CNY for its first hour: the demo gives 100
CARDHOUR_FLEET_FILE=$data/fleet.yaml CARDHOUR_MARKETPLACE__DEMO_APPS=false \
  CARDHOUR_TRIAL_CREDIT=${CARDHOUR_TRIAL_CREDIT:-100.00} \
  "$bin/cardhour" up --backend hosts --port "$port" --data-dir "$data/server" \
  >"$data/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  grep -q "cardhour is up" "$data/server.log" 2>/dev/null && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$data/server.log" >&2; exit 1; }
  sleep 0.2
done
password=$(cat "$data/server/admin-password")
export HOME=$data  # the admin's CLI login stays in the demo's folder
"$bin/cardhour" login --url "$url" --email admin@cardhour.local --password "$password" >/dev/null
n=2
for host in box1 box2; do
  args=(--server "$url" --state-dir "$data/$host" --address "127.0.1.$n" --standin-gpus H100:8)
  if [ ! -e "$data/$host/credential.json" ]; then
    token=$("$bin/cardhour" admin hosts add "$host" --dc bj1 --ib-leaf bj1-leaf1 --json |
      "$bin/python" -c 'import json, sys; print(json.load(sys.stdin)["token"])')
    args+=(--token "$token")
  fi
  "$bin/cardhour" agent "${args[@]}" >"$data/$host.log" 2>&1 &
  pids+=($!)
  n=$((n + 1))
done
for _ in $(seq 150); do
  ready=$("$bin/cardhour" admin hosts list --json | "$bin/python" -c \
    'import json, sys; print(sum(h["state"] == "ready" for h in json.load(sys.stdin)))')
  [ "$ready" = 2 ] && break
  sleep 0.2
done
"$bin/cardhour" admin hosts list
cat <<EOF

cardhour is up at $url on two hosts with STAND-IN GPUs (real containers, fake devices).
  admin     admin@cardhour.local  password: $password
  logs      $data/server.log, $data/box1.log, $data/box2.log

Try it from another terminal:
  $bin/cardhour signup --url $url
  $bin/cardhour ssh-keys add ~/.ssh/id_ed25519.pub
  $bin/cardhour launch --gpu H100:2 --name demo --port 8888
  $bin/cardhour ssh demo
  $bin/cardhour down demo
  $bin/cardhour launch --gpu H100:8 --nodes 2 --name job    # a cluster: one container per box
  $bin/cardhour ssh job -- ssh job-worker1 hostname

Press Ctrl-C to stop.
EOF
wait "${pids[0]}"
