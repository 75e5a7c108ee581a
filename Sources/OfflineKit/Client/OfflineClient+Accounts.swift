extension OfflineClient {
    /// Signs `account` in on this device, with its tokens; nil signs out.
    ///
    /// ```swift
    /// try await client.switchAccount(to: "ben") { SignInSession(serverURL: server, name: "ben", password: password, transport: $0) }
    /// try await client.switchAccount(to: nil, tokens: nil)   // sign-out
    /// ```
    ///
    /// Requests made for the previous account (its queued writes, a pull under way) are no
    /// longer signed from the first line: they fail with ``AccountSwitchedError`` and are not
    /// sent. When `account` is not the account signed in before, one transaction then removes
    /// every row sync brought (the synced collections' tables, cursors, held versions,
    /// conflicts) and records the new account: a screen observing those tables goes from the
    /// previous user's rows to none, never through a mix, and sync pulls the new account's rows
    /// from the start. The response cache forgets what it kept for the previous user (queries
    /// made with `user:` that account).
    ///
    /// The previous account's queued writes stay in the outbox, paused, and go out when it signs
    /// in again (``Outbox/discardEntries(of:)`` drops them). The rows they change went with the
    /// switch: back in that account, such a row shows again once its write reached the server
    /// and sync brought it down, never as the version the write replaces.
    ///
    /// - Parameter tokens: the new account's access tokens, made with the transport underneath;
    ///   nil sends requests unsigned.
    public func switchAccount(to account: String?, tokens: ((any HTTPTransport) -> any AccessTokenSource)?) async throws {
        signedIn.signIn(account, tokens: tokens?(unsigned))
        let previous = try await database.writer.write { [sync] db -> String?? in
            let previous = try Outbox.account(db)
            guard previous != account else { return .none }
            try sync?.forgetPulledRows(in: db)
            try Outbox.setAccount(account, in: db)
            return .some(previous)
        }
        guard case .some(let previousAccount) = previous else { return }
        outbox.changes.send(())
        sync?.accountSwitched()
        if let previousAccount { try await cache.clear(user: previousAccount) }
    }
}
