#!/bin/sh
# envbuilder replicas behind a load balancer on plain Docker (no compose, no image registry):
# one Redis, N replicas of `envbuilder serve --workers W` sharing it, nginx in front.
#
#   python3 -c "import secrets; print(secrets.token_urlsafe(32))" > deploy/api_keys.txt
#   deploy/replicas.sh build                  # the two images, FROM $BASE
#   deploy/replicas.sh up                     # Redis, $REPLICAS replicas, nginx on 127.0.0.1:$PORT
#   curl -s localhost:8080/health             # {"status":"ok",...}
#   deploy/replicas.sh kill 1                 # SIGKILL replica 1 (its episodes go on elsewhere)
#   deploy/replicas.sh down
#
# Settings (environment): BASE (the base image both images build FROM; default the one the
# Dockerfile names: envbuilder-base:bookworm on a machine without a registry), REPLICAS (2),
# WORKERS (2 per replica), PORT (8080, the balancer's on the host), KEYS (deploy/api_keys.txt),
# NAME (the prefix of every container and of the network: several stacks on one host), SPECS
# (what the replicas serve: /srv/envs, the shipped environments), PIP_CA_FILE (a PEM file of the
# certificate authorities a TLS-intercepting proxy between the build and PyPI needs).
#
# The balancer is the one nginx.conf describes (compose.yaml's), with each replica named: round
# robin, no sticky sessions, HTTP/1.1 and no buffering for the SSE streams, and the next replica
# tried when one refuses the connection or answers 503 (a dead replica, or one without Redis).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BASE=${BASE:-python:3.11-slim-bookworm}
REPLICAS=${REPLICAS:-2}
WORKERS=${WORKERS:-2}
PORT=${PORT:-8080}
KEYS=${KEYS:-$here/api_keys.txt}
NAME=${NAME:-envbuilder}
SPECS=${SPECS:-/srv/envs}
net=$NAME-net

build() {
    # PIP_CA_FILE: certificate authorities pip must trust besides the system's (a TLS proxy's).
    docker build --build-arg BASE="$BASE" --build-arg PIP_CA_PEM="$(cat "${PIP_CA_FILE:-/dev/null}")" \
        -f "$here/Dockerfile" -t envbuilder:local "$root"
    docker build --build-arg BASE="$BASE" -f "$here/infra.Dockerfile" -t envbuilder-infra:local "$here"
}

balancer_conf() {
    # nginx.conf's settings, with the replicas by name (Docker's DNS resolves each container).
    echo "events {}"
    echo "http {"
    echo "  upstream envbuilder {"
    i=1
    while [ "$i" -le "$REPLICAS" ]; do
        echo "    server $NAME-replica-$i:8080 max_fails=1 fail_timeout=5s;"
        i=$((i + 1))
    done
    echo "    keepalive 64;"
    echo "  }"
    echo "  server {"
    echo "    listen 8080;"
    echo "    location / {"
    echo "      proxy_pass http://envbuilder;"
    echo "      proxy_http_version 1.1;"
    echo "      proxy_set_header Connection \"\";"
    echo "      proxy_buffering off;"
    echo "      proxy_cache off;"
    echo "      proxy_connect_timeout 2s;"
    echo "      proxy_read_timeout 300s;"
    echo "      proxy_next_upstream error timeout http_502 http_503;"
    echo "      proxy_next_upstream_tries 3;"
    echo "      client_max_body_size 1m;"
    echo "    }"
    echo "  }"
    echo "}"
}

up() {
    [ -r "$KEYS" ] || { echo "no API keys at $KEYS (see the top of this file)" >&2; exit 2; }
    docker network create "$net" >/dev/null
    docker run -d --name "$NAME-redis" --network "$net" envbuilder-infra:local \
        redis-server --save "" --appendonly no --maxmemory-policy noeviction --protected-mode no >/dev/null
    i=1
    while [ "$i" -le "$REPLICAS" ]; do
        # The key file mounted read-only where compose puts its secret; the confinement needs
        # the two security options (README.md here says why).
        docker run -d --name "$NAME-replica-$i" --network "$net" \
            -e ENVBUILDER_STORE="redis://$NAME-redis:6379/0" \
            -v "$KEYS:/run/secrets/api_keys:ro" \
            --security-opt seccomp=unconfined --security-opt systempaths=unconfined \
            envbuilder:local envbuilder serve "$SPECS" --host 0.0.0.0 --port 8080 \
            --workers "$WORKERS" --api-key-file /run/secrets/api_keys >/dev/null
        i=$((i + 1))
    done
    conf=$(mktemp)
    balancer_conf >"$conf"
    docker create --name "$NAME-balancer" --network "$net" -p "127.0.0.1:$PORT:8080" \
        envbuilder-infra:local nginx -g "daemon off;" >/dev/null
    docker cp "$conf" "$NAME-balancer:/etc/nginx/nginx.conf"
    rm -f "$conf"
    docker start "$NAME-balancer" >/dev/null
    echo "balancer on http://127.0.0.1:$PORT ($REPLICAS replicas of $WORKERS workers, one Redis)"
}

down() {
    i=1
    while [ "$i" -le "$REPLICAS" ]; do
        docker rm -f "$NAME-replica-$i" >/dev/null 2>&1 || true
        i=$((i + 1))
    done
    docker rm -f "$NAME-balancer" "$NAME-redis" >/dev/null 2>&1 || true
    docker network rm "$net" >/dev/null 2>&1 || true
}

case "${1:-}" in
    build) build ;;
    up) up ;;
    down) down ;;
    kill) docker kill "$NAME-replica-${2:?which replica}" >/dev/null ;;
    *) echo "usage: $0 build|up|down|kill N" >&2; exit 2 ;;
esac
