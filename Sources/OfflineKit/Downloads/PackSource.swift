public import Foundation
public import OfflineCore

/// Where a pack store finds manifests and files.
///
/// ``server(_:)`` matches the folder layout OfflineServer and a plain web server share:
/// `BASE/packs/PACK/latest.json` and `BASE/packs/PACK/VERSION/PATH`. Apps with signed CDN URLs
/// supply their own closures; a URL may differ on every attempt, since resuming is tied to
/// the file's validator, not its URL.
///
/// ```swift
/// let source = PackSource(
///     manifestURL: { id in try await api.signedManifestURL(id) },
///     fileURL: { manifest, file in try await api.signedURL(manifest.id, manifest.version, file.path) })
/// ```
public struct PackSource: Sendable {
    public var manifestURL: @Sendable (_ packID: String) async throws -> URL
    public var fileURL: @Sendable (_ manifest: PackManifest, _ file: PackManifest.File) async throws -> URL

    public init(
        manifestURL: @escaping @Sendable (_ packID: String) async throws -> URL,
        fileURL: @escaping @Sendable (_ manifest: PackManifest, _ file: PackManifest.File) async throws -> URL
    ) {
        self.manifestURL = manifestURL
        self.fileURL = fileURL
    }

    /// Packs hosted under `baseURL` in the `packs/PACK/VERSION/PATH` layout.
    public static func server(_ baseURL: URL) -> PackSource {
        PackSource(
            manifestURL: { id in baseURL.appendingPathComponent("packs").appendingPathComponent(id).appendingPathComponent("latest.json") },
            fileURL: { manifest, file in
                var url = baseURL.appendingPathComponent("packs").appendingPathComponent(manifest.id).appendingPathComponent(manifest.version)
                for component in file.path.split(separator: "/") { url.appendPathComponent(String(component)) }
                return url
            }
        )
    }
}
