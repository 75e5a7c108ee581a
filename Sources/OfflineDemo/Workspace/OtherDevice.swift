public import Foundation
public import OfflineKit

/// The user's other device (a tablet), signed in to the same account and reaching the server
/// directly, not through the demo's network switch: what it writes reaches the server even while
/// the demo is offline, and comes down to the demo by sync.
public struct OtherDevice: Sendable {
    let serverURL: URL
    let transport: any HTTPTransport

    /// - Parameters:
    ///   - serverURL: the server itself (the switch's upstream).
    ///   - http: a transport that does not cross the switch.
    ///   - user: the demo's user, whose tablet it is.
    public init(serverURL: URL, http: any HTTPTransport, user: String = DemoEnvironment.account.name) {
        self.serverURL = serverURL
        transport = BearerTokenTransport(http, tokens: SignInSession(
            serverURL: serverURL, name: user, password: DemoEnvironment.account.password, transport: http))
    }

    /// Posts `text` to `chat` as the tablet would, and returns the message's id.
    func post(_ text: String, to chat: String, at date: Date) async throws -> String {
        let id = UUID().uuidString.lowercased()
        let payload = MessagePayload(chat: chat, text: text, sentAt: date)
        let response = try await transport.send(TransportRequest(
            method: .put, url: serverURL.appending(path: String(WorkspaceOperations.messagePath(id).dropFirst())),
            headerFields: [.contentType: "application/json", .idempotencyKey: IdempotencyKey().fieldValue],
            body: try JSONEncoder.demo.encode(payload)))
        guard response.status == .ok else { throw SyncError.unavailable(status: response.status.code) }
        return id
    }

    /// Changes the text of message `id` as the tablet would. False when the server does not have
    /// the message (it has not left this device yet).
    func edit(_ id: String, text: String) async throws -> Bool {
        let response = try await transport.send(TransportRequest(
            method: .patch, url: serverURL.appending(path: String(WorkspaceOperations.messagePath(id).dropFirst())),
            headerFields: [.contentType: "application/json", .idempotencyKey: IdempotencyKey().fieldValue],
            body: try JSONEncoder.demo.encode(["text": text])))
        if response.status == .notFound { return false }
        guard response.status == .ok else { throw SyncError.unavailable(status: response.status.code) }
        return true
    }
}
