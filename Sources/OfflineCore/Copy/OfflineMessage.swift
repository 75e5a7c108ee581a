/// A user-facing string from the product's single message catalog.
///
/// Every string a user can see comes from here, keyed for localization. The texts are the
/// product's copy, verbatim from the specification. None of them carries a status code or a
/// technical error.
public struct OfflineMessage: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A stable key, used to look up translations.
    public var key: String
    /// The English text.
    public var text: String

    public init(key: String, text: String) {
        self.key = key
        self.text = text
    }

    public var description: String { text }
}

extension OfflineMessage {
    public static let featureRequiresInternet = OfflineMessage(
        key: "offline.featureRequiresInternet", text: "This feature requires an internet connection.")
    public static let localDataPreserved = OfflineMessage(
        key: "offline.localDataPreserved", text: "Local data is preserved and fully accessible offline.")
    public static let tryAgainWhenOnline = OfflineMessage(
        key: "offline.tryAgainWhenOnline", text: "Try again when online.")
    public static let noInternetConnection = OfflineMessage(
        key: "offline.noInternetConnection", text: "No internet connection. Please check your connection and try again.")
    public static let offlineMode = OfflineMessage(
        key: "offline.offlineMode", text: "Offline mode")
}
