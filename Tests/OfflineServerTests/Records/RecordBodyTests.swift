import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// What the records resource takes from a client it cannot trust: bodies it refuses before
/// storing anything, and what it keeps exactly as sent.
@Suite("Records: hostile and exact bodies", .timeLimit(.minutes(1)))
struct RecordBodyTests {
    static func headers(_ key: String = UUID().uuidString) -> HTTPFields {
        [HTTPField.Name("Idempotency-Key")!: "\"\(key)\"", .contentType: "application/json"]
    }

    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
    }

    /// `{"a":[[…]]}` with `depth` containers in all, the outer object included.
    static func nested(depth: Int) -> String {
        #"{"a":"# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}"
    }

    /// PUTs `body` to `/api/records/hostile/1` and expects a 400 problem, with nothing stored.
    static func expectRefused(_ body: ByteBuffer, _ client: some TestClientProtocol, mentioning word: String? = nil,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await client.execute(uri: "/api/records/hostile/1", method: .put, headers: headers(), body: body) { response throws in
            #expect(response.status == .badRequest, sourceLocation: sourceLocation)
            #expect(response.headers[.contentType] == "application/problem+json", sourceLocation: sourceLocation)
            let problem = try object(response)
            #expect(problem["status"] as? Int == 400, sourceLocation: sourceLocation)
            let detail = try #require(problem["detail"] as? String, sourceLocation: sourceLocation)
            if let word { #expect(detail.localizedCaseInsensitiveContains(word), "\(detail)", sourceLocation: sourceLocation) }
        }
        try await client.execute(uri: "/api/records/hostile/1", method: .get) { response in
            #expect(response.status == .notFound, "nothing was stored", sourceLocation: sourceLocation)
        }
    }

    @Test("a body nested 10,000 deep is refused at the nesting limit; one nested 60 deep is stored and read back")
    func nesting() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            let start = ContinuousClock.now
            try await Self.expectRefused(ByteBuffer(string: Self.nested(depth: 10_000)), client, mentioning: "nested")
            print("10,000-deep body refused in \(ContinuousClock.now - start)")
            try await Self.expectRefused(ByteBuffer(string: Self.nested(depth: 65)), client, mentioning: "nested")
            try await client.execute(uri: "/api/records/deep/60", method: .put, headers: Self.headers(),
                                     body: ByteBuffer(string: Self.nested(depth: 60))) { response in
                #expect(response.status == .ok)
            }
            try await client.execute(uri: "/api/records/deep/60", method: .get) { response throws in
                #expect(response.status == .ok)
                let body = String(buffer: response.body)
                #expect(body.contains(String(repeating: "[", count: 59) + String(repeating: "]", count: 59)))
            }
        }
    }

    @Test("numbers come back exactly as written: 2^53+1, 1e400, 0.1, -0 and exponents")
    func exactNumbers() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        let numbers = ["9007199254740993", "1e400", "0.1", "-0", "1.50E-7", "-12345678901234567890.000001"]
        let body = "{" + numbers.enumerated().map { #""n\#($0.offset)":\#($0.element)"# }.joined(separator: ",") + "}"
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            try await client.execute(uri: "/api/records/numbers/1", method: .put, headers: Self.headers(), body: ByteBuffer(string: body)) { response in
                #expect(response.status == .ok)
                let text = String(buffer: response.body)
                for (index, number) in numbers.enumerated() { #expect(text.contains(#""n\#(index)":\#(number)"#), "\(text)") }
            }
            // Merged by a patch (so read back from storage and written again), then read.
            try await client.execute(uri: "/api/records/numbers/1", method: .patch, headers: Self.headers(),
                                     body: ByteBuffer(string: #"{"extra":true}"#)) { response in
                #expect(response.status == .ok)
            }
            for uri in ["/api/records/numbers/1", "/api/records/numbers"] {
                try await client.execute(uri: uri, method: .get) { response throws in
                    let text = String(buffer: response.body)
                    for (index, number) in numbers.enumerated() { #expect(text.contains(#""n\#(index)":\#(number)"#), "\(uri): \(text)") }
                    // Foundation's reader refuses 1e400 (a Double overflows), so the strict reader checks the syntax.
                    #expect((try? JSONValue.parse(response.body.readableBytesView, limits: .stored)) != nil, "valid JSON")
                }
            }
        }
    }

    @Test("strings with control characters are refused, raw or escaped, NUL included")
    func controlCharacters() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            for body in [#"{"t":"a\u0000b"}"#, #"{"t":"x@blocked.example\u0000.ok"}"#, #"{"t":"\u001f"}"#, #"{"t":"bell\u0007"}"#,
                         #"{"a\u0000":1}"#, #"{"t":["ok","\b"]}"#] {
                try await Self.expectRefused(ByteBuffer(string: body), client, mentioning: "control")
            }
            try await Self.expectRefused(ByteBuffer(bytes: Array(#"{"t":"a"#.utf8) + [0x00] + Array(#"b"}"#.utf8)), client)
            try await Self.expectRefused(ByteBuffer(bytes: Array(#"{"t":"a"#.utf8) + [0x01] + Array(#"b"}"#.utf8)), client)
        }
    }

    @Test("invalid UTF-8, UTF-16 (with or without a byte order mark) and duplicate keys are refused")
    func encodingsAndDuplicates() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        let json = #"{"t":"hello"}"#
        let utf16LE = Array(json.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let utf16BE = Array(json.utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            try await Self.expectRefused(ByteBuffer(bytes: Array(#"{"t":""#.utf8) + [0xFF, 0xC3] + Array(#""}"#.utf8)), client, mentioning: "UTF-8")
            try await Self.expectRefused(ByteBuffer(bytes: [0xFF, 0xFE] + utf16LE), client, mentioning: "UTF-8")
            try await Self.expectRefused(ByteBuffer(bytes: [0xFE, 0xFF] + utf16BE), client, mentioning: "UTF-8")
            try await Self.expectRefused(ByteBuffer(bytes: utf16LE), client, mentioning: "UTF-8")
            try await Self.expectRefused(ByteBuffer(string: #"{"t":1,"t":2}"#), client, mentioning: "twice")
            try await Self.expectRefused(ByteBuffer(string: #"{"t":1} {}"#), client)
            try await Self.expectRefused(ByteBuffer(string: #"[1]"#), client, mentioning: "object")
        }
    }

    @Test("a refused body completes its idempotency key: the retry gets the same 400, replayed")
    func refusalIsReplayed() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        let headers = Self.headers("refused-once")
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            for replayed in [nil, "true"] {
                try await client.execute(uri: "/api/records/notes/1", method: .put, headers: headers,
                                         body: ByteBuffer(string: Self.nested(depth: 100))) { response in
                    #expect(response.status == .badRequest)
                    #expect(response.headers[HTTPField.Name("Idempotent-Replayed")!] == replayed)
                }
            }
        }
    }

    @Test("patches that would grow a record past its collection's limit are refused 413 and change nothing; under it they apply")
    func patchGrowth() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            let part = String(repeating: "x", count: 40 << 10)
            try await client.execute(uri: "/api/records/notes/big", method: .put, headers: Self.headers(),
                                     body: ByteBuffer(string: #"{"a":"\#(part)"}"#)) { response in
                #expect(response.status == .ok)
            }
            // Each patch is under the 64 KiB limit; the record it would make is not.
            try await client.execute(uri: "/api/records/notes/big", method: .patch, headers: Self.headers(),
                                     body: ByteBuffer(string: #"{"b":"\#(part)"}"#)) { response throws in
                #expect(response.status == .contentTooLarge)
                #expect(response.headers[.contentType] == "application/problem+json")
                #expect((try Self.object(response)["detail"] as? String)?.contains(BodyLimit.record.text) == true)
            }
            try await client.execute(uri: "/api/records/notes/big", method: .get) { response throws in
                let record = try Self.object(response)
                #expect(record["version"] as? Int == 1)
                #expect((record["body"] as? [String: Any])?["b"] == nil)
            }
            try await client.execute(uri: "/api/records/notes/big", method: .patch, headers: Self.headers(),
                                     body: ByteBuffer(string: #"{"b":"small"}"#)) { response throws in
                #expect(response.status == .ok)
                #expect(try Self.object(response)["version"] as? Int == 2)
            }
        }
    }

    @Test("a row written by the earlier JSONEncoder-based store still reads, and a patch keeps its values")
    func earlierRows() async throws {
        struct Earlier: Encodable { var title = "Tea/Coffee"; var count = 2.0; var tags = ["é", "\u{0}"]; var done = false }
        let storage = try await openServerStorage(ServerConfiguration(port: 0), schemas: [RecordStore.schema], logger: .init(label: "test"))
        let records = RecordStore(storage: storage)
        let blob = try JSONEncoder().encode(Earlier())
        try await storage.write { db in
            try db.execute("INSERT INTO records (owner, collection, id, body, version) VALUES ('ana', 'notes', 'old', \(blob), 1)")
        }
        let record = try #require(try await records.record("notes", id: "old", owner: "ana"))
        #expect(record.body["title"] == .string("Tea/Coffee"))
        #expect(record.body["tags"] == .array([.string("é"), .string("\u{0}")]))
        let patched = try #require(try await storage.write { db in
            try records.apply(.patch(["done": .bool(true)]), owner: "ana", collection: "notes", id: "old", key: nil, in: db)
        })
        #expect(patched.body["count"] == record.body["count"])
        #expect(try await records.list("notes", owner: "ana").records.first?.body == patched.body)
    }

    @Test("a percent-encoded id names the record the client means: PUT a%20b, then GET it back with id \"a b\"")
    func percentEncodedIDs() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            try await client.execute(uri: "/api/records/my%20notes/a%20b", method: .put, headers: Self.headers(),
                                     body: ByteBuffer(string: #"{"title":"Tea"}"#)) { response throws in
                #expect(response.status == .ok)
                #expect(try Self.object(response)["id"] as? String == "a b")
            }
            try await client.execute(uri: "/api/records/my%20notes/a%20b", method: .get) { response throws in
                #expect(response.status == .ok)
                #expect(try Self.object(response)["id"] as? String == "a b")
            }
            try await client.execute(uri: "/api/records/my%20notes", method: .get) { response throws in
                let list = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [[String: Any]])
                #expect(list.compactMap { $0["id"] as? String } == ["a b"])
            }
            // An id that decodes to a control character would be cut or mangled by storage.
            try await client.execute(uri: "/api/records/notes/a%00b", method: .put, headers: Self.headers(),
                                     body: ByteBuffer(string: #"{"title":"Tea"}"#)) { response in
                #expect(response.status == .badRequest)
            }
        }
    }

    @Test("a record's JSON built around its stored body is the JSON of the record, byte for byte")
    func encodedOnce() throws {
        let body: [String: JSONValue] = ["text": .string("tab\t \"quoted\" é"), "n": .number("9007199254740993"), "list": .array([.null, .bool(true)])]
        for id in ["plain", "a \"quoted\" id", "ünï/cødé"] {
            let record = RecordStore.Record(id: id, version: 12, body: body)
            let stored = RecordStore.Record(id: id, version: 12, body: body, encodedBody: JSONValue.object(body).jsonBytes)
            #expect(stored.jsonBytes == record.json.jsonBytes, "\(id)")
            #expect(record.jsonBytes == record.json.jsonBytes)
        }
    }
}
