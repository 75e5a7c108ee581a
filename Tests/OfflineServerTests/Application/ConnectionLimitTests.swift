@testable import OfflineServer
import Foundation
import OfflineTestSupport
import Testing

/// Slow and silent clients against a live server on loopback, through raw sockets.
///
/// Each test's socket work blocks a thread on reads with deadlines, so it runs through `offPool`
/// (a thread of its own) and hands back what it saw; the expectations are checked here.
/// Serialized: the tests' deadlines are short, and running them side by side would skew them.
@Suite("Connection timeouts and limit", .serialized, .timeLimit(.minutes(1)))
struct ConnectionLimitTests {
    static let clock = ContinuousClock()

    @Test("a connection that sends nothing is closed once the idle timeout has passed")
    func silentConnectionIsClosed() async throws {
        try await withLiveServer(.testing(idleTimeout: .seconds(1), requestHeadTimeout: .seconds(1))) { port in
            let (read, waited) = try await offPool {
                let silent = try LoopbackSocket(port: port)
                let start = Self.clock.now
                let read = silent.read(within: .seconds(5))
                return (read, start.duration(to: Self.clock.now))
            }
            #expect(read == .closed, "still open after 5 s of silence")
            #expect(waited >= .milliseconds(500), "closed before the idle timeout: \(waited)")
        }
    }

