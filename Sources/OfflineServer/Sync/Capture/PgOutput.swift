import Foundation

/// One message of PostgreSQL's logical replication protocol as the built-in `pgoutput` plugin
/// writes it (protocol version 1), read from the bytes `pg_logical_slot_peek_binary_changes`
/// returns, one message per row.
///
/// Only what capture needs is kept: transaction bounds with their LSNs, relations (a table's name
/// and columns, sent before its first change in each decoding call), and row changes with their
/// columns in text form. Everything else the plugin may send (types, origins, logical messages) is
/// read and skipped. The bytes come from the database, but a reader that trusts no peer is cheap:
/// every length is checked, and anything malformed is a ``PgOutput/Malformed`` error, never a
/// crash or an unbounded allocation.
enum PgOutput: Sendable, Hashable {
    case begin(finalLSN: UInt64, xid: UInt32)
    case commit(commitLSN: UInt64, endLSN: UInt64)
    case relation(Relation)
    case insert(relation: UInt32, new: [Column])
    /// `old` holds the key's columns (or the whole old row with `REPLICA IDENTITY FULL`) when the
    /// key changed; nil otherwise.
    case update(relation: UInt32, old: [Column]?, new: [Column])
    /// `old` holds the key's columns (or the whole old row with `REPLICA IDENTITY FULL`).
    case delete(relation: UInt32, old: [Column])
    case truncate(relations: [UInt32])
    /// A message capture has no use for (types, origins, logical messages).
    case other

    struct Relation: Sendable, Hashable {
        var id: UInt32
        var namespace: String
        var name: String
        var columns: [RelationColumn]
    }

    struct RelationColumn: Sendable, Hashable {
        var name: String
        /// Part of the replica identity (the primary key, by default).
        var isKey: Bool
        var typeOID: UInt32
    }

    /// A column's value in a row change.
    enum Column: Sendable, Hashable {
        case null
        /// A TOASTed value the change did not touch: the plugin does not send it again.
        case unchanged
        /// The value in PostgreSQL's text output form.
        case text([UInt8])
    }

    struct Malformed: Error, Sendable, Hashable, CustomStringConvertible {
        var reason: String
        var description: String { "A logical replication message is malformed: \(reason)." }
    }

    /// Reads one message.
    init(_ bytes: some Collection<UInt8>) throws {
        var reader = Reader(bytes: Array(bytes))
        let tag = try reader.byte()
        switch tag {
        case UInt8(ascii: "B"):
            let finalLSN = try reader.uint64()
            _ = try reader.uint64()  // commit timestamp
            self = .begin(finalLSN: finalLSN, xid: try reader.uint32())
        case UInt8(ascii: "C"):
            _ = try reader.byte()  // flags
            let commitLSN = try reader.uint64()
            let endLSN = try reader.uint64()
            _ = try reader.uint64()  // commit timestamp
            self = .commit(commitLSN: commitLSN, endLSN: endLSN)
        case UInt8(ascii: "R"):
            let id = try reader.uint32()
            let namespace = try reader.string()
            let name = try reader.string()
            _ = try reader.byte()  // replica identity setting
            let count = try reader.uint16()
            var columns: [RelationColumn] = []
            columns.reserveCapacity(Int(count))
            for _ in 0..<count {
                let flags = try reader.byte()
                let columnName = try reader.string()
                let type = try reader.uint32()
                _ = try reader.uint32()  // type modifier
                columns.append(RelationColumn(name: columnName, isKey: flags & 1 == 1, typeOID: type))
            }
            self = .relation(Relation(id: id, namespace: namespace, name: name, columns: columns))
        case UInt8(ascii: "I"):
            let relation = try reader.uint32()
            try reader.expect("N")
            self = .insert(relation: relation, new: try reader.tuple())
        case UInt8(ascii: "U"):
            let relation = try reader.uint32()
            var old: [Column]?
            var marker = try reader.byte()
            if marker == UInt8(ascii: "K") || marker == UInt8(ascii: "O") {
                old = try reader.tuple()
                marker = try reader.byte()
            }
            guard marker == UInt8(ascii: "N") else { throw Malformed(reason: "an update without its new row") }
            self = .update(relation: relation, old: old, new: try reader.tuple())
        case UInt8(ascii: "D"):
            let relation = try reader.uint32()
            let marker = try reader.byte()
            guard marker == UInt8(ascii: "K") || marker == UInt8(ascii: "O") else {
                throw Malformed(reason: "a delete without the deleted row's key")
            }
            self = .delete(relation: relation, old: try reader.tuple())
        case UInt8(ascii: "T"):
            let count = try reader.uint32()
            _ = try reader.byte()  // options
            guard Int(count) <= reader.remaining / 4 else { throw Malformed(reason: "a truncate longer than its message") }
            var relations: [UInt32] = []
            for _ in 0..<count { relations.append(try reader.uint32()) }
            self = .truncate(relations: relations)
        case UInt8(ascii: "Y"), UInt8(ascii: "O"), UInt8(ascii: "M"):
            self = .other
        default:
            throw Malformed(reason: "an unknown message type \(tag)")
        }
    }

