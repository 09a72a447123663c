# kube-cdc: a static binary on an empty base image.
#
#   make image    (docker build -t kube-cdc:VERSION --build-arg VERSION=… --build-arg COMMIT=… --build-arg DATE=… .)
#
# The final image holds only the binary, CA certificates (for TLS to the apiserver, Kafka
# and PostgreSQL) and a passwd/group entry for the unprivileged uid 65532, so it runs under
# runAsNonRoot and a read-only root filesystem.

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first: this layer survives source-only changes.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
# The build's identity (make image passes hack/version's; RELEASING.md, "Versions").
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/kube-cdc/kube-cdc/internal/version.Version=${VERSION} -X github.com/kube-cdc/kube-cdc/internal/version.Commit=${COMMIT} -X github.com/kube-cdc/kube-cdc/internal/version.Date=${DATE}" \
      -o /out/kube-cdc ./cmd/kube-cdc
# uid/gid 65532 ("nonroot", as in distroless) and a working directory it owns: the file
# checkpoint store's default path (kube-cdc-state.db) is relative to it.
RUN mkdir -p /out/etc /out/var/lib/kube-cdc \
 && echo 'nonroot:x:65532:65532:nonroot:/var/lib/kube-cdc:/sbin/nologin' > /out/etc/passwd \
 && echo 'nonroot:x:65532:' > /out/etc/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/etc/passwd /out/etc/group /etc/
COPY --from=build --chown=65532:65532 /out/var/lib/kube-cdc /var/lib/kube-cdc
COPY --from=build /out/kube-cdc /kube-cdc
WORKDIR /var/lib/kube-cdc
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["/kube-cdc"]
CMD ["run", "-c", "/etc/kube-cdc/config.yaml"]
