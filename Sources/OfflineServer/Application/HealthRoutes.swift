import Hummingbird

extension Router where Context == OfflineRequestContext {
    /// `GET /health` answers 204 with no body: the default target of the client's probes.
    func addHealthRoutes() {
        get("/health") { _, _ in Response(status: .noContent) }
    }
}
