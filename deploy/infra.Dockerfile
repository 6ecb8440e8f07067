# Redis and nginx for deploy/replicas.sh, from Debian's packages on the base the server image
# uses: nothing is pulled from an image registry (the apt repositories are enough).
#
#   docker build -f deploy/infra.Dockerfile -t envbuilder-infra:local deploy
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server nginx-light \
 && rm -rf /var/lib/apt/lists/* \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
