// swift-tools-version: 6.2
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// Child processes of the tests and benchmarks (swift-subprocess builds for Linux and macOS only).
let subprocess: Target.Dependency = .product(name: "Subprocess", package: "swift-subprocess", condition: .when(platforms: [.linux, .macOS]))

/// Where OfflineKit carries `HTTPClientTransport` (AsyncHTTPClient, NIOPosix, NIOHTTP1): where it
/// is the platform's transport, and on macOS for the `offline` tool and the benchmarks. An iOS,
/// tvOS, watchOS or visionOS app gets `URLSessionTransport` and links none of the three.
let httpClientPlatforms: TargetDependencyCondition? = .when(platforms: [.linux, .macOS, .android, .windows, .openbsd, .wasi])
let httpClientDefine: SwiftSetting = .define("OFFLINEKIT_HTTP_CLIENT", .when(platforms: [.linux, .macOS, .android, .windows, .openbsd, .wasi]))

let package = Package(
    name: "OfflineKit",
    defaultLocalization: "en",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "OfflineCore", targets: ["OfflineCore"]),
        .library(name: "OfflineKit", targets: ["OfflineKit"]),
        .library(name: "OfflineKitTesting", targets: ["OfflineKitTesting"]),
        .library(name: "OfflineKitOpenAPI", targets: ["OfflineKitOpenAPI"]),
        .library(name: "OfflineServer", targets: ["OfflineServer"]),
        .executable(name: "offline", targets: ["offline"]),
        .executable(name: "offline-bench", targets: ["OfflineBenchmarks"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-http-structured-headers", from: "1.7.0"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/pointfreeco/swift-clocks", from: "1.1.1"),
        .package(url: "https://github.com/pointfreeco/xctest-dynamic-overlay", from: "1.13.1"),
        .package(url: "https://github.com/OpenCombine/OpenCombine", from: "0.14.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
    ],
    targets: [
        // Pure vocabulary and decisions: no I/O, no package dependencies.
        .target(name: "OfflineCore", swiftSettings: strict),

        // The client runtime an app links: storage, monitors, outbox, downloads, cache.
        .target(
            name: "OfflineKit",
            dependencies: [
                "OfflineCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: httpClientPlatforms),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HTTPTypesFoundation", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: httpClientPlatforms),
                .product(name: "NIOPosix", package: "swift-nio", condition: httpClientPlatforms),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                .product(name: "OpenCombine", package: "OpenCombine", condition: .when(platforms: [.linux])),
            ],
            resources: [.process("Resources")],
            swiftSettings: strict + [httpClientDefine]
        ),

        // Test doubles an adopting app uses too.
        .target(
            name: "OfflineKitTesting",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "IssueReporting", package: "xctest-dynamic-overlay"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        // A client generated by swift-openapi-generator, run offline-first: the connectivity gate,
        // evidence and idempotency keys as a middleware, OfflineKit's transports under it, and
        // its operations queued in the outbox.
        .target(
            name: "OfflineKitOpenAPI",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            swiftSettings: strict
        ),

        // This package's own test and benchmark helpers that drive real processes (nginx): Linux
        // and macOS only, so no product an app links contains them.
        .target(name: "OfflineTestSupport", dependencies: [
            subprocess,
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "CryptoExtras", package: "swift-crypto"),
        ], swiftSettings: strict),

        // The reference backend. Shares only OfflineCore's wire types with the client.
        .target(
            name: "OfflineServer",
            dependencies: [
                "OfflineCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "RawStructuredFieldValues", package: "swift-http-structured-headers"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            // The routes' OpenAPI document: read by the server's and the OpenAPI client's tests,
            // and by scripts/generate-openapi.sh.
            exclude: ["openapi.json"],
            swiftSettings: strict
        ),

        // The demo's scenario models, screens and network switch, kept out of the executable so
        // they can be tested end to end.
        .target(
            name: "OfflineDemo",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                "OfflineServer",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),

        .executableTarget(
            name: "offline",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                "OfflineServer",
                "OfflineDemo",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: strict
        ),

        .executableTarget(
            name: "OfflineBenchmarks",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                "OfflineKitTesting",
                "OfflineTestSupport",
                "OfflineServer",
                "OfflineDemo",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strict
        ),

        .testTarget(
            name: "OfflineCoreTests",
            dependencies: [
                "OfflineCore",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OfflineKitTests",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                "OfflineKitTesting",
                "OfflineTestSupport",
                "OfflineServer",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine", condition: .when(platforms: [.linux])),
                .product(name: "PropertyBased", package: "swift-property-based"),
                subprocess,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OfflineDemoTests",
            dependencies: [
                "OfflineCore",
                "OfflineDemo",
                "OfflineKit",
                "OfflineKitTesting",
                "OfflineServer",
                "OfflineTestSupport",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                subprocess,
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OfflineKitOpenAPITests",
            dependencies: [
                "OfflineCore",
                "OfflineKit",
                "OfflineKitOpenAPI",
                "OfflineKitTesting",
                "OfflineServer",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            exclude: ["Generated/openapi-generator-config.yaml", "Generated/openapi.sha256"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "OfflineServerTests",
            dependencies: [
                "OfflineCore",
                "OfflineServer",
                "OfflineTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
