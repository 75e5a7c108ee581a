import Foundation

/// A small generic document store: each account's JSON objects by collection and id, and how
/// many times a write with each idempotency key actually ran (the "effects" that the crash test
/// counts), in the server's storage (SQLite or PostgreSQL).
///
/// Records belong to the account that wrote them: every read and write names its owner, and one
/// owner never sees another's records. Sync captures every change of the table, whoever makes it,
/// and sends a record to its owner's devices in the collection `records/COLLECTION` (the built-in
/// sync rules).
/// Writes run in the caller's `write` (``apply(_:owner:collection:id:key:in:)``), so a write
/// route commits them with its idempotency key; reads open their own.
struct RecordStore: Sendable {
    let storage: any ServerStorage
    /// What each owner may keep; checked by every write through ``apply(_:owner:collection:id:key:maxBytes:in:)``.
    var quota = RecordQuota.unlimited
    var now: @Sendable () -> Date = { Date() }

    struct Record: Sendable, Equatable {
        var id: String
        var version: Int
        var body: [String: JSONValue]
        /// ``json`` as bytes, built once when the record was written: the feed and the answer
        /// share them, and they wrap the body's bytes as stored instead of encoding it again.
        private var encoded: [UInt8]?

        init(id: String, version: Int, body: [String: JSONValue]) {
            self.id = id
            self.version = version
            self.body = body
        }

        /// A record just written, whose body was stored as `encodedBody`.
        init(id: String, version: Int, body: [String: JSONValue], encodedBody: [UInt8]) {
            self.init(id: id, version: version, body: body)
            var bytes = Array(#"{"body":"#.utf8)
            bytes.reserveCapacity(encodedBody.count + id.utf8.count + 40)
            bytes += encodedBody
            bytes += #","id":"#.utf8
            bytes += JSONValue.string(id).jsonBytes
            bytes += #","version":\#(version)}"#.utf8
            encoded = bytes
        }

        /// `{"body":…,"id":…,"version":…}`, keys sorted as the server has always sent them.
        var json: JSONValue {
            .object(["body": .object(body), "id": .string(id), "version": .number(String(version))])
        }

        /// ``json`` as bytes.
        var jsonBytes: [UInt8] { encoded ?? json.jsonBytes }

        static func == (lhs: Record, rhs: Record) -> Bool {
            lhs.id == rhs.id && lhs.version == rhs.version && lhs.body == rhs.body
        }
    }

    static let schema = StorageSchema(migrations: [
        ("records.v1", [
            """
            CREATE TABLE IF NOT EXISTS records (
                collection \(.text) NOT NULL, id \(.text) NOT NULL, body \(.blob) NOT NULL, version \(.integer) NOT NULL,
                PRIMARY KEY (collection, id))
            """,
            "CREATE TABLE IF NOT EXISTS record_effects (idempotencyKey \(.text) PRIMARY KEY, count \(.integer) NOT NULL)",
        ]),
        // Records gain an owner. Those written before had none and anyone could read them: they
        // are kept, owned by no account, so no one reads them any more.
        ("records.v2-owners", [
            """
            CREATE TABLE records_owned (
                owner \(.text) NOT NULL, collection \(.text) NOT NULL, id \(.text) NOT NULL, body \(.blob) NOT NULL,
                version \(.integer) NOT NULL, PRIMARY KEY (owner, collection, id))
            """,
            "INSERT INTO records_owned (owner, collection, id, body, version) SELECT '', collection, id, body, version FROM records",
            "DROP TABLE records",
            "ALTER TABLE records_owned RENAME TO records",
        ]),
        // Effects are counted per owner, like the keys they are counted under (a key is the
        // client's, unique per user only), and listed to their owner only. Counts from before
        // have no owner and are no one's.
        ("records.v3-effect-owners", [
            """
            CREATE TABLE record_effects_owned (
                owner \(.text) NOT NULL, idempotencyKey \(.text) NOT NULL, count \(.integer) NOT NULL,
                PRIMARY KEY (owner, idempotencyKey))
            """,
            "INSERT INTO record_effects_owned (owner, idempotencyKey, count) SELECT '', idempotencyKey, count FROM record_effects",
            "DROP TABLE record_effects",
            "ALTER TABLE record_effects_owned RENAME TO record_effects",
        ]),
        // What each owner keeps, for ``RecordQuota``: counted once here, then by every write.
        ("records.v4-usage", [
            """
            CREATE TABLE record_usage (owner \(.text) PRIMARY KEY, records \(.integer) NOT NULL, bytes \(.integer) NOT NULL)
            """,
            """
            INSERT INTO record_usage (owner, records, bytes)
            SELECT owner, COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM records GROUP BY owner
            """,
        ]),
    ])

