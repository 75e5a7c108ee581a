import NIOCore

/// The parts of PostgreSQL's wire protocol (version 3.0) that a logical replication session
/// uses: the start-up and authentication exchange, simple queries (`CREATE_REPLICATION_SLOT`,
/// `START_REPLICATION`) and the rows they answer with, and
/// the copy stream that follows, carrying the slot's changes one way and the capturer's standby
/// status the other. PostgresNIO does not speak the copy-both mode this stream runs in, so the
/// session is a connection of its own.
enum ReplicationWire {
    /// A message from the server.
    enum Backend: Sendable, Equatable {
        case authentication(Authentication)
        case error(String)
        case readyForQuery
        case copyBothResponse
        case copyData(ByteBuffer)
        case copyDone
        /// A row of a command's result, each field in text form (nil: NULL).
        case dataRow([String?])
        /// A message the session passes over (parameter status, backend key, notices, command
        /// complete, a result's row description).
        case other(UInt8)
    }

    /// What the server asks of the client to sign in.
    enum Authentication: Sendable, Equatable {
        case ok
        case cleartextPassword
        case md5Password(salt: [UInt8])
        case sasl(mechanisms: [String])
        case saslContinue([UInt8])
        case saslFinal([UInt8])
        case unsupported(Int32)
    }

    /// A message of the replication stream, inside a `CopyData`.
    enum Replication: Sendable, Equatable {
        /// WAL data: one message of the output plugin, `start` the position it begins at.
        case xLogData(start: UInt64, end: UInt64, payload: [UInt8])
        /// The server's position: every transaction committed before `walEnd` was sent.
        case keepalive(walEnd: UInt64, replyRequested: Bool)
    }

    struct Malformed: Error, Sendable, CustomStringConvertible {
        var reason: String
        var description: String { "PostgreSQL's replication stream is malformed: \(reason)." }
    }

    /// The longest message read: PostgreSQL's own largest allocation (a row of 1 GiB at most).
    static let maxMessageBytes = 1 << 30

    // MARK: Reading

    /// The server's message `type` with its body.
    static func backend(type: UInt8, body: ByteBuffer) throws -> Backend {
        var body = body
        switch type {
        case UInt8(ascii: "R"):
            guard let code = body.readInteger(as: Int32.self) else { throw Malformed(reason: "an authentication request without its code") }
            switch code {
            case 0: return .authentication(.ok)
            case 3: return .authentication(.cleartextPassword)
            case 5:
                guard let salt = body.readBytes(length: 4) else { throw Malformed(reason: "an MD5 request without its salt") }
                return .authentication(.md5Password(salt: salt))
            case 10:
                var mechanisms: [String] = []
                while let name = body.readNullTerminatedString(), !name.isEmpty { mechanisms.append(name) }
                return .authentication(.sasl(mechanisms: mechanisms))
            case 11: return .authentication(.saslContinue(body.readBytes(length: body.readableBytes) ?? []))
            case 12: return .authentication(.saslFinal(body.readBytes(length: body.readableBytes) ?? []))
            default: return .authentication(.unsupported(code))
            }
        case UInt8(ascii: "E"):
            return .error(errorText(body))
        case UInt8(ascii: "Z"): return .readyForQuery
        case UInt8(ascii: "W"): return .copyBothResponse
        case UInt8(ascii: "d"): return .copyData(body)
        case UInt8(ascii: "c"): return .copyDone
        case UInt8(ascii: "D"):
            guard let count = body.readInteger(as: Int16.self), count >= 0 else { throw Malformed(reason: "a row without its field count") }
            var fields: [String?] = []
            for _ in 0..<count {
                guard let length = body.readInteger(as: Int32.self) else { throw Malformed(reason: "a row cut short") }
                if length < 0 {
                    fields.append(nil)
                    continue
                }
                guard let text = body.readString(length: Int(length)) else { throw Malformed(reason: "a field longer than its row") }
                fields.append(text)
            }
            return .dataRow(fields)
        default: return .other(type)
        }
    }

    /// An error's severity, code and message, as PostgreSQL words them.
    static func errorText(_ body: ByteBuffer) -> String {
        var body = body
        var fields: [UInt8: String] = [:]
        while let code = body.readInteger(as: UInt8.self), code != 0, let value = body.readNullTerminatedString() {
            fields[code] = value
        }
        let message = fields[UInt8(ascii: "M")] ?? "no message"
        return "\(fields[UInt8(ascii: "S")] ?? "ERROR") \(fields[UInt8(ascii: "C")] ?? "?"): \(message)"
    }

