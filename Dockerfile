# syntax=docker/dockerfile:1
# Build stage: the release binary.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY migrations migrations
COPY templates templates
RUN cargo build --release --locked && cp target/release/maitred /usr/local/bin/maitred

# Runtime stage: the binary alone, run by an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data --create-home maitred
COPY --from=build /usr/local/bin/maitred /usr/local/bin/maitred
USER maitred
WORKDIR /data
ENV MAITRED_BIND=0.0.0.0 \
    MAITRED_DATA_DIR=/data \
    MAITRED_LOG_FORMAT=json
EXPOSE 8080 8081 8082
ENTRYPOINT ["maitred"]
CMD ["all"]
