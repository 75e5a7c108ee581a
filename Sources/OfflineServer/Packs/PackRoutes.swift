import Foundation
import Hummingbird
import NIOCore
import NIOPosix
import OfflineCore

extension Router where Context == OfflineRequestContext {
    /// Pack hosting from `configuration.packsDirectory`:
    ///
    /// - `GET /packs`: the pack ids with their newest version, as JSON.
    /// - `GET /packs/PACK/latest.json`: the newest version's manifest (strong ETag, `If-None-Match` → 304).
    /// - `GET /packs/PACK/VERSION/manifest.json`: one version's manifest.
    /// - `GET /packs/PACK/VERSION/PATH`: a file listed in that manifest, with `Accept-Ranges`,
    ///   a strong ETag, `Range`/`If-Range`, `Content-Range` and 416.
    /// - `HEAD` on each of these: the same headers, no body.
    /// - `PUT`/`DELETE /_faults/packs`: the fault plan, only with `faultsEnabled`.
    func addPackRoutes(_ configuration: ServerConfiguration) {
        guard let directory = configuration.packsDirectory else { return }
        let hosting = PackHosting(catalog: PackCatalog(directory: directory))
        get("/packs") { _, _ in try await hosting.index() }
        get("/packs/:id/latest.json") { request, context in
            try await hosting.latest(id: context.parameters.require("id"), request: request)
        }
        get("/packs/:id/:version/**") { request, context in
            // The router hands the path over still percent-encoded: a listed file "my notes.txt"
            // is asked for as my%20notes.txt. Only paths the manifest lists are served.
            let components = context.parameters.getCatchAll().map { $0.removingPercentEncoding }
            guard !components.contains(nil) else { throw HTTPError(.notFound) }
            let path = components.compactMap { $0 }.joined(separator: "/")
            return try await hosting.file(
                id: context.parameters.require("id"), version: context.parameters.require("version"),
                path: path, request: request, context: context)
        }
        if configuration.faultsEnabled {
            put("/_faults/packs") { request, context in
                try context.requireLocalPeer()
                let plan = try await request.decode(as: PackFaultPlan.self, context: context)
                hosting.faults.set(plan)
                return Response(status: .noContent)
            }
            delete("/_faults/packs") { _, context in
                try context.requireLocalPeer()
                hosting.faults.set(nil)
                return Response(status: .noContent)
            }
        }
    }
}

/// Answers pack requests from a ``PackCatalog``. The catalog's reads of the folder (listings,
/// attributes, manifests) block, and run on NIO's pool of threads for blocking work, never on the
/// cooperative pool every request shares; file bodies are read by `FileIO`.
struct PackHosting: Sendable {
    let catalog: PackCatalog
    let faults = PackFaultState()
    private let cache = Locked([String: (modified: Date, value: PackCatalog.ManifestData)]())
    private let fileIO = FileIO()

    init(catalog: PackCatalog) {
        self.catalog = catalog
    }

    struct IndexEntry: Codable {
        var id: String
        var version: String
        var totalBytes: Int64
        var createdAt: Date
    }

    func index() async throws -> Response {
        let data = try await NIOThreadPool.singleton.runIfActive { [catalog] in
            let entries = try catalog.packIDs().compactMap { id -> IndexEntry? in
                guard let latest = try catalog.latestManifestData(id: id)?.manifest else { return nil }
                return IndexEntry(id: id, version: latest.version, totalBytes: latest.totalBytes, createdAt: latest.createdAt)
            }
            return try PackManifest.encoder().encode(entries)
        }
        return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-cache"], body: .init(byteBuffer: ByteBuffer(data: data)))
    }

    func latest(id: String, request: Request) async throws -> Response {
        guard let latest = try await NIOThreadPool.singleton.runIfActive({ [catalog] in try catalog.latestManifestData(id: id) }) else {
            throw HTTPError(.notFound)
        }
        return manifestResponse(latest, request: request)
    }

