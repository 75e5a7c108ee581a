import Foundation
@testable import OfflineServer
import Testing

@Suite("A message's sentAt is read as RFC 3339, strictly")
struct RFC3339Tests {
    @Test("dates and times in range are read, with fractions and offsets", arguments: [
        ("2026-11-26T09:00:00Z", 1_795_683_600.0),
        ("2026-11-26T10:30:00+01:30", 1_795_683_600.0),
        ("2026-11-26T00:00:00-09:00", 1_795_683_600.0),
        ("2024-02-29T23:59:59.5Z", 1_709_251_199.5),
        ("2026-11-26T09:00:00+18:00", 1_795_683_600.0 - 18 * 3600),
    ])
    func valid(text: String, seconds: Double) {
        #expect(RFC3339.date(text)?.timeIntervalSince1970 == seconds, "\(text)")
    }

    @Test("anything out of range or of another form is refused, where Foundation's reader took some", arguments: [
        "2024-01-01T12:99:00Z", "2024-01-01T24:00:00Z", "2024-01-01T12:00:60Z", "2023-02-29T12:00:00Z",
        "2024-13-01T12:00:00Z", "2024-00-10T12:00:00Z", "2024-04-31T12:00:00Z", "2024-01-01t12:00:00z",
        "2024-01-01 12:00:00Z", "2024-01-01T12:00:00", "2024-01-01T12:00:00+18:01", "2024-01-01T12:00:00+01:60",
        "2024-01-01T12:00:00.Z", "2024-01-01T12:00:00Z ", "+2024-01-01T12:00:00Z", "2024-01-01T12:00Z", "",
    ])
    func invalid(text: String) {
        #expect(RFC3339.date(text) == nil, "\(text)")
    }
}