    /// Reads big-endian integers, zero-terminated strings and tuples, checking every length.
    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var remaining: Int { bytes.count - index }

        mutating func byte() throws -> UInt8 {
            guard index < bytes.count else { throw Malformed(reason: "it ends early") }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func expect(_ character: Unicode.Scalar) throws {
            guard try byte() == UInt8(ascii: character) else { throw Malformed(reason: "\(character) was expected") }
        }

        mutating func integer<T: FixedWidthInteger & UnsignedInteger>(_: T.Type) throws -> T {
            let size = MemoryLayout<T>.size
            guard remaining >= size else { throw Malformed(reason: "it ends early") }
            var value: T = 0
            for byte in bytes[index..<index + size] { value = value << 8 | T(byte) }
            index += size
            return value
        }

        mutating func uint16() throws -> UInt16 { try integer(UInt16.self) }
        mutating func uint32() throws -> UInt32 { try integer(UInt32.self) }
        mutating func uint64() throws -> UInt64 { try integer(UInt64.self) }

        mutating func string() throws -> String {
            guard let end = bytes[index...].firstIndex(of: 0) else { throw Malformed(reason: "a name without its terminator") }
            defer { index = end + 1 }
            return String(decoding: bytes[index..<end], as: UTF8.self)
        }

        mutating func tuple() throws -> [Column] {
            let count = Int(try uint16())
            // Every column takes a byte at least: a count past the message is a lie, not a reason
            // to reserve memory for it.
            guard count <= remaining else { throw Malformed(reason: "a row with more columns than bytes") }
            var columns: [Column] = []
            columns.reserveCapacity(count)
            for _ in 0..<count {
                switch try byte() {
                case UInt8(ascii: "n"): columns.append(.null)
                case UInt8(ascii: "u"): columns.append(.unchanged)
                case UInt8(ascii: "t"):
                    let length = Int(try uint32())
                    guard length <= remaining else { throw Malformed(reason: "a value longer than its message") }
                    columns.append(.text(Array(bytes[index..<index + length])))
                    index += length
                case let kind:
                    throw Malformed(reason: "a column of unknown kind \(kind)")
                }
            }
            return columns
        }
    }
}

extension PgOutput {
    /// An LSN as PostgreSQL writes it (`16/B374D848`), or nil.
    static func lsn(_ text: String) -> UInt64? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let high = UInt32(parts[0], radix: 16), let low = UInt32(parts[1], radix: 16) else { return nil }
        return UInt64(high) << 32 | UInt64(low)
    }

    /// `lsn` as PostgreSQL writes it.
    static func lsnText(_ lsn: UInt64) -> String {
        String(lsn >> 32, radix: 16, uppercase: true) + "/" + String(lsn & 0xFFFF_FFFF, radix: 16, uppercase: true)
    }
}
