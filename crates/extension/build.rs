//! Generates the `envoygateway.extension` client and server from the
//! vendored `.proto` files without protoc: `protox` compiles them, resolving
//! the Envoy imports from the descriptor set envoy-types 0.7.7 was generated
//! from (vendored by the translate crate), and the Envoy message types are
//! mapped onto envoy-types so the wire encoding is envoy-types' own.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let envoy_set = manifest.join("../translate/descriptors/envoy-types-0.7.7.bin");
    let service = manifest.join("proto/extension/service.proto");
    let context = manifest.join("proto/extension/context.proto");
    for p in [&envoy_set, &service, &context] {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    let mut resolver = protox::file::ChainFileResolver::new();
    // `service.proto` imports "proto/extension/context.proto": the include
    // root is the crate directory so the files stay byte-identical to
    // Envoy Gateway's.
    resolver.add(protox::file::IncludeFileResolver::new(manifest.clone()));
    resolver.add(protox::file::DescriptorSetFileResolver::decode(
        std::fs::read(&envoy_set)?.as_slice(),
    )?);
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true).include_source_info(false);
    compiler.open_files(["proto/extension/service.proto", "proto/extension/context.proto"])?;
    // The descriptor set with its imports, for the drift test (a
    // prost-reflect pool needs the Envoy files the messages refer to).
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("extension_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    // Every imported package is envoy-types' (Envoy's and the annotation
    // packages Envoy's files import), so only `envoygateway.extension`
    // is generated.
    let fds = compiler.file_descriptor_set();

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .extern_path(".envoy", "::envoy_types::pb::envoy")
        .extern_path(".udpa", "::envoy_types::pb::udpa")
        .extern_path(".validate", "::envoy_types::pb::validate")
        .extern_path(".xds", "::envoy_types::pb::xds")
        .compile_fds(fds)?;
    Ok(())
}
