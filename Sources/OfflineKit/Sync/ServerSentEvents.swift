/// One event of a `text/event-stream` body.
struct ServerSentEvent: Sendable, Hashable {
    /// The `event` field; `message` when the event has none.
    var type: String
    /// The `data` lines, joined by newlines.
    var data: String
}

/// Reads `text/event-stream` bytes (the HTML standard's server-sent events) as they arrive,
/// in chunks split anywhere: lines end with CRLF, LF or CR; a blank line ends an event;
/// comments (`:`) and fields other than `event` and `data` are skipped.
///
/// What it holds is bounded whatever the server sends: a line is at most
/// ``maximumLineBytes``, and an event's data (all its `data` lines together) at most
/// ``maximumEventBytes``. A stream that goes past either is not one to follow.
struct ServerSentEventParser: Sendable {
    /// The longest line accepted.
    static let maximumLineBytes = 64 << 10
    /// The most data one event may carry: the bytes of all its `data` lines, with a newline for
    /// each (what the joined data costs, and what holding an empty line costs). The events
    /// OfflineKit reads name a feed; this is far above any of them.
    static let maximumEventBytes = 64 << 10

    struct LineTooLong: Error, Sendable, CustomStringConvertible {
        var description: String { "The event stream sent a line longer than \(ServerSentEventParser.maximumLineBytes) bytes." }
    }

    struct EventTooLarge: Error, Sendable, CustomStringConvertible {
        var description: String { "The event stream sent an event with more than \(ServerSentEventParser.maximumEventBytes) bytes of data." }
    }

    private var line: [UInt8] = []
    /// The last byte was a CR: an LF right after it belongs to the same line ending.
    private var afterCR = false
    private var type = ""
    private var data: [String] = []
    /// What `data` costs, as ``maximumEventBytes`` counts it.
    private var dataBytes = 0

    /// The events that `bytes` completed.
    ///
    /// - Throws: ``LineTooLong``, ``EventTooLarge``. The parser is not to be used after either.
    mutating func append(_ bytes: some Sequence<UInt8>) throws -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\n") where afterCR:
                afterCR = false
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                afterCR = byte == UInt8(ascii: "\r")
                if let event = try endLine() { events.append(event) }
            default:
                afterCR = false
                guard line.count < Self.maximumLineBytes else { throw LineTooLong() }
                line.append(byte)
            }
        }
        return events
    }

    /// Ends the current line: a field is kept, a blank line dispatches the event.
    private mutating func endLine() throws -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        guard !line.isEmpty else {
            defer { (type, data, dataBytes) = ("", [], 0) }
            return data.isEmpty ? nil : ServerSentEvent(type: type.isEmpty ? "message" : type, data: data.joined(separator: "\n"))
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":") else {
            // A field name alone has an empty value.
            if text == "data" { try appendData("") } else if text == "event" { type = "" }
            return nil
        }
        let name = text[..<colon]
        var value = text[text.index(after: colon)...]
        if value.first == " " { value = value.dropFirst() }
        switch name {
        case "": break // a comment: heartbeats and the like
        case "event": type = String(value)
        case "data": try appendData(String(value))
        default: break // `id`, `retry` and unknown fields
        }
        return nil
    }

    private mutating func appendData(_ value: String) throws {
        dataBytes += value.utf8.count + 1
        guard dataBytes <= Self.maximumEventBytes else { throw EventTooLarge() }
        data.append(value)
    }
}