    private func manifestResponse(_ manifest: PackCatalog.ManifestData, request: Request) -> Response {
        var headers: HTTPFields = [.eTag: manifest.entityTag, .cacheControl: "no-cache"]
        if Self.matches(request.headers[.ifNoneMatch], manifest.entityTag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(data: manifest.data)))
    }

    /// A version's manifest, cached while its file is unchanged.
    private func manifest(id: String, version: String) -> PackCatalog.ManifestData? {
        let key = id + "/" + version
        guard let url = catalog.manifestURL(id: id, version: version),
              let modified = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date else { return nil }
        if let cached = cache.withLock({ $0[key] }), cached.modified == modified { return cached.value }
        guard let loaded = catalog.manifestData(id: id, version: version) else { return nil }
        cache.withLock { $0[key] = (modified, loaded) }
        return loaded
    }

    func file(id: String, version: String, path: String, request: Request, context: OfflineRequestContext) async throws -> Response {
        // The manifest and the file's place on disk, in one trip to the blocking pool.
        let (found, located) = try await NIOThreadPool.singleton.runIfActive { [catalog] in
            let found = manifest(id: id, version: version)
            return (found, path == "manifest.json" ? nil : found.flatMap { catalog.fileURL(in: $0.manifest, path: path) })
        }
        guard let manifest = found else { throw HTTPError(.notFound) }
        if path == "manifest.json" { return manifestResponse(manifest, request: request) }
        guard let (url, entry, size) = located else { throw HTTPError(.notFound) }
        // The file changed under its manifest (cut short, or written to): its ETag and length
        // would be false, and announcing the manifest's length while sending another hangs the
        // client, so say so instead.
        guard size == entry.size else {
            context.logger.error("pack file size differs from its manifest",
                                 metadata: ["path": "\(id)/\(version)/\(path)", "manifest": "\(entry.size)", "disk": "\(size)"])
            throw HTTPError(.internalServerError)
        }
        // A HEAD sends no body: it neither uses up a fault plan's responses nor counts bytes.
        let isHead = request.method == .head
        let plan = isHead ? nil : faults.takePlan()
        let generation = faults.generation
        let entityTag = "\"" + entry.sha256.prefix(32) + (generation > 0 ? "-g\(generation)" : "") + "\""

        var headers: HTTPFields = [.acceptRanges: "bytes", .eTag: entityTag, .contentType: entry.mediaType]
        if Self.matches(request.headers[.ifNoneMatch], entityTag) {
            return Response(status: .notModified, headers: headers)
        }
        var range: ClosedRange<Int64>?
        if plan?.ignoreRange != true, let header = request.headers[.range] {
            // If-Range with another validator means "send the whole, current file".
            let validatorHolds = request.headers[.ifRange].map { $0 == entityTag } ?? true
            if validatorHolds {
                switch Self.parseRange(header, size: size) {
                case .whole: break
                case .unsatisfiable:
                    headers[.contentRange] = "bytes */\(size)"
                    return Response(status: .rangeNotSatisfiable, headers: headers)
                case .range(let parsed): range = parsed
                }
            }
        }
        let served = range ?? 0...max(0, size - 1)
        let length = size == 0 ? 0 : served.count
        let status: HTTPResponse.Status
        if let range {
            status = .partialContent
            let first = plan?.wrongContentRange == true ? max(0, range.lowerBound - 1) : range.lowerBound
            headers[.contentRange] = "bytes \(first)-\(range.upperBound)/\(size)"
        } else {
            status = .ok
        }
        headers[.contentLength] = String(length)
        guard length > 0, !isHead else { return Response(status: status, headers: headers) }

        if let plan {
            return Response(status: status, headers: headers, body: faultedBody(url: url, range: served, plan: plan))
        }
        faults.served(Int64(length), threshold: nil)
        let body = try await fileIO.loadFile(path: url.path, range: Int(served.lowerBound)...Int(served.upperBound), context: context)
        return Response(status: status, headers: headers, body: body)
    }

    /// Streams `range` of the file at `url` while applying `plan`.
    private func faultedBody(url: URL, range: ClosedRange<Int64>, plan: PackFaultPlan) -> ResponseBody {
        let faults = faults
        return ResponseBody(contentLength: range.count) { writer in
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(range.lowerBound))
            if let delay = plan.firstByteDelayMilliseconds { try await Task.sleep(for: .milliseconds(delay)) }
            var offset = range.lowerBound
            var sent: Int64 = 0
            let chunkSize = plan.bytesPerSecond.map { max(1, min(64 << 10, $0 / 20)) } ?? (64 << 10)
            while offset <= range.upperBound {
                var count = Int(min(Int64(chunkSize), range.upperBound - offset + 1))
                if let drop = plan.dropAfterBytes { count = Int(min(Int64(count), drop - sent)) }
                if count <= 0 { throw PackFaultInjected.connectionDropped }
                guard var chunk = try handle.read(upToCount: count), !chunk.isEmpty else { break }
                if let corrupt = plan.corruptByteAt, corrupt >= offset, corrupt < offset + Int64(chunk.count) {
                    let index = chunk.startIndex + Int(corrupt - offset)
                    chunk[index] ^= 0xFF
                }
                try await writer.write(ByteBuffer(data: chunk))
                offset += Int64(chunk.count)
                sent += Int64(chunk.count)
                faults.served(Int64(chunk.count), threshold: plan.changeETagAfterBytes)
                if let rate = plan.bytesPerSecond, rate > 0 {
                    try await Task.sleep(for: .milliseconds(chunk.count * 1000 / rate))
                }
            }
            if let drop = plan.dropAfterBytes, sent >= drop, offset <= range.upperBound { throw PackFaultInjected.connectionDropped }
            try await writer.finish(nil)
        }
    }

    static func matches(_ ifNoneMatch: String?, _ entityTag: String) -> Bool {
        guard let ifNoneMatch else { return false }
        return ifNoneMatch.split(separator: ",").contains { tag in
            let tag = tag.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == entityTag || tag == "W/" + entityTag
        }
    }

    enum ParsedRange: Equatable {
        case whole
        case unsatisfiable
        case range(ClosedRange<Int64>)
    }

    /// Parses a `Range` header for a file of `size` bytes (RFC 9110 §14.2).
    ///
    /// A header that is not one valid `bytes=` range (`bytes=--5`, `bytes=abc`, `items=0-1`,
    /// `bytes=5-3`, several ranges) is ignored and the whole file sent, as §14.2 allows; a valid
    /// range that starts at or past the end, or an empty suffix (`bytes=-0`), is unsatisfiable
    /// (416). An end past the file, however many digits, is clamped to the last byte.
    static func parseRange(_ header: String, size: Int64) -> ParsedRange {
        guard let equals = header.firstIndex(of: "="), header[..<equals].lowercased() == "bytes" else { return .whole }
        let parts = header[header.index(after: equals)...].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .whole }
        if parts[0].isEmpty {
            guard let suffix = position(parts[1]) else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .range(max(0, size - suffix)...(size - 1))
        }
        guard let first = position(parts[0]) else { return .whole }
        let last: Int64
        if parts[1].isEmpty {
            last = .max
        } else {
            guard let parsed = position(parts[1]) else { return .whole }
            last = parsed
        }
        guard last >= first else { return .whole }
        guard first < size else { return .unsatisfiable }
        return .range(first...min(last, size - 1))
    }

    /// ASCII digits only (no sign, no spaces); a number too large for Int64 is Int64.max, which
    /// is past any file.
    private static func position(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return Int64(text) ?? .max
    }
}

enum PackFaultInjected: Error {
    case connectionDropped
}
