# syntax=docker/dockerfile:1
# maitred's image: the web UI built with Node, embedded into the release binary built
# with Rust, run from a slim Debian as an unprivileged user. One image for every role:
# the command picks it (all, backend, gateway, mcp).

# 1. The web UI (a Vite app): frontend/dist.
FROM node:22-bookworm-slim AS ui
WORKDIR /src/frontend
# The lock file alone first, so dependencies are reinstalled only when it changes.
COPY frontend/package.json frontend/package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

# 2. The release binary, with frontend/dist embedded at compile time.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
# The workspace's crates, with their migrations and templates.
COPY crates crates
# Cargo reads every target the manifest declares, benchmarks included.
COPY benches benches
COPY --from=ui /src/frontend/dist frontend/dist
# Cache mounts keep the registry and the build directory between image builds; the
# binary is copied out because the mount is not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin maitred \
    && cp target/release/maitred /usr/local/bin/maitred

# 3. The runtime: the binary, CA certificates (for https LLM and issuer URLs) and curl
# (for the health check), run by an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 maitred \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --create-home maitred
COPY --from=build /usr/local/bin/maitred /usr/local/bin/maitred
USER 10001:10001
WORKDIR /data
ENV MAITRED_BIND=0.0.0.0 \
    MAITRED_DATA_DIR=/data \
    MAITRED_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8080 8081 8082
# Readiness of the gateway, the last role to come up in `all`. A container running
# one role sets its own check (docker-compose.yml does, per service).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${MAITRED_GATEWAY_PORT:-8081}/readyz" >/dev/null || exit 1
# maitred handles SIGTERM itself (answers get their grace period), so it can be PID 1.
STOPSIGNAL SIGTERM
ENTRYPOINT ["maitred"]
CMD ["all"]
