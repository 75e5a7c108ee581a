public import Foundation

/// Everything an app needs to work offline against one server, wired together and run as one:
/// the connectivity monitor, the transport, the response cache, the outbox and its drainer, and
/// sync when the app declares synced collections.
///
/// ```swift
/// let client = try OfflineClient(
///     serverURL: URL(string: "https://api.example.com")!,
///     database: .open(at: databaseURL),
///     operations: [.saveNote]
/// )
/// Task { try await client.run() }          // until the app's task is cancelled
///
/// let notes = try await client.cache.load(CacheQuery(TransportRequest(url: client.url("api/notes"))))
/// try await client.outbox.write(.saveNote, path: "/api/notes/1", json: note)
/// ```
///
/// Each part stays usable alone, and is reachable here to configure what the defaults do not:
/// ``monitor`` for the banner (``ConnectivityObserver`` in SwiftUI), ``cache`` for reads,
/// ``outbox`` for writes, ``drainer`` to wait for delivery, ``sync`` for collections that come
/// down by delta.
public final class OfflineClient: Sendable {
    /// The server every relative path is resolved against.
    public let serverURL: URL
    public let database: OfflineDatabase
    public let monitor: ConnectivityMonitor
    /// What requests go through, under the gate: the app's own transport or the platform's
    /// (which ``run()`` releases), with the user's bearer token when `tokens` was given.
    public let transport: any HTTPTransport
    public let cache: ResponseCache
    public let outbox: Outbox
    public let drainer: OutboxDrainer
    /// Present when the app declared synced collections.
    public let sync: SyncEngine?
    private let ownedTransport: OwnedTransport?
    /// The transport without tokens, for the token sources of the accounts that sign in.
    let unsigned: any HTTPTransport
    let signedIn: SignedInTransport

    /// - Parameters:
    ///   - serverURL: the app's server.
    ///   - database: the app's local database (``OfflineDatabase/open(at:)``).
    ///   - operations: every kind of write the app queues, with its hooks.
    ///   - collections: the collections that come down by delta; none leaves ``sync`` nil.
    ///   - healthPath: what the monitor probes on the server; it must answer `204`.
    ///   - syncPath: the server's sync route (sync only): pages there, its checkpoint at
    ///     `syncPath/checkpoint`, and its live stream at `syncPath/events`, held while running.
    ///   - transport: the app's transport; nil makes the platform's own (URLSession on Apple
    ///     platforms, AsyncHTTPClient elsewhere).
    ///   - tokens: the signed-in user's access tokens, made with the transport underneath (for
    ///     example `{ SignInSession(serverURL: server, name: name, password: password, transport: $0) }`):
    ///     every request then carries a bearer token, refreshed when the server refuses it.
    ///     ``switchAccount(to:tokens:)`` replaces them when another user signs in.
    ///   - linkMonitor: the operating system's link events; the system's by default.
    public init(
        serverURL: URL,
        database: OfflineDatabase,
        operations: [OutboxOperation] = [],
        collections: [SyncedCollection] = [],
        healthPath: String = "health",
        syncPath: String = "api/sync",
        transport: (any HTTPTransport)? = nil,
        tokens: ((any HTTPTransport) -> any AccessTokenSource)? = nil,
        linkMonitor: (any LinkMonitor)? = systemLinkMonitor()
    ) {
        self.serverURL = serverURL
        self.database = database
        let owned: OwnedTransport?
        let unsigned: any HTTPTransport
        if let transport {
            owned = nil
            unsigned = transport
        } else {
            let platform = OwnedTransport.platform()
            owned = platform
            unsigned = platform.transport
        }
        let signedIn = SignedInTransport(unsigned, tokens: tokens?(unsigned))
        let base: any HTTPTransport = signedIn
        ownedTransport = owned
        self.unsigned = unsigned
        self.signedIn = signedIn
        self.transport = base
        monitor = ConnectivityMonitor(probe: ConnectivityProbe(url: serverURL.appending(path: healthPath)), linkMonitor: linkMonitor)
        cache = ResponseCache(database: database, transport: base, connectivity: monitor)
        outbox = Outbox(database: database, operations: operations)
        let sync = collections.isEmpty ? nil : SyncEngine(database: database, baseURL: serverURL, transport: base, connectivity: monitor,
                                                           collections: collections, outbox: outbox, syncPath: syncPath)
        self.sync = sync
        // Changes made elsewhere while offline come down before the user's go up, so an edit
        // both made is reported as a conflict rather than overwritten unseen.
        drainer = OutboxDrainer(outbox: outbox, baseURL: serverURL, transport: base, connectivity: monitor, pullFirst: sync)
    }

