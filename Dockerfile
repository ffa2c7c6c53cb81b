# The read gateway as a container image: a static binary on distroless,
# run as a non-root user.
#
#   docker build -t tailgate .
#   docker run --rm -p 8080:8080 -p 9090:9090 tailgate \
#     -backends http://replica-a:8080,http://replica-b:8080
#
# Arguments after the image name are more serve flags (-backends is
# required; -config FILE reads the rest from YAML, see
# deploy/kubernetes/). Build from a clone: the toolchain stamps the
# binary's version and revision from .git (tailgate version,
# tailgate_build_info); a git worktree's .git points outside the build
# context, so there add -buildvcs=false to the go build line.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The build CI checks: cmd/tailgate's TestDockerfile wants this very line,
# and lists its packages with CGO_ENABLED=0 (no runtime/cgo: static).
RUN CGO_ENABLED=0 go build -o /out/tailgate ./cmd/tailgate

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/tailgate /tailgate
# nonroot is 65532:65532 in distroless; numeric, so that Kubernetes can
# check runAsNonRoot without resolving the name.
USER 65532:65532
# Client traffic, and the admin listener (/healthz, /readyz, /metrics).
EXPOSE 8080 9090
# Inside the container only: the gateway's own defaults are 127.0.0.1,
# which no one outside the container could reach.
ENTRYPOINT ["/tailgate", "serve", "-listen", "0.0.0.0:8080", "-admin", "0.0.0.0:9090"]
