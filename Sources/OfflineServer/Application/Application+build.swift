import Foundation
public import Hummingbird
import HummingbirdCore
import Prometheus
import ServiceLifecycle
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
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
    onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    let storage = try await openServerStorage(configuration, schemas: serverSchemas(configuration), logger: logger)
    try await PackSeed.seed(configuration)
    return try await buildApplication(configuration, storage: storage, logger: logger, onServerRunning: onServerRunning,
                                      onMetricsRunning: onMetricsRunning)
}

/// The reference backend over storage that is already open (tests reach the same storage), and
/// over packs already seeded (``PackSeed/seed(_:now:)``).
///
/// - Throws: ``SyncRulesError`` when the sync rules do not fit the database; what preparing
///   capture throws (``SyncCaptureError``).
func buildApplication(
    _ configuration: ServerConfiguration,
    storage: any ServerStorage,
    exactlyOnce: Bool = true,
    logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void,
    onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    // With a metrics port, the server's metrics go to a registry of its own, served there.
    let endpoint = configuration.metricsPort.map { (port: $0, registry: PrometheusCollectorRegistry()) }
    let metrics = endpoint.map { ServerMetrics(factory: PrometheusMetricsFactory(registry: $0.registry)) } ?? ServerMetrics()
    var provider: ProviderKeys?
    if let identityProvider = configuration.identityProvider {
        // A provider's `sub` and a local account's id would name the same user.
        if identityProvider.userIDPrefix == nil, try await storage.read({ db in try db.row("SELECT 1 AS found FROM account LIMIT 1") }) != nil {
            throw IdentityProviderError(description: """
                the server has accounts of its own, and the identity provider's users would share their ids (a token with sub "ana" \
                would be the local account ana): give the provider's users a prefix (--jwt-user-prefix idp:, IdentityProvider.userIDPrefix)
                """)
        }
        provider = try await ProviderKeys(identityProvider, logger: logger)
    }
    let sync = try await SyncRuntime.prepare(configuration, rules: try SyncRules.serving(configuration), storage: storage,
                                             metrics: metrics, logger: logger)
    let purge = ExpiredDataPurge(
        storage: storage, accounts: accountStore(configuration, storage: storage), retention: configuration.idempotencyRetention,
        tombstoneRetention: configuration.tombstoneRetention,
        interval: configuration.purgeInterval, clock: ContinuousClock(), now: { Date() }, logger: logger, metrics: metrics)
    var services: [any Service] = storage.services + [sync.capture, purge]
    if let endpoint {
        services.append(MetricsEndpoint.application(
            configuration: configuration, port: endpoint.port, registry: endpoint.registry,
            refresh: { [service = sync.service] in await service.refreshGauges() }, logger: logger, onRunning: onMetricsRunning))
    }
    return Application(
        router: try buildRouter(configuration, storage: storage, sync: sync.service, exactlyOnce: exactlyOnce, metrics: metrics,
                                provider: provider),
        // Slow and silent clients are closed, and however many there are, they hold at most
        // `maxConnections`: past it, new connections wait in the listen queue until one closes.
        // One address holds at most `maxConnectionsPerAddress` of them.
        server: .http1(idleTimeout: configuration.idleTimeout, requestHeadTimeout: configuration.requestHeadTimeout,
                       requestBodyTimeout: configuration.requestBodyTimeout, responseWriteTimeout: configuration.responseWriteTimeout,
                       sendBuffer: configuration.socketSendBuffer, maxConnectionsPerAddress: configuration.maxConnectionsPerAddress),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "OfflineServer",
            backlog: configuration.listenBacklog,
            availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections, logger: logger)
        ),
        services: services,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? configuration.port) },
        logger: logger
    )
}

/// Every feature's tables, in the order they are created. SQLite's capture table only on
/// SQLite: PostgreSQL's changes are read from its write-ahead log.
func serverSchemas(_ configuration: ServerConfiguration) -> [StorageSchema] {
    [AccountStore.schema(seeds: configuration.accounts), IdempotentWrites.schema,
     DomainStore.schema, ShopStore.schema, RecordStore.schema, ChatStore.schema(members: configuration.accounts.map(\.user.id)),
     SyncFeed.schema] + (configuration.postgresURL == nil ? [SQLiteCapture.schema] : [])
}

/// Every route of the reference backend over `storage`.
///
/// - Parameter exactlyOnce: false leaves out ``IdempotentWrites``, for the benchmark that
///   measures what it costs; never on a server anyone uses.
func buildRouter(_ configuration: ServerConfiguration, storage: any ServerStorage, sync: SyncService,
                 exactlyOnce: Bool = true, metrics: ServerMetrics = ServerMetrics(),
                 provider: ProviderKeys? = nil) throws -> Router<OfflineRequestContext> {
    // HEAD runs the GET route and drops its body, so a client can check a resource's headers
    // (a pack file's length and ETag) without fetching it.
    let router = Router(context: OfflineRequestContext.self, options: .autoGenerateHeadEndpoints)
    // Outermost, so a body over its route's limit gets a readable 413 wherever it was collected.
    router.add(middleware: HostHeaderMiddleware())
    router.add(middleware: BodyLimitMiddleware())
    router.add(middleware: HeadMiddleware())
    // Inside HEAD's, so a HEAD's refusal has the headers of the GET's.
    router.add(middleware: ProblemMiddleware(serverErrors: metrics.serverErrors))
    router.addFaultSwitch(configuration)
    router.addHealthRoutes()
    // Before every route that needs to know who is asking.
    let perAddress = configuration.signInFailuresPerAddress.map { SignInAttempts.Policy.perAddress(failures: $0) }
    router.addAccountRoutes(accounts: accountStore(configuration, storage: storage), provider: provider,
                            throttle: SignInThrottle(addresses: perAddress))
    // Every route after this point counts against its user's requests under way.
    router.add(middleware: RequestsPerUser(places: PlacesPerUser(perUser: configuration.maxRequestsPerUser)))
    // Every write after this point is exactly-once.
    if exactlyOnce {
        router.add(middleware: IdempotentWrites(storage: storage, retention: configuration.idempotencyRetention, now: { Date() },
                                                requiresUser: true, metrics: metrics))
    }
    router.addShopRoutes(storage: storage)
    router.addDomainRoutes(configuration, storage: storage)
    router.addPackRoutes(configuration)
    router.addRecordsRoutes(storage: storage, quota: configuration.recordQuota, faultsEnabled: configuration.faultsEnabled)
    router.addChatRoutes(storage: storage)
    router.addSyncRoutes(sync)
    // Last, so it runs only for a request no route took: a path served with other methods gets
    // 405 and its `Allow`, not 404.
    router.add(middleware: MethodNotAllowedMiddleware(routes: router.routes))
    return router
}

func accountStore(_ configuration: ServerConfiguration, storage: any ServerStorage) -> AccountStore {
    AccountStore(storage: storage, accessLifetime: configuration.accessTokenLifetime,
                 refreshLifetime: configuration.refreshTokenLifetime, now: { Date() })
}
