import Foundation
import OfflineCore
import OfflineKit
import Testing

@Suite("Localized copy")
struct LocalizationTests {
    @Test("every catalog key is in Localizable.strings with the catalog's English text", arguments: OfflineMessage.catalog)
    func everyKey(_ message: OfflineMessage) throws {
        let format = try #require(OfflineMessage.localizedFormat(for: message.key, localization: "en"), "missing \(message.key)")
        #expect(format == message.text)
    }

    @Test("lookups fill arguments and never show a key")
    func lookup() {
        #expect(OfflineMessage.downloadingCity("Lisbon").localized(localization: "en") == "Downloading Lisbon…")
        #expect(OfflineMessage.noInternetConnection.localized() == "No internet connection. Please check your connection and try again.")
        let unknown = OfflineMessage(key: "app.notInCatalog", text: "Fallback")
        #expect(unknown.localized() == "Fallback")
        #expect(OfflineMessage.localizedFormat(for: "app.notInCatalog") == nil)
    }
}
