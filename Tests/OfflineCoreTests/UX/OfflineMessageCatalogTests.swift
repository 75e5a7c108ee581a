import Foundation
import OfflineCore
import Testing

@Suite("Message catalog")
struct OfflineMessageCatalogTests {
    @Test("keys are unique")
    func uniqueKeys() {
        let keys = OfflineMessage.catalog.map(\.key)
        #expect(Set(keys).count == keys.count)
    }

    @Test("no message carries a status code or technical error", arguments: OfflineMessage.catalog)
    func noTechnicalText(_ message: OfflineMessage) {
        for code in ["404", "500", "503", "HTTP", "error", "Error"] {
            #expect(!message.text.contains(code), "\(message.key)")
        }
        #expect(!message.text.isEmpty)
    }

    @Test("typography is the specification's, character for character")
    func typography() {
        #expect(OfflineMessage.notSavedYet.text.unicodeScalars.contains("\u{2011}"))
        #expect(!OfflineMessage.notSavedYet.text.contains("Wi-Fi"))
        #expect(OfflineMessage.downloading("Paris").text.unicodeScalars.last == "\u{2026}")
        #expect(OfflineMessage.updating.text == "Updating\u{2026}")
        #expect(OfflineMessage.downloadWhenOnline("Oslo").text == "Download Oslo when you\u{2019}re online")
        #expect(OfflineMessage.downloadDidNotFinish.text == "Download didn\u{2019}t finish. Check your connection and try again.")
        #expect(OfflineMessage.newVersionOfThisPack.text == "New version of this pack \u{2014} Update")
        #expect(OfflineMessage.noInternetConnection.text == "No internet connection. Please check your connection and try again.")
        #expect(!OfflineMessage.catalog.contains { $0.text.contains("'") || $0.text.contains("...") })
    }

    @Test("placeholders fill in order, by position, and tolerate a bad translation")
    func fill() {
        #expect(OfflineMessage.fill("Download %@ for offline", with: ["Paris"]) == "Download Paris for offline")
        #expect(OfflineMessage.fill("%2$@ · %1$@", with: ["a", "b"]) == "b · a")
        #expect(OfflineMessage.fill("100%% offline", with: []) == "100% offline")
        #expect(OfflineMessage.fill("%@ and %@", with: ["one"]) == "one and ")
        #expect(OfflineMessage.fill("5% off", with: []) == "5% off")
        #expect(OfflineMessage.fill("trailing %", with: []) == "trailing %")
        #expect(OfflineMessage.updatedAt("10:42").text == "Updated 10:42")
    }
}

@Suite("Message coding")
struct OfflineMessageCodingTests {
    @Test("messages round-trip through JSON, and ones stored without arguments still decode")
    func coding() throws {
        let message = OfflineMessage.downloading("Paris")
        let decoded = try JSONDecoder().decode(OfflineMessage.self, from: JSONEncoder().encode(message))
        #expect(decoded == message)
        let legacy = Data(#"{"key":"offline.offlineMode","text":"Offline mode"}"#.utf8)
        #expect(try JSONDecoder().decode(OfflineMessage.self, from: legacy) == .offlineMode)
    }
}
