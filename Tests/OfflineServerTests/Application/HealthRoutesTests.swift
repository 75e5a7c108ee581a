import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
@testable import OfflineServer
import Testing

@Suite("Health routes", .timeLimit(.minutes(1)))
struct HealthRoutesTests {
    @Test("the sample answers the bytes asked for, 0 to 1 MiB, and 16 KiB when none are asked for",
          arguments: [("?bytes=0", 0), ("?bytes=10", 10), ("?bytes=1048576", 1 << 20), ("", 16 * 1024)])
    func sampleSizes(query: String, size: Int) async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            try await client.execute(uri: "/health/sample" + query, method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.body.readableBytes == size)
                #expect(response.headers[.contentType] == "application/octet-stream")
            }
        }
    }

    @Test("a sample size that is not a whole number from 0 to 1 MiB is refused with 400, not answered with another size",
          arguments: ["-1", "1048577", "99999999999999999999", "abc", "1.5", ""])
    func sampleSizeRefused(bytes: String) async throws {
        let app = try await buildApplication(.testing())
        try await app.test(.router) { client in
            try await client.execute(uri: "/health/sample?bytes=" + bytes, method: .get) { response in
                #expect(response.status == .badRequest)
                #expect(response.headers[.contentType] == "application/problem+json")
                let problem = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                #expect(problem?["detail"] as? String == "bytes is a whole number from 0 to 1048576.")
            }
        }
    }
}
