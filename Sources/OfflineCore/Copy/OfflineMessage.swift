/// A user-facing string from the product's single message catalog.
///
/// Every string a user can see comes from here, keyed for localization. The texts are the
/// product's copy, verbatim from the specification. None of them carries a status code or a
/// technical error.
public struct OfflineMessage: Sendable, Hashable, Codable, CustomStringConvertible {
    /// A stable key, used to look up translations.
    public var key: String
    /// The English text, with any arguments filled in.
    public var text: String
    /// The values filled into the text's `%@` placeholders (a pack's name, a time), in order.
    ///
    /// A localized lookup fills them into the translated format the same way.
    public var arguments: [String]

    public init(key: String, text: String) {
        self.key = key
        self.text = text
        self.arguments = []
    }

    /// A message whose English `format` has `%@` placeholders (or positional `%1$@`), filled
    /// with `arguments`.
    ///
    /// ```swift
    /// OfflineMessage(key: "packs.downloading.heading", format: "Downloading %@…", arguments: ["Paris"])
    /// // text == "Downloading Paris…"
    /// ```
    public init(key: String, format: String, arguments: [String]) {
        self.key = key
        self.text = Self.fill(format, with: arguments)
        self.arguments = arguments
    }

    /// Fills `%@` and `%n$@` placeholders of `format` with `arguments`; `%%` is a literal `%`.
    ///
    /// Missing arguments leave the placeholder out rather than crash: a translation with a
    /// wrong placeholder count still shows its words.
    public static func fill(_ format: String, with arguments: [String]) -> String {
        var result = ""
        var next = 0
        var index = format.startIndex
        while index < format.endIndex {
            let character = format[index]
            guard character == "%" else {
                result.append(character)
                index = format.index(after: index)
                continue
            }
            var cursor = format.index(after: index)
            if cursor < format.endIndex, format[cursor] == "%" {
                result.append("%")
                index = format.index(after: cursor)
                continue
            }
            var digits = ""
            while cursor < format.endIndex, let digit = format[cursor].wholeNumberValue, format[cursor].isASCII {
                digits.append(String(digit))
                cursor = format.index(after: cursor)
            }
            var position: Int?
            if !digits.isEmpty, cursor < format.endIndex, format[cursor] == "$" {
                position = Int(digits).map { $0 - 1 }
                cursor = format.index(after: cursor)
            } else if !digits.isEmpty {
                // Not a placeholder after all ("%5 off"): keep it as written.
                result.append("%")
                index = format.index(after: index)
                continue
            }
            guard cursor < format.endIndex, format[cursor] == "@" else {
                result.append("%")
                index = format.index(after: index)
                continue
            }
            let argumentIndex: Int
            if let position {
                argumentIndex = position
            } else {
                argumentIndex = next
                next += 1
            }
            if arguments.indices.contains(argumentIndex) {
                result.append(arguments[argumentIndex])
            }
            index = format.index(after: cursor)
        }
        return result
    }

    public var description: String { text }

    private enum CodingKeys: String, CodingKey {
        case key, text, arguments
    }

    /// Messages stored before arguments existed decode with none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decode(String.self, forKey: .key)
        text = try container.decode(String.self, forKey: .text)
        arguments = try container.decodeIfPresent([String].self, forKey: .arguments) ?? []
    }
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
