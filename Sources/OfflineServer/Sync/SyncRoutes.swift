import Foundation
import Hummingbird
import Logging
import NIOCore
import OfflineCore

/// What the sync routes serve from: the rules, the feed's storage, and where capture stands.
struct SyncService: Sendable {
    let rules: SyncRules
    let storage: any ServerStorage
    let heartbeat: Duration
    /// Where pulls, streams and the feed's gauges are counted.
    var metrics = ServerMetrics()
    /// What this instance's capture is doing.
    var captureStatus = CaptureStatus()
    /// The source position a client waits for after its writes settle (``SQLiteCapture/checkpoint(in:)``,
    /// or PostgreSQL's current WAL position).
    let checkpoint: @Sendable () async throws -> Int64
    /// Devices' writes to the rules' collections (``RowWrites``); nil: none are served.
    var rowWrites: RowWrites?
    /// Live streams open on this instance, per user.
    let streams = PlacesPerUser(perUser: PlacesPerUser.streams)
    /// Pages read once for the members of a workspace at the same cursor.
    let sharedPages = SharedPages()
    /// The page after each pull's, read while the device takes that one.
    let readAhead = PageReadAhead()
    /// Page reads asked for together, read together.
    private let pageReads: BatchedReads<SyncPull.Request, SharedPages.Answer>

    init(rules: SyncRules, storage: any ServerStorage, heartbeat: Duration, metrics: ServerMetrics = ServerMetrics(),
         captureStatus: CaptureStatus = CaptureStatus(), checkpoint: @escaping @Sendable () async throws -> Int64) {
        self.rules = rules
        self.storage = storage
        self.heartbeat = heartbeat
        self.metrics = metrics
        self.captureStatus = captureStatus
        self.checkpoint = checkpoint
        pageReads = BatchedReads { [sharedPages, rules] requests in
            var answers: [Result<SharedPages.Answer, any Error>] = []
            // Pages after a failed statement are read again, in a snapshot of their own.
            while answers.count < requests.count {
                let left = requests[answers.count...]
                do {
                    answers += try await storage.read { db in try sharedPages.pages(left, rules: rules, in: db) }
                } catch {
                    // The snapshot itself failed (the database unreachable): so would the rest.
                    answers += left.map { _ in .failure(error) }
                }
            }
            return answers
        }
    }

    /// Sets the gauges read at each scrape: the feed's head, how far capture is behind its
    /// source, and what it is doing. A failed read (a database restarting) leaves them as they
    /// were.
    func refreshGauges() async {
        metrics.captureCapturing.record(captureStatus.state == .capturing ? 1 : 0)
        guard let state = try? await storage.read({ db in try SyncFeed.state(in: db) }) else { return }
        metrics.feedHead.record(state.head)
        if let checkpoint = try? await checkpoint() {
            let readiness = SyncReadiness(state: state, checkpoint: checkpoint, now: Date(), capture: captureStatus.state)
            metrics.captureBehind.record(readiness.behind)
            metrics.captureLag.record(readiness.lagSeconds)
            metrics.captureStoppedTables.record(readiness.stoppedTables)
        }
    }

    /// Whether sync can be served as it should, and how far capture is behind.
    ///
    /// - Throws: when the database cannot be read.
    func readiness() async throws -> SyncReadiness {
        let state = try await storage.read { db in try SyncFeed.state(in: db) }
        return SyncReadiness(state: state, checkpoint: try await checkpoint(), now: Date(), capture: captureStatus.state)
    }

    /// The page after `request.cursor` and its JSON, read once for the members it is the same for
    /// (``SharedPages``).
    ///
    /// - Throws: ``SyncPull/Refusal``; database errors.
    func page(_ request: SyncPull.Request) async throws -> SharedPages.Answer {
        try await pageReads(request)
    }

    /// ``page(_:)`` for a pull: the page read ahead for it, if waiting (``PageReadAhead``); the
    /// page after it, when there is more, then read ahead.
    func pull(_ request: SyncPull.Request) async throws -> SharedPages.Answer {
        try await readAhead.answer(request) { [pageReads] request in try await pageReads(request) }
    }

