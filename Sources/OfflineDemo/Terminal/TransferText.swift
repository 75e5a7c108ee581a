/// How the demo's screens write sizes and draw progress, so every screen says them alike.
enum TransferText {
    /// A size in decimal units, as the platforms' file sizes are shown: "640 KB", "2.9 MB".
    static func bytes(_ count: Int64) -> String {
        if count < 1_000_000 { return "\(count / 1000) KB" }
        return String(format: "%.1f MB", Double(count) / 1_000_000)
    }

    /// A bar of `width` cells, filled to `fraction` (rounded down; none filled when unknown).
    static func bar(_ fraction: Double?, width: Int) -> String {
        let filled = min(width, max(0, Int(((fraction ?? 0) * Double(width)).rounded(.down))))
        return String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
    }
}
