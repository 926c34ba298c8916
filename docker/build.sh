#!/usr/bin/env bash
# Build ragbench's container image for ZenML's container orchestrators (local_docker and the like).
#
#   docker/build.sh                       # docker.io + debootstrap if missing, dockerd if not running,
#                                         # then ragbench-base (Debian bookworm minbase) and ragbench:local
#   BASE_IMAGE=python:3.11-slim docker/build.sh   # with an image registry: no debootstrap base
#   docker/build.sh --stop-dockerd        # stop the dockerd this script started (by its pid file)
#
# Settings (environment): IMAGE (default ragbench:local), BASE_IMAGE (default ragbench-base, built here
# with debootstrap from the mirror in the host's apt sources), MIRROR (override that mirror),
# REBUILD_BASE=1 (rebuild ragbench-base), PIP_EXTRA_INDEX_URL (e.g. a CPU torch index when no local torch
# wheel is found), WORK (scratch folder: rootfs, build context, dockerd log; default /tmp/docker-work).
#
# The build context is staged under $WORK/context at every build from the host's current CA
# certificates (/usr/local/share/ca-certificates) and the torch wheel found in pip's find-links folders;
# none of it is committed. Timings of each stage are printed (and appended to $WORK/build-times.log).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${IMAGE:-ragbench:local}"
BASE_IMAGE="${BASE_IMAGE:-ragbench-base}"
WORK="${WORK:-/tmp/docker-work}"
DOCKERD_PIDFILE="$WORK/dockerd.pid"
DOCKERD_LOG="$WORK/dockerd.log"
mkdir -p "$WORK"

log() { printf '[docker/build.sh] %s\n' "$*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

stop_dockerd() {
  if [[ -f "$DOCKERD_PIDFILE" ]]; then
    local pid
    pid="$(cat "$DOCKERD_PIDFILE")"
    if kill -0 "$pid" 2>/dev/null; then
      log "stopping dockerd (pid $pid)"
      kill "$pid"
      for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
    rm -f "$DOCKERD_PIDFILE"
  else
    log "no dockerd started by this script ($DOCKERD_PIDFILE missing)"
  fi
}

if [[ "${1:-}" == "--stop-dockerd" ]]; then
  stop_dockerd
  exit 0
fi

# -- (a) tools and daemon -----------------------------------------------------------------------------
need_install=()
command -v dockerd >/dev/null 2>&1 || need_install+=(docker.io)
if [[ "$BASE_IMAGE" == "ragbench-base" ]] && ! command -v debootstrap >/dev/null 2>&1; then
  need_install+=(debootstrap)
fi
if ((${#need_install[@]})); then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing ${need_install[*]} and not root with apt-get: install them first"
    exit 1
  fi
  log "installing ${need_install[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_install[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if [[ "$(id -u)" != 0 ]]; then
    log "the Docker daemon is not running and we are not root to start it"
    exit 1
  fi
  log "starting dockerd (log: $DOCKERD_LOG, pid file: $DOCKERD_PIDFILE)"
  nohup dockerd >"$DOCKERD_LOG" 2>&1 &
  echo $! >"$DOCKERD_PIDFILE"
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see $DOCKERD_LOG"; exit 1; }
fi

# -- (b) parent image from Debian's mirror ------------------------------------------------------------
if [[ "$BASE_IMAGE" == "ragbench-base" ]] \
  && { [[ "${REBUILD_BASE:-0}" == 1 ]] || ! docker image inspect ragbench-base >/dev/null 2>&1; }; then
  if [[ -z "${MIRROR:-}" ]]; then
    # the first http(s) Debian mirror in the host's apt sources (deb822 or one-line format)
    MIRROR="$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list \
      /etc/apt/sources.list.d/*.list | grep -oE 'https?://[^ ]+/debian/?' | grep -v security | head -n1 || true)"
    MIRROR="${MIRROR:-http://deb.debian.org/debian}"
  fi
  log "building ragbench-base: debootstrap --variant=minbase bookworm from $MIRROR"
  start="$(now)"
  rootfs="$WORK/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { log "debootstrap failed; see $WORK/debootstrap.log"; exit 1; }
  # apt inside the image uses the same mirror
  echo "deb $MIRROR bookworm main" >"$rootfs/etc/apt/sources.list"
  echo "deb $MIRROR bookworm-updates main" >>"$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/bin/bash"]' - ragbench-base >/dev/null
  rm -rf "$rootfs"
  log "ragbench-base built in $(elapsed "$start") s"
  echo "$(date -Is) ragbench-base $(elapsed "$start") s" >>"$WORK/build-times.log"
fi

# -- (c) the project image ----------------------------------------------------------------------------
context="$WORK/context"
rm -rf "$context"
mkdir -p "$context/certs" "$context/wheels"
cp "$REPO/docker/Dockerfile" "$REPO/requirements.txt" "$context/"
# the host's current CA certificates (an intercepting proxy's, if any): never committed, copied anew
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$context/certs/"
fi
# a local CPU torch wheel matching requirements.txt, from pip's find-links folders, if there is one
# (copied with its file's mtime so Docker's layer cache recognises it)
torch_version="$(grep -E '^torch==' "$REPO/requirements.txt" | cut -d= -f3)"
find_links="$("$REPO/.venv/bin/pip" config get global.find-links 2>/dev/null || true)"
for folder in $find_links ${FIND_LINKS:-}; do
  folder="${folder#file://}"
  for wheel in "$folder"/torch-"$torch_version"+cpu-cp311-*.whl; do
    [[ -f "$wheel" ]] && cp -p "$wheel" "$context/wheels/" && log "using $(basename "$wheel")"
  done
done
if [[ -z "$(ls -A "$context/wheels")" && -z "${PIP_EXTRA_INDEX_URL:-}" ]]; then
  log "warning: no local torch==$torch_version+cpu wheel and no PIP_EXTRA_INDEX_URL: pip will take PyPI's torch"
fi

log "building $IMAGE from $BASE_IMAGE (log: $WORK/build.log)"
start="$(now)"
if ! DOCKER_BUILDKIT=0 docker build \
  --build-arg BASE_IMAGE="$BASE_IMAGE" \
  --build-arg PIP_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL:-}" \
  -t "$IMAGE" "$context" >"$WORK/build.log" 2>&1; then
  tail -n 40 "$WORK/build.log" >&2
  log "docker build failed; full log: $WORK/build.log"
  exit 1
fi
log "$IMAGE built in $(elapsed "$start") s"
echo "$(date -Is) $IMAGE $(elapsed "$start") s" >>"$WORK/build-times.log"
