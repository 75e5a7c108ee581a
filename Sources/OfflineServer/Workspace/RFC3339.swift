import Foundation

/// Reads an RFC 3339 date-time (section 5.6) strictly: `2026-11-26T09:00:00Z`, with optional
/// fractions of a second and an offset up to 18 hours (`+02:00`). Foundation's ISO 8601 reading
/// is lenient: it takes `12:99:00` as 13:39, so a client could store a time it never wrote.
enum RFC3339 {
    /// The instant `text` names; nil unless every field is in its range (a 60th second is refused:
    /// the time is stored in seconds since 1970, which has no leap seconds).
    static func date(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for index in range {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ index: Int, _ character: Unicode.Scalar) -> Bool { index < bytes.count && bytes[index] == UInt8(ascii: character) }
        guard let year = number(0..<4), byte(4, "-"), let month = number(5..<7), byte(7, "-"), let day = number(8..<10),
              byte(10, "T"), let hour = number(11..<13), byte(13, ":"), let minute = number(14..<16), byte(16, ":"),
              let second = number(17..<19),
              (1...12).contains(month), (1...daysIn(month, of: year)).contains(day),
              hour < 24, minute < 60, second < 60 else { return nil }
        var index = 19
        var fraction = 0.0
        if byte(index, ".") {
            var scale = 0.1
            index += 1
            let start = index
            while index < bytes.count, let digit = number(index..<(index + 1)) {
                fraction += Double(digit) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset = 0
        if byte(index, "Z"), index + 1 == bytes.count {
            offset = 0
        } else if byte(index, "+") || byte(index, "-"), index + 6 == bytes.count,
                  let hours = number((index + 1)..<(index + 3)), byte(index + 3, ":"), let minutes = number((index + 4)..<(index + 6)),
                  minutes < 60, hours * 60 + minutes <= 18 * 60 {
            offset = (hours * 60 + minutes) * 60 * (byte(index, "-") ? -1 : 1)
        } else {
            return nil
        }
        var components = DateComponents()
        (components.year, components.month, components.day) = (year, month, day)
        (components.hour, components.minute, components.second) = (hour, minute, second)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let local = calendar.date(from: components) else { return nil }
        return local.addingTimeInterval(fraction - Double(offset))
    }

    private static func daysIn(_ month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
