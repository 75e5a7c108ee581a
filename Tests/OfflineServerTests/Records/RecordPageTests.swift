import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// `GET /api/records/COLLECTION` answers a page at a time: bounded in records and in bytes,
/// the next page named by a `Link` header.
@Suite("Records: lists come a page at a time", .timeLimit(.minutes(1)))
struct RecordPageTests {
    static let link = HTTPField.Name("Link")!

    /// The next page's path from a `Link: <PATH>; rel="next"` header.
    static func next(_ response: TestResponse) throws -> String? {
        guard let link = response.headers[link] else { return nil }
        #expect(link.hasSuffix(#">; rel="next""#), "\(link)")
        return link.split(separator: ">").first.map { String($0.dropFirst()) }
    }

    @Test("following Link from the first page reads every record once, in id order, and the last page names no next")
    func followLinks() async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            // Ids that a query must escape (a record id is one path segment: no slash).
            let ids = ["a b", "c+d", "e&f=g", "h", "i", "j", "k"].sorted()
            for id in ids {
                let path = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                try await client.execute(uri: "/api/records/paged/\(path)", method: .put, headers: RecordBodyTests.headers(),
                                         body: ByteBuffer(string: #"{"n":1}"#)) { response in
                    #expect(response.status == .ok)
                }
            }
            var uri: String? = "/api/records/paged?limit=3"
            var pages: [[String]] = []
            while let next = uri, pages.count < 10 {
                uri = try await client.execute(uri: next, method: .get) { response throws in
                    #expect(response.status == .ok)
                    let list = try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [[String: Any]])
                    pages.append(list.compactMap { $0["id"] as? String })
                    return try Self.next(response)
                }
            }
            #expect(pages.map(\.count) == [3, 3, 1])
            #expect(pages.flatMap { $0 } == ids)
            try await client.execute(uri: "/api/records/paged", method: .get) { response throws in
                let list = try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [Any])
                #expect(list.count == ids.count && response.headers[Self.link] == nil, "500 by default: one page")
            }
        }
    }

    @Test("a limit outside 1 to 1,000, or an after with a control character, is refused", arguments: [
        "limit=0", "limit=1001", "limit=-1", "limit=ten", "after=%01",
    ])
    func badQuery(_ query: String) async throws {
        let app = try await buildApplication(ServerConfiguration.testing())
        try await app.test(.router) { client in
            let client = try await signedInClient(client, "ana")
            try await client.execute(uri: "/api/records/paged?\(query)", method: .get) { response in
                #expect(response.status == .badRequest)
                #expect(response.headers[.contentType] == "application/problem+json")
            }
        }
    }

    @Test("a page ends once its bodies pass the byte bound, never before its first record")
    func byteBound() async throws {
        let storage = try await openServerStorage(ServerConfiguration(port: 0), schemas: [RecordStore.schema], logger: .init(label: "test"))
        let records = RecordStore(storage: storage)
        let text = String(repeating: "x", count: 1_000)
        for index in 0..<5 {
            _ = try await storage.write { db in
                try records.apply(.put(["text": .string(text)]), owner: "ana", collection: "big", id: "r\(index)", key: nil, in: db)
            }
        }
        var pages: [[String]] = []
        var after: String?
        while pages.count < 10 {
            let page = try await records.list("big", owner: "ana", after: after, limit: 100, maxBytes: 2_500)
            pages.append(page.records.map(\.id))
            after = page.records.last?.id
            if !page.more { break }
        }
        #expect(pages == [["r0", "r1"], ["r2", "r3"], ["r4"]])
        let alone = try await records.list("big", owner: "ana", limit: 100, maxBytes: 10)
        #expect(alone.records.map(\.id) == ["r0"] && alone.more, "a record larger than the bound comes alone")
    }
}
