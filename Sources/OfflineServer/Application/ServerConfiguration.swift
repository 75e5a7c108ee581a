public import Foundation

/// How `offline serve` (and tests) start the reference backend.
public struct ServerConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port; the bound port is reported through `onServerRunning`.
    public var port: Int
    /// Where the embedded SQLite database and seeded data live; nil keeps everything in memory.
    public var dataDirectory: URL?
    /// A folder of packs to host, one folder per pack id, one sub-folder per version.
    public var packsDirectory: URL?
    /// Store everything in PostgreSQL at this URL instead of SQLite.
    public var postgresURL: String?
    /// Expose the fault-injection control endpoint on loopback.
    public var faultsEnabled: Bool
    /// How long idempotency keys and their stored responses are kept.
    public var idempotencyRetention: Duration
    /// How often expired idempotency keys and tokens are deleted.
    public var purgeInterval: Duration
    /// Accounts created at start when missing (``AccountSeed/demo`` for the demo); none by default.
    public var accounts: [AccountSeed]
    /// How long an access token works; the client refreshes it after that.
    public var accessTokenLifetime: Duration
    /// How long a refresh token works if unused: how long a device may stay offline and still
    /// come back signed in.
    public var refreshTokenLifetime: Duration
    /// How long a connection may wait, with no request under way, for the first byte of its next
    /// request before the server closes it.
    public var idleTimeout: Duration
    /// How long a client has, from a request's first byte, to send the whole request head. Later
    /// bytes do not extend it, so a client trickling a header a byte at a time is closed too.
    public var requestHeadTimeout: Duration
    /// How long a client has, from a request's head, to send the whole body.
    public var requestBodyTimeout: Duration
    /// How long an answer may wait for a client that stopped reading it (the connection's send
    /// buffer full, nothing taken) before the server closes the connection.
    public var responseWriteTimeout: Duration
    /// The most connections served at once. Past it the server accepts no new connection until one
    /// closes: they wait in the kernel's listen queue (then are refused once that is full).
    public var maxConnections: Int
    /// The most connections one client address holds at once (nil: no limit); one more is closed
    /// as it opens. Connections from this machine (a reverse proxy in front) are not counted.
    public var maxConnectionsPerAddress: Int? = 128
    /// How many connections the kernel holds, their handshakes complete, until the server takes
    /// them (Linux caps it at `net.core.somaxconn`, 4,096 by default). A burst of connections
    /// past it loses its handshakes, and each client tries again only a second or more later.
    /// At 256, 300 clients connecting at once to a debug build overflowed it.
    public var listenBacklog: Int
    /// The kernel's send buffer of each connection, in bytes (Linux keeps twice this for its own
    /// bookkeeping); nil leaves it to the kernel, which grows it to 4 MiB on Linux. Bounded, a
    /// client that reads nothing holds that much of the machine's memory, not megabytes, and
    /// the server does not spend its event loops filling buffers nobody drains. It also caps
    /// one connection's throughput at about twice this per round trip: 512 KiB at 50 ms is
    /// 10 MB/s.
    public var socketSendBuffer: Int?
    /// How often the live sync stream (`GET /api/sync/events`) sends a heartbeat when nothing
    /// changed, so a client notices a connection the network silently dropped.
    public var syncHeartbeat: Duration
    /// The app's own sync rules (YAML), added to the built-in ones; see the DocC article Sync.
    public var syncRules: URL?
    /// How long a deleted row's tombstone stays in the sync feed. A device offline for longer
    /// syncs everything again when it comes back.
    public var tombstoneRetention: Duration
    /// How often capture looks for changes when it found none the last time (when it does not
    /// stream them). On PostgreSQL it looks this often whatever it found, or less often while
    /// reading the slot takes more than a quarter of the time.
    public var capturePollInterval: Duration
    /// On PostgreSQL, whether capture streams the slot on a replication session of its own
    /// while commits are few, rather than always polling it through SQL: a commit reaches the
    /// feed without waiting for a poll, and an idle database is asked nothing. Each streamed
    /// commit wakes the session, which costs the writers more on a machine of few cores, so
    /// while commits come faster than 400 a second capture polls instead, and streams again once
    /// they are fewer than 100 a second (`docs/design/capture.md`). The session signs in
    /// as the storage's URL says (trust, password, MD5 or SCRAM-SHA-256), and takes one of the
    /// database's `max_wal_senders`. When it cannot start or breaks off (a proxy that does not
    /// speak replication, a role without `REPLICATION`, a `pg_hba.conf` that refuses the role),
    /// capture says why in its log and polls for a minute before it tries again.
    public var captureStreams: Bool
    /// On PostgreSQL, whether the server sets `REPLICA IDENTITY FULL` on a table the rules read
    /// that has no primary key (nor a replica identity of its own) before publishing it; without
    /// it, the server refuses to start on such a table, saying which statement fixes it.
    /// Published with no replica identity, a table's `UPDATE`s and `DELETE`s are refused by
    /// PostgreSQL, whoever runs them.
    public var syncReplicaIdentityFull: Bool = false
    /// When capture that streams gives way to polling and back (``CaptureCadence``).
    var captureCadence = CaptureCadence.Policy()
    /// Where capture opens its replication session; nil: where the storage's URL says.
    var captureEndpoint: PostgresEndpoint?
    /// How many records, and how many bytes of them, each user may keep (`/api/records/…`).
    public var recordQuota: RecordQuota
    /// How many wrong passwords one client address may send in 15 minutes, whatever the names,
    /// before its sign-ins are refused (`429`) until the oldest is 15 minutes old; nil counts
    /// none. Behind a proxy every client has the proxy's address: set it nil there, or one
    /// guesser stops everyone's sign-in.
    public var signInFailuresPerAddress: Int?
    /// How many requests one signed-in user may have under way at once on an instance; one more
    /// is `429` with `Retry-After`.
    public var maxRequestsPerUser: Int
    /// Where Prometheus reads the server's metrics (`GET /metrics` on `metricsHost`, loopback by
    /// default: metrics say how busy the server is and are nobody else's business); nil serves
    /// none, and the metrics go to the process's `MetricsSystem`. 0 picks a free port.
    public var metricsPort: Int?
    public var metricsHost: String
    /// The app's own identity provider, whose signed tokens the server takes beside its own
    /// accounts' (``IdentityProvider``); nil takes only the server's own.
    public var identityProvider: IdentityProvider?

    public init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        dataDirectory: URL? = nil,
        packsDirectory: URL? = nil,
        postgresURL: String? = nil,
        faultsEnabled: Bool = false,
        idempotencyRetention: Duration = .seconds(24 * 3600),
        purgeInterval: Duration = .seconds(10 * 60),
        accounts: [AccountSeed] = [],
        accessTokenLifetime: Duration = .seconds(15 * 60),
        refreshTokenLifetime: Duration = .seconds(30 * 24 * 3600),
        idleTimeout: Duration = .seconds(60),
        requestHeadTimeout: Duration = .seconds(10),
        requestBodyTimeout: Duration = .seconds(30),
        responseWriteTimeout: Duration = .seconds(30),
        maxConnections: Int = 2048,
        listenBacklog: Int = 4096,
        socketSendBuffer: Int? = 256 * 1024,
        syncHeartbeat: Duration = .seconds(15),
        syncRules: URL? = nil,
        tombstoneRetention: Duration = .seconds(30 * 24 * 3600),
        capturePollInterval: Duration = .milliseconds(5),
        captureStreams: Bool = false,
        recordQuota: RecordQuota = .standard,
        signInFailuresPerAddress: Int? = 100,
        maxRequestsPerUser: Int = 32,
        metricsPort: Int? = nil,
        metricsHost: String = "127.0.0.1",
        identityProvider: IdentityProvider? = nil
    ) {
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.packsDirectory = packsDirectory
        self.postgresURL = postgresURL
        self.faultsEnabled = faultsEnabled
        self.idempotencyRetention = idempotencyRetention
        self.purgeInterval = purgeInterval
        self.accounts = accounts
        self.accessTokenLifetime = accessTokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        self.idleTimeout = idleTimeout
        self.requestHeadTimeout = requestHeadTimeout
        self.requestBodyTimeout = requestBodyTimeout
        self.responseWriteTimeout = responseWriteTimeout
        self.maxConnections = maxConnections
        self.listenBacklog = listenBacklog
        self.socketSendBuffer = socketSendBuffer
        self.syncHeartbeat = syncHeartbeat
        self.syncRules = syncRules
        self.tombstoneRetention = tombstoneRetention
        self.capturePollInterval = capturePollInterval
        self.captureStreams = captureStreams
        self.recordQuota = recordQuota
        self.signInFailuresPerAddress = signInFailuresPerAddress
        self.maxRequestsPerUser = maxRequestsPerUser
        self.metricsPort = metricsPort
        self.metricsHost = metricsHost
        self.identityProvider = identityProvider
    }
}
