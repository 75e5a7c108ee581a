import Foundation
@testable import OfflineDemo
import OfflineCore
import OfflineKit
@testable import OfflineServer
import Testing

/// The five offline UX patterns of the chat and workspace screen, end to end against a live
/// backend through the network switch.
@Suite("Workspace scenario (the five patterns)", .timeLimit(.minutes(1)))
struct WorkspaceScenarioTests {
    @Test("None: the about page needs no server and sends nothing, offline or online")
    func aboutSendsNothing() async throws {
        try await withDemo(condition: .offline) { demo in
            let workspace = try await demo.startWorkspace()
            workspace.open(.about)
            try await demo.wait { workspace.snapshot.pane == .about }
            let offline = demo.screen(workspace, connectivity: .offlineSoft)
            await demo.set(.online)
            let online = demo.screen(workspace, connectivity: .online)
            // The page is the same; only the status line above it follows the connection.
            let page = { (screen: String) in screen.split(separator: "\n").filter { !$0.contains("Status: ") } }
            #expect(page(offline) == page(online))
            #expect(offline.contains("Status: Offline mode"))
            #expect(!online.contains("Offline mode"))
            #expect(offline.contains("About page        None"))
            #expect(offline.contains("Pin a chat        A optimistic, no feedback"))
            #expect(offline.contains("Send a message    B optimistic with feedback"))
            #expect(offline.contains("Invite members    C blocking form"))
            #expect(offline.contains("Bank accounts     D full-page blocking"))
            #expect(demo.requestCount == 0)
        }
    }

    @Test("A: pinning offline moves the chat to the top at once, shows no marker, and reaches the server exactly once")
    func pinOffline() async throws {
        try await withDemo(condition: .offline) { demo in
            let workspace = try await demo.startWorkspace()
            #expect(workspace.snapshot.chats.map(\.id) == ["general", "design", "trip"])

            await workspace.togglePin(chat: "trip")
            // The chat list follows the rows' observation, which delivers the commit's rows next.
            try await demo.wait { workspace.snapshot.chats.first?.id == "trip" }
            let state = workspace.snapshot
            #expect(state.chats.map(\.id) == ["trip", "general", "design"])
            #expect(state.chats.first?.pinned == true)
            #expect(demo.requestCount == 0)
            let entries = try await workspace.outbox.entries()
            let entry = try #require(entries.first)
            #expect(entries.count == 1)
            #expect(entry.path == "/api/records/pins/trip")
            // Nothing is shown for pattern A: the chat list carries no pending marker.
            let screen = demo.screen(workspace, connectivity: .offlineSoft)
            #expect(screen.contains("  Team trip      pinned"))
            #expect(!screen.contains("~"))

            await demo.set(.online)
            // The model's queue follows an observation that may not have delivered the pin yet:
            // the outbox itself says when it is delivered, then the model catches up.
            try await workspace.drainer.drain()
            try await demo.wait { workspace.snapshot.queue?.isEmpty == true }
            let pin = try await demo.serverRecord("pins", "trip")
            #expect(pin?["pinned"] as? Bool == true)
            #expect(try await demo.serverEffects()[entry.idempotencyKey] == 1)
        }
    }

