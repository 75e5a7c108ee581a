public import Foundation

/// The three-way comparison behind a sync conflict: which of the fields a user's change sets did
/// someone else change meanwhile, to another value.
///
/// A field is in conflict when the server's value differs from the user's and from the row's
/// value when the user changed it (`base`): the server's change then says something about that
/// field that the user did not see. A server change to other fields, or to the same value the
/// user chose, is no conflict.
public enum FieldConflicts {
    /// The conflicting fields, sorted.
    ///
    /// - Parameters:
    ///   - base: the server's version of the row the user's change was made on; nil when the
    ///     device never had one (then a field the server holds with another value conflicts).
    ///   - server: the server's version that arrived while the change was on its way.
    ///   - local: the JSON objects of the user's changes on their way, oldest first; their
    ///     top-level fields are the fields the user set, the latest value winning.
    ///   - inside: the key of the server's object that holds the fields (`body` for the
    ///     reference backend's records); nil when they are at its top level.
    /// - Returns: no field when a version is not a JSON object.
    public static func fields(base: Data?, server: Data, local: [Data], inside: String?) -> [String] {
        guard let server = object(server, inside: inside) else { return [] }
        let base = base.flatMap { object($0, inside: inside) }
        var set: [String: JSON] = [:]
        for payload in local {
            guard let fields = object(payload, inside: nil) else { continue }
            set.merge(fields) { _, later in later }
        }
        return set.compactMap { field, mine in
            let theirs = server[field]
            guard !same(theirs, mine) else { return nil }
            if let base { return same(theirs, base[field]) ? nil : field }
            return theirs == nil ? nil : field
        }.sorted()
    }

    private static func object(_ json: Data, inside: String?) -> [String: JSON]? {
        guard let root = try? JSON(parsing: json) else { return nil }
        guard let inside else { return root.fields }
        return root[field: inside]?.fields
    }

    /// The same JSON value (`JSON.sameValue(as:)`: numbers by value); absent equals absent.
    private static func same(_ a: JSON?, _ b: JSON?) -> Bool {
        switch (a, b) {
        case (nil, nil): true
        case (let a?, let b?): a.sameValue(as: b)
        default: false
        }
    }
}

extension OfflineMessage {
    /// A change the user made to a row that was also changed elsewhere (on another device, by
    /// another person) before it reached the server. The user's change goes to the server
    /// after the other one, so it is the version kept.
    public static let changedElsewhere = OfflineMessage(
        key: "sync.changedElsewhere", text: "This was also changed elsewhere while your change was on its way. Your version is the one kept.")
}
