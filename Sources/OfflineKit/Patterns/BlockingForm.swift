public import Foundation
import HTTPTypes
import GRDB
public import OfflineCore

/// Pattern C: a form whose submit needs the network, with a draft saved on the device as the user
/// types.
///
/// The draft survives restarts and is never queued. Submitting is a network-required action:
/// while the app cannot reach the server it is refused with the standard message, before any
/// request is built (BR-OFF-001). Actions that must not be optimistic (money, placing an order)
/// always go through here.
///
/// ```swift
/// let form = BlockingForm(id: "invite-members", database: database, baseURL: api,
///                         transport: transport, connectivity: monitor)
/// try await form.saveDraft(invite)                       // on every keystroke
/// submitButton.isEnabled = form.availability.canSubmit   // or observe availabilityUpdates()
/// let response = try await form.submit(.inviteMembers, path: "/api/invites", json: invite)
/// ```
public struct BlockingForm: Sendable {
    /// Whether the form can be submitted, and what to say if not.
    public struct Availability: Sendable, Hashable {
        public var canSubmit: Bool
        /// Shown near the disabled submit button while offline.
        public var message: OfflineMessage?
    }

    public let id: String
    let database: OfflineDatabase
    let baseURL: URL
    let transport: any HTTPTransport
    let connectivity: any ConnectivitySource
    let now: @Sendable () -> Date

    public init(
        id: String,
        database: OfflineDatabase,
        baseURL: URL,
        transport: any HTTPTransport,
        connectivity: any ConnectivitySource,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.id = id
        self.database = database
        self.baseURL = baseURL
        self.transport = transport is GatedTransport ? transport : GatedTransport(transport, connectivity: connectivity)
        self.connectivity = connectivity
        self.now = now
    }

    // MARK: Draft

    /// Saves the draft on the device. Works offline; never sends anything.
    ///
    /// A draft that differs from the one last submitted is a new submission: it will be sent with
    /// a new idempotency key (the server would refuse the old key with another body).
    public func saveDraft<Draft: Encodable & Sendable>(_ draft: Draft) async throws {
        let content = try JSONEncoder().encode(draft)
        let now = now().timeIntervalSince1970
        try await OfflineStoreError.mapping {
            try await database.writer.write { [id] db in
                try db.execute(sql: """
                    INSERT INTO offlinekit_drafts (formID, content, updatedAt) VALUES (?, ?, ?)
                    ON CONFLICT(formID) DO UPDATE SET content = excluded.content, updatedAt = excluded.updatedAt,
                        submissionKey = CASE WHEN content = excluded.content THEN submissionKey END
                    """, arguments: [id, content, now])
            }
        }
    }

    /// The saved draft, or nil when there is none.
    public func loadDraft<Draft: Decodable>(_ type: Draft.Type = Draft.self) async throws -> Draft? {
        let content = try await database.writer.read { [id] db in
            try Data.fetchOne(db, sql: "SELECT content FROM offlinekit_drafts WHERE formID = ?", arguments: [id])
        }
        return try content.map { try JSONDecoder().decode(Draft.self, from: $0) }
    }

    /// Deletes the draft (the user cleared the form).
    public func discardDraft() async throws {
        try await database.writer.write { [id] db in
            try db.execute(sql: "DELETE FROM offlinekit_drafts WHERE formID = ?", arguments: [id])
        }
    }

    // MARK: Submit

    /// Whether submit is enabled right now.
    public var availability: Availability {
        Self.availability(for: connectivity.status.kind)
    }

