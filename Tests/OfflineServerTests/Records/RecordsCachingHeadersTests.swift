import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
@testable import OfflineServer
import Testing

/// The records reads say how a copy may be kept: by the owner only, revalidated before reuse,
/// cheaply (a `304`) while the record is unchanged.
@Suite("Records caching headers", .timeLimit(.minutes(1)))
struct RecordsCachingHeadersTests {
    @Test("a record and a list answer with an ETag and private, no-cache; If-None-Match with that tag answers 304 without a body")
    func readsAreRevalidatable() async throws {
        try await buildApplication(ServerConfiguration.testing()).test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/records/notes/1", method: .put, headers: keyed(ana), body: ByteBuffer(string: #"{"text":"hi"}"#)) {
                #expect($0.status == .ok)
            }
            for uri in ["/api/records/notes/1", "/api/records/notes"] {
                let tag = try await client.execute(uri: uri, method: .get, headers: ana) { response in
                    #expect(response.status == .ok, "\(uri)")
                    #expect(response.headers[.cacheControl] == "private, no-cache", "\(uri)")
                    #expect(response.headers[.vary] == "Authorization", "\(uri)")
                    return try #require(response.headers[.eTag], "\(uri)")
                }
                #expect(tag.hasPrefix("\"") && tag.hasSuffix("\""), "a strong tag")
                var revalidation = ana
                revalidation[.ifNoneMatch] = tag
                try await client.execute(uri: uri, method: .get, headers: revalidation) { response in
                    #expect(response.status == .notModified, "\(uri)")
                    #expect(response.body.readableBytes == 0)
                    #expect(response.headers[.eTag] == tag)
                    #expect(response.headers[.cacheControl] == "private, no-cache")
                }
            }
        }
    }

    @Test("a write changes the tag: the old one gets the new record, not a 304")
    func writeChangesTheTag() async throws {
        try await buildApplication(ServerConfiguration.testing()).test(.router) { client in
            let ana = try await signedInJSON(client, "ana")
            try await client.execute(uri: "/api/records/notes/1", method: .put, headers: keyed(ana), body: ByteBuffer(string: #"{"text":"one"}"#)) { _ in }
            let old = try await client.execute(uri: "/api/records/notes/1", method: .get, headers: ana) { $0.headers[.eTag] }
            try await client.execute(uri: "/api/records/notes/1", method: .put, headers: keyed(ana), body: ByteBuffer(string: #"{"text":"two"}"#)) { _ in }
            var revalidation = ana
            revalidation[.ifNoneMatch] = old
            try await client.execute(uri: "/api/records/notes/1", method: .get, headers: revalidation) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.eTag] != old)
                #expect(String(buffer: response.body).contains("two"))
            }
        }
    }
}
