import GRDB

extension DatabaseMigrator {
    /// The outbox's and drafts' tables.
    mutating func registerOutboxMigrations() {
    }
}
