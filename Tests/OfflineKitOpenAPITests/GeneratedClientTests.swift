import Crypto
import Foundation
import Testing

/// The generated client is committed (CI does not build swift-openapi-generator); this keeps it
/// generated from the document the server's own tests check against the router.
@Suite("The generated client follows the reference backend's document")
struct GeneratedClientTests {
    static let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the document's SHA-256 is the one the committed client was generated from")
    func generatedFromTheDocument() throws {
        let document = try Data(contentsOf: Self.root.appending(path: "Sources/OfflineServer/openapi.json"))
        let digest = SHA256.hash(data: document).map { String(format: "%02x", $0) }.joined()
        let recorded = try String(contentsOf: Self.root.appending(path: "Tests/OfflineKitOpenAPITests/Generated/openapi.sha256"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(digest == recorded, "Sources/OfflineServer/openapi.json changed: regenerate the client with scripts/generate-openapi.sh")
    }
}
