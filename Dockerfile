# The portcullis image for Kubernetes mode (charts/portcullis). No image is
# published: build and push your own (README, "Kubernetes quickstart"):
#
#   docker build -t registry.example.com/portcullis:0.1.0 .
#   docker push registry.example.com/portcullis:0.1.0
#
# The controller does not run Envoy in its pod (`--no-envoy`): the image
# holds the portcullis binary only.
FROM docker.io/library/rust:1.92-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p portcullis \
    && install -D target/release/portcullis /out/portcullis

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/portcullis /usr/local/bin/portcullis
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/portcullis"]