    /// The replication message a `CopyData` body carries.
    static func replication(_ body: ByteBuffer) throws -> Replication {
        var body = body
        switch body.readInteger(as: UInt8.self) {
        case UInt8(ascii: "w"):
            guard let start = body.readInteger(as: UInt64.self), let end = body.readInteger(as: UInt64.self),
                  body.readInteger(as: UInt64.self) != nil else { throw Malformed(reason: "WAL data without its header") }
            return .xLogData(start: start, end: end, payload: body.readBytes(length: body.readableBytes) ?? [])
        case UInt8(ascii: "k"):
            guard let end = body.readInteger(as: UInt64.self), body.readInteger(as: UInt64.self) != nil,
                  let reply = body.readInteger(as: UInt8.self) else { throw Malformed(reason: "a keepalive cut short") }
            return .keepalive(walEnd: end, replyRequested: reply == 1)
        case let tag?:
            throw Malformed(reason: "a copy message of type \(tag)")
        case nil:
            throw Malformed(reason: "an empty copy message")
        }
    }

    // MARK: Writing

    /// The start-up message: protocol 3.0 and `parameters`.
    static func startup(_ parameters: [(String, String)], into buffer: inout ByteBuffer) {
        let start = buffer.writerIndex
        buffer.writeInteger(Int32(0))
        buffer.writeInteger(Int32(196_608))
        for (name, value) in parameters {
            buffer.writeNullTerminatedString(name)
            buffer.writeNullTerminatedString(value)
        }
        buffer.writeInteger(UInt8(0))
        buffer.setInteger(Int32(buffer.writerIndex - start), at: start)
    }

    /// A message of `type` whose body `write` writes.
    static func message(_ type: Character, into buffer: inout ByteBuffer, _ write: (inout ByteBuffer) -> Void) {
        buffer.writeInteger(type.asciiValue!)
        let start = buffer.writerIndex
        buffer.writeInteger(Int32(0))
        write(&buffer)
        buffer.setInteger(Int32(buffer.writerIndex - start), at: start)
    }

    static func password(_ text: String, into buffer: inout ByteBuffer) {
        message("p", into: &buffer) { $0.writeNullTerminatedString(text) }
    }

    static func saslInitial(mechanism: String, _ data: [UInt8], into buffer: inout ByteBuffer) {
        message("p", into: &buffer) {
            $0.writeNullTerminatedString(mechanism)
            $0.writeInteger(Int32(data.count))
            $0.writeBytes(data)
        }
    }

    static func saslResponse(_ data: [UInt8], into buffer: inout ByteBuffer) {
        message("p", into: &buffer) { $0.writeBytes(data) }
    }

    static func query(_ sql: String, into buffer: inout ByteBuffer) {
        message("Q", into: &buffer) { $0.writeNullTerminatedString(sql) }
    }

    /// The standby status: every position up to `flushed` is kept by the client (the slot may
    /// let go of it); `reply` asks the server for a keepalive at once.
    static func standbyStatus(flushed: UInt64, clock microseconds: Int64, reply: Bool, into buffer: inout ByteBuffer) {
        message("d", into: &buffer) {
            $0.writeInteger(UInt8(ascii: "r"))
            $0.writeInteger(flushed)  // written
            $0.writeInteger(flushed)  // flushed
            $0.writeInteger(flushed)  // applied
            $0.writeInteger(microseconds)
            $0.writeInteger(UInt8(reply ? 1 : 0))
        }
    }

    static func terminate(into buffer: inout ByteBuffer) {
        message("X", into: &buffer) { _ in }
    }
}

/// Cuts the server's bytes into messages, every whole message of one read together, so the
/// capturer sees a burst of small transactions as one batch and records them in one write.
struct ReplicationMessageDecoder: ByteToMessageDecoder {
    typealias InboundOut = ReplicationInput

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        var messages: [ReplicationWire.Backend] = []
        while let type = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
              let length = buffer.getInteger(at: buffer.readerIndex + 1, as: Int32.self) {
            guard length >= 4, Int(length) <= ReplicationWire.maxMessageBytes else {
                throw ReplicationWire.Malformed(reason: "a message of \(length) bytes")
            }
            guard buffer.readableBytes >= 1 + Int(length) else { break }
            buffer.moveReaderIndex(forwardBy: 5)
            let body = buffer.readSlice(length: Int(length) - 4)!
            messages.append(try ReplicationWire.backend(type: type, body: body))
        }
        if !messages.isEmpty { context.fireChannelRead(wrapInboundOut(.messages(messages))) }
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        _ = try decode(context: context, buffer: &buffer)
        return .needMoreData
    }
}
