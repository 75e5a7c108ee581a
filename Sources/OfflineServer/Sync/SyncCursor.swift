import Foundation

/// Where a device stands, sent to it as an opaque string (base64url of JSON): what
/// `GET /api/sync` reads back from every client. Kept apart from the pull, so it builds on its
/// own (the fuzz target SyncCursor compiles this file alone).
struct SyncCursor: Codable, Sendable, Hashable {
    /// A text this server could not have given out.
    struct Invalid: Error {}

    /// The feed's epoch.
    var e: String
    /// Every change up to this position, in every audience the device had.
    var p: Int64
    /// Membership changes up to this position were turned into tasks.
    var m: Int64
    /// The collections the device syncs.
    var c: [String]
    /// Snapshots and move-outs to do before going on from `p`, first first.
    var t: [Task]

    struct Task: Codable, Sendable, Hashable {
        enum Kind: String, Codable, Sendable { case snapshot = "s", moveOut = "o" }
        var k: Kind
        var c: [String]
        /// The audiences; nil for all the user's.
        var a: [String]?
        /// A snapshot covers rows up to this position.
        var h: Int64
        /// The last position served.
        var s: Int64
        /// A move-out: the device had every change of the audience up to here, so deletions
        /// after it are sent too (nil in cursors given out before: every deletion is).
        var f: Int64?
    }

    static let maximumLength = 16 << 10

    init(e: String, p: Int64, m: Int64, c: [String], t: [Task]) {
        (self.e, self.p, self.m, self.c, self.t) = (e, p, m, c, t)
    }

    /// - Throws: ``Invalid`` for anything this server could not have given out.
    init(_ text: String) throws {
        guard text.utf8.count <= Self.maximumLength, let data = Base64URL.decoded(text),
              let cursor = try? JSONDecoder().decode(SyncCursor.self, from: data),
              !cursor.e.isEmpty, cursor.e.count <= 32, cursor.p >= 0, cursor.m >= 0, cursor.t.count <= 64,
              cursor.c.count <= 256, cursor.t.allSatisfy({ $0.s >= 0 && $0.h >= 0 && ($0.f ?? 0) >= 0 && ($0.a?.count ?? 0) <= 4096 })
        else { throw Invalid() }
        self = cursor
    }

    var encoded: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // Strings, numbers and arrays of them always encode.
        let data = (try? encoder.encode(self)) ?? Data()
        return Base64URL.encoded(data)
    }
}
