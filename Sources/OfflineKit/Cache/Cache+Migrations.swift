import GRDB

extension DatabaseMigrator {
    /// The response cache's tables.
    ///
    /// Shipped migrations are never edited; changes come as new, named migrations.
    mutating func registerCacheMigrations() {
        registerMigration("offlinekit.cache.v1") { db in
            try db.create(table: "offlinekit_cache_entry") { t in
                // The user scope, the method and the URL: see `CacheKey`.
                t.primaryKey("key", .text)
                // "" for data shared by every user; cleared per user on sign-out.
                t.column("scope", .text).notNull().indexed()
                t.column("url", .text).notNull()
                t.column("status", .integer).notNull()
                // Response headers as JSON, credentials already removed.
                t.column("headers", .text).notNull()
                t.column("body", .blob).notNull()
                // SHA-256 of the body (an HMAC for encrypted records): observers publish only
                // when it changes.
                t.column("bodyHash", .text).notNull()
                t.column("etag", .text)
                t.column("lastModified", .text)
                // Seconds since 1970, by the device's clock, corrected by the response's Age.
                t.column("fetchedAt", .double).notNull()
                t.column("maxAge", .double)
                t.column("staleWhileRevalidate", .double)
                t.column("staleIfError", .double)
                t.column("isEncrypted", .boolean).notNull().defaults(to: false)
            }
        }
        registerMigration("offlinekit.cache.v2-collections") { db in
            try db.alter(table: "offlinekit_cache_entry") { t in
                // Set for a cached collection kept as rows: the app's table holding them
                // (`body` is then empty). Nil for whole responses and private collections.
                t.add(column: "recordTable", .text)
                // The request's values of the headers the response's `Vary` names (see `Vary`);
                // nil when it varies on nothing that needs comparing.
                t.add(column: "varySelection", .text)
            }
        }
    }
}