    @Test("B: a message sent offline shows at once, dimmed and marked pending, and loses the marker once the server has it; the status line says it waits, then up to date")
    func sendOffline() async throws {
        try await withDemo(condition: .offline) { demo in
            let workspace = try await demo.startWorkspace()
            let message = try #require(await workspace.send("See you at nine"))
            let entry = try #require(try await workspace.outbox.entries().first)
            #expect(workspace.snapshot.thread.last?.id == message.id)
            // The marker comes from the outbox's observation, which may still be delivering the
            // value it read just before the write.
            try await demo.wait { workspace.snapshot.status(of: message).pendingAction == .add }
            #expect(demo.requestCount == 0)

            let pending = try #require(demo.lines(workspace, connectivity: .offlineSoft).first { $0.text.contains("See you at nine") })
            #expect(pending.text.contains("~ you: See you at nine"))
            #expect(pending.spans.first { $0.text.contains("See you at nine") }?.style.dim == true)
            #expect(demo.screen(workspace, connectivity: .offlineSoft).contains("Sync queue: 1 waiting · next try when back online"))
            #expect(demo.screen(workspace, connectivity: .offlineSoft).contains("Status: Offline mode · 1 change will sync when you’re back online."))

            await demo.set(.online)
            try await demo.wait { workspace.snapshot.statuses.isEmpty && workspace.snapshot.queue?.isEmpty == true }
            let sent = try #require(demo.lines(workspace, connectivity: .online).first { $0.text.contains("See you at nine") })
            #expect(!sent.text.contains("~"))
            #expect(sent.spans.first { $0.text.contains("See you at nine") }?.style.dim == false)
            #expect(demo.screen(workspace, connectivity: .online).contains("Sync queue: everything sent"))
            // The screen itself is waited for: the write's own change announced on the live stream
            // can start another pull between a wait on the sync status and a read of the screen
            // ("Status: Syncing…" once in CI). The line must still say up to date within the wait.
            try await demo.wait {
                workspace.snapshot.sync?.lastSyncedAt != nil && workspace.snapshot.sync?.isPulling == false
                    && demo.screen(workspace, connectivity: .online).contains("Status: Up to date · Updated ")
            }
            let stored = try #require(try await demo.serverMessage(message.id))
            #expect(stored == ServerMessage(workspace: "northwind", chat: "general", author: DemoEnvironment.account.name, text: "See you at nine"))
            #expect(try await demo.serverMessages(withText: "See you at nine").count == 1)
            // Committed with its key: a resend of the same write is answered from the key, never
            // applied again.
            #expect(try await demo.serverWriteKeys(entry.idempotencyKey) == [200])
        }
    }

    @Test("B: a message the server refuses stays with the error until dismissed; dismissing a failed add removes it")
    func refusedMessage() async throws {
        try await withDemo { demo in
            let workspace = try await demo.startWorkspace()
            let message = try #require(await workspace.send("My card is 4111 1111 1111 1111"))
            try await demo.wait { workspace.snapshot.statuses[message.id]?.failure != nil && workspace.snapshot.queue?.failures.count == 1 }

            let state = workspace.snapshot
            #expect(state.status(of: message).failure?.kind == .rejected)
            #expect(state.chatsNeedingAttention == ["general"])
            #expect(state.queue?.failures.count == 1)
            let screen = demo.screen(workspace, connectivity: .online)
            #expect(screen.contains("! you: My card is 4111"))
            #expect(screen.contains(OfflineMessage.changeNotSaved.text))
            #expect(screen.contains(">!General"))
            #expect(!screen.contains("422"))
            #expect(try await demo.serverMessage(message.id) == nil)

            // Still there after a restart of the model: errors are never lost silently.
            let restarted = try await demo.startWorkspace()
            #expect(restarted.snapshot.status(of: message).failure != nil)

            await restarted.dismissError(message: message.id)
            try await demo.wait { !restarted.snapshot.messages.contains { $0.id == message.id } }
            #expect(try await restarted.outbox.snapshot().failures.isEmpty)
            #expect(!demo.screen(restarted, connectivity: .online).contains("My card"))
        }
    }

    @Test("B: a delete made offline is struck through until the server confirms it; an unsent message just goes")
    func deleteOffline() async throws {
        try await withDemo { demo in
            let workspace = try await demo.startWorkspace()
            let message = try #require(await workspace.send("Lunch at noon?"))
            try await workspace.drainer.drain()
            try await demo.wait { workspace.snapshot.statuses.isEmpty && workspace.snapshot.queue?.isEmpty == true }
            #expect(try await demo.serverMessage(message.id)?.text == "Lunch at noon?")

            await demo.set(.offline)
            await workspace.delete(message: message.id)
            try await demo.wait { workspace.snapshot.status(of: message).pendingAction == .delete }
            let line = try #require(demo.lines(workspace, connectivity: .offlineSoft).first { $0.text.contains("Lunch at noon?") })
            #expect(line.text.contains("~ you: Lunch at noon? (deleting)"))
            let span = try #require(line.spans.first { $0.text.contains("Lunch at noon?") })
            #expect(span.style.strikethrough && span.style.dim)

            // Sent and deleted while offline: neither write is needed, the message goes at once.
            let unsent = try #require(await workspace.send("typo"))
            await workspace.delete(message: unsent.id)
            try await demo.wait { !workspace.snapshot.messages.contains { $0.id == unsent.id } }
            #expect(try await workspace.outbox.entries().map(\.path) == ["/api/workspaces/northwind/messages/\(message.id)"])

            await demo.set(.online)
            try await demo.wait { !workspace.snapshot.messages.contains { $0.id == message.id } }
            #expect(try await demo.serverMessage(message.id) == nil)
            #expect(workspace.snapshot.statuses.isEmpty)
        }
    }

