import Foundation
import Logging
@testable import OfflineServer
import Testing

/// Builds pgoutput messages byte by byte, as the protocol's documentation lays them out.
struct PgOutputBytes {
    var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }
    mutating func char(_ value: Unicode.Scalar) { bytes.append(UInt8(ascii: value)) }
    mutating func int<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { bytes += $0 } }
    mutating func string(_ value: String) { bytes += value.utf8; bytes.append(0) }
    mutating func tuple(_ columns: [String?]) {
        int(UInt16(columns.count))
        for column in columns {
            if let column {
                char("t")
                int(UInt32(column.utf8.count))
                bytes += column.utf8
            } else {
                char("n")
            }
        }
    }

    static func relation(id: UInt32, name: String, columns: [(String, UInt32, Bool)]) -> [UInt8] {
        var message = PgOutputBytes()
        message.char("R")
        message.int(id)
        message.string("public")
        message.string(name)
        message.char("d")
        message.int(UInt16(columns.count))
        for (name, type, key) in columns {
            message.byte(key ? 1 : 0)
            message.string(name)
            message.int(type)
            message.int(Int32(-1))
        }
        return message.bytes
    }
}

@Suite("Capture: pgoutput and the rules' mapping")
struct CaptureMappingTests {
    @Test("pgoutput messages read into transactions, relations and row changes")
    func reads() throws {
        var begin = PgOutputBytes()
        begin.char("B")
        begin.int(UInt64(0x16_0000_0100))
        begin.int(Int64(0))
        begin.int(UInt32(742))
        #expect(try PgOutput(begin.bytes) == .begin(finalLSN: 0x16_0000_0100, xid: 742))

        let relation = PgOutputBytes.relation(id: 16_400, name: "messages", columns: [("id", 25, true), ("n", 20, false)])
        #expect(try PgOutput(relation) == .relation(.init(id: 16_400, namespace: "public", name: "messages", columns: [
            .init(name: "id", isKey: true, typeOID: 25), .init(name: "n", isKey: false, typeOID: 20)])))

        var insert = PgOutputBytes()
        insert.char("I")
        insert.int(UInt32(16_400))
        insert.char("N")
        insert.tuple(["m1", nil])
        #expect(try PgOutput(insert.bytes) == .insert(relation: 16_400, new: [.text(Array("m1".utf8)), .null]))

        var update = PgOutputBytes()
        update.char("U")
        update.int(UInt32(16_400))
        update.char("K")
        update.tuple(["m0", nil])
        update.char("N")
        update.tuple(["m1", "7"])
        #expect(try PgOutput(update.bytes) == .update(relation: 16_400, old: [.text(Array("m0".utf8)), .null],
                                                       new: [.text(Array("m1".utf8)), .text(Array("7".utf8))]))

        var delete = PgOutputBytes()
        delete.char("D")
        delete.int(UInt32(16_400))
        delete.char("K")
        delete.tuple(["m1", nil])
        #expect(try PgOutput(delete.bytes) == .delete(relation: 16_400, old: [.text(Array("m1".utf8)), .null]))

        var commit = PgOutputBytes()
        commit.char("C")
        commit.byte(0)
        commit.int(UInt64(0x16_0000_0180))
        commit.int(UInt64(0x16_0000_01B0))
        commit.int(Int64(0))
        #expect(try PgOutput(commit.bytes) == .commit(commitLSN: 0x16_0000_0180, endLSN: 0x16_0000_01B0))

        #expect(PgOutput.lsn("16/B374D848") == 0x16_B374_D848)
        #expect(PgOutput.lsnText(0x16_B374_D848) == "16/B374D848")
    }

    @Test("a message that lies about its lengths is refused, never read past its end", arguments: [
        [UInt8(ascii: "I"), 0, 0, 0x40],                                  // ends inside the relation id
        [UInt8(ascii: "I"), 0, 0, 0x40, 0x10, UInt8(ascii: "N"), 0xFF, 0xFF],   // 65,535 columns in no bytes
        [UInt8(ascii: "I"), 0, 0, 0x40, 0x10, UInt8(ascii: "N"), 0, 1, UInt8(ascii: "t"), 0x7F, 0xFF, 0xFF, 0xFF, 0x41], // a 2 GiB value
        [UInt8(ascii: "R"), 0, 0, 0x40, 0x10, UInt8(ascii: "p")],            // a name with no terminator
        [UInt8(ascii: "U"), 0, 0, 0x40, 0x10, UInt8(ascii: "X")],            // neither old nor new row
        [UInt8(ascii: "Z")],
        [],
    ])
    func refusesLies(bytes: [UInt8]) {
        #expect(throws: PgOutput.Malformed.self) { try PgOutput(bytes) }
    }

    @Test("values are typed from PostgreSQL's text: numbers, booleans, JSON, bytes, timestamps")
    func values() {
        typealias T = CapturedValue.PostgresType
        #expect(CapturedValue(postgresText: Array("42".utf8), type: T.int8) == .integer(42))
        #expect(CapturedValue(postgresText: Array("3.25".utf8), type: T.numeric) == .number("3.25"))
        #expect(CapturedValue(postgresText: Array("NaN".utf8), type: T.float8) == .text("NaN"))
        #expect(CapturedValue(postgresText: Array("t".utf8), type: T.bool) == .bool(true))
        #expect(CapturedValue(postgresText: Array(#"{"a": 1}"#.utf8), type: T.jsonb) == .json(Array(#"{"a": 1}"#.utf8)))
        #expect(CapturedValue(postgresText: Array(#"\x00ff"#.utf8), type: T.bytea) == .bytes([0, 255]))
        #expect(CapturedValue(postgresText: Array("2026-11-26 09:51:31.5+00".utf8), type: T.timestamptz) == .timestamp("2026-11-26 09:51:31.5+00"))
        #expect(CapturedValue(postgresText: Array("héllo".utf8), type: 25) == .text("héllo"))
    }

    static let rules = try! SyncRules.load(yaml: """
        audiences:
          workspace: { table: memberships, user: user_id, key: workspace_id }
        collections:
          messages:
            table: messages
            key: id
            columns:
              id: id
              body: body
              meta: { column: meta, format: json }
              sentAt: { column: sent_at, format: iso8601 }
            seen_by:
              - workspace: workspace_id
              - user: author_id
          records:
            table: records
            key: id
            split_by: collection
            columns: [id, version]
            seen_by: [user: owner]
        """)

    static let logger = Logger(label: "test")

    @Test("a row goes to one feed row per audience and collection, with its fields in order")
    func rows() {
        let mapping = FeedMapping(rules: Self.rules)
        let message = CapturedChange(table: "messages", kind: .upsert, columns: [
            "id": .text("m1"), "body": .text("Hi \"all\""), "meta": .json(Array(#"{"pinned":true}"#.utf8)),
            "sent_at": .timestamp("2026-11-26 09:51:31.5+00"), "workspace_id": .integer(7), "author_id": .text("ana"),
        ], key: [.text("m1")])
        let rows = mapping.rows(of: message, previous: { _ in nil }, logger: Self.logger)
        let json = #"{"id":"m1","body":"Hi \"all\"","meta":{"pinned":true},"sentAt":"2026-11-26T09:51:31Z"}"#
        #expect(rows == [
            FeedRowKey(collection: "messages", audience: "workspace:7", id: "m1"): Array(json.utf8),
            FeedRowKey(collection: "messages", audience: "user:ana", id: "m1"): Array(json.utf8),
        ])
        #expect(message.source == #"messages/["m1"]"#)

        let record = CapturedChange(table: "records", kind: .upsert, columns: [
            "owner": .text("ben"), "collection": .text("notes"), "id": .text("n1"), "version": .integer(3)],
            key: [.text("ben"), .text("notes"), .text("n1")])
        #expect(mapping.rows(of: record, previous: { _ in nil }, logger: Self.logger)
                == [FeedRowKey(collection: "records/notes", audience: "user:ben", id: "n1"): Array(#"{"id":"n1","version":3}"#.utf8)])
        #expect(record.source == #"records/["ben","notes","n1"]"#)

        let membership = CapturedChange(table: "memberships", kind: .upsert,
                                        columns: ["user_id": .text("ben"), "workspace_id": .integer(7)], key: [.text("ben"), .integer(7)])
        #expect(mapping.rows(of: membership, previous: { _ in nil }, logger: Self.logger)
                == [FeedRowKey(collection: FeedMapping.membersCollection, audience: "user:ben", id: "workspace:7"): Array("true".utf8)])
        #expect(mapping.rows(of: CapturedChange(table: "messages", kind: .delete, columns: [:], key: [.text("m1")]),
                             previous: { _ in nil }, logger: Self.logger).isEmpty)
    }

    @Test("seconds since 1970 are written as UTC to the second, as the .iso8601 date strategy reads them")
    func iso8601Seconds() throws {
        #expect(FeedMapping.iso8601(seconds: 1_764_150_691) == "2025-11-26T09:51:31Z")
        #expect(FeedMapping.iso8601(seconds: 1_764_150_691.9) == "2025-11-26T09:51:31Z")
        #expect(FeedMapping.iso8601(seconds: -1) == "1969-12-31T23:59:59Z")
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let date = try decoder.decode(Date.self, from: Data("\"\(FeedMapping.iso8601(seconds: 1_764_150_691.9))\"".utf8))
        #expect(date == Date(timeIntervalSince1970: 1_764_150_691))
    }

    @Test("a value the change did not send again keeps what the feed held; one that breaks its format is sent as it is")
    func unchangedAndMismatched() {
        let mapping = FeedMapping(rules: Self.rules)
        let change = CapturedChange(table: "messages", kind: .upsert, columns: [
            "id": .text("m1"), "body": .unchanged, "meta": .text("not json"), "sent_at": .integer(0), "author_id": .text("ana")],
            key: [.text("m1")])
        let previous = Array(#"{"id":"m1","body":"long text","meta":null,"sentAt":"1970-01-01T00:00:00Z"}"#.utf8)
        let rows = mapping.rows(of: change, previous: { _ in previous }, logger: Self.logger)
        #expect(rows == [FeedRowKey(collection: "messages", audience: "user:ana", id: "m1"):
                            Array(#"{"id":"m1","body":"long text","meta":"not json","sentAt":"1970-01-01T00:00:00Z"}"#.utf8)])
    }
}

extension CaptureMappingTests {
    @Test("a row no device can keep maps to no feed row: an id that breaks the rule, JSON over 1 MiB, a value not sent again with no version to take it from")
    func unsendableRows() {
        let mapping = FeedMapping(rules: Self.rules)
        func message(_ id: String, body: CapturedValue) -> CapturedChange {
            CapturedChange(table: "messages", kind: .upsert, columns: [
                "id": .text(id), "body": body, "meta": .null, "sent_at": .integer(0), "author_id": .text("ana")], key: [.text(id)])
        }
        let kept = message("m1", body: .text("hi"))
        #expect(mapping.rows(of: kept, previous: { _ in nil }, logger: Self.logger).count == 1)
        #expect(mapping.rows(of: message("x/y", body: .text("hi")), previous: { _ in nil }, logger: Self.logger).isEmpty)
        #expect(mapping.rows(of: message(String(repeating: "x", count: 513), body: .text("hi")), previous: { _ in nil }, logger: Self.logger).isEmpty)
        let large = message("m2", body: .text(String(repeating: "x", count: UnsendableRow.maximumBytes)))
        #expect(mapping.rows(of: large, previous: { _ in nil }, logger: Self.logger).isEmpty)
        let previous = Array(#"{"id":"m3","body":"long text","meta":null,"sentAt":"1970-01-01T00:00:00Z"}"#.utf8)
        #expect(mapping.rows(of: message("m3", body: .unchanged), previous: { _ in nil }, logger: Self.logger).isEmpty,
                "not sent with a null for the body")
        #expect(mapping.rows(of: message("m3", body: .unchanged), previous: { _ in previous }, logger: Self.logger).count == 1)
    }

    @Test("pgoutput rows become captured changes: a changed key is a deletion and an insertion, other tables pass by")
    func changes() throws {
        var changes = PgOutputChanges(tables: ["messages"])
        let relation = try PgOutput(PgOutputBytes.relation(id: 7, name: "messages", columns: [("id", 25, true), ("n", 20, false)]))
        let other = try PgOutput(PgOutputBytes.relation(id: 8, name: "audit", columns: [("id", 25, true)]))
        #expect(try changes.events(relation).isEmpty)
        #expect(try changes.events(other).isEmpty)
        #expect(try changes.events(.insert(relation: 8, new: [.text(Array("x".utf8))])).isEmpty, "not a table the rules read")
        let update = try changes.events(.update(relation: 7, old: [.text(Array("a".utf8)), .null], new: [.text(Array("b".utf8)), .unchanged]))
        #expect(update == [
            .change(CapturedChange(table: "messages", kind: .delete, columns: ["id": .text("a"), "n": .null], key: [.text("a")])),
            .change(CapturedChange(table: "messages", kind: .upsert, columns: ["id": .text("b"), "n": .unchanged], key: [.text("b")])),
        ])
        #expect(try changes.events(.commit(commitLSN: 10, endLSN: 12)) == [.commit(end: 12)])
        #expect(throws: PgOutput.Malformed.self) { try changes.events(.insert(relation: 99, new: [])) }
        #expect(throws: PgOutput.Malformed.self) { try changes.events(.insert(relation: 7, new: [.null])) }
    }

    @Test("capture moves through on at once after changes, and at most every 50 ms when only its own writes moved the log")
    func advancesThrough() {
        let start = Date(timeIntervalSince1970: 1_000)
        let advances = { (upto: Int64, decoded: Bool, last: Date?, after: TimeInterval) in
            PostgresCapture.advances(upto: upto, through: 100, decoded: decoded, lastAdvance: last, now: start.addingTimeInterval(after))
        }
        #expect(!advances(100, true, nil, 0), "nothing past through")
        #expect(advances(120, false, nil, 0), "the first pass")
        #expect(advances(120, true, start, 0.001), "changes were decoded")
        #expect(!advances(120, false, start, 0.01), "only the log moved, 10 ms after the last")
        #expect(advances(120, false, start, 0.06))
        #expect(advances(120, false, start, -1), "a clock set back does not stop it")
    }

    @Test("what capture spaces out is due when never done, once its interval passed, or when the clock went back")
    func spacing() {
        let last = Date(timeIntervalSince1970: 1_000)
        #expect(last.isDue(after: nil, every: 1))
        #expect(!last.addingTimeInterval(0.999).isDue(after: last, every: 1))
        #expect(last.addingTimeInterval(1).isDue(after: last, every: 1))
        #expect(last.addingTimeInterval(-0.001).isDue(after: last, every: 1), "a clock set back would hold it back as long")
    }

    @Test("the next look comes 5 ms after the last one's start, or four times its read of the slot when that took longer, a second at most")
    func pacedLooks() {
        let start = ContinuousClock.now
        let next = { (reading: Duration) in PostgresCapture.nextLook(started: start, reading: reading, pollInterval: .milliseconds(5)) - start }
        #expect(next(.zero) == .milliseconds(5), "a look that read nothing waits the interval")
        #expect(next(.microseconds(300)) == .milliseconds(5), "an idle slot's read is well within a quarter of it")
        #expect(next(.microseconds(1_250)) == .milliseconds(5))
        #expect(next(.microseconds(2_700)) == .microseconds(10_800), "a read of 2.7 ms is at most a quarter of the time")
        #expect(next(.milliseconds(40)) == .milliseconds(160))
        #expect(next(.milliseconds(400)) == .seconds(1), "pacing waits a second at most")
        #expect(next(.seconds(30)) == .seconds(1), "after a backlog read for 30 s, the next look is due at once")
    }

    @Test("the slot is confirmed at the first pass, then once 4 rows were recorded since, or a second after")
    func confirmsTheSlot() {
        let start = Date(timeIntervalSince1970: 1_000)
        var confirmation = SlotConfirmation()
        #expect(!confirmation.due(through: 0, now: start), "nothing to confirm: the feed has read nothing")
        #expect(confirmation.due(through: 100, now: start), "the first pass confirms where the feed had read through")
        confirmation.confirmed(through: 100, now: start)
        #expect(confirmation.position == 100)
        // Commits now and then: one row a pass.
        for pass in 1..<4 {
            confirmation.recorded(1)
            #expect(!confirmation.due(through: Int64(100 + pass), now: start.addingTimeInterval(0.01 * Double(pass))), "pass \(pass)")
        }
        confirmation.recorded(1)
        #expect(confirmation.due(through: 104, now: start.addingTimeInterval(0.04)), "4 rows recorded since")
        confirmation.confirmed(through: 104, now: start.addingTimeInterval(0.04))
        #expect(confirmation.position == 104)
        confirmation.recorded(1)
        #expect(!confirmation.due(through: 105, now: start.addingTimeInterval(1.03)))
        #expect(confirmation.due(through: 105, now: start.addingTimeInterval(1.05)), "a second since the last")
        #expect(confirmation.due(through: 105, now: start.addingTimeInterval(-5)), "a clock set back does not stop it")
    }

    @Test("under writes that do not stop, the slot is confirmed after every pass; never behind where it was")
    func confirmsUnderWrites() {
        let start = Date(timeIntervalSince1970: 1_000)
        var confirmation = SlotConfirmation()
        confirmation.confirmed(through: 500, now: start)
        for pass in 1...20 {
            let now = start.addingTimeInterval(0.012 * Double(pass))
            confirmation.recorded(30)
            #expect(confirmation.due(through: Int64(500 + pass), now: now), "pass \(pass)")
            confirmation.confirmed(through: Int64(500 + pass), now: now)
        }
        confirmation.recorded(100)
        #expect(!confirmation.due(through: 520, now: start.addingTimeInterval(5)), "the feed has not moved past the slot")
        confirmation.confirmed(through: 400, now: start.addingTimeInterval(5))
        #expect(confirmation.position == 520)
    }
}
