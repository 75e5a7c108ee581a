extension OfflineMessage {
    /// The city-pack specification's copy for a download that did not finish.
    public static let packDownloadDidNotFinish = OfflineMessage(
        key: "pack.downloadDidNotFinish", text: "Download didn’t finish. Check your connection and try again.")
    public static let packVerificationFailed = OfflineMessage(
        key: "pack.verificationFailed", text: "The download was damaged on the way and was discarded. Try again.")
    public static let packInsufficientStorage = OfflineMessage(
        key: "pack.insufficientStorage", text: "Not enough storage space. Free up some space and try again.")
    public static let packInvalidContent = OfflineMessage(
        key: "pack.invalidContent", text: "This download isn’t available right now. Try again later.")
    public static let packPermissionDenied = OfflineMessage(
        key: "pack.permissionDenied", text: "Allow storage for offline downloads to save this for offline.")
}

extension PackFailure {
    /// The message to show for this failure; none carries a technical detail.
    public var message: OfflineMessage {
        switch self {
        case .interrupted: .packDownloadDidNotFinish
        case .verificationFailed: .packVerificationFailed
        case .insufficientStorage: .packInsufficientStorage
        case .invalidContent: .packInvalidContent
        case .permissionDenied: .packPermissionDenied
        }
    }
}