    @Test("C: the invite draft is saved as the user types and survives a restart; submit is refused offline with no request built")
    func inviteDraftAndOfflineSubmit() async throws {
        try await withDemo(condition: .offline) { demo in
            let workspace = try await demo.startWorkspace()
            _ = await workspace.handle(.character("i"))
            _ = await workspace.handle(.character("e"))
            #expect(workspace.capturesText)
            for character in "ana@northwind.test" { _ = await workspace.handle(.character(character)) }
            _ = await workspace.handle(.enter)
            #expect(!workspace.capturesText)
            try await demo.wait { workspace.snapshot.savedDraft?.email == "ana@northwind.test" }
            #expect(demo.screen(workspace, connectivity: .offlineSoft).contains("Draft saved on this device."))

            // A new model knows only what the device kept.
            let restarted = try await demo.startWorkspace()
            restarted.open(.invite)
            try await demo.wait { restarted.snapshot.pane == .invite }
            #expect(restarted.snapshot.invite == InviteDraft(email: "ana@northwind.test"))
            let screen = demo.screen(restarted, connectivity: .offlineSoft)
            #expect(screen.contains("ana@northwind.test"))
            #expect(screen.contains("[Send invitation] (disabled)"))
            #expect(screen.contains(OfflineMessage.noInternetConnection.text))

            await restarted.submitInvite()
            #expect(restarted.snapshot.invitation == .failed(.noInternetConnection))
            #expect(restarted.snapshot.toast == OfflineMessage.noInternetConnection.text)
            #expect(demo.requestCount == 0)
            #expect(try await restarted.form.loadDraft(InviteDraft.self) == InviteDraft(email: "ana@northwind.test"))
        }
    }

    @Test("C: online, the server's validation problem is shown in words and the draft kept; a valid invitation succeeds and clears it")
    func inviteOnline() async throws {
        try await withDemo { demo in
            let workspace = try await demo.startWorkspace()
            workspace.open(.invite)
            await workspace.updateInvite(InviteDraft(email: "guest@mailinator.com", name: "Guest"))
            await workspace.submitInvite()
            #expect(workspace.snapshot.invitation == .refused(message: "Invitations to mailinator.com addresses are not allowed.", field: .email))
            let refused = demo.screen(workspace, connectivity: .online)
            #expect(refused.contains("Invitations to mailinator.com addresses are not allowed."))
            #expect(!refused.contains("422"))
            #expect(try await workspace.form.loadDraft(InviteDraft.self)?.email == "guest@mailinator.com")

            await workspace.updateInvite(InviteDraft(email: "Ana@Northwind.test", name: "Ana", role: "admin"))
            await workspace.submitInvite()
            #expect(workspace.snapshot.invitation == .invited(InvitedMember(email: "ana@northwind.test", name: "Ana", role: "admin")))
            #expect(demo.screen(workspace, connectivity: .online).contains("Invited Ana <ana@northwind.test> as admin."))
            #expect(try await workspace.form.loadDraft(InviteDraft.self) == nil)
            #expect(workspace.snapshot.invite == InviteDraft())
        }
    }

    @Test("D: offline the bank accounts page is blocked with the message and sends nothing; online it shows the accounts")
    func bankAccounts() async throws {
        try await withDemo(condition: .offline) { demo in
            let workspace = try await demo.startWorkspace()
            workspace.open(.bank)
            try await demo.wait { workspace.snapshot.bank == .blocked(.featureRequiresInternet) }
            #expect(demo.requestCount == 0)
            let blocked = demo.screen(workspace, connectivity: .offlineSoft)
            #expect(blocked.contains(OfflineMessage.featureRequiresInternet.text))
            #expect(!blocked.contains("Northwind"))

            await demo.set(.online)
            workspace.connectivityChanged(demo.monitor.status)
            try await demo.wait { if case .loaded = workspace.snapshot.bank { true } else { false } }
            guard case .loaded(let accounts) = workspace.snapshot.bank else {
                Issue.record("expected the accounts, got \(workspace.snapshot.bank)")
                return
            }
            #expect(accounts.map(\.name) == ["Everyday checking", "Savings", "Travel card"])
            let loaded = demo.screen(workspace, connectivity: .online)
            #expect(loaded.contains("Northwind Bank"))
            #expect(loaded.contains("•••• 4321"))

            // Going offline again never leaves the accounts on screen.
            await demo.set(.offline)
            workspace.connectivityChanged(demo.monitor.status)
            try await demo.wait { workspace.snapshot.bank == .blocked(.featureRequiresInternet) }
        }
    }

