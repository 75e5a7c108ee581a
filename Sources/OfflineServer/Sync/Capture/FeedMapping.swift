import Foundation
import Logging

/// One row as a feed keeps it: the client collection it belongs to, the audience that sees it,
/// and its id on the device.
struct FeedRowKey: Sendable, Hashable, Comparable {
    var collection: String
    var audience: String
    var id: String

    static func < (lhs: FeedRowKey, rhs: FeedRowKey) -> Bool {
        (lhs.collection, lhs.audience, lhs.id) < (rhs.collection, rhs.audience, rhs.id)
    }
}

/// What the sync rules make of captured changes: the feed rows a row should have, and their JSON.
///
/// Memberships travel through the feed too, in commit order with the data: a user's audiences
/// are the live rows of the ``membersCollection`` in their own audience, so a pull reads them as
/// of the same position as the rows, and sees when one came or went.
struct FeedMapping: Sendable {
    /// The feed's own collection of memberships: in audience `user:ID`, one row per audience the
    /// user belongs to, its id the audience (`workspace:w1`). No client collection is named so:
    /// names from the rules cannot start with `$`.
    static let membersCollection = "$members"

    let rules: SyncRules
    /// The collections reading each table, by lower-cased table name.
    private let collectionsByTable: [String: [SyncRules.Collection]]
    /// The audience kinds whose memberships each table holds.
    private let audiencesByTable: [String: [SyncRules.Audience]]

    init(rules: SyncRules) {
        self.rules = rules
        collectionsByTable = Dictionary(grouping: rules.collections) { $0.table.lowercased() }
        audiencesByTable = Dictionary(grouping: rules.audiences.values) { $0.table.lowercased() }
    }

    /// Whether any rule reads `table`.
    func reads(_ table: String) -> Bool {
        collectionsByTable[table] != nil || audiencesByTable[table] != nil
    }

    /// The feed rows `change`'s row belongs in after the change, with the JSON each holds: one
    /// per audience that sees it in each collection reading its table, and, for a membership
    /// row, the member's ``membersCollection`` row naming the audience. None after a deletion.
    ///
    /// `previous` gives the JSON a feed row held before, for fields whose column the change did
    /// not send again (PostgreSQL's unchanged TOASTed values): they keep their value.
    ///
    /// A row no device can keep (``UnsendableRow``: its id, its size, a value PostgreSQL did not
    /// send again and the feed cannot complete) is left out, with an error naming its table, its
    /// key and why; the change's other rows are not.
    func rows(of change: CapturedChange, previous: (FeedRowKey) -> [UInt8]?, logger: Logger) -> [FeedRowKey: [UInt8]] {
        guard change.kind == .upsert else { return [:] }
        var rows: [FeedRowKey: [UInt8]] = [:]
        for audience in audiencesByTable[change.table] ?? [] {
            guard let user = change.columns[audience.userColumn.lowercased()]?.identifier,
                  let id = change.columns[audience.keyColumn.lowercased()]?.identifier else { continue }
            rows[FeedRowKey(collection: Self.membersCollection, audience: SyncRules.audience(SyncRules.userKind, user),
                            id: SyncRules.audience(audience.kind, id))] = Array("true".utf8)
        }
        for collection in collectionsByTable[change.table] ?? [] {
            guard let id = change.columns[collection.key.lowercased()]?.identifier else {
                logger.warning("A synced row has no id: it is not sent", metadata: ["table": "\(change.table)", "key": "\(collection.key)"])
                continue
            }
            let split = collection.splitBy.flatMap { change.columns[$0.lowercased()]?.identifier }
            if collection.splitBy != nil, split == nil {
                logger.warning("A synced row has nothing in its split_by column: it is not sent",
                               metadata: ["table": "\(change.table)", "column": "\(collection.splitBy ?? "")"])
                continue
            }
            let name = collection.clientName(split: split)
            if let problem = UnsendableRow.problem(id: id) {
                // A version recorded before ids were held to the rule is removed from devices.
                let sent = audiences(of: collection, in: change.columns).contains {
                    previous(FeedRowKey(collection: name, audience: $0, id: id)) != nil
                }
                skip(change, name, problem, sent: sent, logger: logger)
                continue
            }
            let unsent = UnsendableRow.unsentColumn(collection.fields, change.columns)
            var skipped: (problem: UnsendableRow, sent: Bool)?
            for audience in audiences(of: collection, in: change.columns) {
                let key = FeedRowKey(collection: name, audience: audience, id: id)
                let earlier = previous(key)
                if let unsent, earlier == nil {
                    skipped = (unsent, skipped?.sent ?? false)
                    continue
                }
                let json = encode(collection.fields, change.columns, previous: { earlier }, logger: logger)
                if let problem = UnsendableRow.problem(json: json) {
                    skipped = (problem, (skipped?.sent ?? false) || earlier != nil)
                    continue
                }
                rows[key] = json
            }
            if let skipped { skip(change, name, skipped.problem, sent: skipped.sent, logger: logger) }
        }
        return rows
    }

