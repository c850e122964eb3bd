#!/usr/bin/env bash
# A Docker engine for streamlab's container runtime, idempotently (make docker-setup, .ci/run).
#   - an engine already answers `docker info` (Docker Desktop, a system service): nothing to do;
#   - otherwise, on Debian as root: install docker.io (and Compose v1, the only Compose Debian
#     ships) if missing, clear stale pid files, start dockerd in the background, poll until it answers.
# dockerd runs without a bridge, iptables or masquerading: streamlab's containers use the host
# network only and bind 127.0.0.1, and these machines allow no iptables changes.
set -euo pipefail
LOG=${DOCKERD_LOG:-/var/log/streamlab-dockerd.log}

have_compose() { docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null; }
as_root_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

missing=()
command -v docker >/dev/null || missing+=(docker.io)
if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null || missing+=(docker.io)
fi
have_compose || missing+=(docker-compose)
if ((${#missing[@]})); then
    if ! as_root_apt; then
        echo "docker-setup: missing ${missing[*]}: install Docker (engine and Compose) yourself;" \
             "this script installs them only on Debian as root" >&2
        exit 1
    fi
    echo "docker-setup: installing ${missing[*]} ..."
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi

if docker info >/dev/null 2>&1; then
    echo "docker-setup: engine $(docker info --format '{{.ServerVersion}}') answers"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "docker-setup: no engine answers and only root can start dockerd here" >&2
    exit 1
fi
# A live dockerd (not a zombie left by one that was killed) is given time to answer; otherwise one
# is started. Checked on every poll, so an engine that dies while we wait is replaced once.
dockerd_alive() { ps -C dockerd -o stat= 2>/dev/null | grep -qv '^Z'; }
started=0
for _ in $(seq 300); do  # answers in < 0.5 s on these machines; allow 30 s
    if docker info >/dev/null 2>&1; then
        echo "docker-setup: engine $(docker info --format '{{.ServerVersion}}') answers"
        exit 0
    fi
    if ! dockerd_alive && ((started < 2)); then
        # Pid files left by an engine that died make dockerd and containerd refuse to start.
        rm -f /var/run/docker.pid /run/docker/containerd/containerd.pid \
              /var/run/docker/containerd/containerd.pid
        echo "docker-setup: starting dockerd (log: $LOG)"
        setsid nohup dockerd --bridge=none --iptables=false --ip-masq=false >>"$LOG" 2>&1 </dev/null &
        started=$((started + 1))
    fi
    sleep 0.1
done
echo "docker-setup: dockerd did not answer within 30 s; its log says:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
