import GRDB

extension DatabaseMigrator {
    /// The response cache's tables.
    mutating func registerCacheMigrations() {
    }
}
