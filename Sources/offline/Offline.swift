import ArgumentParser

@main
struct Offline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline",
        abstract: "OfflineKit's command line: connectivity, the reference backend, packs and the demo.",
        subcommands: [Status.self, Serve.self, Accounts.self, Pack.self, Outbox.self, Sync.self, Demo.self]
    )
}
