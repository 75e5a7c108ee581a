import ServiceLifecycle

/// Runs `action` when the application shuts down gracefully (or is cancelled): closes what has no
/// service of its own, such as the PostgreSQL idempotency-key store's connection.
///
/// Listed before the server among the application's services, it runs after the server has
/// stopped taking requests (a service group shuts its services down in reverse order).
struct ShutdownHook: Service {
    let action: @Sendable () async -> Void

    func run() async throws {
        try? await gracefulShutdown()
        await action()
    }
}
