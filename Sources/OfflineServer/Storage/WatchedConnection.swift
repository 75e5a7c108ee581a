import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// A PostgreSQL session of its own whose statements fail once its connection has closed.
///
/// PostgresNIO sends a statement by writing it into the connection's channel, whose handler
/// answers it. Once the channel has closed, the handler is gone: the write fails unseen, and the
/// statement's answer never comes. Capture, which sends a statement every few milliseconds on a
/// session of its own, waited on such a statement for ever after PostgreSQL restarted or ended
/// its session (`pg_terminate_backend`): no error, and nothing captured again by any instance.
///
/// Here each statement is sent from a task of its own and raced against the connection's close,
/// and whichever comes first answers: a closed connection fails every statement waiting on it,
/// and every statement sent after. A statement written in the moment the connection closed stays
/// waiting in its task, which nothing awaits any more (at most one per connection lost). Rows
/// are read as the statement's sequence gives them: once the handler has taken a statement, it
/// fails its rows if the connection closes.
///
/// The storage's pooled connections are kept from the same fate otherwise: their statements are
/// synchronous, sent from the connection's event loop after a check that it is open
/// (``PostgresStorage``).
struct WatchedConnection: Sendable {
    let connection: PostgresConnection
    private let watch = CloseWatch()

    /// Connects to `configuration` and watches the connection from then on. Its channel reads
    /// only what its handler asks for (``AskedReadsOnly``).
    static func connect(_ configuration: PostgresConnection.Configuration, id: Int, logger: Logger) async throws -> WatchedConnection {
        guard let host = configuration.host, let port = configuration.port else {
            return WatchedConnection(try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger))
        }
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(configuration.options.connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(AskedReadsOnly()) }
            }
            .connect(host: host, port: port).get()
        var established = PostgresConnection.Configuration(establishedChannel: channel, tls: configuration.tls,
                                                           username: configuration.username, password: configuration.password,
                                                           database: configuration.database)
        established.options = configuration.options
        do {
            return WatchedConnection(try await PostgresConnection.connect(on: channel.eventLoop, configuration: established, id: id, logger: logger))
        } catch {
            try? await channel.close()
            throw error
        }
    }

    init(_ connection: PostgresConnection) {
        self.connection = connection
        connection.closeFuture.whenComplete { [watch] _ in watch.close() }
    }

    var isClosed: Bool { connection.isClosed }

    @discardableResult
    func query(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await run { connection in try await connection.query(query, logger: logger) }
    }

    func execute<Statement: PostgresPreparedStatement>(
        _ statement: Statement, logger: Logger
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row> where Statement.Row: Sendable {
        try await run { connection in try await connection.execute(statement, logger: logger) }
    }

    func close() async throws {
        try await connection.close()
    }

    /// `statement`'s answer, or ``StorageError/connectionClosed`` once the connection has closed.
    func run<T: Sendable>(_ statement: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let answer = Answer<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                answer.wait(continuation)
                guard let id = watch.add({ answer.give(.failure(StorageError.connectionClosed)) }) else {
                    answer.give(.failure(StorageError.connectionClosed))
                    return
                }
                answer.start { [connection, watch] in
                    let result: Result<T, any Error>
                    do { result = .success(try await statement(connection)) } catch { result = .failure(error) }
                    watch.remove(id)
                    answer.give(result)
                }
            }
        } onCancel: {
            answer.give(.failure(CancellationError()))
        }
    }
}

/// The statements waiting on one connection, failed together when it closes.
private final class CloseWatch: Sendable {
    private struct State {
        var closed = false
        var next = 0
        var waiting: [Int: @Sendable () -> Void] = [:]
    }

    private let state = NIOLockedValueBox(State())

    /// Registers `fail`, to be called if the connection closes; nil when it has closed already.
    func add(_ fail: @escaping @Sendable () -> Void) -> Int? {
        state.withLockedValue { state in
            guard !state.closed else { return nil }
            state.next += 1
            state.waiting[state.next] = fail
            return state.next
        }
    }

    func remove(_ id: Int) {
        state.withLockedValue { _ = $0.waiting.removeValue(forKey: id) }
    }

    func close() {
        let waiting = state.withLockedValue { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for fail in waiting { fail() }
    }
}

/// One statement's answer, given once: by the statement, the connection's close, or the
/// caller's cancellation, whichever comes first; the task running the statement is cancelled
/// when it is not the statement.
private final class Answer<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var early: Result<T, any Error>?
        var given = false
        var task: Task<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let early: Result<T, any Error>? = state.withLockedValue { state in
            guard let early = state.early else {
                state.continuation = continuation
                return nil
            }
            return early
        }
        if let early { continuation.resume(with: early) }
    }

    func start(_ work: @escaping @Sendable () async -> Void) {
        let task = Task { await work() }
        let given = state.withLockedValue { state in
            state.task = task
            return state.given
        }
        if given { task.cancel() }
    }

    func give(_ result: Result<T, any Error>) {
        let (continuation, task): (CheckedContinuation<T, any Error>?, Task<Void, Never>?) = state.withLockedValue { state in
            guard !state.given else { return (nil, nil) }
            state.given = true
            guard let continuation = state.continuation else {
                state.early = result
                return (nil, state.task)
            }
            state.continuation = nil
            return (continuation, state.task)
        }
        continuation?.resume(with: result)
        if case .failure = result { task?.cancel() }
    }
}

/// Passes on what the socket gives only once the handlers behind it asked for it (`read()`), and
/// holds the rest until they ask.
///
/// PostgresNIO's row stream stops asking while its reader catches up. When PostgreSQL closes the
/// connection meanwhile (a restart, `pg_terminate_backend`), NIO reads what is left in the socket
/// without being asked, and the row stream stops the process ("How can we receive a body part,
/// after a channelReadComplete, but no read has been forwarded yet"): the server went down with
/// its database. Held here instead, those bytes wait for the next ask; a connection that closes
/// first drops them, and its statement fails as closed.
final class AskedReadsOnly: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A read was asked for and its reads have not completed yet.
    private var asked = false
    private var held: [ByteBuffer] = []

    func read(context: ChannelHandlerContext) {
        guard held.isEmpty else {
            let reads = held
            held = []
            for bytes in reads { context.fireChannelRead(wrapInboundOut(bytes)) }
            context.fireChannelReadComplete()
            return
        }
        asked = true
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if asked {
            context.fireChannelRead(data)
        } else {
            held.append(unwrapInboundIn(data))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard asked else { return }
        asked = false
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        held = []
        context.fireChannelInactive()
    }
}
