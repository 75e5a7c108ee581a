import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineCore
@testable import OfflineServer
import Testing

/// Pack hosting against a packs folder that holds links leading elsewhere and files that
/// changed under their manifest.
@Suite("Pack hosting: links and sizes on disk", .timeLimit(.minutes(1)))
struct PackPathTests {
    static let created = Date(timeIntervalSince1970: 1_700_000_000)

    /// A root with `packs/` (pack "paris" version 1 holding `media/a.bin`, 1000 bytes) and
    /// `outside/` (pack "evil" version 1 holding the same, published outside the packs folder).
    static func withFolders(_ body: (_ packs: URL, _ outside: URL, _ content: Data) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-hostile-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let source = root.appendingPathComponent("src")
        try FileManager.default.createDirectory(at: source.appendingPathComponent("media"), withIntermediateDirectories: true)
        let content = Data((0..<1000).map { UInt8($0 % 251) })
        try content.write(to: source.appendingPathComponent("media/a.bin"))
        let packs = root.appendingPathComponent("packs")
        let outside = root.appendingPathComponent("outside")
        try PackFolder.publish(id: "paris", version: "1", from: source, into: packs, createdAt: Self.created)
        try PackFolder.publish(id: "evil", version: "1", from: source, into: outside, createdAt: Self.created)
        try await body(packs, outside, content)
    }

    static func app(_ packs: URL) async throws -> some ApplicationProtocol {
        try await buildApplication(ServerConfiguration.testing(packsDirectory: packs))
    }

    @Test("a linked pack, version or folder that leads outside the packs folder is not served (404)")
    func linksOutside() async throws {
        try await Self.withFolders { packs, outside, _ in
            let fileManager = FileManager.default
            try fileManager.createSymbolicLink(at: packs.appendingPathComponent("evil"), withDestinationURL: outside.appendingPathComponent("evil"))
            let moved = packs.appendingPathComponent("paris/1/media")
            try fileManager.moveItem(at: moved, to: outside.appendingPathComponent("media"))
            try fileManager.createSymbolicLink(at: moved, withDestinationURL: outside.appendingPathComponent("media"))
            try await Self.app(packs).test(.router) { client in
                for uri in ["/packs/evil/latest.json", "/packs/evil/1/manifest.json", "/packs/evil/1/media/a.bin", "/packs/paris/1/media/a.bin"] {
                    try await client.execute(uri: uri, method: .get) { response in
                        #expect(response.status == .notFound, "\(uri)")
                    }
                }
                try await client.execute(uri: "/packs", method: .get) { response in
                    #expect(!String(buffer: response.body).contains("evil"))
                }
                // The manifest itself still lives inside the folder.
                try await client.execute(uri: "/packs/paris/1/manifest.json", method: .get) { response in
                    #expect(response.status == .ok)
                }
            }
        }
    }

    @Test("a link that stays inside the packs folder is still served")
    func linksInside() async throws {
        try await Self.withFolders { packs, _, content in
            try FileManager.default.createSymbolicLink(at: packs.appendingPathComponent("paris-alias"), withDestinationURL: packs.appendingPathComponent("paris"))
            try await Self.app(packs).test(.router) { client in
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(Data(buffer: response.body) == content)
                }
            }
        }
    }

    @Test("a listed file whose name needs percent-encoding is served at its encoded path")
    func percentEncodedPath() async throws {
        try await Self.withFolders { packs, _, _ in
            let source = packs.deletingLastPathComponent().appendingPathComponent("src-encoded")
            try FileManager.default.createDirectory(at: source.appendingPathComponent("my notes"), withIntermediateDirectories: true)
            try Data("100% tea".utf8).write(to: source.appendingPathComponent("my notes/100% tea.txt"))
            try PackFolder.publish(id: "paris", version: "2", from: source, into: packs, createdAt: Self.created)
            try await Self.app(packs).test(.router) { client in
                try await client.execute(uri: "/packs/paris/2/my%20notes/100%25%20tea.txt", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(String(buffer: response.body) == "100% tea")
                }
                try await client.execute(uri: "/packs/paris/2/my%20notes/%zz", method: .get) { response in
                    #expect(response.status == .notFound)
                }
            }
        }
    }

    @Test("a file shorter or longer on disk than its manifest says is answered 500, never with a length it cannot send",
          arguments: [500, 1500])
    func sizeMismatch(size: Int) async throws {
        try await Self.withFolders { packs, _, _ in
            let file = packs.appendingPathComponent("paris/1/media/a.bin")
            try Data(repeating: 7, count: size).write(to: file)
            try await Self.app(packs).test(.router) { client in
                for range in [nil, "bytes=0-99"] {
                    let headers: HTTPFields = range.map { [.range: $0] } ?? [:]
                    try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: headers) { response in
                        #expect(response.status == .internalServerError)
                        #expect(response.headers[.contentLength] != "1000")
                    }
                }
            }
        }
    }
}
