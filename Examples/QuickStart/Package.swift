// swift-tools-version: 6.2
// The README's examples as an app's own package: it adds OfflineKit as the README's Installation
// section says, from the checkout it sits in. scripts/labs/10-readme-quickstart.sh builds it
// (with no warning allowed) and runs it against the reference server.
import PackageDescription

let package = Package(
    name: "QuickStart",
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    dependencies: [
        // In an app: .package(path: "../OfflineKit"), or the repository's URL from a release.
        .package(name: "OfflineKit", path: "../.."),
        // For the app's own tables and observing them (OfflineKit's database is GRDB's).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(name: "QuickStart", dependencies: [.product(name: "OfflineKit", package: "OfflineKit")]),
        .executableTarget(name: "Connectivity", dependencies: [.product(name: "OfflineKit", package: "OfflineKit")]),
        .executableTarget(name: "SyncedChat", dependencies: [.product(name: "OfflineKit", package: "OfflineKit"),
                                                             .product(name: "GRDB", package: "GRDB.swift")]),
    ]
)
