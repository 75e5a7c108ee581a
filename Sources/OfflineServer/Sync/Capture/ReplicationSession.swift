import Foundation
import NIOCore
import NIOPosix

/// What the session hands its reader: the server's messages of one read, or the clock's tick.
enum ReplicationInput: Sendable {
    case messages([ReplicationWire.Backend])
    case tick
}

/// One logical replication session on a connection of its own: it signs in with
/// `replication=database`, starts streaming a slot, and gives its reader one input loop of the
/// server's messages and of a tick every `tick`, on which the reader answers with its standby
/// status.
enum ReplicationSession {
    struct Failed: Error, Sendable, CustomStringConvertible {
        var description: String
    }

    /// Connects to `endpoint`, signs in, sends `command` (a `START_REPLICATION`), and once the
    /// server streams, runs `read` with the inputs and a function that sends a standby status.
    /// The connection closes when `read` returns or throws.
    static func run(_ endpoint: PostgresEndpoint, command: String, tick: Duration,
                    read: (inout Inputs, _ status: (UInt64, Bool) async throws -> Void) async throws -> Void) async throws {
        try await session(endpoint, tick: tick) { inputs, outbound, patience in
            var buffer = ByteBuffer()
            ReplicationWire.query(command, into: &buffer)
            try await outbound.write(buffer)
            streaming: while true {
                switch try await inputs.nextBackend(within: patience) {
                case .copyBothResponse: break streaming
                case .error(let text): throw Failed(description: "PostgreSQL refused to stream changes: \(text)")
                default: continue
                }
            }
            let epoch = Date(timeIntervalSince1970: 946_684_800)  // 2000-01-01, PostgreSQL's epoch
            try await read(&inputs) { flushed, reply in
                var buffer = ByteBuffer()
                ReplicationWire.standbyStatus(flushed: flushed, clock: Int64(Date().timeIntervalSince(epoch) * 1_000_000),
                                              reply: reply, into: &buffer)
                try await outbound.write(buffer)
            }
        }
    }

    /// A slot made on a replication session, and the snapshot the session exported with it.
    struct CreatedSlot: Sendable, Hashable {
        /// Where the slot begins: every transaction that committed after it comes from the slot,
        /// every one before it is in the snapshot.
        var consistentPoint: UInt64
        /// The snapshot's name, for `SET TRANSACTION SNAPSHOT`; it can be taken up while the
        /// session stays open and sends nothing else.
        var snapshot: String
    }

    /// Creates the logical replication slot `slot` (pgoutput) on a session of its own and, while
    /// that session holds the snapshot it exported, runs `body` with both.
    static func createSlot<T: Sendable>(_ endpoint: PostgresEndpoint, slot: String,
                                        _ body: (CreatedSlot) async throws -> T) async throws -> T {
        try await session(endpoint, tick: .milliseconds(100)) { inputs, outbound, patience in
            var buffer = ByteBuffer()
            ReplicationWire.query("CREATE_REPLICATION_SLOT \(slot) LOGICAL pgoutput (SNAPSHOT 'export')", into: &buffer)
            try await outbound.write(buffer)
            var created: CreatedSlot?
            answer: while true {
                switch try await inputs.nextBackend(within: patience) {
                case .dataRow(let fields):
                    // slot_name, consistent_point, snapshot_name, output_plugin
                    guard fields.count >= 3, let point = fields[1].flatMap(PgOutput.lsn), let snapshot = fields[2] else {
                        throw Failed(description: "PostgreSQL created the slot \(slot) but did not say where it begins")
                    }
                    created = CreatedSlot(consistentPoint: point, snapshot: snapshot)
                case .error(let text): throw Failed(description: "PostgreSQL could not create the slot \(slot): \(text)")
                case .readyForQuery: break answer
                default: continue
                }
            }
            guard let created else { throw Failed(description: "PostgreSQL created the slot \(slot) without its snapshot") }
            return try await body(created)
        }
    }

