import Foundation
public import Hummingbird
import NIOCore

/// Decodes request bodies for `request.decode(as:context:)` after checking them with
/// ``JSONValue/parse(_:limits:)``: one bounded pass that refuses deep nesting, control
/// characters in any string (a field a check reads differently from storage), duplicate keys and
/// anything but UTF-8, before Foundation's decoder (which accepts UTF-16 and NUL) sees the bytes.
public struct CheckedJSONDecoder: RequestDecoder {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        _ = try JSONBody.parse(buffer, maxBytes: context.maxUploadSize)
        return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
    }
}

/// Request bodies in JSON, checked the same way on every route.
enum JSONBody {
    /// `buffer` parsed with the request limits.
    /// - Throws: ``BadRequest`` saying what is wrong with the body.
    static func parse(_ buffer: ByteBuffer, maxBytes: Int) throws(BadRequest) -> JSONValue {
        do {
            return try JSONValue.parse(buffer.readableBytesView, limits: .request(maxBytes: maxBytes))
        } catch {
            throw BadRequest(detail: error.description)
        }
    }

    /// `buffer` parsed with the request limits, when it is a JSON object.
    static func object(_ buffer: ByteBuffer, maxBytes: Int) throws(BadRequest) -> [String: JSONValue] {
        guard case .object(let object) = try parse(buffer, maxBytes: maxBytes) else {
            throw BadRequest(detail: "The body must be a JSON object.")
        }
        return object
    }
}

/// A request refused before anything is stored: `400` with an `application/problem+json` body,
/// `{"detail": "…", "status": 400}`.
struct BadRequest: HTTPResponseError {
    var detail: String

    var status: HTTPResponse.Status { .badRequest }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        problemResponse(status, detail)
    }
}

/// A problem as `application/problem+json` (RFC 9457): its status and detail, and the members
/// a kind of problem adds (`title`, the `field` a refused record names).
func problemResponse(_ status: HTTPResponse.Status, _ detail: String, _ members: [String: String] = [:]) -> Response {
    WriteAnswer.problem(status, detail, members).response
}
