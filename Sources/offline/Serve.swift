import ArgumentParser
import Foundation
import Hummingbird
import OfflineServer

extension Offline {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the reference backend until SIGINT or SIGTERM."
        )

        @Option(help: "Address to listen on.") var host = "127.0.0.1"
        @Option(help: "Port to listen on (0 picks a free one).") var port = 8080
        @Option(help: "Folder for the embedded SQLite databases (kept across restarts); without it, data lives in memory.")
        var data: String?
        @Option(help: "Folder of packs to host: PACK/VERSION/… .") var packs: String?
        @Option(help: "Store everything (domain, shop, records, idempotency keys) in PostgreSQL at this URL (postgres://user[:password]@host[:port]/database) instead of SQLite; several servers may share it.")
        var postgres: String?
        @Flag(help: "Expose the fault-injection control endpoint on loopback.") var faults = false
        @Flag(name: .customLong("demo-accounts"), help: "Create the demo's accounts (ana and ben, password offline-demo) when missing. Never on a server others can reach.")
        var demoAccounts = false
        @Option(name: .customLong("idempotency-retention"), help: "Hours to keep idempotency keys and their stored responses.")
        var idempotencyRetention: Double = 24
        @Option(name: .customLong("idle-timeout"), help: "Seconds a connection may wait for its next request before it is closed.")
        var idleTimeout: Double = 60
        @Option(name: .customLong("request-head-timeout"), help: "Seconds a client has, from a request's first byte, to send the whole request head.")
        var requestHeadTimeout: Double = 10
        @Option(name: .customLong("request-body-timeout"), help: "Seconds a client has, from a request's head, to send the whole body.")
        var requestBodyTimeout: Double = 30
        @Option(name: .customLong("response-write-timeout"), help: "Seconds an answer may wait for a client that stopped reading it before the connection is closed.")
        var responseWriteTimeout: Double = 30
        @Option(name: .customLong("max-connections"), help: "Connections served at once; more wait in the listen queue until one closes.")
        var maxConnections = 2048
        @Option(name: .customLong("max-connections-per-address"), help: "Connections one client address holds at once (0: no limit); connections from this machine, a proxy's, are not counted.")
        var maxConnectionsPerAddress = 128
        @Option(name: .customLong("listen-backlog"), help: "Connections the kernel holds for the server to take; past it, a connection's handshake is lost and retried a second later.")
        var listenBacklog = 4096
        @Option(name: .customLong("socket-send-buffer"), help: "Bytes of kernel send buffer per connection (0 leaves it to the kernel): what a client that reads nothing can hold.")
        var socketSendBuffer = 256 * 1024
        @Option(name: .customLong("sync-rules"), help: "A YAML file of sync rules: which of the database's tables are synced, and to whom (added to the built-in ones).")
        var syncRules: String?
        @Flag(name: .customLong("capture-stream"), help: "With --postgres: stream changes to capture on a replication session while commits are few (a commit passed on at once, an idle database asked nothing), and poll every 5 ms while they come faster than 400 a second (cheaper for the writers).")
        var captureStream = false
        @Flag(name: .customLong("sync-replica-identity-full"), help: "With --postgres: set REPLICA IDENTITY FULL on a table the sync rules read that has no primary key, before publishing it (otherwise the server refuses to start, printing the statements that fix it).")
        var syncReplicaIdentityFull = false
        @Option(name: .customLong("tombstone-retention"), help: "Days to keep deleted rows' tombstones in the sync feed; a device offline longer syncs everything again.")
        var tombstoneRetention: Double = 30
        @Option(name: .customLong("max-records-per-user"), help: "Records one user may keep across collections; a write past it is refused (403).")
        var maxRecordsPerUser = RecordQuota.standard.records
        @Option(name: .customLong("max-record-bytes-per-user"), help: "Bytes the bodies of one user's records may take together; a write past it is refused (403).")
        var maxRecordBytesPerUser = RecordQuota.standard.bytes
        @Option(name: .customLong("sign-in-failures-per-address"), help: "Wrong passwords one client address may send in 15 minutes before its sign-ins are refused (429); 0 counts none (behind a proxy, where every client has the proxy's address).")
        var signInFailuresPerAddress = 100
        @Option(name: .customLong("max-requests-per-user"), help: "Requests one signed-in user may have under way at once; one more is refused (429).")
        var maxRequestsPerUser = 32
        @Option(name: .customLong("metrics-port"), help: "Serve the server's metrics for Prometheus at GET /metrics on this port (0 picks a free one); none by default.")
        var metricsPort: Int?
        @Option(name: .customLong("metrics-host"), help: "The address the metrics port listens on: loopback by default, a private address for a scraper elsewhere.")
        var metricsHost = "127.0.0.1"
        @Option(name: .customLong("jwt-issuer"), help: "Take the JSON Web Tokens of the app's own identity provider with this iss, beside the server's own accounts (with --jwt-audience and --jwt-keys).")
        var jwtIssuer: String?
        @Option(name: .customLong("jwt-audience"), help: "The aud the identity provider's tokens must name.")
        var jwtAudience: String?
        @Option(name: .customLong("jwt-keys"), help: "The identity provider's JWK Set: a file, or its https address (jwks_uri). Read again every 5 minutes, and when a token names a key it does not hold.")
        var jwtKeys: String?
        @Option(name: .customLong("jwt-roles-claim"), help: "The claim holding the user's roles.")
        var jwtRolesClaim = "roles"
        @Option(name: .customLong("jwt-user-prefix"), help: "Put before each provider user's sub to make their user id (idp: makes sub ana the user idp:ana); required beside the server's own accounts.")
        var jwtUserPrefix: String?

        /// The identity provider the three `--jwt-` options name, or nil when none is given.
        var identityProvider: IdentityProvider? {
            get throws {
                let given = [jwtIssuer, jwtAudience, jwtKeys].compactMap { $0 }
                guard !given.isEmpty else { return nil }
                guard let jwtIssuer, let jwtAudience, let jwtKeys, !jwtIssuer.isEmpty, !jwtAudience.isEmpty else {
                    throw ValidationError("--jwt-issuer, --jwt-audience and --jwt-keys go together.")
                }
                let keys: IdentityProvider.Keys = if jwtKeys.hasPrefix("https://") || jwtKeys.hasPrefix("http://"), let url = URL(string: jwtKeys) {
                    .url(url)
                } else {
                    .file(URL(fileURLWithPath: jwtKeys))
                }
                var provider = IdentityProvider(issuer: jwtIssuer, audience: jwtAudience, keys: keys, rolesClaim: jwtRolesClaim)
                provider.userIDPrefix = jwtUserPrefix.flatMap { $0.isEmpty ? nil : $0 }
                return provider
            }
        }

        func validate() throws {
            guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535.") }
            guard idempotencyRetention > 0 else { throw ValidationError("--idempotency-retention must be positive.") }
            for (name, seconds) in [("--idle-timeout", idleTimeout), ("--request-head-timeout", requestHeadTimeout),
                                    ("--request-body-timeout", requestBodyTimeout), ("--response-write-timeout", responseWriteTimeout)] where !(seconds > 0) {
                throw ValidationError("\(name) must be positive.")
            }
            guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive.") }
            guard maxConnectionsPerAddress >= 0 else { throw ValidationError("--max-connections-per-address must be 0 or more.") }
            guard listenBacklog > 0 else { throw ValidationError("--listen-backlog must be positive.") }
            guard socketSendBuffer >= 0 else { throw ValidationError("--socket-send-buffer must be 0 or more.") }
            guard tombstoneRetention > 0 else { throw ValidationError("--tombstone-retention must be positive.") }
            guard maxRequestsPerUser > 0 else { throw ValidationError("--max-requests-per-user must be positive.") }
            if let metricsPort, !(0...65_535).contains(metricsPort) { throw ValidationError("--metrics-port must be a port number.") }
            guard signInFailuresPerAddress >= 0 else { throw ValidationError("--sign-in-failures-per-address must be 0 or more.") }
            _ = try identityProvider
            guard maxRecordsPerUser > 0, maxRecordBytesPerUser > 0 else {
                throw ValidationError("--max-records-per-user and --max-record-bytes-per-user must be positive.")
            }
        }

        func run() async throws {
            var configuration = ServerConfiguration(
                host: host,
                port: port,
                dataDirectory: data.map { URL(fileURLWithPath: $0, isDirectory: true) },
                packsDirectory: packs.map { URL(fileURLWithPath: $0, isDirectory: true) },
                postgresURL: postgres,
                faultsEnabled: faults,
                idempotencyRetention: .seconds(idempotencyRetention * 3600),
                accounts: demoAccounts ? AccountSeed.demo : [],
                idleTimeout: .seconds(idleTimeout),
                requestHeadTimeout: .seconds(requestHeadTimeout),
                requestBodyTimeout: .seconds(requestBodyTimeout),
                responseWriteTimeout: .seconds(responseWriteTimeout),
                maxConnections: maxConnections,
                listenBacklog: listenBacklog,
                socketSendBuffer: socketSendBuffer == 0 ? nil : socketSendBuffer,
                syncRules: syncRules.map { URL(fileURLWithPath: $0) },
                tombstoneRetention: .seconds(tombstoneRetention * 24 * 3600),
                captureStreams: captureStream,
                recordQuota: RecordQuota(records: maxRecordsPerUser, bytes: maxRecordBytesPerUser),
                signInFailuresPerAddress: signInFailuresPerAddress == 0 ? nil : signInFailuresPerAddress,
                maxRequestsPerUser: maxRequestsPerUser,
                metricsPort: metricsPort,
                metricsHost: metricsHost,
                identityProvider: try identityProvider
            )
            configuration.syncReplicaIdentityFull = syncReplicaIdentityFull
            configuration.maxConnectionsPerAddress = maxConnectionsPerAddress == 0 ? nil : maxConnectionsPerAddress
            let app = try await buildApplication(configuration, onServerRunning: { [configuration] port in
                print("offline serve: listening on http://\(configuration.host):\(port)")
                fflush(nil)
            }, onMetricsRunning: { [configuration] port in
                print("offline serve: metrics at http://\(configuration.metricsHost):\(port)/metrics")
                fflush(nil)
            })
            try await app.runService()
        }
    }
}