    /// The audiences `user` belongs to as the feed has them at its head.
    func audiences(of user: String) async throws -> Set<String> {
        try await storage.read { db in
            guard let head = try SyncFeed.state(in: db)?.head else { return [] }
            return try SyncPull.audiences(of: user, through: head, in: db)
        }
    }
}

extension Router where Context == OfflineRequestContext {
    /// The signed-in user's rows, from every audience they belong to:
    ///
    /// - `GET /api/sync?collections=A,B&cursor=…&limit=…` →
    ///   `{"changes": [{"collection", "id", "value"} or {"collection", "id", "deleted": true}], "cursor", "hasMore", "through", "progress"?}`.
    ///   Without a cursor, a first sync; with one, what changed after it (a workspace joined comes
    ///   whole, one left goes). Send the answer's `cursor` next time, at once while `hasMore`.
    /// - `410` problem: the cursor cannot be followed; sync again without one.
    /// - `503` problem with `Retry-After`: the feed is being built from the tables; try again.
    /// - `GET /api/sync/checkpoint` → `{"checkpoint": N}`: once a page says `through` ≥ N, every
    ///   write committed before the checkpoint was asked for is in the pulls.
    /// - `GET /api/sync/events`: the live stream that says when to pull, or, with `?collections=`
    ///   and the cursor as `Last-Event-ID`, sends the pages themselves (``SyncEvents``).
    func addSyncRoutes(_ sync: SyncService) {
        get("/api/sync") { request, context in
            let user = try context.requireUser().id
            let query = request.uri.queryParameters
            let collections = try SyncLimits.collections(query["collections"])
            var limit = SyncLimits.defaultPage
            if let text = query["limit"] {
                guard let parsed = Int(text), parsed > 0 else { throw BadRequest(detail: "The limit must be a positive number.") }
                limit = Swift.min(parsed, SyncLimits.maximumPage)
            }
            let cursor = query["cursor"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
            let pull = SyncPull.Request(user: user, collections: collections, cursor: cursor, limit: limit, maxBytes: SyncLimits.maximumPageBytes)
            do {
                let (page, json) = try await sync.pull(pull)
                sync.metrics.pulls.increment()
                sync.metrics.changesSent.increment(by: page.changes.count)
                if let behind = page.behind { sync.metrics.pullBehind.record(behind) }
                return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                                body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
            } catch let refusal as SyncPull.Refusal {
                switch refusal {
                case .gone:
                    sync.metrics.pullsGone.increment()
                    return problemResponse(.gone, "This sync position is no longer kept. Sync again from the start.")
                case .badCursor: throw BadRequest(detail: "The cursor is not one this server gave out.")
                case .unknownCollection(let name): throw BadRequest(detail: "No collection \(name) is synced by this server.")
                case .building:
                    var response = problemResponse(.serviceUnavailable, "The server is getting sync ready. Try again in a moment.")
                    response.headers[.retryAfter] = "1"
                    return response
                }
            }
        }
        // Unauthenticated, for load balancers and orchestrators: 200 when sync is served as it
        // should be, 503 while the feed is built or capture is over 30 s behind. Counts only:
        // which tables stopped, and why, are in the log.
        get("/health/ready") { _, _ in
            do {
                let readiness = try await sync.readiness()
                return Response(status: readiness.ready ? .ok : .serviceUnavailable,
                                headers: [.contentType: "application/json", .cacheControl: "no-store"],
                                body: ResponseBody(byteBuffer: ByteBuffer(string: readiness.json)))
            } catch {
                return problemResponse(.serviceUnavailable, "The database cannot be read.")
            }
        }
        get("/api/sync/checkpoint") { _, context in
            _ = try context.requireUser()
            let checkpoint = try await sync.checkpoint()
            return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"checkpoint":\#(checkpoint)}"#)))
        }
        get("/api/sync/events") { request, context in
            let user = try context.requireUser().id
            var follow: SyncEvents.Follow?
            // Collections named are checked whether or not a cursor comes with them: a stream is
            // never opened on a request the route would refuse with one.
            if let names = request.uri.queryParameters["collections"] {
                let collections = try SyncLimits.collections(names)
                if let unknown = collections.first(where: { !sync.rules.serves($0) }) {
                    throw BadRequest(detail: "No collection \(unknown) is synced by this server.")
                }
                if let cursor = request.headers[SyncEvents.lastEventID], !cursor.isEmpty {
                    guard cursor.utf8.count <= SyncCursor.maximumLength else {
                        throw BadRequest(detail: "The cursor is not one this server gave out.")
                    }
                    follow = SyncEvents.Follow(collections: collections, cursor: cursor)
                }
            }
            guard let lease = sync.streams.lease(for: user) else {
                return problemResponse(.tooManyRequests, "This account has \(sync.streams.perUser) live streams open already. Close one to open another.")
            }
            return SyncEvents(user: user, sync: sync, lease: lease, follow: follow, body: request.body).response()
        }
        // Served whatever the rules: a collection that takes no writes is 404.
        if let writes = sync.rowWrites {
            let rows = group("/api/rows")
            rows.put(":collection/:id") { request, context in try await rowWrite(.put, request, context, sync.storage, writes) }
            rows.patch(":collection/:id") { request, context in try await rowWrite(.patch, request, context, sync.storage, writes) }
            rows.delete(":collection/:id") { request, context in try await rowWrite(.delete, request, context, sync.storage, writes) }
        }
    }
}

/// A device's write to a row of a rules collection (``RowWrites``), exactly once.
private func rowWrite(_ operation: RowWrites.Operation, _ request: Request, _ context: OfflineRequestContext, _ storage: any ServerStorage,
                      _ writes: RowWrites) async throws -> Response {
    let user = try context.requireUser().id
    var request = request
    let body = try await request.collectBody(upTo: context.maxUploadSize)
    let (collection, id): (String, String)
    var object: [String: JSONValue] = [:]
    do {
        (collection, id) = (try context.pathParameter("collection"), try context.pathParameter("id"))
        if operation != .delete { object = try JSONBody.object(body, maxBytes: context.maxUploadSize) }
    } catch let refusal as BadRequest {
        // Returned, not thrown, so the idempotency key keeps this answer like any other 4xx.
        return problemResponse(refusal.status, refusal.detail)
    }
    if operation == .put, let refusal = SyncedRowID.refusal(id, of: "row") { return refusal }
    let now = Date()
    return try await context.commitWrite(on: storage) { [object] db in
        try writes.apply(operation, collection: collection, id: id, body: object, user: user, now: now, in: db)
    }
}

/// How much a page carries.
enum SyncLimits {
    static let defaultPage = 500
    static let maximumPage = 2_000
    /// Past this many bytes of rows a page ends early, whatever its limit.
    static let maximumPageBytes = 4 << 20
    /// The most collections one request names.
    static let maximumCollections = 64