    enum Write: Sendable {
        case put([String: JSONValue])
        case patch([String: JSONValue])
        case delete
    }

    /// A patch would make the record larger than its collection allows a body to be: patches of
    /// fields could otherwise grow one record without bound, each under the limit.
    struct TooLarge: Error, Equatable {
        var limit: Int
    }

    /// Applies a write in `db`, records it in the owner's change feed and counts its effect under
    /// `key`: call it inside the `write` that commits the write route's effect.
    /// - Parameter maxBytes: the most a patched record's JSON may take (the collection's body limit).
    /// - Returns: the record after the write (nil after a delete, or a patch of a missing record).
    /// - Throws: ``TooLarge`` when a patch would pass `maxBytes`; nothing is written then.
    ///   ``RecordQuota/Exceeded`` when the write would take the owner past ``quota``: the caller's
    ///   `write` rolls back what this one wrote.
    func apply(_ write: Write, owner: String, collection: String, id: String, key: String?, maxBytes: Int = .max,
               in db: any SQLDatabase) throws -> Record? {
        var result: Record?
        switch write {
        case .put(let body):
            let encoded = JSONValue.object(body).jsonBytes
            let previous = try db.row("""
                SELECT LENGTH(body) AS bytes FROM records WHERE owner = \(owner) AND collection = \(collection) AND id = \(id) \(.forUpdate)
                """)?.int("bytes")
            // One statement, so concurrent writers on other instances each get their own version.
            let version = try db.row("""
                INSERT INTO records (owner, collection, id, body, version) VALUES (\(owner), \(collection), \(id), \(Data(encoded)), 1)
                ON CONFLICT (owner, collection, id) DO UPDATE SET body = excluded.body, version = records.version + 1
                RETURNING version
                """)?.int("version") ?? 1
            // Version 1 is a new record. (When the same user creates it twice at once on two instances,
            // the second finds none before its insert and version 2 after: it counts no new record
            // and, not knowing the bytes it replaced, counts more bytes than the user keeps.)
            try charge(owner, records: version == 1 ? 1 : 0, bytes: encoded.count - (previous ?? 0), in: db)
            result = Record(id: id, version: version, body: body, encodedBody: encoded)
        case .patch(let body):
            // The merge happens here, so the row stays locked from read to write.
            guard let row = try db.row("""
                SELECT body, version FROM records WHERE owner = \(owner) AND collection = \(collection) AND id = \(id) \(.forUpdate)
                """) else { return nil }
            let stored = try row.data("body")
            let current = try Self.body(stored)
            let (version, mergedBody) = (try row.int("version") + 1, current.merging(body) { _, new in new })
            let encoded = JSONValue.object(mergedBody).jsonBytes
            guard encoded.count <= maxBytes else { throw TooLarge(limit: maxBytes) }
            try charge(owner, records: 0, bytes: encoded.count - stored.count, in: db)
            try db.execute("""
                UPDATE records SET body = \(Data(encoded)), version = \(version)
                WHERE owner = \(owner) AND collection = \(collection) AND id = \(id)
                """)
            result = Record(id: id, version: version, body: mergedBody, encodedBody: encoded)
        case .delete:
            if let freed = try db.row("""
                DELETE FROM records WHERE owner = \(owner) AND collection = \(collection) AND id = \(id) RETURNING LENGTH(body) AS bytes
                """)?.int("bytes") {
                try charge(owner, records: -1, bytes: -freed, in: db)
            }
        }
        if let key {
            try db.execute("""
                INSERT INTO record_effects (owner, idempotencyKey, count) VALUES (\(owner), \(key), 1)
                ON CONFLICT (owner, idempotencyKey) DO UPDATE SET count = record_effects.count + 1
                """)
        }
        return result
    }

