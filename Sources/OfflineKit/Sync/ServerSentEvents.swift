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
struct ServerSentEventParser: Sendable {
    /// The longest line accepted: a stream that sends longer ones is not one to follow.
    static let maximumLineBytes = 64 << 10

    struct LineTooLong: Error, Sendable, CustomStringConvertible {
        var description: String { "The event stream sent a line longer than \(ServerSentEventParser.maximumLineBytes) bytes." }
    }

    private var line: [UInt8] = []
    /// The last byte was a CR: an LF right after it belongs to the same line ending.
    private var afterCR = false
    private var type = ""
    private var data: [String] = []

    /// The events that `bytes` completed.
    ///
    /// - Throws: ``LineTooLong``.
    mutating func append(_ bytes: some Sequence<UInt8>) throws -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\n") where afterCR:
                afterCR = false
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                afterCR = byte == UInt8(ascii: "\r")
                if let event = endLine() { events.append(event) }
            default:
                afterCR = false
                guard line.count < Self.maximumLineBytes else { throw LineTooLong() }
                line.append(byte)
            }
        }
        return events
    }

    /// Ends the current line: a field is kept, a blank line dispatches the event.
    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        guard !line.isEmpty else {
            defer { (type, data) = ("", []) }
            return data.isEmpty ? nil : ServerSentEvent(type: type.isEmpty ? "message" : type, data: data.joined(separator: "\n"))
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":") else {
            // A field name alone has an empty value.
            if text == "data" { data.append("") } else if text == "event" { type = "" }
            return nil
        }
        let name = text[..<colon]
        var value = text[text.index(after: colon)...]
        if value.first == " " { value = value.dropFirst() }
        switch name {
        case "": break // a comment: heartbeats and the like
        case "event": type = String(value)
        case "data": data.append(String(value))
        default: break // `id`, `retry` and unknown fields
        }
        return nil
    }
}