    @Test("The records resource refuses empty, over-long and card-number messages in words, and stores a valid one")
    func messageRules() async throws {
        try await withDemo { demo in
            let cases: [(String, Int, String?)] = [
                ("   ", 422, "A message can't be empty."),
                (String(repeating: "a", count: 501), 422, "A message can be at most 500 characters long."),
                ("pay with 4111-1111-1111-1111 please", 422, "Messages can't contain card numbers. Share payment details another way."),
                ("Order 1234567890123 shipped", 200, nil),  // 13 digits failing the Luhn check: not a card
                ("All good", 200, nil),
            ]
            for (index, (text, status, detail)) in cases.enumerated() {
                let body = try JSONSerialization.data(withJSONObject: ["text": text, "chat": "general"])
                let response = try await demo.asDemoAccount.send(TransportRequest(
                    method: .put, url: demo.environment.url("api/records/messages/rule-\(index)"),
                    headerFields: [.contentType: "application/json", .idempotencyKey: "\"rule-\(index)-\(UUID().uuidString)\""], body: body))
                #expect(response.status.code == status, "\(text.prefix(20))")
                if let detail {
                    let problem = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
                    #expect(problem?["detail"] as? String == detail)
                    #expect(problem?["field"] as? String == "text")
                }
            }
        }
    }

    // MARK: Sync: messages from the user's other devices

    static func fromTablet(_ workspace: WorkspaceModel) -> [String] {
        workspace.snapshot.thread.map(\.text).filter { $0.hasPrefix("Written on my tablet") }
    }

    @Test("Live: what the user's tablet posts shows in the chat as it arrives, with nothing pressed")
    func tabletMessagesArriveLive() async throws {
        try await withDemo { demo in
            let workspace = try await demo.startWorkspace()
            // Besides the live stream's pokes, at most three pulls can come by themselves at the
            // start (connectivity, the stream opening, the queue's first state): four messages in
            // turn need the pokes.
            for number in 1...4 {
                await workspace.postFromOtherDevice()
                try await demo.wait { Self.fromTablet(workspace).count == number }
            }
            // Posted within one second, they are ordered by id (times are kept to the second).
            #expect(Self.fromTablet(workspace).sorted() == (1...4).map { "Written on my tablet (\($0))" })
            let screen = demo.screen(workspace, connectivity: .online)
            #expect(screen.contains("you: Written on my tablet (4)"), "\(screen)")
            #expect(demo.requestCount == 0, "the chat's own patterns sent nothing; only its sync did")
        }
    }

    @Test("Offline, the tablet's messages wait on the server; back online the chat catches up with only what changed")
    func tabletMessagesCatchUp() async throws {
        try await withDemo { demo in
            let workspace = try await demo.startWorkspace()
            await workspace.postFromOtherDevice()
            try await demo.wait { Self.fromTablet(workspace).count == 1 }

            await demo.set(.offline)
            await workspace.postFromOtherDevice()
            await workspace.postFromOtherDevice()
            let syncOffline = demo.requests.urls.filter(DemoHarness.isSync).count
            #expect(Self.fromTablet(workspace).count == 1, "nothing comes down offline")

            await demo.set(.online)
            try await demo.wait { Self.fromTablet(workspace).count == 3 }
            let pulls = demo.pulls(of: "messages")
            // Back online, the device asks again: a pull, or the live stream, which opens after its
            // cursor and may bring the messages itself, with no pull.
            #expect(demo.requests.urls.filter(DemoHarness.isSync).count > syncOffline, "asked the server again once back online")
            // Only the first pull ever starts from nothing; every later one asks for what changed
            // after its cursor.
            #expect(pulls.first?.query?.contains("cursor=") == false)
            #expect(pulls.dropFirst().allSatisfy { $0.query?.contains("cursor=") == true }, "\(pulls)")
        }
    }
}

