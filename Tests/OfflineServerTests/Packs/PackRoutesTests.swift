import Foundation
import Hummingbird
import HummingbirdTesting
import OfflineCore
import OfflineServer
import Testing

@Suite("Pack hosting routes")
struct PackRoutesTests {
    let created = Date(timeIntervalSince1970: 1_700_000_000)

    func withPacks(_ body: (URL, Data) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-routes-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let source = root.appendingPathComponent("src")
        try FileManager.default.createDirectory(at: source.appendingPathComponent("media"), withIntermediateDirectories: true)
        let content = Data((0..<1000).map { UInt8($0 % 251) })
        try content.write(to: source.appendingPathComponent("media/a.bin"))
        try PackFolder.publish(id: "paris", version: "1", from: source, into: root.appendingPathComponent("packs"), createdAt: created)
        try await body(root.appendingPathComponent("packs"), content)
    }

    func app(_ packs: URL) async throws -> some ApplicationProtocol {
        try await buildApplication(ServerConfiguration.testing(packsDirectory: packs, faultsEnabled: true))
    }

    @Test("serves the newest version's manifest with a strong ETag and answers If-None-Match with 304")
    func manifest() async throws {
        try await withPacks { packs, _ in
            let newer = packs.deletingLastPathComponent().appendingPathComponent("src2")
            try FileManager.default.createDirectory(at: newer, withIntermediateDirectories: true)
            try Data("x".utf8).write(to: newer.appendingPathComponent("b.txt"))
            try PackFolder.publish(id: "paris", version: "2", from: newer, into: packs, createdAt: created.addingTimeInterval(60))
            try await app(packs).test(.router) { client in
                let tag = try await client.execute(uri: "/packs/paris/latest.json", method: .get) { response in
                    #expect(response.status == .ok)
                    let manifest = try PackManifest.decode(Data(buffer: response.body))
                    #expect(manifest.version == "2")
                    let tag = try #require(response.headers[.eTag])
                    #expect(!tag.hasPrefix("W/"))
                    return tag
                }
                try await client.execute(uri: "/packs/paris/latest.json", method: .get, headers: [.ifNoneMatch: tag]) { response in
                    #expect(response.status == .notModified)
                    #expect(response.body.readableBytes == 0)
                }
                try await client.execute(uri: "/packs", method: .get) { response in
                    #expect(String(buffer: response.body).contains("\"version\" : \"2\""))
                }
            }
            // Publishing also wrote latest.json for static hosts.
            let latest = try PackManifest.decode(Data(contentsOf: packs.appendingPathComponent("paris/latest.json")))
            #expect(latest.version == "2")
        }
    }

    @Test("serves files with Accept-Ranges, a strong ETag, ranges, If-Range and 416")
    func ranges() async throws {
        try await withPacks { packs, content in
            try await app(packs).test(.router) { client in
                let tag = try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(response.headers[.acceptRanges] == "bytes")
                    #expect(Data(buffer: response.body) == content)
                    return try #require(response.headers[.eTag])
                }
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: "bytes=100-", .ifRange: tag]) { response in
                    #expect(response.status == .partialContent)
                    #expect(response.headers[.contentRange] == "bytes 100-999/1000")
                    #expect(Data(buffer: response.body) == content.subdata(in: 100..<1000))
                }
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: "bytes=-10"]) { response in
                    #expect(response.headers[.contentRange] == "bytes 990-999/1000")
                }
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: "bytes=100-", .ifRange: "\"stale\""]) { response in
                    #expect(response.status == .ok)
                    #expect(response.body.readableBytes == 1000)
                }
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: "bytes=1000-"]) { response in
                    #expect(response.status == .rangeNotSatisfiable)
                    #expect(response.headers[.contentRange] == "bytes */1000")
                }
            }
        }
    }

    @Test("refuses paths outside the manifest, traversal included")
    func refusesUnlisted() async throws {
        try await withPacks { packs, _ in
            try Data("secret".utf8).write(to: packs.appendingPathComponent("paris/1/unlisted.txt"))
            try await app(packs).test(.router) { client in
                for uri in ["/packs/paris/1/unlisted.txt", "/packs/paris/9/media/a.bin", "/packs/nope/latest.json"] {
                    try await client.execute(uri: uri, method: .get) { response in
                        #expect(response.status == .notFound, "\(uri)")
                    }
                }
            }
        }
    }

    @Test("the fault plan corrupts, ignores ranges and changes the ETag on demand")
    func faults() async throws {
        try await withPacks { packs, content in
            try await app(packs).test(.router) { client in
                let plan = try JSONEncoder().encode(PackFaultPlan(ignoreRange: true, corruptByteAt: 5, responses: 1))
                try await client.execute(uri: "/_faults/packs", method: .put, headers: [.contentType: "application/json"], body: ByteBuffer(data: plan)) { response in
                    #expect(response.status == .noContent)
                }
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: "bytes=100-"]) { response in
                    #expect(response.status == .ok)
                    let body = Data(buffer: response.body)
                    #expect(body.count == content.count)
                    #expect(body[5] == content[5] ^ 0xFF)
                }
                // The plan covered one response only.
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: "bytes=100-"]) { response in
                    #expect(response.status == .partialContent)
                }
            }
        }
    }

    @Test("publishing refuses links and an existing version")
    func publishRefusals() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-publish-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let source = root.appendingPathComponent("src")
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        try Data("a".utf8).write(to: source.appendingPathComponent("a"))
        try PackFolder.publish(id: "p", version: "1", from: source, into: root.appendingPathComponent("packs"))
        #expect(throws: PackFolderError.versionExists(id: "p", version: "1")) {
            try PackFolder.publish(id: "p", version: "1", from: source, into: root.appendingPathComponent("packs"))
        }
        try FileManager.default.createSymbolicLink(atPath: source.appendingPathComponent("link").path, withDestinationPath: "/etc/passwd")
        #expect(throws: PackFolderError.notARegularFile("link")) {
            try PackFolder.publish(id: "p", version: "2", from: source, into: root.appendingPathComponent("packs"))
        }
    }
}