    /// Adds a write's change to what `owner` keeps.
    /// - Throws: ``RecordQuota/Exceeded`` when a change that adds records or bytes ends past the
    ///   quota (the owner's usage row stays locked until the caller's `write` ends either way).
    private func charge(_ owner: String, records: Int, bytes: Int, in db: any SQLDatabase) throws {
        guard records != 0 || bytes != 0 else { return }
        guard let usage = try db.row("""
            INSERT INTO record_usage (owner, records, bytes) VALUES (\(owner), \(records), \(bytes))
            ON CONFLICT (owner) DO UPDATE SET records = record_usage.records + excluded.records, bytes = record_usage.bytes + excluded.bytes
            RETURNING records, bytes
            """) else { return }
        if records > 0, try usage.int("records") > quota.records { throw RecordQuota.Exceeded(quota: quota, records: true) }
        if bytes > 0, try usage.int("bytes") > quota.bytes { throw RecordQuota.Exceeded(quota: quota, records: false) }
    }

    /// One page of a collection's records, by id: those after `after`, at most `limit` of them
    /// and, past the first, at most `maxBytes` of bodies; `more` when records are left after it.
    /// The sizes are read first, so a page never holds more than it returns.
    func list(_ collection: String, owner: String, after: String? = nil, limit: Int = RecordPage.defaultLimit,
              maxBytes: Int = RecordPage.maximumBytes) async throws -> (records: [Record], more: Bool) {
        try await storage.read { db in
            let start: SQL = after.map { "AND id > \($0)" } ?? ""
            let sizes = try db.rows("""
                SELECT id, LENGTH(body) AS bytes FROM records WHERE owner = \(owner) AND collection = \(collection) \(start)
                ORDER BY id LIMIT \(limit + 1)
                """)
            var (count, bytes) = (0, 0)
            for row in sizes.prefix(limit) {
                bytes += try row.int("bytes")
                if count > 0, bytes > maxBytes { break }
                count += 1
            }
            guard count > 0 else { return ([], false) }
            let last = try sizes[count - 1].string("id")
            let records = try db.rows("""
                SELECT id, body, version FROM records WHERE owner = \(owner) AND collection = \(collection) \(start)
                AND id <= \(last) ORDER BY id
                """).map { try Self.record(from: $0) }
            return (records, sizes.count > count)
        }
    }

    /// One record, read on its own (the collection may be large).
    func record(_ collection: String, id: String, owner: String) async throws -> Record? {
        try await storage.read { db in
            try db.row("""
                SELECT id, body, version FROM records WHERE owner = \(owner) AND collection = \(collection) AND id = \(id)
                """).map { try Self.record(from: $0) }
        }
    }

    /// How many times each of `owner`'s writes ran, by idempotency key.
    func effects(owner: String) async throws -> [String: Int] {
        try await storage.read { db in
            Dictionary(uniqueKeysWithValues: try db.rows("SELECT idempotencyKey, count FROM record_effects WHERE owner = \(owner)").map {
                (try $0.string("idempotencyKey"), try $0.int("count"))
            })
        }
    }

    private static func record(from row: SQLRow) throws -> Record {
        Record(id: try row.string("id"), version: try row.int("version"), body: try body(try row.data("body")))
    }

    /// A stored body. Rows written before by Foundation's `JSONEncoder` read the same way: it
    /// wrote plain JSON, which ``JSONValue/Limits/stored`` takes in full.
    private static func body(_ data: Data) throws -> [String: JSONValue] {
        guard case .object(let body) = try JSONValue.parse(data, limits: .stored) else {
            throw JSONValue.ParseError(reason: "A stored record is not a JSON object.", offset: 0)
        }
        return body
    }
}

/// How much one page of `GET /api/records/COLLECTION` carries.
enum RecordPage {
    static let defaultLimit = 500
    static let maximumLimit = 1_000
    /// Past this many bytes of bodies a page ends early, whatever its limit; a page always holds
    /// at least one record.
    static let maximumBytes = 4 << 20
}