    /// Connects to `endpoint` with `replication=database` and capture's session settings, signs
    /// in, and runs `body` with the server's messages, a writer to it, and how many ticks make
    /// the 10 s it is given for each answer while a command starts; says goodbye after.
    private static func session<T: Sendable>(
        _ endpoint: PostgresEndpoint, tick: Duration,
        _ body: (inout Inputs, NIOAsyncChannelOutboundWriter<ByteBuffer>, _ patience: Int) async throws -> T
    ) async throws -> T {
        let ticks = TimeAmount.nanoseconds(Int64(tick.components.seconds) * 1_000_000_000 + tick.components.attoseconds / 1_000_000_000)
        // Ticks allowed for each answer while the session starts: 10 s.
        let patience = Int(10 / (Double(ticks.nanoseconds) / 1e9))
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .connect(host: endpoint.host, port: endpoint.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(ReplicationMessageDecoder()))
                    try channel.pipeline.syncOperations.addHandler(ReplicationTicks(every: ticks))
                    return try NIOAsyncChannel<ReplicationInput, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var inputs = Inputs(iterator: inbound.makeAsyncIterator())
            var buffer = ByteBuffer()
            // Values reach capture in their text form, written in the session's settings
            // (``PostgresCapture/sessionSettings``): dates as ISO 8601, times in UTC, whatever the
            // database's defaults.
            ReplicationWire.startup([("user", endpoint.user), ("database", endpoint.database ?? endpoint.user), ("replication", "database"),
                                     ("application_name", "offlinekit-capture"), ("client_encoding", "UTF8")]
                                        + PostgresCapture.sessionSettings, into: &buffer)
            try await outbound.write(buffer)
            try await signIn(endpoint, &inputs, patience: patience, outbound)
            let value = try await body(&inputs, outbound, patience)
            buffer.clear()
            ReplicationWire.terminate(into: &buffer)
            try? await outbound.write(buffer)
            return value
        }
    }

    /// Answers the server's authentication requests until it accepts, then waits until it is ready.
    private static func signIn(_ endpoint: PostgresEndpoint, _ inputs: inout Inputs, patience: Int,
                               _ outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>) async throws {
        var scram: ReplicationSignIn.SCRAM?
        func password() throws -> String {
            guard let password = endpoint.password else {
                throw Failed(description: "PostgreSQL asks for a password and the URL has none")
            }
            return password
        }
        var buffer = ByteBuffer()
        while true {
            buffer.clear()
            switch try await inputs.nextBackend(within: patience) {
            case .authentication(.ok):
                continue
            case .authentication(.cleartextPassword):
                ReplicationWire.password(try password(), into: &buffer)
            case .authentication(.md5Password(let salt)):
                ReplicationWire.password(ReplicationSignIn.md5(user: endpoint.user, password: try password(), salt: salt), into: &buffer)
            case .authentication(.sasl(let mechanisms)):
                guard mechanisms.contains(ReplicationSignIn.SCRAM.mechanism) else {
                    throw Failed(description: "PostgreSQL offers \(mechanisms.joined(separator: ", ")), not SCRAM-SHA-256")
                }
                let exchange = ReplicationSignIn.SCRAM(password: try password())
                ReplicationWire.saslInitial(mechanism: ReplicationSignIn.SCRAM.mechanism, exchange.first, into: &buffer)
                scram = exchange
            case .authentication(.saslContinue(let data)):
                guard var exchange = scram else { throw Failed(description: "PostgreSQL continued a SCRAM exchange never begun") }
                ReplicationWire.saslResponse(try exchange.final(answering: data), into: &buffer)
                scram = exchange
            case .authentication(.saslFinal(let data)):
                guard let exchange = scram else { throw Failed(description: "PostgreSQL ended a SCRAM exchange never begun") }
                try exchange.check(serverFinal: data)
                continue
            case .authentication(.unsupported(let code)):
                throw Failed(description: "PostgreSQL asks for an authentication method this session does not speak (\(code))")
            case .error(let text):
                throw Failed(description: "PostgreSQL refused the replication session: \(text)")
            case .readyForQuery:
                return
            default:
                continue
            }
            try await outbound.write(buffer)
        }
    }

    /// The session's inputs, one at a time.
    struct Inputs {
        var iterator: NIOAsyncChannelInboundStream<ReplicationInput>.AsyncIterator
        private var waiting: [ReplicationWire.Backend] = []

        init(iterator: NIOAsyncChannelInboundStream<ReplicationInput>.AsyncIterator) {
            self.iterator = iterator
        }

        /// The next batch of messages or tick.
        ///
        /// - Throws: ``Failed`` when the connection ends.
        mutating func next() async throws -> ReplicationInput {
            if !waiting.isEmpty {
                defer { waiting.removeAll() }
                return .messages(waiting)
            }
            guard let input = try await iterator.next() else { throw Failed(description: "PostgreSQL closed the replication connection") }
            return input
        }

        /// The server's next message, ticks passed over (before the stream starts).
        ///
        /// - Throws: ``Failed`` when `ticks` ticks pass before it: a server that stops answering
        ///   while the session starts does not hold capture for good.
        mutating func nextBackend(within ticks: Int) async throws -> ReplicationWire.Backend {
            var waited = 0
            while true {
                if !waiting.isEmpty { return waiting.removeFirst() }
                switch try await next() {
                case .messages(let messages): waiting = messages
                case .tick:
                    waited += 1
                    guard waited < ticks else { throw Failed(description: "PostgreSQL stopped answering while the replication session started") }
                }
            }
        }
    }
}

/// Fires a ``ReplicationInput/tick`` every interval while the connection is open.
private final class ReplicationTicks: ChannelInboundHandler {
    typealias InboundIn = ReplicationInput
    typealias InboundOut = ReplicationInput

    let interval: TimeAmount
    private var task: RepeatedTask?

    init(every interval: TimeAmount) {
        self.interval = interval
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard task == nil else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        task = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = bound.value
            context.fireChannelRead(handler.wrapInboundOut(.tick))
            context.fireChannelReadComplete()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        task?.cancel()
        task = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        task?.cancel()
        task = nil
    }
}
