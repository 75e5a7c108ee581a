extension Duration {
    /// The duration in seconds, with its fraction: for `Date` arithmetic and rates.
    ///
    /// `Duration` has no such accessor of its own, and every module of the package needs one.
    package var timeInterval: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