    /// ``availability`` now and whenever connectivity changes.
    public func availabilityUpdates() -> AsyncStream<Availability> {
        let updates = connectivity.statusUpdates()
        return AsyncStream { continuation in
            let task = Task {
                var last: Availability?
                for await status in updates {
                    let availability = Self.availability(for: status.kind)
                    if availability != last { continuation.yield(availability) }
                    last = availability
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    static func availability(for kind: ConnectivityKind) -> Availability {
        ConnectivityGate.allows(.networkRequired, status: kind)
            ? Availability(canSubmit: true, message: nil)
            : Availability(canSubmit: false, message: .noInternetConnection)
    }

    /// Submits the form: refused at once while offline, else sent once with an idempotency key
    /// that is kept with the draft, so submitting again after a lost response cannot apply it
    /// twice. The draft is deleted once the server accepts.
    ///
    /// - Returns: the server's 2xx response.
    /// - Throws: ``NetworkRequiredError`` (with ``OfflineMessage/noInternetConnection``) while
    ///   offline, before any request is built; ``FormSubmissionError`` when the server refuses or
    ///   cannot be reached. The draft is kept in both cases.
    public func submit(_ operation: OutboxOperation, path: String, body: Data?) async throws -> TransportResponse {
        // BR-OFF-001: decide before building anything.
        try ConnectivityGate.check(.networkRequired, status: connectivity.status.kind, feature: operation.name,
                                   message: .noInternetConnection)
        guard let key = IdempotencyKey(try await submissionKey()) else {
            throw FormSubmissionError(failure: OutboxFailure(kind: .rejected, detail: "unreadable submission key"), response: nil)
        }
        guard let url = URL(string: path, relativeTo: baseURL)?.absoluteURL else {
            throw FormSubmissionError(failure: OutboxFailure(kind: .rejected, detail: "invalid path \(path)"), response: nil)
        }
        var headerFields: HTTPFields = [.idempotencyKey: key.fieldValue]
        if body != nil { headerFields[.contentType] = "application/json" }
        let request = TransportRequest(method: operation.method, url: url, headerFields: headerFields, body: body, requirement: .networkRequired)
        let response: TransportResponse
        do {
            response = try await transport.send(request, maxBodyBytes: 1 << 20)
        } catch let error as NetworkRequiredError {
            throw error
        } catch {
            let outcome: OutboxAttemptOutcome = (error as? TransportError) == .timeout ? .timeout : .networkFailure("\(error)")
            throw FormSubmissionError(verdict: OutboxDelivery.verdict(for: outcome, now: now()), response: nil)
        }
        let verdict = OutboxDelivery.verdict(for: .response(status: response.status.code, retryAfter: response.headerFields[.retryAfter]), now: now())
        guard verdict == .acknowledge else { throw FormSubmissionError(verdict: verdict, response: response) }
        try await discardDraft()
        return response
    }

    /// ``submit(_:path:body:)`` with a JSON body.
    public func submit<Body: Encodable & Sendable>(_ operation: OutboxOperation, path: String, json body: Body) async throws -> TransportResponse {
        try ConnectivityGate.check(.networkRequired, status: connectivity.status.kind, feature: operation.name,
                                   message: .noInternetConnection)
        return try await submit(operation, path: path, body: try JSONEncoder().encode(body))
    }

    /// The key of this form's pending submission, created on first submit and kept with the draft.
    private func submissionKey() async throws -> String {
        let fresh = UUID().uuidString.lowercased()
        let now = now().timeIntervalSince1970
        return try await database.writer.write { [id] db in
            if let key = try String.fetchOne(db, sql: "SELECT submissionKey FROM offlinekit_drafts WHERE formID = ?", arguments: [id]) {
                return key
            }
            try db.execute(sql: """
                INSERT INTO offlinekit_drafts (formID, content, submissionKey, updatedAt) VALUES (?, x'7B7D', ?, ?)
                ON CONFLICT(formID) DO UPDATE SET submissionKey = excluded.submissionKey
                """, arguments: [id, fresh, now])
            return fresh
        }
    }
}

/// A form submission that reached no agreement with the server. The draft is kept.
public struct FormSubmissionError: Error, Sendable, Hashable {
    /// Why: retryable (network, server busy) or a refusal.
    public var failure: OutboxFailure
    /// The server's response, when there was one (a refusal's body explains it).
    public var response: TransportResponse?

    public init(failure: OutboxFailure, response: TransportResponse?) {
        self.failure = failure
        self.response = response
    }

    init(verdict: OutboxVerdict, response: TransportResponse?) {
        switch verdict {
        case .acknowledge: failure = OutboxFailure(kind: .serverError, status: response?.status.code)
        case .retry(let failure, _), .pause(let failure), .reject(let failure): self.failure = failure
        }
        self.response = response
    }

    /// What to tell the user.
    public var message: OfflineMessage {
        failure.isConnectivity ? .noInternetConnection : failure.kind == .rejected ? .changeNotSaved : .tryAgainWhenOnline
    }
}
