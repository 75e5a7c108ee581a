import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

@Suite("Sign-in session", .timeLimit(.minutes(1)))
struct SignInSessionTests {
    @Test("a request that joined a sign-in which could not reach the server signs in again itself; the one that started it gets the error")
    func joinedSignInRetries() async throws {
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let signIns = Locked(0)
        let wire = RecordingTransport()
        wire.allow(.post, "/api/auth/sign-in") { _ in
            let number = signIns.withLock { count in
                count += 1
                return count
            }
            if number == 1 {
                // Sent while the server could not be reached: refused once the second caller has joined it.
                for await _ in released { break }
                throw TransportError.connectionRefused
            }
            return TransportResponse(status: 200, body: Data(#"{"accessToken":"a2","refreshToken":"r2"}"#.utf8))
        }
        let session = SignInSession(serverURL: URL(string: "http://127.0.0.1:9")!, name: "ana", password: "pw", transport: wire)
        let first = Task { try await session.accessToken() }
        try await eventually("the first sign-in on its way", within: .seconds(10), observed: { "\(signIns.current)" }) { signIns.current == 1 }
        let second = Task { try await session.accessToken() }
        try await eventually("the second caller joining it", within: .seconds(10), observed: { "\(session.joinedCount.current)" }) {
            session.joinedCount.current == 1
        }
        #expect(signIns.current == 1, "joining sends nothing")
        release.yield()
        await #expect(throws: TransportError.self) { try await first.value }
        #expect(try await second.value == "a2")
        #expect(signIns.current == 2)
    }

    @Test("a sign-in answered by a redirect to another origin fails, and sends that origin neither the name nor the password",
          arguments: TransportKind.allCases)
    func redirectedElsewhere(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.post("api/auth/sign-in") { _, _ in
                Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: #"{"accessToken":"minted-elsewhere","refreshToken":"r"}"#)))
            }
        }) { other in
            try await withHostileServer({ router, _ in
                router.post("api/auth/sign-in") { _, _ in
                    Response(status: .temporaryRedirect, headers: [.location: other.url("api/auth/sign-in").absoluteString])
                }
            }) { api in
                try await kind.withTransport { transport in
                    let session = SignInSession(serverURL: api.url, name: "ana", password: "secret-password", transport: transport)
                    await #expect(throws: SignInError.unavailable(status: 307)) { try await session.accessToken() }
                    #expect(other.requests.isEmpty, "the other origin was sent \(other.requests.map(\.text))")
                }
            }
        }
    }
}
