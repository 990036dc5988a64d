#!/usr/bin/env bash
# Build the container images of these machines offline (no registry): Debian bases made by
# mmdebstrap from the machine's own apt sources, piped to `podman import` (the renters' base and
# the marketplace apps' `app-python`), then thin stand-in layers for the catalog images
# (src/cardhour/config/demo-fleet.yaml), a crash image and one without sshd.
# Idempotent: every image carries its build key as a label and is skipped when it matches; the
# base tarball is cached under .cache/images/. See docs/dev/runtime.md.
#
#   scripts/images.sh            build what is missing or stale
#   PODMAN=... CONTAINERS_CONF=... scripts/images.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# absolute: `podman build` runs helpers in other directories
CONTAINERS_CONF=$(realpath "${CONTAINERS_CONF:-$root/scripts/containers.conf}")
export CONTAINERS_CONF
podman=${PODMAN:-podman}
packages=(python3 openssh-server iproute2 procps ca-certificates)
base=localhost/cardhour/base
app_packages=(python3 python3-pip python3-numpy espeak-ng tesseract-ocr ca-certificates)
app_base=localhost/cardhour/app-python
cache=$root/.cache/images
key_label=org.cardhour.build-key
t0=${EPOCHREALTIME/./}

say() {  # progress on stderr, with the seconds since the start
  local tenths=$(((${EPOCHREALTIME/./} - t0) / 100000))
  printf 'images: %s (%d.%ds)\n' "$*" $((tenths / 10)) $((tenths % 10)) >&2
}
label_of() {  # label_of IMAGE: its build key, "" when the image is absent
  "$podman" image inspect --format "{{ index .Labels \"$key_label\" }}" "$1" 2>/dev/null || true
}

# one build at a time (parallel test workers each run this script)
mkdir -p "$cache"
[ -e "$cache/.gitignore" ] || echo '*' >"$cache/.gitignore"
exec 9>"$cache/.lock"
flock 9

codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")

# The machine's own apt sources for $codename, as one-line "deb" entries (one-line .list files
# and deb822 .sources files; other suites, e.g. third-party repositories, are left out).
sources=$(python3 - "$codename" <<'EOF'
import glob, sys
codename = sys.argv[1]
def emit(uris, suites, comps, signed_by):
    opt = f"[signed-by={signed_by}] " if signed_by else ""
    for uri in uris:
        for suite in suites:
            if suite == codename or suite.startswith(codename + "-"):
                print(f"deb {opt}{uri} {suite} {' '.join(comps)}")
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        continue
    for line in lines:
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        signed_by = ""
        if words[0].startswith("["):
            opts = []
            while not opts or not opts[-1].endswith("]"):
                opts.append(words.pop(0))
            for opt in " ".join(opts).strip("[]").split():
                if opt.startswith("signed-by="):
                    signed_by = opt.split("=", 1)[1]
        emit([words[0]], [words[1]], words[2:], signed_by)
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in open(path).read().split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            name, value = line.split(":", 1)
            fields[name.strip().lower()] = value.split()
        if "deb" not in fields.get("types", []) or fields.get("enabled") == ["no"]:
            continue
        emit(fields.get("uris", []), fields.get("suites", []), fields.get("components", []),
             " ".join(fields.get("signed-by", [])))
EOF
)
[ -n "$sources" ] || { echo "images: no apt source for $codename on this machine" >&2; exit 1; }
mapfile -t mirrors <<<"$sources"

# 1. Debian bases: skipped when the image carries its key; the tarball is reused when cached
debian_base() {  # debian_base TAG STANDIN PACKAGE...  (STANDIN: true when it stands in for others)
  local tag=$1 standin=$2
  shift 2
  local packages=("$@") name
  name=${tag#localhost/cardhour/}
  name=${name%%:*}
  local key
  key=$(printf '%s\n' "$codename" "${packages[*]}" "$sources" "hostkeys-removed-v1" | sha256sum | cut -c1-16)
  if [ "$(label_of "$tag")" = "$key" ]; then
    say "$tag is up to date (key $key)"
    return
  fi
  local tarball=$cache/$name-$codename-$key.tar
  if [ ! -s "$tarball" ]; then
    say "mmdebstrap $codename (${packages[*]}) from ${#mirrors[@]} apt source(s)"
    # host keys are made per container by the entrypoint, never shared through the image
    mmdebstrap --quiet --format=tar --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
      --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
      "$codename" "$tarball.part" "${mirrors[@]}"
    mv "$tarball.part" "$tarball"
    say "cached $(du -h "$tarball" | cut -f1) at ${tarball#"$root"/}"
  fi
  say "podman import $tag"
  "$podman" import --quiet --change 'CMD ["/bin/bash"]' --change "LABEL $key_label=$key" \
    --change "LABEL org.cardhour.standin=$standin" "$tarball" "$tag" >/dev/null
  find "$cache" -name "$name-$codename-*.tar" ! -name "$name-$codename-$key.tar" -delete
}
debian_base "$base:$codename" true "${packages[@]}"
# marketplace apps' replicas (src/cardhour/backends/apps/container.py): Python with numpy and
# the programs the demo apps call (examples/apps); no sshd, no shell tools beyond minbase
debian_base "$app_base:$codename" false "${app_packages[@]}"
"$podman" tag "$app_base:$codename" "$app_base:latest"  # the default of marketplace.app_image
base_id=$("$podman" image inspect --format '{{.Id}}' "$base:$codename")

# 2. thin layers: rebuilt when their Containerfile, arguments or the base changed
build() {  # build TAG CONTEXT [--build-arg ...]
  local tag=$1 context=$2
  shift 2
  local layer_key
  layer_key=$(cat "$context/Containerfile" <(printf '%s\n' "$base_id" "$@") | sha256sum | cut -c1-16)
  if [ "$(label_of "$tag")" = "$layer_key" ]; then
    say "$tag is up to date"
    return
  fi
  say "podman build $tag"
  "$podman" build --quiet --pull=never --build-arg "BASE=$base:$codename" \
    --label "$key_label=$layer_key" "$@" -t "$tag" "$context" >/dev/null
}

# the catalog's image ids, read from the demo fleet so the two never drift
mapfile -t ids < <(awk '/^images:/ {on=1; next} /^[^ #]/ {on=0} on && /^  - id:/ {print $3}' \
  src/cardhour/config/demo-fleet.yaml)
[ "${#ids[@]}" -gt 0 ] || { echo "images: no image ids in demo-fleet.yaml" >&2; exit 1; }
for id in "${ids[@]}"; do
  build "localhost/cardhour/$id:latest" images/standin --build-arg "IMAGE_ID=$id"
done
build localhost/cardhour/crash:latest images/crash
build localhost/cardhour/no-sshd:latest images/no-sshd
say "done: $base:$codename, $app_base:$codename, ${ids[*]}, crash, no-sshd"
