public import Foundation
public import GRDB
public import OfflineCore

/// A record the response cache can keep as a row of the app's own table, so a cached list
/// opens as a plain database read instead of decoding the whole response again.
///
/// Declare the record as you would any GRDB record, and create its table with
/// ``GRDB/Database/createCachedRecordTable(_:body:)`` in one of the app's migrations:
///
/// ```swift
/// struct Order: Codable, CachedRecord {
///     static let databaseTableName = "cachedOrder"
///     var id: String
///     var status: String
///     var totalCents: Int
/// }
///
/// migrator.registerMigration("cachedOrder") { db in
///     try db.createCachedRecordTable(Order.databaseTableName) { t in
///         t.column("id", .text).notNull()
///         t.column("status", .text).notNull()
///         t.column("totalCents", .integer).notNull()
///     }
/// }
/// ```
public protocol CachedRecord: FetchableRecord, EncodableRecord, TableRecord, Sendable {}

extension Database {
    /// Creates the table of a ``CachedRecord``: the columns `body` declares, plus the two the
    /// cache keeps (which collection a row belongs to, and its position in it).
    ///
    /// The primary key is the collection and the position, so rows read back in the server's
    /// order and one collection's rows sit together on disk. Declare the record's own
    /// identifier as a plain column (add an index if the app queries it).
    ///
    /// - Throws: the database's error when the table cannot be created.
    public func createCachedRecordTable(_ name: String, body: (TableDefinition) throws -> Void) throws {
        try create(table: name, options: .withoutRowID) { t in
            t.column(RecordWriter.collectionColumn, .text).notNull()
            t.column(RecordWriter.positionColumn, .integer).notNull()
            try body(t)
            t.primaryKey([RecordWriter.collectionColumn, RecordWriter.positionColumn])
        }
    }
}

/// A cached read of a list: a `GET` whose body is decoded into records once, when it
/// arrives, and kept as rows.
///
/// ```swift
/// let orders = CollectionQuery(CacheQuery(ordersRequest, user: userID), envelope: OrderPage.self) { $0.orders }
/// let screen = try await cache.load(orders)      // CachedCollection<Order>
/// render(screen.records, CachedScreen(CachedScreenInput(connectivity: monitor.status.kind, content: screen.content)))
/// ```
///
/// A collection and the plain response of the same request are separate cache entries.
/// A private query (``CacheQuery/isPrivate``) is not spread over plain rows: it stays one
/// encrypted body, decoded at each open.
public struct CollectionQuery<Record: CachedRecord>: Sendable {
    /// The request, its policy, its user, and whether it is private.
    public var query: CacheQuery
    /// Turns a response body into the records, in order. Throwing rejects the response: the
    /// stored collection is kept.
    public var decode: @Sendable (Data) throws -> [Record]

    public init(_ query: CacheQuery, of type: Record.Type = Record.self, decode: @escaping @Sendable (Data) throws -> [Record]) {
        self.query = query
        self.decode = decode
    }

    /// The query as the cache keys it: by the record table as well.
    var cacheQuery: CacheQuery {
        var query = query
        query.recordTable = Record.databaseTableName
        return query
    }
}

extension CollectionQuery where Record: Decodable {
    /// A collection whose body is a JSON array of records.
    ///
    /// - Parameter makeDecoder: builds the JSON decoder (date strategies and the like).
    public init(
        _ query: CacheQuery, of type: Record.Type = Record.self,
        decoder makeDecoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) {
        self.init(query) { body in try makeDecoder().decode([Record].self, from: body) }
    }

    /// A collection found inside a JSON object, as in `{"orders": [...], "next": null}`.
    ///
    /// - Parameters:
    ///   - envelope: the type of the whole body.
    ///   - makeDecoder: builds the JSON decoder (date strategies and the like).
    ///   - records: picks the records out of the decoded body.
    public init<Envelope: Decodable & SendableMetatype>(
        _ query: CacheQuery, envelope: Envelope.Type,
        decoder makeDecoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() },
        records: @escaping @Sendable (Envelope) -> [Record]
    ) {
        self.init(query) { body in records(try makeDecoder().decode(Envelope.self, from: body)) }
    }
}

/// A cached list, read back as records, with where and when it came from.
public struct CachedCollection<Record: Sendable>: Sendable {
    /// The records, in the order the server sent them.
    public var records: [Record]
    /// Source, fetch time, validator and staleness.
    public var metadata: CacheMetadata
    /// A digest of the response the records came from: equal digests mean equal content.
    public var bodyHash: String

    public init(records: [Record], metadata: CacheMetadata, bodyHash: String) {
        self.records = records
        self.metadata = metadata
        self.bodyHash = bodyHash
    }

    /// The state the ``CachedScreen`` resolver takes.
    public var content: CachedContent { .available(metadata) }
}

extension CachedCollection: Equatable where Record: Equatable {}
extension CachedCollection: Hashable where Record: Hashable {}

