import Foundation
@testable import OfflineServer
import Testing

@Suite("Base64url")
struct Base64URLTests {
    @Test("round trips every length of random bytes, as RFC 4648's alphabet without padding")
    func roundTrips() throws {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let data = Data((0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
            let text = Base64URL.encoded(data)
            let expected = data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(text == expected)
            #expect(Base64URL.decoded(text) == data)
        }
        #expect(Base64URL.decoded("-_-_") == Data([0xFB, 0xFF, 0xBF]))
    }

    @Test("refuses anything outside the alphabet: standard base64's letters, padding, spaces, other scripts")
    func refusesOtherLetters() {
        for text in ["ab+c", "ab/c", "abc=", "ab c", "abç", "a\u{0}bc", "abcde"] {
            #expect(Base64URL.decoded(text) == nil, "\(text)")
        }
    }
}
