#if os(Linux)
import Foundation
import Glibc
public import OfflineCore

/// Link events from the Linux kernel over an rtnetlink socket.
///
/// Subscribes to link, IPv4/IPv6 address and IPv4/IPv6 route changes, and waits for them in
/// `poll(2)` on a dedicated thread: nothing is polled on a timer. After each burst of kernel
/// messages it dumps links, addresses and routes once and classifies the device:
/// - usable: a default route leaves through an interface that is up, running and has a global
///   address;
/// - down: no interface other than loopback is up and running;
/// - no route: some interface is up, but no default route leaves through a usable one.
///
/// An event is reported when the classification or the set of default-route interfaces changes.
public struct NetlinkLinkMonitor: LinkMonitor {
    public init() {}

    public func linkEvents() -> AsyncThrowingStream<LinkEvent, any Error> {
        AsyncThrowingStream { continuation in
            let watcher: NetlinkWatcher
            do {
                watcher = try NetlinkWatcher()
            } catch {
                continuation.finish(throwing: error)
                return
            }
            let thread = Thread {
                watcher.run { event in continuation.yield(event) } onError: { error in
                    continuation.finish(throwing: error)
                }
                continuation.finish()
            }
            thread.name = "OfflineKit.netlink"
            continuation.onTermination = { _ in watcher.stop() }
            thread.start()
        }
    }
}

/// A netlink failure, with the errno behind it.
public struct NetlinkError: Error, CustomStringConvertible {
    public var operation: String
    public var code: Int32
    public var description: String { "netlink \(operation) failed: \(String(cString: strerror(code)))" }
}

/// Owns the sockets; `run` blocks its thread until `stop` is called.
final class NetlinkWatcher: @unchecked Sendable {
    // @unchecked: the file descriptors are written once in init; `stop` only writes to the wake
    // pipe, which is safe from any thread, and `run` alone reads the sockets.
    private let events: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    init() throws {
        let events = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Netlink.route)
        guard events >= 0 else { throw NetlinkError(operation: "socket", code: errno) }
        var address = Netlink.SocketAddress(groups: Netlink.groups)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(events, $0, socklen_t(MemoryLayout<Netlink.SocketAddress>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(events)
            throw NetlinkError(operation: "bind", code: code)
        }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            let code = errno
            close(events)
            throw NetlinkError(operation: "pipe", code: code)
        }
        self.events = events
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
        for end in pipeEnds {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
    }

    deinit {
        close(events)
        close(wakeRead)
        close(wakeWrite)
    }

    func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    func run(onEvent: (LinkEvent) -> Void, onError: (any Error) -> Void) {
        var last: Netlink.Snapshot?
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            do {
                let snapshot = try Netlink.snapshot()
                if snapshot != last {
                    onEvent(snapshot.event)
                    last = snapshot
                }
            } catch {
                onError(error)
                return
            }
            var descriptors = [
                pollfd(fd: events, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                onError(NetlinkError(operation: "poll", code: errno))
                return
            }
            if descriptors[1].revents != 0 { return }
            // Drain the whole burst (a link going down brings address and route removals too),
            // then look at the result once.
            while recv(events, &buffer, buffer.count, Int32(MSG_DONTWAIT)) > 0 {}
        }
    }
}

/// rtnetlink constants and parsing. Values from <linux/netlink.h>, <linux/rtnetlink.h>,
/// <linux/if_addr.h> and <linux/if.h>, which the Glibc module does not import.
enum Netlink {
    static let route: Int32 = 0 // NETLINK_ROUTE
    static let groups: UInt32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400 // LINK, IPV4_IFADDR, IPV4_ROUTE, IPV6_IFADDR, IPV6_ROUTE

    static let messageDone: UInt16 = 3
    static let messageError: UInt16 = 2
    static let newLink: UInt16 = 16, getLink: UInt16 = 18
    static let newAddress: UInt16 = 20, getAddress: UInt16 = 22
    static let newRoute: UInt16 = 24, getRoute: UInt16 = 26
    static let flagRequest: UInt16 = 0x1, flagDump: UInt16 = 0x300

    static let interfaceUp: UInt32 = 0x1, interfaceLoopback: UInt32 = 0x8, interfaceRunning: UInt32 = 0x40
    static let routeAttributeOutputInterface: UInt16 = 4
    static let routeTableMain: UInt8 = 254
    static let routeTypeUnicast: UInt8 = 1
    static let scopeUniverse: UInt8 = 0

    struct SocketAddress {
        var family = sa_family_t(AF_NETLINK)
        var padding: UInt16 = 0
        var pid: UInt32 = 0
        var groups: UInt32
    }

    struct Snapshot: Equatable {
        var anyInterfaceRunning: Bool
        /// Interfaces a usable default route leaves through.
        var defaultInterfaces: Set<Int32>

        var event: LinkEvent {
            if !defaultInterfaces.isEmpty { return .usable }
            return anyInterfaceRunning ? .noRoute : .down
        }
    }

