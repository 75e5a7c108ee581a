public import Hummingbird

/// The request context every OfflineServer route receives.
public struct OfflineRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// Uploads are small JSON documents; packs are served, never uploaded.
    public var maxUploadSize: Int { 1 << 20 }

    /// `request.decode(as:context:)` checks every body before decoding it, so no route can take
    /// a control character, deep nesting or UTF-16 that the checked routes refuse.
    public var requestDecoder: CheckedJSONDecoder { CheckedJSONDecoder() }
}