/// How a fetched body becomes the rows of a collection. Type-erased so the cache's fetch path
/// (and its background revalidation queue) carries it without knowing the record type.
struct RecordWriter: Sendable {
    static let collectionColumn = "cacheCollection"
    static let positionColumn = "cachePosition"

    let table: String
    /// Decodes a body, before any write; throws ``CacheError/unavailable(_:)`` when it cannot.
    let prepare: @Sendable (Data) throws -> PreparedRows

    struct PreparedRows: Sendable {
        /// Inserts the rows of the collection whose key is given.
        let insert: @Sendable (Database, String) throws -> Void
    }

    init<Record: CachedRecord>(_ collection: CollectionQuery<Record>) {
        let table = Record.databaseTableName
        let decode = collection.decode
        self.table = table
        self.prepare = { body in
            let rows: [[String: DatabaseValue]]
            do {
                rows = try decode(body).map { try $0.databaseDictionary }
            } catch {
                throw CacheError.unavailable(.invalidResponse)
            }
            return PreparedRows { db, key in try Self.insert(rows, into: table, collection: key, db) }
        }
    }

    func delete(_ db: Database, collection key: String) throws {
        try db.execute(
            sql: "DELETE FROM \(table.quotedDatabaseIdentifier) WHERE \(Self.collectionColumn) = ?",
            arguments: [key])
    }

    private static func insert(_ rows: [[String: DatabaseValue]], into table: String, collection key: String, _ db: Database) throws {
        // Every column any record encoded; a record without one stores NULL there.
        let columns = Set(rows.flatMap(\.keys)).subtracting([collectionColumn, positionColumn]).sorted()
        let names = ([collectionColumn, positionColumn] + columns).map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let placeholders = Array(repeating: "?", count: columns.count + 2).joined(separator: ", ")
        let statement = try db.makeStatement(sql: "INSERT INTO \(table.quotedDatabaseIdentifier) (\(names)) VALUES (\(placeholders))")
        for (position, row) in rows.enumerated() {
            var values: [DatabaseValue] = [key.databaseValue, position.databaseValue]
            values += columns.map { row[$0] ?? .null }
            try statement.execute(arguments: StatementArguments(values))
        }
    }

    static func fetch<Record: CachedRecord>(_ type: Record.Type, collection key: String, _ db: Database) throws -> [Record] {
        try Record.fetchAll(db, sql: """
            SELECT * FROM \(Record.databaseTableName.quotedDatabaseIdentifier)
            WHERE \(collectionColumn) = ? ORDER BY \(positionColumn)
            """, arguments: [key])
    }
}

extension ResponseCache {
    /// Reads a collection by its query's policy, exactly as ``load(_:)-(CacheQuery)`` reads a
    /// response: offline it answers at once from the stored records or throws
    /// ``CacheError/neverLoadedAndOffline``. Just after launch, while the monitor is still
    /// `unknown`, a read with nothing stored waits for its first verdict, as ``load(_:)-(CacheQuery)`` does.
    ///
    /// Opening a stored collection is one read transaction: the metadata row and the records'
    /// rows; the response is not decoded again. A collection opened before in this process is
    /// served from memory when the metadata row shows its content has not changed.
    ///
    /// - Throws: ``CacheError``, or `CancellationError`.
    public func load<Record>(_ collection: CollectionQuery<Record>) async throws -> CachedCollection<Record> {
        let query = collection.cacheQuery
        try Self.requireCacheable(query)
        let status = connectivity.status
        let now = now()
        // The plan is decided inside the read, so a stored collection opens in one transaction.
        let (entry, storedPlan, stored) = try await database.writer.read { db -> (CacheEntry?, CachePlan, CachedCollection<Record>?) in
            let entry = try CacheEntry.fetchOne(db, for: query)
            let plan = CachePlan.decide(policy: query.policy, entry: entry?.freshness, reachable: status.isReachable, now: now)
            guard let entry, plan == .serveCache || plan == .serveCacheThenRevalidate else { return (entry, plan, nil) }
            return (entry, plan, try self.collection(from: entry, collection, source: .cache, now: now, db))
        }
        var plan = storedPlan
        if status.kind == .unknown, plan.waitsForFirstVerdict(policy: query.policy) {
            // Nothing stored to show, or a networkFirst read: wait briefly for the monitor's
            // first verdict (see load(_:)).
            plan = try await planAfterFirstVerdict(query, entry: entry?.freshness)
        }
        switch plan {
        case .serveCache:
            return try requireCollection(stored)
        case .serveCacheThenRevalidate:
            revalidate(query, records: RecordWriter(collection))
            return try requireCollection(stored)
        case .fetch(let fallBackToCache, let timeout):
            let response = try await fetch(query, entry: entry, timeout: timeout, fallBackToCache: fallBackToCache, records: RecordWriter(collection))
            return try await self.collection(after: response, collection)
        case .neverLoadedAndOffline, .notCached, .offline:
            throw plan.failure ?? .notCached
        }
    }

