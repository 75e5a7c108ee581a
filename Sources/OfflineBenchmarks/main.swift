print("bench")
try await runDownloadBenchmark()
try await runCacheBenchmark()
try await runOutboxBenchmark()
