# otlpgate as a static binary on a distroless base, running as a non-root user.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t otlpgate .
#   docker run --rm -p 4317:4317 -p 4318:4318 otlpgate -grpc.listen=:4317 -http.listen=:4318
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
LABEL org.opencontainers.image.version=$VERSION
COPY --from=build /src/bin/static/otlpgate /usr/local/bin/otlpgate
USER nonroot:nonroot
EXPOSE 4317 4318 8888
ENTRYPOINT ["/usr/local/bin/otlpgate", "-admin.listen=:8888", "-uds.listen=", "-file.path=/tmp/otlp.jsonl"]