    /// `path` resolved against the server, for the requests the app builds.
    public func url(_ path: String) -> URL {
        serverURL.appending(path: path)
    }

    /// Runs the monitor, the cache's revalidations, the drainer and sync until the calling task
    /// is cancelled, then releases the transport this client made. Call it once.
    ///
    /// - Throws: the first error a part ends with (the outbox owned by another process, a
    ///   database that went away); cancellation ends it without an error.
    public func run() async throws {
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.monitor.run() }
                group.addTask { try await self.cache.run() }
                group.addTask { try await self.drainer.run() }
                if let sync { group.addTask { try await sync.run() } }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch is CancellationError {
        }
        await ownedTransport?.release()
    }

    /// Runs the client (``run()``) while `body` runs, then stops it and returns once it stopped:
    /// its outbox's lock released, the transport it made closed.
    ///
    /// ```swift
    /// let unread = try await client.running { client in
    ///     try await client.sync?.pull()
    ///     return try await client.database.writer.read(Message.fetchCount)
    /// }
    /// ```
    ///
    /// For work with a beginning and an end: a background task (`BGAppRefreshTask`), a
    /// command-line tool, a test. An app that keeps the client for its whole life calls ``run()``
    /// from a task of its own instead (in SwiftUI, `.task { try? await client.run() }`). Like
    /// ``run()``, call it once per client.
    ///
    /// `body` starts once the client holds its outbox's lock, so a client whose queue another
    /// process delivers throws ``OutboxError/queueOwnedElsewhere(path:)`` without running `body`.
    ///
    /// - Throws: what `body` throws; or what ``run()`` ended with before `body` returned (the
    ///   outbox owned by another process, before `body` started; a database that went away),
    ///   `body` then being cancelled.
    @discardableResult
    public func running<Value: Sendable>(_ body: @escaping @Sendable (OfflineClient) async throws -> Value) async throws -> Value {
        try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask { try await self.run(); return nil }
            group.addTask { [drainer] in
                // body starts once the client holds its outbox: a second process's client of
                // the same file fails before its body runs, instead of racing it for the lock.
                for await owning in drainer.owning.subscribe() where owning { break }
                try Task.checkCancellation()
                return try await body(self)
            }
            defer { group.cancelAll() }
            // run() ends before body only with an error (thrown here) or when this task is
            // cancelled (body is too, and ends with what it throws then).
            while let result = try await group.next() {
                guard let value = result else { continue }
                group.cancelAll()
                try await group.waitForAll()
                return value
            }
            throw CancellationError()
        }
    }
}

/// A transport the client made and must release, once: at the end of ``OfflineClient/run()``,
/// or when the client goes away without having run.
final class OwnedTransport: Sendable {
    let transport: any HTTPTransport
    private let shutdown: @Sendable () async -> Void
    private let released = Locked(false)

    private init(transport: any HTTPTransport, shutdown: @escaping @Sendable () async -> Void) {
        self.transport = transport
        self.shutdown = shutdown
    }

    static func platform() -> OwnedTransport {
        #if canImport(Darwin)
        let transport = URLSessionTransport()
        return OwnedTransport(transport: transport, shutdown: { transport.invalidate() })
        #else
        let transport = HTTPClientTransport()
        return OwnedTransport(transport: transport, shutdown: { try? await transport.shutdown() })
        #endif
    }

    func release() async {
        guard released.withLock({ released in defer { released = true }; return !released }) else { return }
        await shutdown()
    }

    deinit {
        // Nothing can be awaited here: the release runs on its own, holding what it releases.
        if !released.current { Task { [shutdown] in await shutdown() } }
    }
}
