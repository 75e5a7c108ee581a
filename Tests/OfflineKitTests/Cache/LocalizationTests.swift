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
        #expect(OfflineMessage.downloading("Lisbon").localized(localization: "en") == "Downloading Lisbon…")
        #expect(OfflineMessage.noInternetConnection.localized() == "No internet connection. Please check your connection and try again.")
        let unknown = OfflineMessage(key: "app.notInCatalog", text: "Fallback")
        #expect(unknown.localized() == "Fallback")
        #expect(OfflineMessage.localizedFormat(for: "app.notInCatalog") == nil)
    }

    /// Features add their messages with `extension OfflineMessage { static let … }` in their own
    /// folders; this keeps every one of them translatable, not only the central catalog.
    @Test("every message declared anywhere in the package is in Localizable.strings")
    func everyDeclaredKey() throws {
        let sources = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }
            .filter { $0.pathExtension == "swift" && !$0.path.contains("/OfflineCore/Copy/") }
        let pattern = try NSRegularExpression(pattern: #"key:\s*"([a-zA-Z0-9]+\.[a-zA-Z0-9.]+)",\s*text:\s*"((?:[^"\\]|\\.)*)""#)
        var declared = 0
        for file in files {
            let source = try String(contentsOf: file, encoding: .utf8)
            let range = NSRange(source.startIndex..., in: source)
            for match in pattern.matches(in: source, range: range) {
                guard let keyRange = Range(match.range(at: 1), in: source), let textRange = Range(match.range(at: 2), in: source) else { continue }
                let key = String(source[keyRange])
                // `app.` keys are examples in doc comments; `demo.` keys are the demo app's own
                // copy, which an app keeps in its own strings, not in the library's.
                guard !key.hasPrefix("app."), !key.hasPrefix("demo.") else { continue }
                declared += 1
                let text = Self.unescape(String(source[textRange]))
                let format = OfflineMessage.localizedFormat(for: key, localization: "en")
                #expect(format == text, "\(key) from \(file.lastPathComponent) is missing from or differs in Localizable.strings")
            }
        }
        #expect(declared > 0)
    }

    /// Resolves the `\u{…}` escapes Swift sources use for invisible characters (U+2011).
    static func unescape(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: "\\u{") {
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}"),
                  let value = UInt32(rest[start.upperBound..<end], radix: 16), let scalar = Unicode.Scalar(value)
            else { result += rest[start]; rest = rest[start.upperBound...]; continue }
            result.unicodeScalars.append(scalar)
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }
}
