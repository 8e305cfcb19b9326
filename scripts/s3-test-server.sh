#!/usr/bin/env bash
# Installs (if needed) and starts an S3-compatible server on loopback for the sync tests.
#
#   scripts/s3-test-server.sh install        # pip install moto[server] (pinned major), nothing else
#   scripts/s3-test-server.sh start [PORT]   # start moto_server on 127.0.0.1:PORT (default 5123),
#                                            # wait until it answers, print the env to export
#   scripts/s3-test-server.sh stop           # stop the server started by `start`
#
# The sync tests start their own moto_server (one per test, on a free port, with its request log
# read to count uploads); they only need the `moto_server` executable on PATH, or its path in
# CLIMA_SYNC_MOTO_SERVER. `install` is what CI runs. `start` is for trying the CLI by hand:
#   eval "$(scripts/s3-test-server.sh start)"
#   clima-artifacts sync push run/ s3://test-bucket/run1
set -euo pipefail

MOTO_SPEC='moto[server]>=5,<6'
STATE_DIR="${TMPDIR:-/tmp}/clima-s3-test-server"

install() {
    if command -v moto_server >/dev/null 2>&1; then
        echo "moto_server already installed: $(command -v moto_server)" >&2
        return 0
    fi
    python3 -m pip install --quiet "$MOTO_SPEC" >&2
    # pyenv shims need a rehash before a new console script is on PATH.
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
    command -v moto_server >/dev/null 2>&1 || {
        echo "error: moto_server is not on PATH after pip install; add the pip scripts folder to PATH" >&2
        exit 1
    }
    echo "installed moto_server: $(command -v moto_server)" >&2
}

start() {
    local port="${1:-5123}"
    install
    mkdir -p "$STATE_DIR"
    moto_server -H 127.0.0.1 -p "$port" >"$STATE_DIR/server.log" 2>&1 &
    echo $! >"$STATE_DIR/pid"
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            # Create the bucket (moto does not check signatures).
            local bucket="${CLIMA_S3_TEST_BUCKET:-test-bucket}"
            exec 3<>"/dev/tcp/127.0.0.1/$port"
            printf 'PUT /%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' "$bucket" "$port" >&3
            head -c 200 <&3 | head -1 >&2
            exec 3<&-
            cat <<ENV
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
export AWS_ALLOW_HTTP=true
export AWS_ACCESS_KEY_ID=testing
export AWS_SECRET_ACCESS_KEY=testing
export AWS_REGION=us-east-1
ENV
            echo "moto_server running on 127.0.0.1:$port (pid $(cat "$STATE_DIR/pid"), log $STATE_DIR/server.log); bucket s3://${CLIMA_S3_TEST_BUCKET:-test-bucket} created" >&2
            return 0
        fi
        sleep 0.1
    done
    echo "error: moto_server did not answer on 127.0.0.1:$port within 10 s; see $STATE_DIR/server.log" >&2
    exit 1
}

stop() {
    if [[ -f "$STATE_DIR/pid" ]]; then
        kill "$(cat "$STATE_DIR/pid")" 2>/dev/null || true
        rm -f "$STATE_DIR/pid"
    fi
}

case "${1:-}" in
    install) install ;;
    start) shift; start "$@" ;;
    stop) stop ;;
    *) echo "usage: $0 install | start [PORT] | stop" >&2; exit 2 ;;
esac
