import Hummingbird
@testable import OfflineServer
import Testing

@Suite("Service names", .timeLimit(.minutes(1)))
struct ServiceNamesTests {
    @Test("the server's services describe themselves by their type's name, not by reflecting what they hold")
    func servicesAreNamed() async throws {
        let app = try await buildApplication(.testing())
        let names = app.services.map { "\($0)" }
        #expect(names.contains("SQLiteCaptureService"))
        #expect(names.contains("ExpiredDataPurge<ContinuousClock>"))
        for name in names {
            #expect(name.count <= 64 && !name.contains("("), "a service described as \(name.prefix(200))…")
        }
    }
}
