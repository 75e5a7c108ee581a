import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import NIOCore
import OfflineCore
@testable import OfflineKit
import OfflineKitTesting
import Testing

/// The client attack lab: a hostile or broken server on loopback, answering as no honest API
/// does, and the client's real parts (transports, sign-in, outbox, sync engine) against it. Each
/// test prints its figure (`hostile-lab:` lines) and asserts the bound the client keeps.
///
/// Memory is the process's resident size sampled while the hostile answer is read; the other
/// suites running beside this one add to it, so the bounds leave them room.
@Suite("Client attack lab", .serialized, .timeLimit(.minutes(2)),
       .enabled(if: ProcessInfo.processInfo.environment["OFFLINEKIT_INTEGRATION"] != nil))
struct HostileServerTests {
    static func figure(_ text: String) { print("hostile-lab: \(text)") }

    // MARK: Sign-in and writes sent elsewhere

    @Test("a sign-in answered with a redirect to another origin sends it neither the name nor the password, and takes no token from it",
          arguments: TransportKind.allCases)
    func signInRedirectedElsewhere(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.post("api/auth/sign-in") { _, _ in
                Response(status: .ok, headers: [.contentType: "application/json"],
                         body: .init(byteBuffer: ByteBuffer(string: #"{"accessToken":"minted-elsewhere","refreshToken":"r"}"#)))
            }
        }) { other in
            try await withHostileServer({ router, _ in
                router.post("api/auth/sign-in") { _, _ in
                    Response(status: .temporaryRedirect, headers: [.location: other.url("api/auth/sign-in").absoluteString])
                }
            }) { api in
                try await kind.withTransport { transport in
                    let session = SignInSession(serverURL: api.url, name: "ana", password: "secret-password", transport: transport)
                    let token = try? await session.accessToken()
                    let leaked = other.requests.filter { $0.text.contains("secret-password") }
                    Self.figure("sign-in via \(kind): \(other.requests.count) requests reached the other origin, \(leaked.count) with the password; token \(token ?? "none")")
                    #expect(other.requests.isEmpty, "the other origin was sent \(other.requests.map { "\($0.method) \($0.path)" })")
                    #expect(token == nil, "the session took a token minted elsewhere: \(token ?? "")")
                }
            }
        }
    }

    /// Three writes queued, delivered by a drainer for as long as it takes each to be tried once.
    static func deliverThreeWrites(to api: HostileServer, _ kind: TransportKind) async throws -> (remaining: [OutboxEntry], delivered: Int) {
        let database = try OfflineDatabase.inMemory()
        let outbox = Outbox(database: database, operations: [.setItem])
        for number in 0..<3 {
            try await outbox.write(.setItem, path: "api/records/items/i\(number)", json: ItemBody(value: "v\(number)"))
        }
        try await kind.withTransport { transport in
            let drainer = OutboxDrainer(outbox: outbox, baseURL: api.url,
                                        transport: BearerTokenTransport(transport, tokens: FixedToken(token: "secret-token")),
                                        connectivity: FakeConnectivityMonitor(.online))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await drainer.run() }
                defer { group.cancelAll() }
                // Until each write was tried once and its outcome settled.
                let clock = ContinuousClock()
                let deadline = clock.now + .seconds(20)
                while true {
                    let tried = api.requests.filter { $0.method == .put }.count >= 3
                    if tried, try await outbox.snapshot().inFlightCount == 0 { break }
                    guard clock.now < deadline else {
                        Issue.record("the three writes were not all tried within 20 s")
                        break
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
        }
        let remaining = try await outbox.entries()
        return (remaining, 3 - remaining.count)
    }

    @Test("a write answered by a redirect to a page that answers 200 (a maintenance page, a captive portal) is not delivered",
          arguments: TransportKind.allCases)
    func writeRedirectedToAPage(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.put("api/records/items/:id") { _, _ in Response(status: .found, headers: [.location: "/maintenance"]) }
            // Like a captive portal's page, it answers whatever is sent to it.
            for method in [HTTPRequest.Method.get, .put, .post] {
                router.on("maintenance", method: method) { _, _ in
                    Response(status: .ok, headers: [.contentType: "text/html"], body: .init(byteBuffer: ByteBuffer(string: "<html>Back soon</html>")))
                }
            }
        }) { api in
            let (remaining, delivered) = try await Self.deliverThreeWrites(to: api, kind)
            Self.figure("302 to a 200 page via \(kind): \(delivered) of 3 writes counted delivered, 0 stored")
            #expect(delivered == 0, "writes the API never stored were counted delivered")
            // By its name, so that the lab also builds against a client without this kind.
            #expect(remaining.allSatisfy { $0.state == .pending && $0.lastFailure?.kind.rawValue == "redirected" },
                    "\(remaining.map { "\($0.state) \($0.lastFailure?.kind.rawValue ?? "no failure")" })")
        }
    }

    @Test("a write answered by a redirect to another origin sends it nothing: no body, no Idempotency-Key, no token",
          arguments: TransportKind.allCases)
    func writeRedirectedElsewhere(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.put("api/records/items/:id") { _, _ in Response(status: .ok) }
        }) { other in
            try await withHostileServer({ router, _ in
                router.put("api/records/items/:id") { request, _ in
                    Response(status: .temporaryRedirect, headers: [.location: other.origin + request.uri.path])
                }
            }) { api in
                let (_, delivered) = try await Self.deliverThreeWrites(to: api, kind)
                let seen = other.requests
                let keys = seen.filter { $0.headerFields[.idempotencyKey] != nil }.count
                let tokens = seen.filter { $0.headerFields[.authorization] != nil }.count
                let bodies = seen.filter { !$0.body.isEmpty }.count
                Self.figure("307 elsewhere via \(kind): \(seen.count) requests reached the other origin (\(bodies) bodies, \(keys) Idempotency-Keys, \(tokens) tokens); \(delivered) of 3 counted delivered")
                #expect(seen.isEmpty)
                #expect(delivered == 0)
            }
        }
    }

    @Test("a read redirected to another origin is followed without the token, cookies or key", arguments: TransportKind.allCases)
    func readRedirectedElsewhere(_ kind: TransportKind) async throws {
        try await withHostileServer({ router, _ in
            router.get("elsewhere") { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "there"))) }
        }) { other in
            try await withHostileServer({ router, _ in
                router.get("api/profile") { _, _ in Response(status: .found, headers: [.location: other.url("elsewhere").absoluteString]) }
            }) { api in
                try await kind.withTransport { transport in
                    let response = try await BearerTokenTransport(transport, tokens: FixedToken(token: "secret-token")).send(
                        OfflineKit.TransportRequest(url: api.url("api/profile"), headerFields: [.cookie: "session=secret-cookie"]))
                    let seen = other.requests
                    let leaked = seen.filter { $0.headerFields[.authorization] != nil || $0.headerFields[.cookie] != nil }
                    Self.figure("GET redirected elsewhere via \(kind): status \(response.status.code), \(leaked.count) of \(seen.count) requests to the other origin carried the token or cookie")
                    #expect(response.status == 200 && seen.count == 1, "the read is still followed")
                    #expect(leaked.isEmpty, "credentials reached the other origin: \(leaked.map(\.headerFields))")
                }
            }
        }
    }

    // MARK: Sync pages that lie

    /// A table the lab's pages land in; a row's value is kept by size only.
    static func labCollection() -> SyncedCollection {
        SyncedCollection("notes",
            upsert: { db, row in try db.execute(sql: "INSERT OR REPLACE INTO note (id, size) VALUES (?, ?)", arguments: [row.id, row.value.count]) },
            delete: { db, id in try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [id]) },
            ids: { db in try String.fetchAll(db, sql: "SELECT id FROM note") })
    }

    static func labDatabase() throws -> OfflineDatabase {
        let database = try OfflineDatabase.inMemory()
        try database.writer.write { db in try db.execute(sql: "CREATE TABLE note (id TEXT PRIMARY KEY, size INTEGER NOT NULL)") }
        return database
    }

    static func labEngine(_ database: OfflineDatabase, _ api: HostileServer, _ transport: any HTTPTransport,
                          pageSize: Int = 500, maxPageBytes: Int = 32 << 20, liveStream: Bool = false) -> SyncEngine {
        // Backoffs at the middle of their jitter (0.5 s, 1 s, 2 s…), so a count over seconds is
        // the policy's, not the luck of the draw.
        SyncEngine(database: database, baseURL: api.url, transport: transport, connectivity: FakeConnectivityMonitor(.online),
                   collections: [labCollection()], pageSize: pageSize, maxPageBytes: maxPageBytes, liveStream: liveStream,
                   random: { 0.5 })
    }

    /// The cursor each request for a page asked after, in the order they came ("none": the first
    /// page of a first sync).
    static func cursorsAsked(_ api: HostileServer) -> [String] {
        api.requests(to: syncPath).map { request in
            request.query.flatMap { URLComponents(string: "?\($0)")?.queryItems?.first { $0.name == "cursor" }?.value } ?? "none"
        }
    }

    /// True the first time it is asked, false after: a failure a route answers once.
    static func firstTime(_ flag: Locked<Bool>) -> Bool {
        flag.withLock { done in
            defer { done = true }
            return !done
        }
    }

    static let syncPath = "/api/sync"

    static func page(_ json: String) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: json)))
    }

    @Test("a server that says hasMore with a cursor that never moves is not asked again and again")
    func cursorThatNeverMoves() async throws {
        try await withHostileServer({ router, _ in
            router.get("api/sync") { _, _ in Self.page(#"{"changes":[],"cursor":"e.1","hasMore":true}"#) }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let engine = Self.labEngine(try Self.labDatabase(), api, transport)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.run() }
                    defer { group.cancelAll() }
                    try await Task.sleep(for: .seconds(3))
                }
                let pulls = api.requests(to: Self.syncPath).count
                Self.figure("hasMore with a stuck cursor: \(pulls) requests in 3 s")
                // Each attempt asks twice (the first page, then the one whose cursor did not
                // move), at 0, 0.5 and 1.5 s: 6.
                #expect(pulls <= 6, "\(pulls) requests in 3 s")
                var progress = engine.progress().makeAsyncIterator()
                let latest = await progress.next()
                #expect(latest?.isFirstSync == true && latest?.failure != nil,
                        "a first sync that never completed says so, with why: \(String(describing: latest))")
            }
        }
    }

    @Test("a later pull whose pages never end keeps at most twice the largest page aside, landing the rest as it goes")
    func pagesWithoutEnd() async throws {
        let value = String(repeating: "x", count: 2_000)
        try await withHostileServer({ router, _ in
            router.get("api/sync") { request, _ in
                // The first sync: one page. Every later pull: 20 rows of 2 kB a page, each page
                // after the one asked for, and always more.
                guard let cursor = request.uri.queryParameters.get("cursor"), let at = Int(cursor.dropFirst(2)) else {
                    return Self.page(#"{"changes":[{"collection":"notes","id":"first","value":{}}],"cursor":"e.1","hasMore":false}"#)
                }
                let changes = (0..<20).map { #"{"collection":"notes","id":"n\#(at)-\#($0)","value":"\#(value)"}"# }
                return Self.page(#"{"changes":[\#(changes.joined(separator: ","))],"cursor":"e.\#(at + 1)","hasMore":true}"#)
            }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let database = try Self.labDatabase()
                let maxPageBytes = 64 << 10
                let engine = Self.labEngine(database, api, transport, maxPageBytes: maxPageBytes)
                try await engine.pull()
                var mostAside = 0
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.pull() }
                    defer { group.cancelAll() }
                    let end = ContinuousClock.now + .seconds(3)
                    while ContinuousClock.now < end {
                        let aside = try await database.writer.read { db in
                            try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM offlinekit_sync_staged") ?? 0
                        }
                        mostAside = max(mostAside, aside)
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                let pages = api.requests(to: Self.syncPath).count - 1
                let (rows, cursor) = try await database.writer.read { db in
                    (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") ?? 0,
                     try String.fetchOne(db, sql: "SELECT cursor FROM offlinekit_sync_cursor") ?? "")
                }
                Self.figure("a later pull without end: \(pages) pages in 3 s, at most \(mostAside >> 10) KiB kept aside "
                            + "(bound \((2 * maxPageBytes) >> 10) KiB), \(rows) rows landed, cursor saved at \(cursor)")
                // 20 pages of 40 kB would pass the bound three times over.
                #expect(pages >= 20, "the server was asked for \(pages) pages only")
                #expect(mostAside <= 2 * maxPageBytes, "\(mostAside) bytes kept aside")
                #expect(rows > 20 && cursor != "e.1", "nothing landed while the pull went on: \(rows) rows, cursor \(cursor)")
            }
        }
    }

    @Test("a pull that fails after landing what it kept aside starts again from the landed cursor")
    func failureAfterLanding() async throws {
        let value = String(repeating: "x", count: 2_000)
        let failed = Locked(false)
        try await withHostileServer({ router, _ in
            router.get("api/sync") { request, _ in
                guard let cursor = request.uri.queryParameters.get("cursor"), let at = Int(cursor.dropFirst(2)) else {
                    return Self.page(#"{"changes":[{"collection":"notes","id":"first","value":{}}],"cursor":"e.1","hasMore":false}"#)
                }
                // Pages of 40 kB: the fourth of a pull passes the bound of 128 kB and lands the
                // three kept aside, at e.5. The page after e.7 fails, once.
                if at >= 7, Self.firstTime(failed) {
                    return Response(status: .serviceUnavailable)
                }
                let changes = (0..<20).map { #"{"collection":"notes","id":"n\#(at)-\#($0)","value":"\#(value)"}"# }
                return Self.page(#"{"changes":[\#(changes.joined(separator: ","))],"cursor":"e.\#(at + 1)","hasMore":true}"#)
            }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let engine = Self.labEngine(try Self.labDatabase(), api, transport, maxPageBytes: 64 << 10)
                try await engine.pull()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.run() }
                    defer { group.cancelAll() }
                    // The failure, the retry 0.5 s later, and pages after it.
                    try await Task.sleep(for: .seconds(2))
                }
                let cursors = Self.cursorsAsked(api).filter { $0 != "none" }
                let failedAt = try #require(cursors.firstIndex(of: "e.7"), "the pull never reached the failing page: \(cursors)")
                let retried = cursors.dropFirst(failedAt + 1).first
                Self.figure("a pull failing after it landed at e.5: asked for \(cursors.prefix(failedAt + 1).joined(separator: " ")), "
                            + "then again from \(retried ?? "nowhere")")
                #expect(failed.current, "the page after e.7 never failed")
                #expect(cursors.filter { $0 == "e.1" }.count == 1, "the landed pages were asked for again: \(cursors)")
                #expect(retried == "e.5", "the retry started from \(retried ?? "nowhere"), not from the landed cursor e.5")
            }
        }
    }

    @Test("a first sync that fails midway starts again after the last page it applied")
    func firstSyncFailsMidway() async throws {
        let failed = Locked(false)
        try await withHostileServer({ router, _ in
            router.get("api/sync") { request, _ in
                let at = request.uri.queryParameters.get("cursor").flatMap { Int($0.dropFirst(2)) } ?? 0
                // Ten pages of 50 rows; the page after e.6 fails, once.
                if at >= 6, Self.firstTime(failed) {
                    return Response(status: .serviceUnavailable)
                }
                let changes = (0..<50).map { #"{"collection":"notes","id":"n\#(at)-\#($0)","value":{}}"# }
                return Self.page(#"{"changes":[\#(changes.joined(separator: ","))],"cursor":"e.\#(at + 1)","hasMore":\#(at + 1 < 10)}"#)
            }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let database = try Self.labDatabase()
                let engine = Self.labEngine(database, api, transport, pageSize: 50)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.run() }
                    defer { group.cancelAll() }
                    try await Task.sleep(for: .seconds(2))
                }
                let cursors = Self.cursorsAsked(api)
                let rows = try await database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") ?? 0 }
                Self.figure("a first sync failing after e.6: asked for \(cursors.joined(separator: " ")); \(rows) rows")
                #expect(failed.current && rows == 500)
                #expect(cursors.filter { $0 == "none" }.count == 1, "the first sync started again from nothing: \(cursors)")
                // e.6 was asked for twice: the failure, then the retry after the page written last.
                #expect(cursors.filter { $0 == "e.6" }.count == 2 && cursors.filter { $0 == "e.1" }.count == 1, "\(cursors)")
            }
        }
    }

    @Test("a page of 200 MiB is refused past the engine's cap: memory stays bounded and the rest is not read")
    func hugePage() async throws {
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
        try await withHostileServer({ router, writes in
            router.get("api/sync") { _, _ in
                writes.stream(prefix: #"{"changes":[{"collection":"notes","id":"big","value":""#, chunk, count: 200,
                              suffix: #""}],"cursor":"e.1","hasMore":false}"#)
            }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let database = try Self.labDatabase()
                let engine = Self.labEngine(database, api, transport)
                let watch = ResidentMemoryWatch()
                let outcome: String
                do {
                    try await engine.pull()
                    outcome = "applied"
                } catch {
                    outcome = "refused (\(error))"
                }
                let growth = watch.stop()
                // The server writes as the client reads (its writes wait for the connection):
                // what it wrote once the client stopped is what the client read, and what the
                // kernel's buffers took (up to 36 MiB on this Linux).
                try await Task.sleep(for: .milliseconds(500))
                let written = api.bodyBytesWritten
                Self.figure("200 MiB page: \(outcome); resident memory grew by \(ResidentMemoryWatch.mebibytes(growth)); the server wrote \(ResidentMemoryWatch.mebibytes(written))")
                #expect(growth < 160 << 20, "resident memory grew by \(ResidentMemoryWatch.mebibytes(growth))")
                #expect(written < 96 << 20, "the client read on past its limit: the server wrote \(ResidentMemoryWatch.mebibytes(written))")
                #expect(try await database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") } == 0)
            }
        }
    }

    /// Pages no honest feed writes, each with what is wrong with it.
    static let lyingPages: [(String, String)] = [
        ("a change to a collection not asked for", #"{"changes":[{"collection":"secrets","id":"a","value":{}}],"cursor":"e.5","hasMore":false}"#),
        ("a change without its collection", #"{"changes":[{"id":"a","value":{}}],"cursor":"e.1","hasMore":false}"#),
        ("a capture position below zero", #"{"changes":[{"collection":"notes","id":"a","value":{}}],"cursor":"e.1","hasMore":false,"through":-7}"#),
        ("a cursor with a line break", #"{"changes":[{"collection":"notes","id":"a","value":{}}],"cursor":"e.1\r\nX-Injected: 1","hasMore":false}"#),
        ("a cursor with a space", #"{"changes":[{"collection":"notes","id":"a","value":{}}],"cursor":"e 2","hasMore":false}"#),
    ]

    @Test("a page that lies is applied nowhere and its cursor is not saved", arguments: 0..<5)
    func lyingPage(_ index: Int) async throws {
        let (lie, json) = Self.lyingPages[index]
        try await withHostileServer({ router, _ in
            router.get("api/sync") { _, _ in Self.page(json) }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let database = try Self.labDatabase()
                let engine = Self.labEngine(database, api, transport)
                let failure: (any Error)?
                do {
                    try await engine.pull()
                    failure = nil
                } catch {
                    failure = error
                }
                let (rows, saved) = try await database.writer.read { db in
                    (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") ?? 0, try SyncEngine.hasPulled("notes", db))
                }
                Self.figure("\(lie): \(rows) rows applied, cursor \(saved ? "saved" : "not saved"), \(failure.map { "refused: \($0)" } ?? "no error")")
                #expect(failure != nil && rows == 0 && !saved)
            }
        }
    }

    /// Rows no device may keep, each with what is wrong with it.
    static let unkeepableRows: [(String, String)] = [
        ("an id that climbs out of a path", #"{"collection":"notes","id":"../../etc","value":{}}"#),
        ("an id with a control character", #"{"collection":"notes","id":"a\u0000b","value":{}}"#),
        ("an id with a slash, deleted", #"{"collection":"notes","id":"x/y","deleted":true}"#),
        ("a value that is not JSON", #"{"collection":"notes","id":"n","value":{"score":NaN}}"#),
    ]

    @Test("a row no device may keep is dropped and reported; the rest of its page lands and its cursor is saved", arguments: 0..<4)
    func unkeepableRow(_ index: Int) async throws {
        let (lie, row) = Self.unkeepableRows[index]
        let json = #"{"changes":[{"collection":"notes","id":"a","value":{}},\#(row),{"collection":"notes","id":"b","value":{}}],"cursor":"e.1","hasMore":false}"#
        try await withHostileServer({ router, _ in
            router.get("api/sync") { _, _ in Self.page(json) }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let database = try Self.labDatabase()
                let engine = Self.labEngine(database, api, transport)
                try await engine.pull()
                let (ids, saved) = try await database.writer.read { db in
                    (try String.fetchAll(db, sql: "SELECT id FROM note ORDER BY id"), try SyncEngine.hasPulled("notes", db))
                }
                let status = engine.progressUpdates.latest
                Self.figure("\(lie): rows \(ids) applied, cursor \(saved ? "saved" : "not saved"), \(status.droppedRows) dropped: \(status.lastDroppedRow.map(String.init(describing:)) ?? "none")")
                #expect(ids == ["a", "b"] && saved)
                #expect(status.droppedRows == 1 && status.lastDroppedRow?.collection == "notes")
            }
        }
    }

    @Test("a later page to a collection not asked for is refused; the first page stays applied")
    func laterPageGoesBack() async throws {
        try await withHostileServer({ router, _ in
            router.get("api/sync") { request, _ in
                request.uri.queryParameters.get("cursor") == nil
                    ? Self.page(#"{"changes":[{"collection":"notes","id":"a","value":{}}],"cursor":"e.10","hasMore":true}"#)
                    : Self.page(#"{"changes":[{"collection":"secrets","id":"b","value":{}}],"cursor":"e.11","hasMore":false}"#)
            }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let database = try Self.labDatabase()
                let engine = Self.labEngine(database, api, transport)
                let refused = (try? await engine.pull()) == nil
                let ids = try await database.writer.read { db in try String.fetchAll(db, sql: "SELECT id FROM note ORDER BY id") }
                Self.figure("a second page of another collection: \(refused ? "refused" : "accepted"), rows \(ids)")
                #expect(refused && ids == ["a"])
            }
        }
    }

    // MARK: Event streams that misbehave

    @Test("an event stream that answers 200 and drops at once is not reopened four times a second")
    func streamThatDrops() async throws {
        try await withHostileServer({ router, _ in
            router.get("api/sync/events") { _, _ in
                Response(status: .ok, headers: [.contentType: "text/event-stream"], body: .init(byteBuffer: ByteBuffer(string: ": connected\n\n")))
            }
            router.get("api/sync") { _, _ in Self.page(#"{"changes":[],"cursor":"e.0","hasMore":false}"#) }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let engine = Self.labEngine(try Self.labDatabase(), api, transport, liveStream: true)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.run() }
                    defer { group.cancelAll() }
                    try await Task.sleep(for: .seconds(4))
                }
                let opens = api.requests(to: "/api/sync/events").count
                let pulls = api.requests(to: Self.syncPath).count
                Self.figure("a stream that drops at once: opened \(opens) times in 4 s, \(pulls) pulls")
                #expect(opens <= 5, "opened \(opens) times in 4 s")
                #expect(pulls <= opens + 1)
            }
        }
    }

    @Test("an event of endless data lines is dropped at its bound: memory stays bounded")
    func endlessEvent() async throws {
        let chunk = Array(String(repeating: "data: x\n", count: 1 << 14).utf8)
        let chunks = (200 << 20) / chunk.count
        try await withHostileServer({ router, writes in
            router.get("api/sync/events") { _, _ in
                writes.stream(prefix: ": connected\n\n", chunk, count: chunks, headers: [.contentType: "text/event-stream"])
            }
            router.get("api/sync") { _, _ in Self.page(#"{"changes":[],"cursor":"e.0","hasMore":false}"#) }
        }) { api in
            try await HTTPClientTransport.withTransport { transport in
                let engine = Self.labEngine(try Self.labDatabase(), api, transport, liveStream: true)
                let watch = ResidentMemoryWatch()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.run() }
                    defer { group.cancelAll() }
                    // Until the whole 200 MiB is written, or the client has dropped the stream
                    // and come back, or 20 s.
                    let clock = ContinuousClock()
                    let deadline = clock.now + .seconds(20)
                    while api.bodyBytesWritten < chunks * chunk.count, api.requests(to: "/api/sync/events").count < 2, clock.now < deadline {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                }
                let growth = watch.stop()
                Self.figure("endless data lines: resident memory grew by \(ResidentMemoryWatch.mebibytes(growth)) while the server wrote \(ResidentMemoryWatch.mebibytes(api.bodyBytesWritten))")
                #expect(growth < 64 << 20, "resident memory grew by \(ResidentMemoryWatch.mebibytes(growth))")
            }
        }
    }
}
