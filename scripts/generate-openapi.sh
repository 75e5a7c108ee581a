#!/usr/bin/env bash
# Regenerates the OpenAPI client the OfflineKitOpenAPI tests use, from the reference backend's
# document (Sources/OfflineServer/openapi.json), and records the document's SHA-256 beside it.
#
# The generated code is committed, so CI never builds swift-openapi-generator (OpenAPIKit, Yams
# and the generator add minutes to a clean build); a test fails when the document changed
# without this script being run.
#
#   bash scripts/generate-openapi.sh
#
# Builds the generator once in a scratch package (.build-openapi-generator, ignored by git), or
# uses the one SWIFT_OPENAPI_GENERATOR names (a swift-openapi-generator 1.14.3 binary).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
document="$root/Sources/OfflineServer/openapi.json"
output="$root/Tests/OfflineKitOpenAPITests/Generated"
tool="$root/.build-openapi-generator"
version="1.14.3"

generator="${SWIFT_OPENAPI_GENERATOR:-}"
if [[ -z "$generator" ]]; then
    mkdir -p "$tool"
    cat > "$tool/Package.swift" <<SWIFT
// swift-tools-version: 6.0
import PackageDescription
let package = Package(
    name: "openapi-generator-tool",
    dependencies: [.package(url: "https://github.com/apple/swift-openapi-generator", exact: "$version")],
    targets: []
)
SWIFT
    swift build --package-path "$tool" --product swift-openapi-generator
    generator="$(swift build --package-path "$tool" --show-bin-path)/swift-openapi-generator"
fi

# The generator writes every file it knows of; remove the old ones so none is left behind.
rm -f "$output"/*.swift
"$generator" generate "$document" \
    --config "$output/openapi-generator-config.yaml" \
    --output-directory "$output"
(cd "$root" && sha256sum Sources/OfflineServer/openapi.json | cut -d' ' -f1) > "$output/openapi.sha256"
echo "generated $(ls "$output"/*.swift | xargs -n1 basename | tr '\n' ' ')from $document"