    /// The collections a `collections=A,B` parameter names (empty names skipped).
    ///
    /// - Throws: `400` when it names none, or more than ``maximumCollections``.
    static func collections(_ parameter: Substring?) throws -> [String] {
        let collections = (parameter ?? "").split(separator: ",").map(String.init)
        guard !collections.isEmpty, collections.count <= maximumCollections else {
            throw BadRequest(detail: "Name the collections to sync: collections=A,B (at most \(maximumCollections)).")
        }
        return collections
    }
}

extension SyncPull.Page {
    /// The page as JSON, each row's JSON copied in as capture wrote it.
    var jsonBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(changes.reduce(96 + cursor.utf8.count) { $0 + 48 + $1.collection.utf8.count + $1.id.utf8.count + ($1.value?.count ?? 0) })
        bytes += #"{"changes":["#.utf8
        for (index, change) in changes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += #"{"collection":"#.utf8
            JSONValue.write(change.collection, to: &bytes)
            bytes += #","id":"#.utf8
            JSONValue.write(change.id, to: &bytes)
            if let value = change.value {
                bytes += #","value":"#.utf8
                bytes += value
            } else {
                bytes += #","deleted":true"#.utf8
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes += #"],"cursor":"#.utf8
        JSONValue.write(cursor, to: &bytes)
        bytes += #","hasMore":\#(hasMore),"through":\#(through)"#.utf8
        if let progress { bytes += #","progress":\#((progress * 1000).rounded() / 1000)"#.utf8 }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
