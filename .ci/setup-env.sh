#!/usr/bin/env bash
# CI: dependencies (Node 24 comes with them), local services, typecheck, lint, the README's test command
# against a fresh PostgreSQL database, then one boot of the built server on the embedded
# PostgreSQL (DATABASE_URL unset) answering /health.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '\n==> %s\n' "$*"; }

# --- dependencies --------------------------------------------------------------------------
log "npm ci"
# The registry here serves only this platform's build of some optional binaries.
node scripts/prune-lockfile-optionals.mjs
npm ci --no-audit --no-fund
# The project brings Node 24 itself (the `node` package); every npm script runs on it.
PROJECT_NODE="$ROOT/node_modules/.bin/node"
log "system node $(node --version), project node $("$PROJECT_NODE" --version), npm $(npm --version 2>/dev/null)"
# The README's commands run through npm: the Node they get there must be 24, whatever the system node.
NPM_NODE=$(npm exec -- node -p process.versions.node)
case "$NPM_NODE" in
  24.*) ;;
  *) echo "npm runs node $NPM_NODE, not 24: the README's commands would fail" >&2; exit 1 ;;
esac

# --- Debian packages the tests use --------------------------------------------------------
apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
# chromium: the console's browser tests (playwright-core drives /usr/bin/chromium).
apt_install chromium || echo "chromium could not be installed; browser tests will be skipped" >&2
# bubblewrap: the process driver's tenant sandbox (docs/runtime.md "Isolation").
apt_install bubblewrap || echo "bubblewrap could not be installed; agents run under their own uids only" >&2

# iproute2 and nftables: each agent's network namespace on the process driver (docs/runtime.md
# "Network"); without them agents share the host's network and the network tests are skipped.
apt_install iproute2 nftables || echo "iproute2/nftables could not be installed; agents share the host's network" >&2

# zstd and CRIU: a sleeping agent is checkpointed (compressed) and restored on wake
# (docs/runtime.md "Sleep and wake"); CRIU 4.2 is built from Debian's source (~30 s).
apt_install zstd || echo "zstd could not be installed; checkpoints stay uncompressed" >&2
if [ "$(id -u)" = 0 ]; then
  log "CRIU"
  scripts/install-criu.sh || echo "CRIU could not be built; checkpoint tests will be skipped" >&2
fi

# docker.io: the docker driver's live tests (images are built locally: no registry here).
apt_install docker.io || echo "docker.io could not be installed; docker driver tests will be skipped" >&2
# busybox-static: the shell and basic tools of locally built agent images (a framework's exec tool).
apt_install busybox-static || echo "busybox-static could not be installed; locally built agent images have no shell" >&2

# redis-server: the Redis outage fault test runs a Redis of its own (and REDIS_URL tests use it).
apt_install redis-server || echo "redis-server could not be installed; the Redis outage test will fail" >&2

# python3-venv: Hermes agents run from a venv the runtime cache makes with /usr/bin/python3.
apt_install python3-venv || echo "python3-venv could not be installed; the real Hermes test will fail" >&2

# --- local services, when installed --------------------------------------------------------
STARTED_DOCKERD=false
if command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  log "starting the Docker engine"
  dockerd >/tmp/agent-host-ci-dockerd.log 2>&1 &
  STARTED_DOCKERD=true
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start:" >&2; tail -20 /tmp/agent-host-ci-dockerd.log >&2; }
fi
stop_dockerd() {
  if [ "$STARTED_DOCKERD" = true ] && [ -f /var/run/docker.pid ]; then
    kill -TERM "$(cat /var/run/docker.pid)" 2>/dev/null || true
  fi
}
HAVE_PG=false
if command -v pg_ctlcluster >/dev/null 2>&1 && ls /etc/postgresql >/dev/null 2>&1; then
  if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
    log "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
  fi
  pg_isready -h 127.0.0.1 -p 5432 -q && HAVE_PG=true
fi
if command -v redis-server >/dev/null 2>&1; then
  if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
    log "starting Redis"
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
    for _ in $(seq 1 10); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 1; done
  fi
fi

