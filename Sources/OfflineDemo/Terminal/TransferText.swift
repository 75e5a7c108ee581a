import Foundation

/// How the demo's screens write sizes and draw progress, so every screen says them alike.
enum TransferText {
    /// A size as the platforms show file sizes, by Foundation's formatter: "640 KB", "2.9 MB".
    static func bytes(_ count: Int64) -> String {
        ByteCountFormatter.string(fromByteCount: count, countStyle: .file)
    }

    /// A bar of `width` cells, filled to `fraction` (rounded down; none filled when unknown).
    static func bar(_ fraction: Double?, width: Int) -> String {
        let filled = min(width, max(0, Int(((fraction ?? 0) * Double(width)).rounded(.down))))
        return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    }
}