extension WorkspaceScenarioTests {
    @Test("Conflict: a message edited offline here and on the tablet says it changed elsewhere, keeps the text written here, and the note goes when dismissed")
    func editConflict() async throws {
        try await withDemo { demo in
            let workspace = try await demo.startWorkspace()
            let message = try #require(await workspace.send("Meet at the station"))
            try await workspace.drainer.drain()

            await demo.set(.offline)
            await workspace.edit(message: message.id, to: "Meet at the station, platform 4")
            #expect(workspace.snapshot.selectedMessage == message.id)
            await workspace.editFromOtherDevice()
            try await demo.wait { workspace.snapshot.status(of: message).pendingAction == .update }
            let offline = demo.screen(workspace, connectivity: .offlineSoft)
            #expect(offline.contains("~ you: Meet at the station, platform 4"), "\(offline)")

            // Back online, the tablet's edit comes down before this device's goes up.
            await demo.set(.online)
            try await demo.wait {
                workspace.snapshot.conflicts[message.id] != nil && workspace.snapshot.queue?.isEmpty == true
                    && workspace.snapshot.status(of: message) == .synced
            }
            let screen = demo.screen(workspace, connectivity: .online)
            #expect(screen.contains("you: Meet at the station, platform 4"), "\(screen)")
            #expect(screen.contains("This was also changed elsewhere"), "\(screen)")
            #expect(try await demo.serverMessage(message.id)?.text == "Meet at the station, platform 4")
            #expect(workspace.snapshot.conflicts[message.id]?.fields == ["text"])

            #expect(await workspace.handle(.character("x")))
            try await demo.wait { workspace.snapshot.conflicts.isEmpty }
            #expect(!demo.screen(workspace, connectivity: .online).contains("changed elsewhere"))
            #expect(workspace.snapshot.thread.first { $0.id == message.id }?.text == "Meet at the station, platform 4")
        }
    }
}

extension DemoHarness {
    /// A workspace model started on this harness's device and backend.
    func startWorkspace() async throws -> WorkspaceModel {
        let workspace = WorkspaceModel(environment: environment)
        await workspace.start()
        try await wait { workspace.snapshot.queue != nil }
        return workspace
    }

    func lines(_ workspace: WorkspaceModel, connectivity: ConnectivityKind) -> [Line] {
        workspace.render(RenderContext(connectivity: connectivity)).body
    }

    /// The body as plain text.
    func screen(_ workspace: WorkspaceModel, connectivity: ConnectivityKind) -> String {
        lines(workspace, connectivity: connectivity).map(\.text).joined(separator: "\n")
    }

    /// The server's copy of a chat message, read in its chat store (members read it only by
    /// sync), nil when it has none.
    func serverMessage(_ id: String) async throws -> ServerMessage? {
        try await serverStorage.read { db in
            try db.row("SELECT workspace_id, chat, author_id, text FROM chat_message WHERE id = \(id)").map(ServerMessage.init)
        }
    }

    /// The server's chat messages, of any chat and author, whose text is `text`.
    func serverMessages(withText text: String) async throws -> [ServerMessage] {
        try await serverStorage.read { db in
            try db.rows("SELECT workspace_id, chat, author_id, text FROM chat_message WHERE text = \(text)").map(ServerMessage.init)
        }
    }

    /// The statuses the server kept with idempotency key `key`, one per account that used it:
    /// a write is applied once, with its key, and every resend is answered from it.
    func serverWriteKeys(_ key: String) async throws -> [Int] {
        try await serverStorage.read { db in
            try db.rows("SELECT status FROM write_key WHERE key = \(key)").map { try $0.int("status") }
        }
    }

    /// The server's copy of a record (read past the switch's counter), nil when it has none.
    func serverRecord(_ collection: String, _ id: String) async throws -> [String: Any]? {
        let response = try await asDemoAccount.send(TransportRequest(url: environment.url("api/records/\(collection)/\(id)")))
        guard response.status == 200 else { return nil }
        let record = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return record?["body"] as? [String: Any]
    }

    /// How many times the server applied a write, per idempotency key.
    func serverEffects() async throws -> [String: Int] {
        let response = try await asDemoAccount.send(TransportRequest(url: environment.url("api/record-effects")))
        let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return (object?["effects"] as? [String: Int]) ?? [:]
    }
}

/// A message as the server's chat store keeps it.
struct ServerMessage: Equatable {
    var workspace: String
    var chat: String
    var author: String
    var text: String
}

extension ServerMessage {
    init(_ row: SQLRow) throws {
        self.init(workspace: try row.string("workspace_id"), chat: try row.string("chat"), author: try row.string("author_id"),
                  text: try row.string("text"))
    }
}
