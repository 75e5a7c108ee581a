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
    ("capture", runCaptureBenchmark),
    ("capture-large", runCaptureLargeBenchmark),
    ("move-out", runMoveOutBenchmark),
    ("fan-out", runFanOutBenchmark),
]

// The cache benchmark's child process, run in a new process for each first open it times.
if CommandLine.arguments.count == 3, CommandLine.arguments[1] == cacheColdOpenCommand {
    try await runCacheColdOpen(file: URL(fileURLWithPath: CommandLine.arguments[2]))
    exit(0)
}

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
