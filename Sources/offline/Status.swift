import ArgumentParser
extension Offline { struct Status: AsyncParsableCommand { func run() async throws {} } }
