import Foundation
public import Hummingbird
public import Logging

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
        configuration,
        schemas: [AccountStore.schema(seeds: configuration.accounts), IdempotentWrites.schema,
                  DomainStore.schema, ShopStore.schema, RecordStore.schema],
        logger: logger)
    let accounts = AccountStore(storage: storage, accessLifetime: configuration.accessTokenLifetime,
                                refreshLifetime: configuration.refreshTokenLifetime, now: { Date() })
    let router = Router(context: OfflineRequestContext.self)
    router.addFaultSwitch(configuration)
    router.addHealthRoutes()
    // Before every route that needs to know who is asking.
    router.addAccountRoutes(accounts: accounts)
    // Every write after this point is exactly-once.
    router.add(middleware: IdempotentWrites(storage: storage, retention: configuration.idempotencyRetention, now: { Date() }))
    router.addShopRoutes(storage: storage)
    try router.addDomainRoutes(configuration, storage: storage)
    router.addPackRoutes(configuration)
    router.addRecordsRoutes(storage: storage)
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "OfflineServer"),
        services: storage.services,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger
    )
}
