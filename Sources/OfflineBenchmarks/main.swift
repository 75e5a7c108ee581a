// offline-bench: prints OfflineKit's performance figures beside a raw baseline measured in the
// same run. `offline-bench` runs every benchmark; `offline-bench download cache` runs those named.
import Foundation

let benchmarks: [(name: String, run: () async throws -> Void)] = [
    ("download", runDownloadBenchmark),
    ("cache", runCacheBenchmark),
    ("outbox", runOutboxBenchmark),
    ("demo", runDemoBenchmark),
    ("server-slow-clients", runServerSlowClientsBenchmark),
    ("server", runServerBenchmark),
    ("server-cost", runServerCostBenchmark),
    ("sync", runSyncBenchmark),
]

let requested = Set(CommandLine.arguments.dropFirst())
let unknown = requested.subtracting(benchmarks.map(\.name))
guard unknown.isEmpty else {
    print("offline-bench: no benchmark named \(unknown.sorted().joined(separator: ", ")); choose from \(benchmarks.map(\.name).joined(separator: ", "))")
    exit(2)
}
for benchmark in benchmarks where requested.isEmpty || requested.contains(benchmark.name) {
    print("== \(benchmark.name)")
    try await benchmark.run()
}
