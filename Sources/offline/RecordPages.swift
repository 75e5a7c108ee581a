import ArgumentParser
import Foundation
import HTTPTypes
import OfflineKit

/// Every page of `GET /api/records/COLLECTION`, in order: the server answers a page at a time
/// (at most 1,000 records and 4 MiB) and names the next one in `Link: <PATH>; rel="next"`.
func recordPages(of collection: String, at server: URL, through transport: any HTTPTransport) async throws -> [Data] {
    var next: URL? = server.appendingPathComponent("api/records/\(collection)").appending(queryItems: [URLQueryItem(name: "limit", value: "1000")])
    var pages: [Data] = []
    while let url = next {
        let response = try await transport.send(TransportRequest(url: url), maxBodyBytes: 16 << 20)
        guard response.status == 200 else { throw ValidationError("The server refused to list the records (status \(response.status)).") }
        pages.append(response.body)
        next = nextPage(response.headerFields[HTTPField.Name("Link")!], on: server)
        guard pages.count < 100_000 else { throw ValidationError("The server's list of records does not end.") }
    }
    return pages
}

/// The target of a `Link` header's `rel="next"` (RFC 8288), resolved against `server`.
func nextPage(_ link: String?, on server: URL) -> URL? {
    guard let link else { return nil }
    for value in link.split(separator: ",") {
        let parts = value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let target = parts.first, target.hasPrefix("<"), target.hasSuffix(">"),
              parts.dropFirst().contains(where: { $0.replacingOccurrences(of: "\"", with: "").lowercased() == "rel=next" }) else { continue }
        return URL(string: String(target.dropFirst().dropLast()), relativeTo: server)?.absoluteURL
    }
    return nil
}
