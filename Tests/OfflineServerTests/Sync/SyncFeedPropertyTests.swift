import Foundation
@testable import OfflineServer
import OfflineTestSupport
import PropertyBased
import Testing

/// The feed's pulls against a model of the rules, over random programs: messages written,
/// moved between workspaces and deleted, memberships added and removed, alone or several in one
/// source transaction, some recorded in two parts as a large transaction is (pulls in between
/// must see the feed as it was before it), and three devices pulling one page at a time with
/// random page sizes between them.
@Suite("Sync feed property")
struct SyncFeedPropertyTests {
    static let users = ["ana", "ben", "cy"]
    static let workspaces = ["w1", "w2", "w3"]

    /// The app's tables as the writers left them.
    struct Model {
        struct Message: Equatable { var workspace: String?; var author: String; var body: String }
        var messages: [String: Message] = [:]
        var members: Set<[String]> = []

        /// What `user` may see now, as the device's rows: id → the row's JSON fields.
        func visible(to user: String) -> [String: [String: String]] {
            var rows: [String: [String: String]] = [:]
            for (id, message) in messages {
                let member = message.workspace.map { members.contains([user, $0]) } ?? false
                if member || message.author == user { rows[id] = ["id": id, "body": message.body] }
            }
            return rows
        }
    }

    /// A device's rows, each row's JSON read back into fields.
    static func rows(_ device: SyncFeedTests.Device) -> [String: [String: String]] {
        device.rows.mapValues { text in
            (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String]) ?? ["unreadable": text]
        }
    }

    @Test("after every pull that reached the head, each device holds exactly the rows its user may see, field by field")
    func pullsFollowTheRules() async {
        // A step n: n % 8 picks the change (0-2 write a message, 3 delete one, 4 a membership,
        // 5 a message and a membership in one transaction), 6-7 a device pulling one page; the
        // rest of n picks the message, workspace, author, user and page size, and whether a
        // message's write is a transaction's first part, published with the next change.
        await propertyCheck(count: 100, input: Gen.int(in: 0...9_999).array(of: 1...60)) { steps in
            // Each program runs on a thread of its own: its SQLite work, synchronous, held a thread
            // of the cooperative pool every other test shares for up to 5 s (a stall watch run).
            let mismatches = try await offPool { try Self.play(steps) }
            #expect(mismatches.isEmpty, "steps \(steps): \(mismatches)")
        }
    }

    /// Runs the program `steps` and returns how the devices differed from the model: after each
    /// pull that reached the head, and once every device pulled to the head at the end.
    static func play(_ steps: [Int]) throws -> [String] {
        let feed = try SyncFeedTests.Feed()
        var model = Model()
        // What the feed's head shows: the model without the part recorded and not published.
        var published = Model()
        var devices = Self.users.map(SyncFeedTests.Device.init)
        var mismatches: [String] = []

        func message(_ n: Int) -> CapturedChange {
            let id = "m\(n / 8 % 4)"
            let workspace = [nil, "w1", "w2", "w3"][n / 64 % 4]
            let author = Self.users[n / 256 % 3]
            model.messages[id] = Model.Message(workspace: workspace, author: author, body: "b\(n)")
            return feed.message(id, workspace: workspace, author: author, body: "b\(n)")
        }
        func membership(_ n: Int) -> CapturedChange {
            let pair = [Self.users[n / 8 % 3], Self.workspaces[n / 24 % 3]]
            let present = !model.members.contains(pair)
            if present { model.members.insert(pair) } else { model.members.remove(pair) }
            return feed.member(pair[0], pair[1], present)
        }
        func check(_ device: SyncFeedTests.Device, _ moment: String) {
            let expected = published.visible(to: device.user)
            if Self.rows(device) != expected {
                mismatches.append("\(device.user) \(moment): \(Self.rows(device)), expected \(expected)")
            }
        }

        for n in steps {
            switch n % 8 {
            case 0, 1, 2:
                let part = n / 1_024 % 4 == 0
                try feed.commit(message(n), publish: !part)
                if !part { published = model }
            case 3:
                let id = "m\(n / 8 % 4)"
                model.messages[id] = nil
                try feed.commit(feed.deleted(id))
                published = model
            case 4:
                try feed.commit(membership(n))
                published = model
            case 5:
                try feed.commit(message(n), membership(n / 3))
                published = model
            default:
                let index = n / 8 % 3
                let page = try devices[index].pullPage(feed, limit: 1 + n / 24 % 4)
                if !page.hasMore { check(devices[index], "after a pull reached the head") }
            }
        }
        // Every device pulls to the head: the same holds for each.
        try feed.commit()
        published = model
        for index in devices.indices {
            try devices[index].pull(feed, limit: 3)
            check(devices[index], "at the end")
        }
        return mismatches
    }
}
