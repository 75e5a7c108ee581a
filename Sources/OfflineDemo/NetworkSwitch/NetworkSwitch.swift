public import Foundation
import NIOCore
import NIOPosix
import OfflineKit

/// A loopback TCP proxy whose network can be cut, slowed and restored at runtime.
///
/// The demo points its client at the switch instead of the server, so everything the client
/// sends crosses it: the connectivity monitor's probes, cached reads, the outbox, downloads.
///
/// ```swift
/// let network = NetworkSwitch(upstreamHost: "127.0.0.1", upstreamPort: serverPort)
/// group.addTask { try await network.run { port in print("proxy on \(port)") } }
/// network.set(.offline)    // new connections refused, open ones closed
/// network.set(.slow)       // 750 ms each way, 16 KiB/s
/// network.set(.online)
/// ```
///
/// Offline by refusal really stops listening, so clients see "connection refused"; offline by
/// black hole accepts connections and delivers nothing, so clients run into their timeouts.
public final class NetworkSwitch: Sendable {
    /// Traffic counters since the switch was created.
    public struct Statistics: Sendable, Hashable {
        /// Connections accepted and relayed to the server.
        public var connectionsRelayed = 0
        /// Connections accepted while black-holed, or closed because the switch was offline.
        public var connectionsDropped = 0
        public var bytesToServer: Int64 = 0
        public var bytesToClient: Int64 = 0
        /// Times the switch, back from refusing, could not listen on its port again (its clients
        /// then keep seeing refusals).
        public var relistenFailures = 0
    }

    private struct State {
        var statistics = Statistics()
        var connections: [ObjectIdentifier: any Channel] = [:]
        var port: Int?
    }

    public let upstreamHost: String
    public let upstreamPort: Int
    private let listenHost: String
    private let requestedPort: Int
    private let conditions: Broadcast<NetworkCondition>
    private let applied: Broadcast<NetworkCondition?>
    private let state = Locked(State())

    /// - Parameters:
    ///   - listenPort: the loopback port to listen on; 0 picks a free one.
    ///   - condition: the condition to start in.
    public init(
        upstreamHost: String,
        upstreamPort: Int,
        listenHost: String = "127.0.0.1",
        listenPort: Int = 0,
        condition: NetworkCondition = .online
    ) {
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.listenHost = listenHost
        self.requestedPort = listenPort
        self.conditions = Broadcast(condition)
        self.applied = Broadcast(nil)
    }

    /// The current condition.
    public var condition: NetworkCondition { conditions.latest }

    /// Changes the condition for new and open connections.
    public func set(_ condition: NetworkCondition) {
        conditions.send(condition)
    }

    /// Changes the condition and returns once the switch applied it: after it, a refused switch
    /// no longer listens and a restored one listens again. Returns at once when not running.
    public func change(to condition: NetworkCondition) async {
        set(condition)
        guard port != nil else { return }
        for await current in applied.subscribe() where current == condition { return }
    }

    /// Every condition from now on, starting with the current one.
    public func conditionUpdates() -> AsyncStream<NetworkCondition> { conditions.subscribe() }

    /// The port the switch listens on, once ``run(onListening:)`` has bound it.
    public var port: Int? { state.withLock { $0.port } }

    /// The URL clients use instead of the server's, once listening.
    public var url: URL? { port.flatMap { URL(string: "http://\(listenHost):\($0)") } }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Listens on loopback and relays until the calling task is cancelled.
    ///
    /// - Parameter onListening: called once with the bound port, before any condition change is
    ///   applied.
    /// - Throws: when the port cannot be bound.
    public func run(onListening: @Sendable (Int) async -> Void = { _ in }) async throws {
        var server: (any Channel)? = try await bindFirst()
        let port = server?.localAddress?.port ?? requestedPort
        state.withLock { $0.port = port }
        defer { state.withLock { $0.port = nil } }
        await onListening(port)

        var previous: NetworkCondition?
        for await condition in conditions.subscribe() {
            if Task.isCancelled { break }
            defer { previous = condition }
            switch condition {
            case .offline(.refuse):
                if let listening = server {
                    server = nil
                    try? await listening.close()
                }
                await closeAllConnections()
            case .online, .slow, .offline(.blackHole):
                if case .offline(.blackHole) = previous, condition != previous {
                    // Whatever was sent into the hole is lost; those connections cannot recover.
                    await closeAllConnections()
                }
                if server == nil {
                    // Refused meanwhile, the port is free for anyone; taken, the switch stays
                    // refused (its clients see refusals) rather than failing its callers, and
                    // counts it in its statistics.
                    server = await relisten(port: port)
                    if server == nil { count { $0.relistenFailures += 1 } }
                }
            }
            applied.send(condition)
        }
        applied.send(nil)
        try? await server?.close()
        await closeAllConnections()
    }