    /// Asks the network for the collection now, whatever the policy says (the screen's
    /// refresh action). The stored records are kept when the refresh fails.
    ///
    /// - Throws: ``CacheError/offline`` while offline; ``CacheError/unavailable(_:)`` on failure
    ///   (also when the body cannot be decoded into records).
    @discardableResult
    public func refresh<Record>(_ collection: CollectionQuery<Record>) async throws -> CachedCollection<Record> {
        let response = try await refresh(collection.cacheQuery, records: RecordWriter(collection))
        return try await self.collection(after: response, collection)
    }

    /// The stored records of `collection`, without touching the network; nil when there are none.
    ///
    /// - Throws: ``CacheError/unreadableRecord`` when a private collection cannot be decrypted.
    public func cachedCollection<Record>(for collection: CollectionQuery<Record>) throws -> CachedCollection<Record>? {
        let query = collection.cacheQuery
        let now = now()
        return try database.writer.read { db in
            guard let entry = try CacheEntry.fetchOne(db, for: query) else { return nil }
            return try self.collection(from: entry, collection, source: .cache, now: now, db)
        }
    }

    /// The stored records at once (or `.loading` / `.unavailable`), then every content change,
    /// exactly as ``observe(_:)-(CacheQuery)`` observes a response: what a list screen
    /// subscribes to.
    ///
    /// A change is published only when the response the records came from differs (by digest):
    /// a `304` or an identical body publishes nothing. Fetches (by the query's policy, and when
    /// the connection comes back) store the records as rows; records stored by any writer of the
    /// database file are published too. A failed refresh while records are on screen publishes
    /// nothing. The observation stops when the caller stops iterating.
    ///
    /// ```swift
    /// for await snapshot in cache.observe(orders) {
    ///     render(snapshot.records ?? [], CachedScreen(CachedScreenInput(connectivity: monitor.status.kind, content: snapshot.content)))
    /// }
    /// ```
    public func observe<Record>(_ collection: CollectionQuery<Record>) -> AsyncStream<CollectionSnapshot<Record>> {
        observation(of: collection.cacheQuery, records: RecordWriter(collection)) { [self] entry, source in
            try await storedCollection(collection, bodyHash: entry.bodyHash, source: source)
        }
    }

    // MARK: - Reading records

    private func requireCollection<Record>(_ collection: CachedCollection<Record>?) throws -> CachedCollection<Record> {
        guard let collection else { throw CacheError.notCached }
        return collection
    }

    /// The records of a stored entry: its rows, or (private collections) its sealed body decoded.
    private func collection<Record>(
        from entry: CacheEntry, _ collection: CollectionQuery<Record>, source: ResponseSource, now: Date, _ db: Database
    ) throws -> CachedCollection<Record> {
        let metadata = CacheMetadata(
            source: source, fetchedAt: Date(timeIntervalSince1970: entry.fetchedAt),
            validator: entry.validator, isStale: !entry.freshness.isFresh(at: now))
        if entry.recordTable != nil {
            if let records = memory.records(entry.key, bodyHash: entry.bodyHash, as: Record.self) {
                return CachedCollection(records: records, metadata: metadata, bodyHash: entry.bodyHash)
            }
            let records = try RecordWriter.fetch(Record.self, collection: entry.key, db)
            memory.keep(records, for: entry.key, bodyHash: entry.bodyHash)
            return CachedCollection(records: records, metadata: metadata, bodyHash: entry.bodyHash)
        }
        let body = try response(from: entry, source: source).body
        guard let records = try? collection.decode(body) else { throw CacheError.unreadableRecord }
        return CachedCollection(records: records, metadata: metadata, bodyHash: entry.bodyHash)
    }

    /// The collection a fetch ended with: the rows it just stored (or the stored ones it fell
    /// back to), or, when the server forbade storing (`no-store`), the body decoded.
    private func collection<Record>(after response: CachedResponse, _ collection: CollectionQuery<Record>) async throws -> CachedCollection<Record> {
        if var stored = try await storedCollection(collection, bodyHash: response.bodyHash, source: response.metadata.source) {
            stored.metadata = response.metadata
            return stored
        }
        guard let records = try? collection.decode(response.body) else { throw CacheError.unavailable(.invalidResponse) }
        return CachedCollection(records: records, metadata: response.metadata, bodyHash: response.bodyHash)
    }

    /// The stored records of `collection` while its stored content is the one with digest
    /// `bodyHash`; nil when none is stored or other content replaced it meanwhile. Entry and
    /// records are read in one transaction, so records are never labelled with another digest.
    private func storedCollection<Record>(
        _ collection: CollectionQuery<Record>, bodyHash: String, source: ResponseSource
    ) async throws -> CachedCollection<Record>? {
        let query = collection.cacheQuery
        let now = now()
        return try await database.writer.read { db in
            guard let entry = try CacheEntry.fetchOne(db, for: query), entry.bodyHash == bodyHash else { return nil }
            return try self.collection(from: entry, collection, source: source, now: now, db)
        }
    }
}
