import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineCore
@testable import OfflineServer
import Testing

/// Pack hosting's ranges: malformed ones are ignored, unsatisfiable ones answered 416.
@Suite("Pack hosting: ranges", .timeLimit(.minutes(1)))
struct PackRangeTests {
    @Test("a malformed Range is ignored (200, whole file); a valid one past the end is 416 with bytes */SIZE",
          arguments: ["bytes=--5", "bytes=abc", "items=0-1", "bytes=+5-10", "bytes=5-3", "bytes=0-1,4-5", "bytes=-", "bytes=1-2-3", "bytes=0x10-"])
    func malformedRange(header: String) async throws {
        try await PackPathTests.withFolders { packs, _, content in
            try await PackPathTests.app(packs).test(.router) { client in
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: header]) { response in
                    #expect(response.status == .ok, "\(header)")
                    #expect(response.headers[.contentRange] == nil)
                    #expect(Data(buffer: response.body) == content)
                }
            }
        }
    }

    @Test("ranges past the end, and an empty suffix, are unsatisfiable", arguments: ["bytes=1000-", "bytes=5000-6000", "bytes=-0"])
    func unsatisfiableRange(header: String) async throws {
        try await PackPathTests.withFolders { packs, _, _ in
            try await PackPathTests.app(packs).test(.router) { client in
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .get, headers: [.range: header]) { response in
                    #expect(response.status == .rangeNotSatisfiable, "\(header)")
                    #expect(response.headers[.contentRange] == "bytes */1000")
                }
            }
        }
    }

    @Test("the range parser reads RFC 9110 ranges: clamps the end, ignores bad syntax")
    func parseRange() {
        #expect(PackHosting.parseRange("bytes=0-99999999999999999999", size: 10) == .range(0...9))
        #expect(PackHosting.parseRange("bytes=-99999999999999999999", size: 10) == .range(0...9))
        #expect(PackHosting.parseRange("BYTES=2-4", size: 10) == .range(2...4))
        #expect(PackHosting.parseRange("bytes=--5", size: 10) == .whole)
        #expect(PackHosting.parseRange("bytes= 1-2", size: 10) == .whole)
        #expect(PackHosting.parseRange("bytes=0-", size: 0) == .unsatisfiable)
    }
}