    @Test("a client sending its header a byte every 200 ms is closed once the head deadline passes, while /health answers on another connection")
    func slowHeaderIsClosedWhileOthersAreServed() async throws {
        // An idle timeout far longer than the test: only the head deadline can close it.
        let configuration = ServerConfiguration.testing(idleTimeout: .seconds(30), requestHeadTimeout: .seconds(1))
        try await withLiveServer(configuration) { port in
            let (closedAfter, answers, healthyAfter) = try await offPool {
                let slow = try LoopbackSocket(port: port)
                let healthy = try LoopbackSocket(port: port)
                // A header that never ends: long enough to outlast the test's bound of 50 bytes.
                let header = Array("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + String(repeating: "a", count: 100))
                let start = Self.clock.now
                var closedAfter: Duration?
                var answers: [String?] = []
                for byte in header.prefix(50) {
                    guard slow.send(String(byte)) else { closedAfter = start.duration(to: Self.clock.now); break }
                    answers.append(healthy.get("/health", within: .seconds(2)))
                    // The 200 ms between bytes is spent waiting for the server to close the connection.
                    if slow.read(within: .milliseconds(200)) == .closed {
                        closedAfter = start.duration(to: Self.clock.now)
                        break
                    }
                }
                return (closedAfter, answers, healthy.get("/health"))
            }
            let closed = try #require(closedAfter, "the slow client was still connected after 50 bytes")
            #expect(closed < .seconds(5), "closed only after \(closed)")
            // One /health per byte sent: how many fit before the close depends on the machine's load.
            #expect(!answers.isEmpty, "the slow client was closed before /health was asked")
            #expect(answers.allSatisfy { $0 == "HTTP/1.1 204 No Content" }, "\(answers)")
            #expect(healthyAfter == "HTTP/1.1 204 No Content", "the healthy connection was closed with the slow one")
        }
    }

    @Test("past the connection limit a new connection waits unanswered, and is served once others close")
    func connectionsBeyondTheLimitWait() async throws {
        let configuration = ServerConfiguration.testing(idleTimeout: .seconds(30), requestHeadTimeout: .seconds(30), maxConnections: 8)
        try await withLiveServer(configuration) { port in
            let (heldAnswers, ninthSent, ninthEarly, ninthLater) = try await offPool {
                var held: [LoopbackSocket] = []
                var heldAnswers: [String?] = []
                for _ in 0..<8 {
                    let connection = try LoopbackSocket(port: port)
                    // An answer proves the server has accepted this connection before the next opens.
                    heldAnswers.append(connection.get("/health"))
                    held.append(connection)
                }
                let ninth = try LoopbackSocket(port: port)
                let sent = ninth.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let early = ninth.read(within: .seconds(1))
                for connection in held { connection.close() }
                return (heldAnswers, sent, early, ninth.readResponseHead(within: .seconds(5)))
            }
            #expect(heldAnswers.allSatisfy { $0 == "HTTP/1.1 204 No Content" }, "\(heldAnswers)")
            #expect(ninthSent)
            #expect(ninthEarly == .timedOut, "a ninth connection was served while eight were open")
            #expect(ninthLater?.hasPrefix("HTTP/1.1 204 No Content") == true, "\(ninthLater ?? "no answer")")
        }
    }

    @Test("past the connection limit, the listen queue holds as many connections as the backlog says, and drops the handshakes of more")
    func listenQueueHoldsTheBacklog() async throws {
        var configuration = ServerConfiguration.testing(idleTimeout: .seconds(30), requestHeadTimeout: .seconds(30), maxConnections: 1)
        configuration.listenBacklog = 8
        try await withLiveServer(configuration) { port in
            let (heldAnswer, queued, dropped) = try await offPool {
                let held = try LoopbackSocket(port: port)
                // An answer proves the server took this one: it takes no other while it is open.
                let heldAnswer = held.get("/health")
                var queued: [LoopbackSocket] = []
                var dropped: [String] = []
                for _ in 0..<12 {
                    do {
                        queued.append(try LoopbackSocket(port: port, connectWithin: .milliseconds(300)))
                    } catch {
                        dropped.append("\(error)")
                    }
                }
                held.close()
                return (heldAnswer, queued.count, dropped)
            }
            #expect(heldAnswer == "HTTP/1.1 204 No Content", "\(heldAnswer ?? "no answer")")
            // Linux holds one more than the backlog.
            #expect((8...9).contains(queued), "\(queued) connections made past the limit with a backlog of 8")
            // The others timed out waiting for a handshake the kernel dropped; none was refused.
            #expect(dropped.allSatisfy { $0.hasSuffix("errno \(EINPROGRESS)") }, "\(dropped)")
        }
    }

    @Test("a keep-alive client pausing between requests for longer in all than every timeout stays connected")
    func keepAliveClientStaysConnected() async throws {
        try await withLiveServer(.testing(idleTimeout: .seconds(1), requestHeadTimeout: .seconds(1), requestBodyTimeout: .seconds(1))) { port in
            let rounds = try await offPool {
                let client = try LoopbackSocket(port: port)
                // 6 × 400 ms: each pause is within the idle timeout, their sum is past all of them.
                return (0..<6).map { _ in (answer: client.get("/health"), pause: client.read(within: .milliseconds(400))) }
            }
            for (request, round) in rounds.enumerated() {
                #expect(round.answer == "HTTP/1.1 204 No Content", "request \(request)")
                #expect(round.pause == .timedOut, "closed after request \(request)")
            }
        }
    }

    @Test("a request body sent a byte at a time is cut off at the body deadline")
    func slowBodyIsClosed() async throws {
        let configuration = ServerConfiguration.testing(idleTimeout: .seconds(30), requestHeadTimeout: .seconds(30), requestBodyTimeout: .seconds(1))
        try await withLiveServer(configuration) { port in
            let (headSent, closedAfter, unexpected) = try await offPool {
                let slow = try LoopbackSocket(port: port)
                let headSent = slow.send("POST /api/auth/sign-in HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
                let start = Self.clock.now
                for _ in 0..<50 {
                    guard slow.send(" ") else { return (headSent, Optional(start.duration(to: Self.clock.now)), LoopbackSocket.Read?.none) }
                    // Waiting for the close is what paces the bytes; anything else (an answer) is wrong.
                    let read = slow.read(within: .milliseconds(200))
                    if read == .closed { return (headSent, start.duration(to: Self.clock.now), nil) }
                    if read != .timedOut { return (headSent, nil, read) }
                }
                return (headSent, nil, nil)
            }
            #expect(headSent)
            #expect(unexpected == nil, "the server answered an unfinished body: \(String(describing: unexpected))")
            let closed = try #require(closedAfter, "the slow body was still being accepted after 50 bytes")
            #expect(closed < .seconds(5), "closed only after \(closed)")
        }
    }
}
