import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A guarded write's answer as kept beside its key, to answer a repeated request byte for byte.
struct StoredResponse: Sendable, Hashable {
    var status: Int
    /// Header fields in order (name, value).
    var headers: [[String]]
    var body: Data

    /// `response`, its body collected.
    static func capture(_ response: Response) async throws -> StoredResponse {
        let collector = BodyCollector()
        try await response.body.write(collector)
        let headers = response.headers.map { [$0.name.rawName, $0.value] }
        return StoredResponse(status: Int(response.status.code), headers: headers, body: collector.data)
    }

    /// The answer as sent: the stored fields but `Content-Length`, which the server sets for the
    /// body it sends.
    var response: Response {
        var fields = HTTPFields()
        for pair in headers where pair.count == 2 {
            guard let name = HTTPField.Name(pair[0]), name != .contentLength else { continue }
            fields.append(HTTPField(name: name, value: pair[1]))
        }
        return Response(
            status: HTTPResponse.Status(code: status),
            headers: fields,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Collects a response body so it can be stored and replayed.
private final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
    // @unchecked: used by one task only, strictly before `data` is read.
    var data = Data()

    func write(_ buffer: ByteBuffer) async throws {
        data.append(contentsOf: buffer.readableBytesView)
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