    /// Says why `change`'s row is not sent to `collection` (``UnsendableRow``); `sent`: a
    /// version of it was, and becomes a deletion (``SyncFeed`` makes a deletion of every row a
    /// change no longer maps to).
    private func skip(_ change: CapturedChange, _ collection: String, _ problem: UnsendableRow, sent: Bool, logger: Logger) {
        logger.error(sent ? "A synced row cannot be sent: it is skipped, and removed from devices" : "A synced row cannot be sent: it is skipped",
                     metadata: ["table": "\(change.table)", "key": "\(change.source)", "collection": "\(collection)", "problem": "\(problem)"])
    }

    /// The audiences that see a row of `collection` holding `columns`.
    func audiences(of collection: SyncRules.Collection, in columns: [String: CapturedValue]) -> Set<String> {
        var audiences = Set<String>()
        for reader in collection.seenBy {
            switch reader.source {
            case .value(let id):
                audiences.insert(SyncRules.audience(reader.kind, id))
            case .column(let column):
                if let id = columns[column.lowercased()]?.identifier { audiences.insert(SyncRules.audience(reader.kind, id)) }
            }
        }
        return audiences
    }

    /// The row's JSON: its fields in the rules' order.
    func encode(_ fields: [SyncRules.Field], _ columns: [String: CapturedValue], previous: () -> [UInt8]?,
                logger: Logger) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        var earlier: [String: JSONValue]?
        for (index, field) in fields.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.write(field.name, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            let value = columns[field.column.lowercased()] ?? .null
            if case .unchanged = value {
                if earlier == nil, let json = previous(), case .object(let object)? = try? JSONValue.parse(json, limits: .stored) {
                    earlier = object
                }
                (earlier?[field.name] ?? .null).write(to: &bytes)
                continue
            }
            Self.write(value, as: field.format, to: &bytes) { problem in
                logger.warning("A synced column does not hold what its format says; sent as it is", metadata: [
                    "column": "\(field.column)", "format": "\(field.format.rawValue)", "problem": "\(problem)"])
            }
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// Writes `value` in `format`; what does not fit the format is written as its own type, and
    /// `mismatch` says so.
    static func write(_ value: CapturedValue, as format: SyncRules.Format, to bytes: inout [UInt8], mismatch: (String) -> Void) {
        switch (format, value) {
        case (_, .null), (_, .unchanged):
            bytes += "null".utf8
        case (.json, .json(let json)):
            bytes += json
        case (.json, .text(let text)) where (try? JSONValue.parse(Array(text.utf8), limits: .stored)) != nil:
            bytes += text.utf8
        case (.json, .bytes(let data)) where (try? JSONValue.parse(data, limits: .stored)) != nil:
            bytes += data
        case (.iso8601, .timestamp(let text)):
            JSONValue.write(iso8601(postgres: text), to: &bytes)
        case (.iso8601, .integer(let seconds)):
            JSONValue.write(iso8601(seconds: Double(seconds)), to: &bytes)
        case (.iso8601, .number(let text)) where Double(text) != nil:
            JSONValue.write(iso8601(seconds: Double(text)!), to: &bytes)
        case (.json, _), (.iso8601, _):
            mismatch("\(value)".prefix(80).description)
            write(value, as: .automatic, to: &bytes, mismatch: mismatch)
        case (.automatic, .bool(let flag)):
            bytes += (flag ? "true" : "false").utf8
        case (.automatic, .integer(let number)):
            bytes += String(number).utf8
        case (.automatic, .number(let text)):
            bytes += text.utf8
        case (.automatic, .text(let text)):
            JSONValue.write(text, to: &bytes)
        case (.automatic, .json(let json)):
            bytes += json
        case (.automatic, .bytes(let data)):
            JSONValue.write(Data(data).base64EncodedString(), to: &bytes)
        case (.automatic, .timestamp(let text)):
            JSONValue.write(iso8601(postgres: text, wholeSeconds: false), to: &bytes)
        case (.automatic, .array(let items)):
            bytes.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(item, as: .automatic, to: &bytes, mismatch: mismatch)
            }
            bytes.append(UInt8(ascii: "]"))
        }
    }

    /// `2026-11-26 09:51:31.5+00` as `2026-11-26T09:51:31Z` (or with its fraction kept); a
    /// timestamp without a zone keeps none.
    static func iso8601(postgres text: String, wholeSeconds: Bool = true) -> String {
        var text = text.replacingOccurrences(of: " ", with: "T")
        var zone = ""
        if text.hasSuffix("+00") {
            text.removeLast(3)
            zone = "Z"
        } else if let sign = text.lastIndex(where: { $0 == "+" || $0 == "-" }), let t = text.firstIndex(of: "T"), sign > t {
            zone = String(text[sign...])
            if zone.count == 3 { zone += ":00" }
            text = String(text[..<sign])
        }
        if wholeSeconds, let dot = text.firstIndex(of: ".") { text = String(text[..<dot]) }
        return text + zone
    }

    /// Seconds since 1970 as `YYYY-MM-DDThh:mm:ssZ`, the fraction dropped, as Foundation's
    /// `.iso8601` date strategy writes and reads dates. A format style, not a new
    /// `ISO8601DateFormatter` per value: each of those opened an ICU date format.
    static func iso8601(seconds: Double) -> String {
        Date(timeIntervalSince1970: seconds.rounded(.down)).formatted(Self.secondsInUTC)
    }

    private static let secondsInUTC = Date.ISO8601FormatStyle(timeZone: .gmt)
}
