import Foundation

extension Date {
    /// Whether something last done at `last` (nil: never) may be done again at this date:
    /// `interval` has passed since, or the wall clock went back past `last` (a clock set back
    /// would otherwise hold it back for as long as it went back).
    func isDue(after last: Date?, every interval: TimeInterval) -> Bool {
        guard let last else { return true }
        return timeIntervalSince(last) >= interval || self < last
    }
}
