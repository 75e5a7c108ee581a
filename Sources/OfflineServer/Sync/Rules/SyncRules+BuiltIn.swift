import Foundation

extension SyncRules {
    /// The reference backend's own collections, as rules of the same kind an app writes:
    ///
    /// - `records/COLLECTION`: each user's records (`/api/records`), seen by their owner;
    /// - `orders`: the shop's order history, seen by its customer;
    /// - `messages`: the demo workspace's chat, seen by the workspace's members.
    static let builtIn = try! SyncRules.load(yaml: """
        audiences:
          workspace:
            table: workspace_membership
            user: user_id
            key: workspace_id
        collections:
          records:
            table: records
            key: id
            split_by: collection
            columns:
              body: { column: body, format: json }
              id: id
              version: version
            seen_by:
              - user: owner
          orders:
            table: shop_order
            key: id
            columns:
              currency: currency
              id: id
              placedAt: { column: placed_at, format: iso8601 }
              rating: rating
              status: status
              totalCents: total_cents
            seen_by:
              - user: customer
          messages:
            table: chat_message
            key: id
            columns:
              id: id
              chat: chat
              author: author_id
              text: text
              sentAt: { column: sent_at, format: iso8601 }
            seen_by:
              - workspace: workspace_id
        """, file: "built-in rules")

    /// The rules a server with `configuration` runs: the built-in ones, and the app's own file's.
    ///
    /// - Throws: ``SyncRulesError`` for a file that cannot be read or is not valid.
    static func serving(_ configuration: ServerConfiguration) throws -> SyncRules {
        guard let file = configuration.syncRules else { return builtIn }
        return try builtIn.merging(try SyncRules.load(contentsOf: file))
    }
}
