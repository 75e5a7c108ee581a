public import Foundation
import OfflineCore
public import OfflineKit
import OfflineServer

/// What every scenario model is built from: OfflineKit's public pieces, plus the demo's
/// background-work and redraw hooks. Toasts are each screen's own, in its state.
public struct DemoEnvironment: Sendable {
    /// The server as the client reaches it (through the network switch).
    public var serverURL: URL
    /// The app's transport: gated by connectivity and reporting outcomes to it.
    public var transport: any HTTPTransport
    /// The transport underneath, for OfflineKit components that gate requests themselves
    /// (the response cache, the outbox, downloads). Signed in: every request carries the
    /// account's access token, refreshed when the server says it expired.
    public var rawTransport: any HTTPTransport
    /// The account the demo signs in as by default: Ana, one of the backend's seeded demo
    /// accounts (Ben is the other).
    public static let account = (name: "ana", password: AccountSeed.demoPassword)
    /// The account this demo signs in as (its name is its id on the demo backend).
    public var user: String
    public var connectivity: any ConnectivitySource
    /// The app's local database.
    public var database: OfflineDatabase
    /// Where the app keeps files (downloads, packs).
    public var directory: URL
    /// Wall-clock time for persisted timestamps and "today".
    public var now: @Sendable () -> Date
    /// The user's other device, when the demo has one (the chat's "post from your tablet").
    public var otherDevice: OtherDevice?
    let tasks: BackgroundTasks
    let changes: ChangeSignal

    public init(
        serverURL: URL,
        rawTransport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        database: OfflineDatabase,
        directory: URL,
        user: String = DemoEnvironment.account.name,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.serverURL = serverURL
        self.user = user
        let session = SignInSession(serverURL: serverURL, name: user, password: Self.account.password, transport: rawTransport)
        self.rawTransport = BearerTokenTransport(rawTransport, tokens: session)
        self.transport = GatedTransport(self.rawTransport, connectivity: connectivity)
        self.connectivity = connectivity
        self.database = database
        self.directory = directory
        self.now = now
        self.tasks = BackgroundTasks()
        self.changes = ChangeSignal()
    }

    /// Runs `work` in the demo's task group (owned, cancelled on exit).
    public func spawn(_ work: @escaping @Sendable () async -> Void) { tasks.spawn(work) }

    /// Runs `body` while the work handed to ``spawn(_:)`` runs (the screens' loops and what they
    /// started), and cancels that work once `body` returns: for callers with no ``DemoRuntime``
    /// around them, such as the benchmarks.
    package func withBackgroundTasks<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [tasks] in await tasks.run() }
            defer { group.cancelAll() }
            return try await body()
        }
    }

    /// Asks for a redraw.
    public func changed() { changes.send() }

    public func url(_ path: String) -> URL {
        serverURL.appending(path: path)
    }
}

/// Background work that a task group owns: scenarios hand work in, the runtime runs it.
final class BackgroundTasks: Sendable {
    typealias Work = @Sendable () async -> Void
    private let stream: AsyncStream<Work>
    private let continuation: AsyncStream<Work>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Work.self)
    }

    func spawn(_ work: @escaping Work) { continuation.yield(work) }

    /// Runs every spawned piece of work until cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await work in stream {
                group.addTask { await work() }
            }
        }
    }
}

/// A redraw request, fanned out to whoever draws.
final class ChangeSignal: Sendable {
    private let broadcast = Broadcast<Int>(0)
    func send() { broadcast.send(broadcast.latest &+ 1) }
    func updates() -> AsyncStream<Int> { broadcast.subscribe() }
}
