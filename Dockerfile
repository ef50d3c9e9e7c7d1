# kvorum's container image: the static binary and nothing else.
#
# Built by `make image`, which first builds bin/kvorum with CGO_ENABLED=0 and
# puts it, with an empty data directory, in the build context (bin/image):
#
#   make image                 # kvorum:<version> and kvorum:latest
#   docker run --rm -p 6379:6379 kvorum:latest      # a single-node cluster
#
# No base image: kvorum needs no libc, shell, CA bundle or /etc/passwd. It
# runs as an unprivileged numeric user; /data (the volume) is owned by it.
# A cluster: deploy/compose.yaml, deploy/kubernetes, and README.md's "Deploy"
# section.
FROM scratch

ARG VERSION=unknown
LABEL org.opencontainers.image.title="kvorum" \
      org.opencontainers.image.description="Raft-replicated key-value store speaking the Redis protocol" \
      org.opencontainers.image.version="${VERSION}"

COPY kvorum /kvorum
# An empty directory from the build context: FROM scratch has no mkdir or
# chown to run, so ownership comes with the copy.
COPY --chown=10001:10001 data /data

USER 10001:10001
WORKDIR /data
VOLUME /data

# Client (Redis protocol), peer (Raft between nodes), admin HTTP.
EXPOSE 6379 7379 8379

ENTRYPOINT ["/kvorum"]
# Node 1 of a single-node cluster, listening on all of the container's
# interfaces. For a cluster, replace the command: every node needs --id,
# --initial-cluster and a --peer-addr the others can dial
# (deploy/compose.yaml).
CMD ["start", "--id", "1", "--data-dir", "/data", "--client-addr", "0.0.0.0:6379", "--peer-addr", "0.0.0.0:7379", "--admin-addr", "0.0.0.0:8379", "--log-level", "info"]