    /// Ports the switch picks from when asked for any: below the kernel's ephemeral range, so
    /// that while a refusal has closed the listener, no connection elsewhere on the machine is
    /// given its port and the switch can listen there again.
    static let ports = 20_000..<32_768

    /// The first listener: the requested port, or a free one of ``ports``.
    private func bindFirst() async throws -> any Channel {
        guard requestedPort == 0 else { return try await bind(port: requestedPort) }
        for _ in 0..<64 {
            if let channel = try? await bind(port: Int.random(in: Self.ports)) { return channel }
        }
        return try await bind(port: 0)
    }

    private func bind(port: Int) async throws -> any Channel {
        try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.assumeIsolated().makeCompletedFuture {
                    self.accept(channel)
                }
            }
            .bind(host: listenHost, port: port)
            .get()
    }

    /// Connects an accepted client connection to the server, or drops it when offline.
    private func accept(_ inbound: any Channel) {
        track(inbound)
        switch condition {
        case .offline(.refuse):
            // Accepted in the instant before the listener closed.
            count { $0.connectionsDropped += 1 }
            inbound.close(promise: nil)
            return
        case .offline(.blackHole):
            count { $0.connectionsDropped += 1 }
            // Read and discard: the client's bytes vanish and no answer ever comes.
            _ = inbound.setOption(.autoRead, value: true)
            return
        case .online, .slow:
            break
        }
        ClientBootstrap(group: inbound.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(3))
            .connect(host: upstreamHost, port: upstreamPort)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let outbound):
                    self.track(outbound)
                    self.count { $0.connectionsRelayed += 1 }
                    let toServer = RelayHandler(network: self, direction: .toServer)
                    let toClient = RelayHandler(network: self, direction: .toClient)
                    toServer.partner = toClient
                    toClient.partner = toServer
                    do {
                        try inbound.pipeline.syncOperations.addHandler(toServer)
                        try outbound.pipeline.syncOperations.addHandler(toClient)
                    } catch {
                        inbound.close(promise: nil)
                        outbound.close(promise: nil)
                        return
                    }
                    inbound.setOption(.autoRead, value: true).whenFailure { _ in inbound.close(promise: nil) }
                case .failure:
                    // The server is down: the client sees its connection end without an answer.
                    inbound.close(promise: nil)
                }
            }
    }

    private func track(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { $0.connections[id] = channel }
        channel.closeFuture.whenComplete { [state] _ in
            state.withLock { _ = $0.connections.removeValue(forKey: id) }
        }
    }

    /// Closes every open connection, and returns once they are closed.
    private func closeAllConnections() async {
        let open = state.withLock { state in
            let open = Array(state.connections.values)
            state.statistics.connectionsDropped += open.count / 2
            return open
        }
        for channel in open { try? await channel.close() }
    }

    /// Listens on `port` again after a refusal, or nil when it cannot within about a second.
    ///
    /// The kernel can refuse the port for a moment (EADDRINUSE, with SO_REUSEADDR and nothing
    /// but TIME_WAIT connections left on it), seen in parallel test runs that refused and restored
    /// the switch hundreds of times. That moment passes; a port another program took does not.
    private func relisten(port: Int) async -> (any Channel)? {
        for attempt in 0..<50 {
            if let channel = try? await bind(port: port) { return channel }
            guard attempt < 49 else { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    fileprivate func count(_ update: (inout Statistics) -> Void) {
        state.withLock { update(&$0.statistics) }
    }
}

/// Relays the bytes read from one side of a proxied connection to the other, pacing them when
/// the switch is slow and dropping them when it is black-holed.
///
/// Both channels of a pair live on the same event loop, so the pair talks without locks.
private final class RelayHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    enum Direction { case toServer, toClient }

    /// Slow mode stops reading from a side once this much is waiting, so a large download
    /// through a slow link does not pile up in memory.
    static let highWaterMark = 256 * 1024
    /// Slow mode delivers in slices of this size, so progress is smooth rather than bursty.
    static let sliceSize = 2048

    let network: NetworkSwitch
    let direction: Direction
    var partner: RelayHandler?
    private var context: ChannelHandlerContext?
    /// The pair's event loop, kept after this side closes so queued bytes still reach the other.
    private var eventLoop: (any EventLoop)?
    private var queue = CircularBuffer<(deliverAt: ContinuousClock.Instant, buffer: ByteBuffer)>()
    private var queuedBytes = 0
    private var pacer: Pacer<ContinuousClock.Instant>?
    private var drainTask: Scheduled<Void>?
    private var closeWhenDrained = false
    private var readingPaused = false

    init(network: NetworkSwitch, direction: Direction) {
        self.network = network
        self.direction = direction
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.eventLoop = context.eventLoop
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        // Bytes this side read before it closed (a response followed by the server's close)
        // are still delivered at their paced times; the drain closes the other side after them.
        guard queue.isEmpty else { return }
        drainTask?.cancel()
        partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        let now = ContinuousClock.now
        switch network.condition {
        case .offline:
            return
        case .online:
            if queue.isEmpty {
                forward(buffer)
            } else {
                enqueue(buffer, at: now)
            }
        case .slow(let throttle):
            if pacer?.throttle != throttle {
                var fresh = Pacer<ContinuousClock.Instant>(throttle)
                if let busy = pacer?.busyUntil, busy > now { _ = fresh.schedule(bytes: 0, arrivedAt: busy) }
                pacer = fresh
            }
            while buffer.readableBytes > 0, let slice = buffer.readSlice(length: min(Self.sliceSize, buffer.readableBytes)) {
                let deliverAt = pacer!.schedule(bytes: slice.readableBytes, arrivedAt: now)
                enqueue(slice, at: deliverAt)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeWhenDrained = true
        if queue.isEmpty { partner?.context?.close(promise: nil) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func forward(_ buffer: ByteBuffer) {
        guard let target = partner?.context else { return }
        let bytes = Int64(buffer.readableBytes)
        switch direction {
        case .toServer: network.count { $0.bytesToServer += bytes }
        case .toClient: network.count { $0.bytesToClient += bytes }
        }
        target.writeAndFlush(NIOAny(buffer), promise: nil)
    }

    private func enqueue(_ buffer: ByteBuffer, at deliverAt: ContinuousClock.Instant) {
        queue.append((deliverAt, buffer))
        queuedBytes += buffer.readableBytes
        updateBackpressure()
        if drainTask == nil { scheduleDrain() }
    }

    private func scheduleDrain() {
        guard let eventLoop, let head = queue.first else { return }
        let delay = ContinuousClock.now.duration(to: head.deliverAt)
        let nanoseconds = max(0, delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)
        drainTask = eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) { [self] in
            self.drainTask = nil
            self.drain()
        }
    }

    private func drain() {
        let now = ContinuousClock.now
        while let head = queue.first, head.deliverAt <= now {
            queue.removeFirst()
            queuedBytes -= head.buffer.readableBytes
            forward(head.buffer)
        }
        updateBackpressure()
        if queue.isEmpty {
            if closeWhenDrained {
                partner?.context?.close(promise: nil)
                if context == nil { partner = nil }
            }
        } else {
            scheduleDrain()
        }
    }

    private func updateBackpressure() {
        guard let channel = context?.channel else { return }
        let shouldPause = queuedBytes > Self.highWaterMark
        guard shouldPause != readingPaused else { return }
        readingPaused = shouldPause
        _ = channel.setOption(.autoRead, value: !shouldPause)
    }
}
