import ServiceLifecycle

/// Runs `action` when the application shuts down gracefully (or is cancelled): stops what has no
/// service of its own, such as the threads PostgreSQL's transactions run on.
///
/// Listed before the services that use what it stops, it runs after they have stopped (a service
/// group shuts its services down in reverse order).
struct ShutdownHook: NamedService {
    let action: @Sendable () async -> Void

    func run() async throws {
        try? await gracefulShutdown()
        await action()
    }
}
