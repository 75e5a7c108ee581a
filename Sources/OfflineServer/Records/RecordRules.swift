import Foundation
import Hummingbird
import NIOCore

/// The checks some collections of the records resource make before a write is stored.
///
/// Only the server can apply these rules for good (another client, an older app version or a
/// queued write made days ago may send anything), so a queued write can be refused long after the
/// user made it: the client's outbox then rolls the change back and shows the error (pattern B).
/// A refusal is `422 Unprocessable Content` with a problem that says, in words, what is wrong
/// and which field is at fault.
enum RecordRules {
    /// The longest message the workspace accepts, in characters.
    static let maxMessageLength = 500

    /// A problem the user can act on.
    struct Refusal: Sendable, Hashable {
        var detail: String
        var field: String
    }

    /// Why a `method` write of `body` to `collection` is refused, or nil when it may be stored.
    /// PATCH bodies are checked only for the fields they carry.
    static func check(_ method: HTTPRequest.Method, _ body: [String: JSONValue], collection: String) -> Refusal? {
        let isPatch = method == .patch
        switch collection {
        case "messages":
            return checkMessage(body, isPatch: isPatch)
        case "pins":
            guard let pinned = body["pinned"] else {
                return isPatch ? nil : Refusal(detail: "Say whether the chat is pinned.", field: "pinned")
            }
            guard case .bool = pinned else { return Refusal(detail: "Pinned must be true or false.", field: "pinned") }
            return nil
        default:
            return nil
        }
    }

    /// `check(_:_:collection:)` as the response to send, or nil when the write may go ahead.
    static func refusal(_ method: HTTPRequest.Method, _ body: [String: JSONValue], collection: String) -> Response? {
        guard let refusal = check(method, body, collection: collection) else { return nil }
        return problemResponse(.unprocessableContent, refusal.detail, ["field": refusal.field])
    }

    static func checkMessage(_ body: [String: JSONValue], isPatch: Bool) -> Refusal? {
        guard let value = body["text"] else {
            return isPatch ? nil : Refusal(detail: "A message needs some text.", field: "text")
        }
        guard case .string(let text) = value else { return Refusal(detail: "A message's text must be text.", field: "text") }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty {
            return Refusal(detail: "A message can't be empty.", field: "text")
        }
        if trimmed.count > maxMessageLength {
            return Refusal(detail: "A message can be at most \(maxMessageLength) characters long.", field: "text")
        }
        if containsCardNumber(trimmed) {
            return Refusal(detail: "Messages can't contain card numbers. Share payment details another way.", field: "text")
        }
        return nil
    }

    /// Whether `text` holds a run of 13 to 19 digits (spaces and dashes allowed between them)
    /// that passes the Luhn check: a payment card number, which chat history must never keep.
    static func containsCardNumber(_ text: String) -> Bool {
        var digits: [Int] = []
        func runIsCard() -> Bool { (13...19).contains(digits.count) && luhn(digits[...]) }
        for character in text {
            if let digit = character.wholeNumberValue, character.isASCII {
                digits.append(digit)
            } else if character == " " || character == "-", !digits.isEmpty {
                continue
            } else {
                if runIsCard() { return true }
                digits.removeAll()
            }
        }
        return runIsCard()
    }

    static func luhn(_ digits: ArraySlice<Int>) -> Bool {
        var sum = 0
        for (offset, digit) in digits.reversed().enumerated() {
            if offset % 2 == 1 {
                let doubled = digit * 2
                sum += doubled > 9 ? doubled - 9 : doubled
            } else {
                sum += digit
            }
        }
        return sum % 10 == 0
    }
}
