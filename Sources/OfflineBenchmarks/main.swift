print("bench")
try await runDownloadBenchmark()
try await runCacheBenchmark()
