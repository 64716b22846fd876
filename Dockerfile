# otlpgate as a static binary on a distroless base, running as a non-root user.
#   docker build -t otlpgate .
#   docker run --rm -p 4317:4317 -p 4318:4318 otlpgate -grpc.listen=:4317 -http.listen=:4318
# The build stage runs `make static`, the same target CI runs, so CI checks this build.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make static

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/static/otlpgate /usr/local/bin/otlpgate
USER nonroot:nonroot
EXPOSE 4317 4318 8888
ENTRYPOINT ["/usr/local/bin/otlpgate", "-admin.listen=:8888", "-uds.listen=", "-file.path=/tmp/otlp.jsonl"]
