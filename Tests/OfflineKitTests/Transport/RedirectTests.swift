import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Hummingbird
import NIOCore
@testable import OfflineKit
import Testing

/// What every transport does with a redirect: a write never follows one, and a read that
/// follows one to another origin leaves its credentials behind (``RedirectPolicy``).
@Suite("Redirects", .timeLimit(.minutes(1)))
struct RedirectTests {
    @Test("a write answered by a redirect gets the redirect as its answer, and nothing is sent where it points",
          arguments: TransportKind.allCases, [(HTTPRequest.Method.post, 302), (.put, 307), (.post, 308), (.delete, 301), (.patch, 303)])
    func writesDoNotFollow(_ kind: TransportKind, _ write: (HTTPRequest.Method, Int)) async throws {
        let (method, status) = write
        try await withHostileServer({ router, _ in
            router.on("write", method: method) { _, _ in Response(status: .init(code: status), headers: [.location: "/target"]) }
            for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] {
                router.on("target", method: method) { _, _ in Response(status: .ok) }
            }
        }) { server in
            try await kind.withTransport { transport in
                let response = try await transport.send(OfflineKit.TransportRequest(
                    method: method, url: server.url("write"),
                    headerFields: [.contentType: "application/json", .idempotencyKey: IdempotencyKey().fieldValue], body: Data("{}".utf8)))
                #expect(response.status.code == status)
                #expect(response.headerFields[.location] == "/target")
                #expect(server.requests(to: "/target").isEmpty, "the redirect was followed")
            }
        }
    }

    @Test("a write redirected to another origin sends it nothing: no body, no key, no token", arguments: TransportKind.allCases)
    func writesStayHome(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.post("write") { _, _ in Response(status: .ok) }
        }) { other in
            try await withHostileServer({ router, _ in
                router.post("write") { _, _ in Response(status: .temporaryRedirect, headers: [.location: other.url("write").absoluteString]) }
            }) { api in
                try await kind.withTransport { transport in
                    let response = try await transport.send(OfflineKit.TransportRequest(
                        method: .post, url: api.url("write"),
                        headerFields: [.authorization: "Bearer secret", .idempotencyKey: IdempotencyKey().fieldValue], body: Data("{}".utf8)))
                    #expect(response.status == .temporaryRedirect)
                    #expect(other.requests.isEmpty, "the other origin was sent \(other.requests.map(\.headerFields))")
                }
            }
        }
    }

    @Test("a read redirected to another origin is followed, without the token, the cookies or a proxy's credentials",
          arguments: TransportKind.allCases)
    func readsLeaveCredentialsHome(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.get("there") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "there"))) }
        }) { other in
            try await withHostileServer({ router, _ in
                router.get("here") { _, _ in Response(status: .found, headers: [.location: other.url("there").absoluteString]) }
            }) { api in
                try await kind.withTransport { transport in
                    let response = try await transport.send(OfflineKit.TransportRequest(url: api.url("here"), headerFields: [
                        .authorization: "Bearer secret", .cookie: "session=secret", .proxyAuthorization: "Basic c2VjcmV0",
                        .accept: "text/plain",
                    ]))
                    #expect(response.status == .ok && String(decoding: response.body, as: UTF8.self) == "there")
                    let seen = try #require(other.requests.first)
                    #expect(seen.headerFields[.authorization] == nil)
                    #expect(seen.headerFields[.cookie] == nil)
                    #expect(seen.headerFields[.proxyAuthorization] == nil)
                    #expect(seen.headerFields[.accept] == "text/plain", "other fields go along")
                }
            }
        }
    }

    @Test("a read redirected within its origin is followed with its credentials", arguments: TransportKind.allCases)
    func readsKeepCredentialsWithinTheOrigin(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.get("here") { _, _ in Response(status: .movedPermanently, headers: [.location: "/there"]) }
            router.get("there") { _, _ in Response(status: .ok) }
        }) { api in
            try await kind.withTransport { transport in
                let response = try await transport.send(OfflineKit.TransportRequest(url: api.url("here"), headerFields: [.authorization: "Bearer secret"]))
                #expect(response.status == .ok)
                #expect(api.requests(to: "/there").first?.headerFields[.authorization] == "Bearer secret")
            }
        }
    }

    @Test("a read redirected in a circle stops", arguments: TransportKind.allCases)
    func circles(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.get("a") { _, _ in Response(status: .found, headers: [.location: "/b"]) }
            router.get("b") { _, _ in Response(status: .found, headers: [.location: "/a"]) }
        }) { api in
            try await kind.withTransport { transport in
                // A transport may answer with the last redirect or fail; either way it stops.
                let response = try? await transport.send(OfflineKit.TransportRequest(url: api.url("a")))
                #expect(response.map { (300..<400).contains($0.status.code) } ?? true)
                #expect(api.requests.count <= RedirectPolicy.maximumRedirects + 1, "\(api.requests.count) requests")
            }
        }
    }

    // MARK: The policy

    @Test("origins are scheme, host and port, the scheme's own port when none is written")
    func origins() {
        func same(_ a: String, _ b: String) -> Bool { RedirectPolicy.isSameOrigin(URL(string: a)!, URL(string: b)!) }
        #expect(same("http://api.example/a", "http://API.example/b?c"))
        #expect(same("https://api.example/a", "https://api.example:443/b"))
        #expect(same("http://127.0.0.1:8080/a", "http://127.0.0.1:8080/"))
        #expect(!same("http://127.0.0.1:8080/a", "http://127.0.0.1:8081/a"))
        #expect(!same("https://api.example/a", "http://api.example/a"))
        #expect(!same("https://api.example/a", "https://api.example.evil/a"))
        #expect(!same("https://api.example/a", "https://cdn.api.example/a"))
    }

    @Test("only reads follow; across origins without credentials; never past the limit")
    func policy() {
        var proposed = URLRequest(url: URL(string: "https://cdn.example/file")!)
        for (name, value) in [("Authorization", "Bearer t"), ("Cookie", "c=1"), ("Proxy-Authorization", "Basic x"), ("Accept", "*/*")] {
            proposed.setValue(value, forHTTPHeaderField: name)
        }
        let api = URL(string: "https://api.example/packs/file")!
        for method in ["POST", "PUT", "PATCH", "DELETE", nil] {
            #expect(RedirectPolicy.follow(proposed, method: method, from: api, redirects: 0) == nil, "\(method ?? "no method")")
        }
        let followed = RedirectPolicy.follow(proposed, method: "GET", from: api, redirects: 0)
        #expect(followed?.url == proposed.url)
        #expect(followed?.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(followed?.value(forHTTPHeaderField: "Cookie") == nil)
        #expect(followed?.value(forHTTPHeaderField: "Proxy-Authorization") == nil)
        #expect(followed?.value(forHTTPHeaderField: "Accept") == "*/*")
        let home = RedirectPolicy.follow(proposed, method: "HEAD", from: URL(string: "https://cdn.example/old")!, redirects: 0)
        #expect(home?.value(forHTTPHeaderField: "Authorization") == "Bearer t", "within the origin")
        #expect(RedirectPolicy.follow(proposed, method: "GET", from: api, redirects: RedirectPolicy.maximumRedirects) == nil)
    }
}
