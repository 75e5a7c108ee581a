import Foundation
@testable import OfflineKit
import Testing

@Suite("Cache-Control")
struct CacheControlTests {
    @Test("Cache-Control directives are parsed, malformed values ignored")
    func parse() {
        let control = CacheControl(parsing: "private, max-age=30, stale-while-revalidate=60, stale-if-error=\"86400\", foo=bar")
        #expect(control == CacheControl(maxAge: 30, staleWhileRevalidate: 60, staleIfError: 86400))
        #expect(CacheControl(parsing: "no-store").noStore)
        #expect(CacheControl(parsing: "no-cache, max-age=100").maxAge == 0)
        #expect(CacheControl(parsing: "max-age=-5, max-age=abc").maxAge == nil)
        #expect(CacheControl(parsing: nil) == CacheControl())
    }
}
