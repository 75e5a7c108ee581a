import Foundation
@testable import OfflineKit
import Testing

/// Pages that came together are written as one: what the sync machine's read-ahead relies on.
@Suite("Sync engine, pages read as one")
struct FetchedPageTests {
    @Test("pages appended read as one: every change in order, the last page's cursor and more")
    func appends() {
        let change = { (id: String) in SyncPage.Change(collection: "messages", id: id, value: Data("{}".utf8)) }
        var first = SyncEngine.Fetched(page: SyncPage(changes: [change("a"), change("b")], cursor: "c2", hasMore: true, through: 7,
                                                      progress: 0.2), bytes: 10)
        first.append(SyncEngine.Fetched(page: SyncPage(changes: [change("b"), change("c")], cursor: "c3", hasMore: false,
                                                       through: 9, progress: 1), bytes: 5))
        #expect(first.page.changes.map(\.id) == ["a", "b", "b", "c"])
        #expect(first.cursor == "c3" && !first.hasMore && first.rows == 4)
        #expect(first.through == 9 && first.progress == 1)
        #expect(first.bytes == 15)
        // A page that does not say how far capture read keeps what the page before it said.
        first.append(SyncEngine.Fetched(page: SyncPage(changes: [], cursor: "c4", hasMore: true), bytes: 0))
        #expect(first.through == 9 && first.progress == 1 && first.hasMore)
    }
}
