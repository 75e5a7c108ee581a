import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A write route's answer as bytes: what a guarded write stores beside its key, in the same
/// transaction as its effect, and replays byte for byte.
///
/// A route builds it inside its `write` (``OfflineRequestContext/commitWrite(on:_:)``), where no
/// response body can be streamed: a response is made from it once the transaction has ended.
struct WriteAnswer: Sendable {
    var status: HTTPResponse.Status
    var headers: HTTPFields
    var body: ByteBuffer

    init(status: HTTPResponse.Status, headers: HTTPFields = [:], body: ByteBuffer = ByteBuffer()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `200` (or `status`) with a JSON body.
    static func json(_ bytes: some Sequence<UInt8>, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> WriteAnswer {
        var fields = headers
        if fields[.contentType] == nil { fields[.contentType] = "application/json" }
        return WriteAnswer(status: status, headers: fields, body: ByteBuffer(bytes: bytes))
    }

    /// A problem as `application/problem+json` (RFC 9457): its status and detail, and the members
    /// a kind of problem adds (`title`, the `field` a refused record names).
    static func problem(_ status: HTTPResponse.Status, _ detail: String, _ members: [String: String] = [:]) -> WriteAnswer {
        var problem: [String: Any] = members
        problem["status"] = Int(status.code)
        problem["detail"] = detail
        let body = (try? JSONSerialization.data(withJSONObject: problem, options: [.sortedKeys])) ?? Data()
        return WriteAnswer(status: status, headers: [.contentType: "application/problem+json"], body: ByteBuffer(bytes: body))
    }

    /// The most body bytes kept for a replay.
    static let maxKeptBody = 16 << 10

    /// The answer as kept for replays: itself, or, when its body is over ``maxKeptBody``, its
    /// status and fields without the body (and without the body's type), marked
    /// `Idempotent-Replay-Body: omitted`.
    var kept: WriteAnswer {
        guard body.readableBytes > Self.maxKeptBody else { return self }
        var fields = headers
        fields[.contentType] = nil
        fields[IdempotentWrites.replayBodyField] = "omitted"
        return WriteAnswer(status: status, headers: fields)
    }

    /// The answer as sent: its fields but `Content-Length`, which the server sets for the body it
    /// sends.
    var response: Response {
        var fields = headers
        fields[.contentLength] = nil
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: body))
    }

    /// `response`, its body collected: the answer of a route that built a response itself.
    static func capture(_ response: Response) async throws -> WriteAnswer {
        let collector = BodyCollector()
        try await response.body.write(collector)
        return WriteAnswer(status: response.status, headers: response.headers, body: collector.buffer)
    }

    /// The header fields as stored: a JSON array of `[name, value]` pairs, in order. Written with
    /// ``JSONValue`` rather than `JSONEncoder`, which cost as much as the statement that stores it.
    var storedHeaders: Data {
        Data(JSONValue.array(headers.map { .array([.string($0.name.rawName), .string($0.value)]) }).jsonBytes)
    }

    /// An answer as ``storedHeaders`` and the status and body columns kept it.
    init(status: Int, storedHeaders: Data, body: Data) throws {
        var fields = HTTPFields()
        guard case .array(let pairs) = try JSONValue.parse(storedHeaders, limits: .stored) else {
            throw StorageError.unexpectedValue(column: "headers")
        }
        for case .array(let pair) in pairs {
            guard pair.count == 2, case .string(let rawName) = pair[0], case .string(let value) = pair[1],
                  let name = HTTPField.Name(rawName) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        self.init(status: HTTPResponse.Status(code: status), headers: fields, body: ByteBuffer(bytes: body))
    }
}

/// Collects a response body so it can be stored and replayed.
private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
    // @unchecked: used by one task only, strictly before `buffer` is read.
    var buffer = ByteBuffer()

    func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        self.buffer.writeBuffer(&buffer)
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
