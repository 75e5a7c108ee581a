public import Hummingbird

/// The request context every OfflineServer route receives.
public struct OfflineRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// Uploads are small JSON documents; packs are served, never uploaded.
    public var maxUploadSize: Int { 1 << 20 }
}
