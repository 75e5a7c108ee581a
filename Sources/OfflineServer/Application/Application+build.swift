public import Hummingbird
public import Logging
import ServiceLifecycle

/// Builds the reference backend: routes grouped by feature, each feature in its own folder.
///
/// ```swift
/// let app = try await buildApplication(ServerConfiguration(port: 0))
/// try await app.runService()
/// ```
public func buildApplication(
    _ configuration: ServerConfiguration,
    logger: Logger = Logger(label: "offline.server"),
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    let storage = try await openServerStorage(
        configuration, schemas: [DomainStore.schema, ShopStore.schema, RecordStore.schema], logger: logger)
    let (router, recordServices) = try await buildRouter(configuration, storage: storage)
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "OfflineServer"),
        services: storage.services + recordServices,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger
    )
}

/// Every route of the reference backend over `storage`, and the services its features need
/// running beside the server.
func buildRouter(
    _ configuration: ServerConfiguration, storage: any ServerStorage
) async throws -> (Router<OfflineRequestContext>, [any Service]) {
    // HEAD runs the GET route and drops its body, so a client can check a resource's headers
    // (a pack file's length and ETag) without fetching it.
    let router = Router(context: OfflineRequestContext.self, options: .autoGenerateHeadEndpoints)
    router.add(middleware: HeadMiddleware())
    router.addFaultSwitch(configuration)
    router.addHealthRoutes()
    router.addShopRoutes(storage: storage)
    try router.addDomainRoutes(configuration, storage: storage)
    router.addPackRoutes(configuration)
    let recordServices = try await router.addRecordsRoutes(configuration, storage: storage)
    return (router, recordServices)
}