    /// Dumps links, addresses and routes over a fresh request socket and classifies them.
    static func snapshot() throws -> Snapshot {
        let socket = Glibc.socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), route)
        guard socket >= 0 else { throw NetlinkError(operation: "socket", code: errno) }
        defer { close(socket) }

        var running: Set<Int32> = []
        try dump(socket, type: getLink, family: UInt8(AF_UNSPEC), sequence: 1) { type, payload in
            guard type == newLink, payload.count >= 16 else { return }
            let index: Int32 = payload.load(at: 4)
            let flags: UInt32 = payload.load(at: 8)
            if flags & interfaceLoopback == 0, flags & interfaceUp != 0, flags & interfaceRunning != 0 {
                running.insert(index)
            }
        }
        var addressed: Set<Int32> = []
        try dump(socket, type: getAddress, family: UInt8(AF_UNSPEC), sequence: 2) { type, payload in
            guard type == newAddress, payload.count >= 8 else { return }
            let scope: UInt8 = payload.load(at: 3)
            let index = Int32(bitPattern: payload.load(at: 4) as UInt32)
            if scope == scopeUniverse { addressed.insert(index) }
        }
        var defaults: Set<Int32> = []
        try dump(socket, type: getRoute, family: UInt8(AF_UNSPEC), sequence: 3) { type, payload in
            guard type == newRoute, payload.count >= 12 else { return }
            let destinationLength: UInt8 = payload.load(at: 1)
            let table: UInt8 = payload.load(at: 4)
            let routeType: UInt8 = payload.load(at: 7)
            guard destinationLength == 0, table == routeTableMain, routeType == routeTypeUnicast else { return }
            for (attribute, value) in attributes(payload, from: 12) where attribute == routeAttributeOutputInterface && value.count >= 4 {
                let index = Int32(bitPattern: value.load(at: 0) as UInt32)
                if running.contains(index), addressed.contains(index) { defaults.insert(index) }
            }
        }
        return Snapshot(anyInterfaceRunning: !running.isEmpty, defaultInterfaces: defaults)
    }

    /// Sends a dump request and hands each message's type and payload to `body`.
    private static func dump(
        _ socket: Int32, type: UInt16, family: UInt8, sequence: UInt32,
        _ body: (UInt16, ArraySlice<UInt8>) -> Void
    ) throws {
        // nlmsghdr (16 bytes) + rtgenmsg (1 byte, padded to 4).
        var request = [UInt8](repeating: 0, count: 20)
        request.store(UInt32(20), at: 0)
        request.store(type, at: 4)
        request.store(flagRequest | flagDump, at: 6)
        request.store(sequence, at: 8)
        request[16] = family
        guard send(socket, request, request.count, 0) == request.count else {
            throw NetlinkError(operation: "send", code: errno)
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let received = recv(socket, &buffer, buffer.count, 0)
            if received < 0 {
                if errno == EINTR { continue }
                throw NetlinkError(operation: "recv", code: errno)
            }
            var offset = 0
            while offset + 16 <= received {
                let length = Int(buffer.load(at: offset) as UInt32)
                let messageType: UInt16 = buffer.load(at: offset + 4)
                guard length >= 16, offset + length <= received else { break }
                if messageType == messageDone { return }
                if messageType == messageError {
                    let code: Int32 = buffer.load(at: offset + 16)
                    if code != 0 { throw NetlinkError(operation: "dump", code: -code) }
                    return
                }
                body(messageType, buffer[(offset + 16)..<(offset + length)])
                offset += (length + 3) & ~3
            }
        }
    }

    /// The rtattr (type, value) pairs of a payload, starting after its fixed header.
    private static func attributes(_ payload: ArraySlice<UInt8>, from start: Int) -> [(UInt16, ArraySlice<UInt8>)] {
        var result: [(UInt16, ArraySlice<UInt8>)] = []
        var offset = payload.startIndex + start
        while offset + 4 <= payload.endIndex {
            let length = Int(payload.load(at: offset - payload.startIndex) as UInt16)
            let type: UInt16 = payload.load(at: offset - payload.startIndex + 2)
            guard length >= 4, offset + length <= payload.endIndex else { break }
            result.append((type, payload[(offset + 4)..<(offset + length)]))
            offset += (length + 3) & ~3
        }
        return result
    }
}

extension Collection where Element == UInt8, Index == Int {
    /// Loads a native-endian integer at `offset` from the collection's start, unaligned.
    func load<T: FixedWidthInteger>(at offset: Int) -> T {
        var value = T.zero
        withUnsafeMutableBytes(of: &value) { raw in
            for index in 0..<MemoryLayout<T>.size {
                raw[index] = self[startIndex + offset + index]
            }
        }
        return value
    }
}

extension Array where Element == UInt8 {
    mutating func store<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        Swift.withUnsafeBytes(of: value) { raw in
            for index in 0..<MemoryLayout<T>.size { self[offset + index] = raw[index] }
        }
    }
}
#endif
