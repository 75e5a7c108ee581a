import Foundation
import NIOPosix

/// Publishes the sample packs on first start: one per city (its guide plus map tiles, about
/// 1–2 MB) and one per audio session (a WAV file of a few hundred KB to a few MB).
enum PackSeed {
    /// Publishes the sample packs into the configuration's packs folder, if it has one and they
    /// are not there yet, on NIO's thread pool for blocking work: making and writing a few
    /// megabytes of files would otherwise hold a thread of the cooperative pool, which every
    /// request of every server in the process shares, for as long as it takes.
    static func seed(_ configuration: ServerConfiguration, now: Date = Date()) async throws {
        guard let packs = configuration.packsDirectory else { return }
        try await NIOThreadPool.singleton.runIfActive { try seedIfNeeded(into: packs, now: now) }
    }

    static func seedIfNeeded(into packsDirectory: URL, now: Date) throws {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: packsDirectory, withIntermediateDirectories: true)
        let scratch = fileManager.temporaryDirectory.appendingPathComponent("offline-seed-\(UUID().uuidString)")
        defer { try? fileManager.removeItem(at: scratch) }

        for (index, city) in DomainCatalog.cities.enumerated() where !exists(city.packId, in: packsDirectory) {
            let source = scratch.appendingPathComponent(city.packId)
            try fileManager.createDirectory(at: source.appendingPathComponent("tiles"), withIntermediateDirectories: true)
            let guide = try JSONEncoder().encode(DomainCatalog.guide(for: city))
            try guide.write(to: source.appendingPathComponent("guide.json"))
            // Larger cities get more tiles: 6 to 13 tiles of 128 KiB.
            for tile in 0..<(6 + index) {
                try SyntheticContent.noise(count: 128 * 1024, seed: UInt64(index * 100 + tile))
                    .write(to: source.appendingPathComponent("tiles/\(tile).bin"))
            }
            try PackFolder.publish(id: city.packId, version: "1", from: source, into: packsDirectory, createdAt: now)
        }

        for (index, session) in DomainCatalog.sessions.enumerated() where !exists(session.packId, in: packsDirectory) {
            let source = scratch.appendingPathComponent(session.packId)
            try fileManager.createDirectory(at: source, withIntermediateDirectories: true)
            try SyntheticContent.wav(seconds: session.minutes * 60, baseFrequency: 220 + Double(index) * 55)
                .write(to: source.appendingPathComponent("audio.wav"))
            try PackFolder.publish(id: session.packId, version: "1", from: source, into: packsDirectory, createdAt: now)
        }
    }

    /// Publishes the next version of a city pack (the guide gains a line), so clients see
    /// "Update available". Returns the new version.
    static func publishNextVersion(of packId: String, in packsDirectory: URL, now: Date) throws -> String {
        let fileManager = FileManager.default
        let versions = (try? fileManager.contentsOfDirectory(atPath: packsDirectory.appendingPathComponent(packId).path)) ?? []
        let latest = versions.compactMap(Int.init).max() ?? 0
        guard latest > 0 else { throw PackFolderError.versionExists(id: packId, version: "0") }
        let next = String(latest + 1)
        let current = packsDirectory.appendingPathComponent(packId).appendingPathComponent(String(latest))
        let scratch = fileManager.temporaryDirectory.appendingPathComponent("offline-update-\(UUID().uuidString)")
        defer { try? fileManager.removeItem(at: scratch) }
        try fileManager.createDirectory(at: scratch, withIntermediateDirectories: true)
        for path in try PackFolder.regularFiles(under: current) where path != "manifest.json" {
            let target = scratch.appendingPathComponent(path)
            try fileManager.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            try fileManager.copyItem(at: current.appendingPathComponent(path), to: target)
        }
        let guideURL = scratch.appendingPathComponent("guide.json")
        if var guide = try? JSONDecoder().decode(CityGuideDocument.self, from: Data(contentsOf: guideURL)), !guide.problems.isEmpty {
            guide.problems[0].situations.append(.init(title: "Updated in version \(next)", actions: ["New tips from local editors"]))
            try JSONEncoder().encode(guide).write(to: guideURL)
        }
        try PackFolder.publish(id: packId, version: next, from: scratch, into: packsDirectory, createdAt: now)
        return next
    }

    private static func exists(_ packId: String, in packsDirectory: URL) -> Bool {
        FileManager.default.fileExists(atPath: packsDirectory.appendingPathComponent(packId).appendingPathComponent("latest.json").path)
    }
}
