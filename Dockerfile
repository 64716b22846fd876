# otlpgate as a static binary on a distroless base, running as a non-root user.
#   make image IMAGE=registry.example.com/otlpgate     (passes VERSION and COMMIT from git)
#   docker run --rm -p 4317:4317 -p 4318:4318 -p 8888:8888 registry.example.com/otlpgate
# The default command listens on every interface of the container (otlpgate's own defaults are
# 127.0.0.1, which nothing outside the container reaches) and, with no -dest, writes what it
# receives to /tmp/otlp.jsonl. Arguments given to `docker run` or a pod's args replace that
# command whole, so they name the listen addresses again (deploy/kubernetes does).
# The build stage runs `make static`, the same target CI runs, so CI checks this build.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git stays out of the build context (.dockerignore): the version comes in as arguments.
ARG VERSION=unknown
ARG COMMIT=unknown
RUN make static VERSION=$VERSION COMMIT=$COMMIT

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=unknown
ARG COMMIT=unknown
LABEL org.opencontainers.image.version=$VERSION org.opencontainers.image.revision=$COMMIT
COPY --from=build /src/bin/static/otlpgate /usr/local/bin/otlpgate
USER nonroot:nonroot
EXPOSE 4317 4318 8888
ENTRYPOINT ["/usr/local/bin/otlpgate"]
CMD ["-grpc.listen=:4317", "-http.listen=:4318", "-admin.listen=:8888", "-uds.listen=", "-file.path=/tmp/otlp.jsonl"]
