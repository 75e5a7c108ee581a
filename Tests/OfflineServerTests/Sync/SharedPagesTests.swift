import Foundation
@testable import OfflineServer
import Testing

/// Pages read once for the members of a workspace at one cursor, over a real SQLite feed.
@Suite("Sync pages shared by the members at one cursor")
struct SharedPagesTests {
    typealias Feed = SyncFeedTests.Feed
    typealias Device = SyncFeedTests.Device

    /// Ana, Ben and Carol in workspace w1, each synced to the head: one cursor for the three.
    func workspace() throws -> (Feed, [Device]) {
        let feed = try Feed()
        try feed.commit(feed.member("ana", "w1"), feed.member("ben", "w1"), feed.member("carol", "w1"))
        try feed.commit(feed.message("m1", workspace: "w1", author: "dora"))
        var devices = ["ana", "ben", "carol"].map(Device.init)
        for index in devices.indices { try devices[index].pull(feed) }
        #expect(Set(devices.map(\.cursor)).count == 1, "the three stand at one cursor")
        return (feed, devices)
    }

    @Test("a workspace's message is read once for its members at one cursor, each getting the page read for them alone")
    func readOnce() throws {
        var (feed, devices) = try workspace()
        try feed.commit(feed.message("m2", workspace: "w1", author: "dora", body: "two"))
        let before = feed.shared.hits
        for index in devices.indices {
            let alone = try feed.ownPage(devices[index].user, cursor: devices[index].cursor)
            let page = try devices[index].pullPage(feed)
            #expect(page.changes == alone.changes && page.cursor == alone.cursor && page.hasMore == alone.hasMore,
                    "\(devices[index].user)'s page is the one read for them")
            #expect(devices[index].rows["m2"] == #"{"id":"m2","body":"two"}"#)
        }
        #expect(feed.shared.hits - before == 2, "read for the first member, shared with the two others")
    }

    @Test("a member with a row of their own after the cursor reads their own page")
    func ownRows() throws {
        var (feed, devices) = try workspace()
        try feed.commit(feed.message("m3", workspace: "w1", author: "dora"))
        // Ben's own message, in no workspace: his audience alone.
        try feed.commit(feed.message("m4", workspace: nil, author: "ben"))
        let before = feed.shared.hits
        for index in devices.indices { try devices[index].pullPage(feed) }
        #expect(devices.map { $0.ids } == [["m1", "m3"], ["m1", "m3", "m4"], ["m1", "m3"]])
        #expect(feed.shared.hits - before == 1, "Carol's page is Ana's; Ben's is his own")
    }

    @Test("a member who left since their audiences were last read is never answered with the workspace's page")
    func leftSince() throws {
        var (feed, devices) = try workspace()
        // Ben's audiences were read at the head the three stand at; then he leaves w1.
        try feed.commit(feed.member("ben", "w1", false))
        try feed.commit(feed.message("m9", workspace: "w1", author: "dora"))
        let before = feed.shared.hits
        for index in devices.indices { try devices[index].pullPage(feed) }
        #expect(devices.map { $0.ids } == [["m1", "m9"], [], ["m1", "m9"]], "Ben's move-out takes m1 and never brings m9")
        #expect(feed.shared.hits - before == 1, "Carol's page is Ana's; Ben's is his own")
    }

    @Test("a page with a deletion is never shared: whether it is sent depends on all the member's audiences")
    func deletions() throws {
        var (feed, devices) = try workspace()
        // Ben wrote m5 in w1: he sees it twice, as a member and as its author.
        try feed.commit(feed.message("m5", workspace: "w1", author: "ben"))
        for index in devices.indices { try devices[index].pull(feed) }
        #expect(Set(devices.map(\.cursor)).count == 1)
        // m5 leaves the workspace: gone for Ana and Carol, kept by its author.
        try feed.commit(feed.message("m5", workspace: nil, author: "ben"))
        let before = feed.shared.hits
        for index in devices.indices { try devices[index].pullPage(feed) }
        #expect(devices.map { $0.ids } == [["m1"], ["m1", "m5"], ["m1"]])
        #expect(feed.shared.hits == before, "no page with a deletion was shared")
    }

    @Test("a change recorded after a page was kept is read, never hidden behind the kept page")
    func newerChange() throws {
        var (feed, devices) = try workspace()
        try feed.commit(feed.message("m6", workspace: "w1", author: "dora"))
        try devices[0].pullPage(feed)
        try feed.commit(feed.message("m7", workspace: "w1", author: "dora"))
        let before = feed.shared.hits
        try devices[1].pullPage(feed)
        try devices[2].pullPage(feed)
        #expect(devices.map { $0.ids } == [["m1", "m6"], ["m1", "m6", "m7"], ["m1", "m6", "m7"]])
        #expect(feed.shared.hits - before == 1, "Ben read the newer head; Carol got his page")
    }

    @Test("a page kept before capture read further says how far it has read now: through moves without the head")
    func throughMoves() throws {
        var (feed, devices) = try workspace()
        try feed.commit(feed.message("m8", workspace: "w1", author: "dora"))
        let first = try devices[0].pullPage(feed)
        // Capture read past a write no rule reads: the checkpoint a client waits for moves on.
        let read = first.through + 7
        _ = try feed.queue.write { db in try SyncFeed.advance(through: read, now: Date(), in: TestDatabase(db: db)) }
        let second = try devices[1].pullPage(feed)
        #expect(second.changes == first.changes && second.cursor == first.cursor)
        #expect(second.through == read, "the page says where capture stands now, not where it stood for Ana")
    }

    @Test("at most 64 pages are kept")
    func bounded() throws {
        var (feed, devices) = try workspace()
        // Each of Ana's pulls is kept under a cursor and a head of its own.
        for round in 0..<70 {
            try feed.commit(feed.message("r\(round)", workspace: "w1", author: "dora"))
            try devices[0].pullPage(feed)
        }
        let kept = feed.shared.kept
        #expect(kept.pages == SharedPages.maximumEntries)
        #expect(kept.bytes > 0 && kept.bytes <= SharedPages.maximumBytes)
    }
}
