import Foundation
public import OfflineCore

extension OfflineMessage {
    /// The message in the user's language, from OfflineKit's `Localizable.strings`, with its
    /// arguments filled in.
    ///
    /// ```swift
    /// Text(OfflineMessage.downloading("Paris").localized())   // “Downloading Paris…”
    /// ```
    ///
    /// Falls back to the English ``OfflineMessage/text`` when the key has no translation, so a
    /// user never sees a key.
    ///
    /// - Parameter localization: a localization to use instead of the user's preferred one
    ///   (`"en"`), for previews and tests.
    public func localized(localization: String? = nil) -> String {
        guard let format = Self.localizedFormat(for: key, localization: localization) else { return text }
        return Self.fill(format, with: arguments)
    }

    /// The translated format for `key` (with `%@` placeholders), or nil when there is none.
    public static func localizedFormat(for key: String, localization: String? = nil) -> String? {
        var bundle = Bundle.module
        if let localization,
           let path = Bundle.module.path(forResource: localization, ofType: "lproj"),
           let localized = Bundle(path: path) {
            bundle = localized
        }
        // A sentinel default tells "missing" apart from a translation equal to the key.
        let missing = "\u{0}offlinekit.missing"
        let value = bundle.localizedString(forKey: key, value: missing, table: "Localizable")
        return value == missing ? nil : value
    }
}
