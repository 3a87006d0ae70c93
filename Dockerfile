# syntax=docker/dockerfile:1
#
# agentd container image.
#
#   docker build -t agentd:0.1.0 .
#   docker run --rm -p 50051:50051 agentd:0.1.0
#
# The builder runs the same command as CI (`cargo build --release --locked`); protoc comes from
# the protoc-bin-vendored crate, so the official Rust image needs nothing more. The runtime is
# distroless "cc" (glibc, libgcc, CA certificates; no shell, no package manager) running as the
# non-root user 65532. Base images are pinned; bump them together (Renovate/Dependabot can).

# Both stages are Debian 12: the binary links the builder's glibc dynamically, so the runtime
# must match (bookworm = distroless *-debian12).
ARG RUST_IMAGE=rust:1.95.0-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f

# --- build -------------------------------------------------------------------------------------
FROM ${RUST_IMAGE} AS builder
WORKDIR /src

COPY . .

# Cache mounts keep the crates.io download and the target directory between builds; the binary
# is copied out of the cache in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked \
 && install -D -m 0755 target/release/agentd /out/usr/local/bin/agentd \
 && install -d -m 0755 /out/etc/agentd \
 && install -d -m 0750 /out/var/lib/agentd

# --- runtime -----------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}

ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="agentd" \
      org.opencontainers.image.description="A gRPC service that runs AI agents" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=builder /out/usr/local/bin/agentd /usr/local/bin/agentd
# Config dir, read-only for agentd: /etc/agentd/agentd.toml is read when it exists (the Helm chart
# mounts it here; `docker run -v ./agentd.toml:/etc/agentd/agentd.toml:ro` works the same),
# and data dir, owned by agentd (the embedded store; mount a volume here: the Helm chart always
# does, its root filesystem is read-only).
COPY --from=builder /out/etc/agentd /etc/agentd
COPY --from=builder --chown=65532:65532 /out/var/lib/agentd /var/lib/agentd

ENV AGENTD_LISTEN=0.0.0.0:50051 \
    AGENTD_DATA_DIR=/var/lib/agentd

# Numeric, so Kubernetes can verify runAsNonRoot.
USER 65532:65532
WORKDIR /var/lib/agentd
# gRPC (agentd.v1.*, grpc.health.v1.Health, reflection), gRPC-web and the JSON mapping; and
# Prometheus /metrics when AGENTD_METRICS_LISTEN=0.0.0.0:9464 is set (the Helm chart sets it).
EXPOSE 50051 9464

ENTRYPOINT ["/usr/local/bin/agentd"]
