public import Foundation
import GRDB
public import OfflineCore
public import OfflineKit

/// The chat and workspace scenario: one feature per offline UX pattern.
///
/// - About (None): no server at all.
/// - Pin a chat (A): the local change and the queued write commit together; nothing else shows.
/// - Send and delete messages (B): shown at once; pending ones dimmed, pending deletes struck
///   through, refusals shown with their error until dismissed.
/// - Invite members (C): a ``BlockingForm`` whose draft is saved as the user types; submit is
///   disabled offline and the server's validation problems are shown in words.
/// - Bank accounts (D): a ``BlockingRead``: blocked with the standard message offline.
///
/// Queued writes go through an ``Outbox`` drained in the background by an ``OutboxDrainer``.
public final class WorkspaceModel: Scenario {
    public enum Pane: String, Sendable, Hashable, CaseIterable {
        case chat, invite, bank, about

        public var title: String {
            switch self {
            case .chat: "Chat"
            case .invite: "Invite members"
            case .bank: "Bank accounts"
            case .about: "About"
            }
        }

        /// The pattern the pane demonstrates, from the flow chart's answers.
        public var patterns: [OfflinePattern] {
            switch self {
            case .chat: [WorkspaceFeature.pinChat.pattern, WorkspaceFeature.sendMessage.pattern]
            case .invite: [WorkspaceFeature.inviteMembers.pattern]
            case .bank: [WorkspaceFeature.bankAccounts.pattern]
            case .about: [WorkspaceFeature.about.pattern]
            }
        }
    }

    public enum Editing: Sendable, Hashable {
        /// Writing a message in the selected chat.
        case message(TextField)
        /// Typing into a field of the invite form (the draft is saved on every key).
        case invite(InviteDraft.Field)
    }

    public enum Invitation: Sendable, Hashable {
        case idle
        case submitting
        /// The server refused it; its words, and the field at fault.
        case refused(message: String, field: InviteDraft.Field?)
        /// Could not be submitted (offline, or the server could not be reached).
        case failed(OfflineMessage)
        case invited(InvitedMember)
    }

    public enum BankAccounts: Sendable, Hashable {
        case notLoaded
        case loading
        case blocked(OfflineMessage)
        case loaded([WorkspaceBankAccount])
        case failed(OfflineMessage)
    }

    public struct State: Sendable, Hashable {
        public var pane: Pane = .chat
        /// Pinned chats first.
        public var chats: [WorkspaceChat] = []
        /// Every chat's messages, oldest first.
        public var messages: [WorkspaceMessage] = []
        /// Messages that are not in sync, by id (pattern B's markers and errors).
        public var statuses: [String: RecordSyncStatus] = [:]
        /// The queue of writes, for the status line.
        public var queue: OutboxSnapshot?
        public var selectedChat: String?
        public var selectedMessage: String?
        /// How many messages the tablet has posted, to number them.
        public var tabletMessages = 0
        public var editing: Editing?
        public var invite = InviteDraft()
        public var inviteField: InviteDraft.Field = .email
        /// The draft as last saved on the device.
        public var savedDraft: InviteDraft?
        public var invitation: Invitation = .idle
        public var bank: BankAccounts = .notLoaded
        /// Set when the background delivery of queued writes stopped.
        public var deliveryProblem: String?
        public init() {}

        /// The selected chat's messages, oldest first.
        public var thread: [WorkspaceMessage] {
            guard let chat = selectedChat else { return [] }
            return messages.filter { $0.chat == chat }
        }

        public func status(of message: WorkspaceMessage) -> RecordSyncStatus { statuses[message.id] ?? .synced }

        /// Chats with a refused message: the "brick road" to the error.
        public var chatsNeedingAttention: Set<String> {
            Set(messages.filter { statuses[$0.id]?.failure != nil }.map(\.chat))
        }
    }

    public let title = "Chat & workspace"
    public let outbox: Outbox
    public let drainer: OutboxDrainer
    public let form: BlockingForm
    /// The chat's messages from the server, pulled when its live stream says they changed.
    public let sync: SyncEngine
    private let bankAccounts: BlockingRead<[WorkspaceBankAccount]>
    private let environment: DemoEnvironment
    private let state = Locked(State())
    private let drafts: AsyncStream<InviteDraft>
    private let draftContinuation: AsyncStream<InviteDraft>.Continuation

    public init(environment: DemoEnvironment) {
        self.environment = environment
        self.outbox = Outbox(database: environment.database, operations: WorkspaceOperations.all, now: environment.now)
        self.drainer = OutboxDrainer(outbox: outbox, baseURL: environment.serverURL, transport: environment.rawTransport,
                                     connectivity: environment.connectivity, requestTimeout: .seconds(5))
        self.sync = SyncEngine(database: environment.database, baseURL: environment.serverURL, transport: environment.rawTransport,
                               connectivity: environment.connectivity, collections: [WorkspaceSync.messages], outbox: outbox,
                               eventsPath: "api/sync/events")
        self.form = BlockingForm(id: "workspace.invite-members", database: environment.database, baseURL: environment.serverURL,
                                 transport: environment.transport, connectivity: environment.connectivity, now: environment.now)
        self.bankAccounts = BlockingRead(
            request: TransportRequest(url: environment.url("api/workspace/bank-accounts"), timeout: .seconds(5)),
            transport: environment.transport, connectivity: environment.connectivity
        ) { response in
            try JSONDecoder().decode(BankAccountsResponse.self, from: response.body).accounts
        }
        (drafts, draftContinuation) = AsyncStream.makeStream(of: InviteDraft.self, bufferingPolicy: .bufferingNewest(1))
    }

    public var snapshot: State { state.current }
    public var capturesText: Bool { state.withLock { $0.editing != nil } }

    // MARK: Starting

    /// Loads chats, messages and the saved draft from the device, then starts delivering queued
    /// writes and following the queue in the background. Sends nothing itself.
    public func start() async {
        try? DemoMigrations.migrate(environment.database.writer)
        let now = environment.now()
        try? await environment.database.writer.write { db in try WorkspaceStore.seedIfEmpty(now: now, db) }
        // Rows, markers and the queue together, so the first frame already shows what is pending.
        await refresh()
        let draft = try? await form.loadDraft(InviteDraft.self)
        state.withLock { state in
            if let draft {
                state.invite = draft
                state.savedDraft = draft
            }
        }
        environment.spawn { [self] in await deliver() }
        environment.spawn { [self] in await followQueue() }
        environment.spawn { [self] in await followMessageStatuses() }
        environment.spawn { [self] in await saveDrafts() }
        environment.spawn { [self] in await followSync() }
        environment.spawn { [sync] in try? await sync.run() }
        environment.changed()
    }

    /// Shows what each pull brought: messages from the user's other devices, as they arrive.
    /// Rows only: the markers and the queue have observers of their own, and a copy of them
    /// read here could land after a newer one and bring back a marker already cleared.
    private func followSync() async {
        for await progress in sync.progress() where !progress.isPulling && progress.rows > 0 {
            reload()
            environment.changed()
        }
    }

    /// The tablet posts a message to the selected chat, through the server, as if the user had
    /// written it there: it appears here by sync (at once online, on reconnecting otherwise).
    public func postFromOtherDevice() async {
        guard let device = environment.otherDevice, let chat = snapshot.selectedChat else { return }
        let count = state.withLock { state in
            state.tabletMessages += 1
            return state.tabletMessages
        }
        do {
            _ = try await device.post("Written on my tablet (\(count))", to: chat, at: environment.now())
            environment.toast("Your tablet sent a message.")
        } catch {
            environment.toast("Your tablet could not reach the server.")
        }
    }

    /// Reads chats and messages from the device. Never waits for the network.
    public func reload() {
        let (chats, messages) = (try? environment.database.writer.read { db in
            (try WorkspaceStore.chats(db), try WorkspaceStore.messages(db))
        }) ?? ([], [])
        state.withLock { state in
            state.chats = chats
            state.messages = messages
            if state.selectedChat == nil || !chats.contains(where: { $0.id == state.selectedChat }) {
                state.selectedChat = chats.first?.id
            }
            let thread = state.thread
            if state.selectedMessage == nil || !thread.contains(where: { $0.id == state.selectedMessage }) {
                state.selectedMessage = thread.last?.id
            }
        }
        environment.changed()
    }

    private func deliver() async {
        do {
            try await drainer.run()
        } catch is CancellationError {
        } catch {
            state.withLock { $0.deliveryProblem = String(describing: error) }
            environment.changed()
        }
    }

    private func followQueue() async {
        do {
            for try await queue in outbox.snapshots() {
                state.withLock { $0.queue = queue }
                environment.changed()
            }
        } catch {}
    }

    /// Pending markers and errors; acknowledgement and dismissal hooks change the local rows in
    /// the same transaction, so the rows are read again with them.
    private func followMessageStatuses() async {
        do {
            for try await statuses in outbox.syncStatusUpdates(in: WorkspaceOperations.messages) {
                state.withLock { $0.statuses = statuses.filter { $0.value != .synced } }
                reload()
            }
        } catch {}
    }

    /// Saves the invite draft one version at a time, in typing order.
    private func saveDrafts() async {
        for await draft in drafts {
            do {
                try await form.saveDraft(draft)
                state.withLock { $0.savedDraft = draft }
            } catch {
                environment.toast("The draft could not be saved on this device.")
            }
            environment.changed()
        }
    }

    // MARK: Pattern A: pin a chat

    /// Pins or unpins `chat`: changed on the device and queued in one transaction; returns at once.
    public func togglePin(chat: String) async throws {
        guard let current = snapshot.chats.first(where: { $0.id == chat }) else { return }
        let pinned = !current.pinned
        try await outbox.write(WorkspaceOperations.pinChat, path: WorkspaceOperations.pinPath(chat), json: PinPayload(pinned: pinned),
                               record: RecordKey(WorkspaceOperations.pins, chat)) { db in
            try WorkspaceStore.setPinned(pinned, chat: chat, db)
        }
        await refresh()
    }

    // MARK: Pattern B: send and delete messages

    /// Sends `text` to the selected chat: shown at once, delivered when the server can be reached.
    @discardableResult
    public func send(_ text: String) async throws -> WorkspaceMessage? {
        guard let chat = snapshot.selectedChat, !text.isEmpty else { return nil }
        let message = WorkspaceMessage(id: UUID().uuidString.lowercased(), chat: chat, author: WorkspaceStore.me,
                                       text: text, sentAt: environment.now())
        let payload = MessagePayload(chat: chat, author: message.author, text: text, sentAt: message.sentAt)
        let body = try JSONEncoder.demo.encode(payload)
        try await outbox.write(WorkspaceOperations.sendMessage, path: WorkspaceOperations.messagePath(message.id), payload: body,
                               record: RecordKey(WorkspaceOperations.messages, message.id)) { db in
            try WorkspaceStore.insert(message, db)
        }
        state.withLock { $0.selectedMessage = message.id }
        await refresh()
        return message
    }

    /// Deletes one of the user's messages: struck through until the server confirms. A message that
    /// never left the device goes at once; a refused one is dismissed instead.
    public func delete(message id: String) async throws {
        let current = snapshot
        guard let message = current.messages.first(where: { $0.id == id }) else { return }
        guard message.isMine else {
            environment.toast("You can delete only your own messages.")
            return
        }
        if current.status(of: message).failure != nil {
            try await dismissError(message: id)
            return
        }
        let outbox = outbox
        try await environment.database.writer.write { db in
            let entry = try outbox.enqueue(WorkspaceOperations.deleteMessage, path: WorkspaceOperations.messagePath(id),
                                           record: RecordKey(WorkspaceOperations.messages, id), in: db)
            // Cancelled against its unsent add: the server never saw it, so it just goes.
            if entry == nil { try WorkspaceStore.deleteMessage(id: id, db) }
        }
        await refresh()
    }

    /// Dismisses the error on a refused message: a refused message goes, a refused delete's
    /// marker clears.
    public func dismissError(message id: String) async throws {
        try await outbox.dismissError(on: RecordKey(WorkspaceOperations.messages, id))
        await refresh()
    }

    /// Reads the rows, the markers and the queue right after a local change, so the screen shows
    /// the change and its marker together (the observations follow a moment later).
    private func refresh() async {
        let statuses = try? await outbox.syncStatuses(in: WorkspaceOperations.messages)
        let queue = try? await outbox.snapshot()
        state.withLock { state in
            if let statuses { state.statuses = statuses.filter { $0.value != .synced } }
            if let queue { state.queue = queue }
        }
        reload()
    }

    // MARK: Pattern C: invite members

    /// Applies a key to the focused invite field and queues the draft to be saved.
    private func typeInvite(_ field: InviteDraft.Field, _ key: Key) {
        var draft: InviteDraft?
        state.withLock { state in
            var text = TextField(state.invite[field], maxLength: 80)
            switch text.apply(key) {
            case .editing:
                state.invite[field] = text.text
                draft = state.invite
                if case .refused = state.invitation { state.invitation = .idle }
            case .submitted, .cancelled:
                state.editing = nil
            }
        }
        if let draft { draftContinuation.yield(draft) }
    }

    /// Replaces the form's content (as typing does) and saves the draft.
    public func updateInvite(_ draft: InviteDraft) async throws {
        state.withLock { $0.invite = draft }
        try await form.saveDraft(draft)
        state.withLock { $0.savedDraft = draft }
        environment.changed()
    }

    /// Submits the invitation. Offline it is refused with the standard message before any request
    /// is built; a server refusal is shown in the server's words; the draft is kept until the
    /// server accepts.
    public func submitInvite() async {
        let availability = form.availability
        guard availability.canSubmit else {
            let message = availability.message ?? .noInternetConnection
            state.withLock { $0.invitation = .failed(message) }
            environment.toast(message)
            return
        }
        let draft = state.withLock { state in
            state.invitation = .submitting
            return state.invite
        }
        environment.changed()
        let body = InvitedMember(email: draft.email, name: draft.name, role: draft.role)
        do {
            let response = try await form.submit(WorkspaceOperations.inviteMember, path: "/api/workspace/invitations", json: body)
            let member = (try? JSONDecoder().decode(InvitedMember.self, from: response.body)) ?? body
            state.withLock { state in
                state.invitation = .invited(member)
                state.invite = InviteDraft()
                state.savedDraft = nil
                state.editing = nil
            }
        } catch let error as NetworkRequiredError {
            state.withLock { $0.invitation = .failed(error.message) }
            environment.toast(error.message)
        } catch let error as FormSubmissionError {
            if error.failure.kind == .rejected, let response = error.response,
               let problem = try? JSONDecoder().decode(InvitationProblem.self, from: response.body) {
                let field = problem.field.flatMap(InviteDraft.Field.init(rawValue:))
                state.withLock { state in
                    state.invitation = .refused(message: problem.message, field: field)
                    if let field { state.inviteField = field }
                }
            } else {
                state.withLock { $0.invitation = .failed(error.message) }
                environment.toast(error.message)
            }
        } catch {
            state.withLock { $0.invitation = .failed(.tryAgainWhenOnline) }
            environment.toast(.tryAgainWhenOnline)
        }
        environment.changed()
    }

    // MARK: Pattern D: bank accounts

    /// Loads the accounts from the server; blocked, sending nothing, while offline.
    public func loadBankAccounts() async {
        state.withLock { $0.bank = .loading }
        environment.changed()
        let loaded: BankAccounts = switch await bankAccounts.load() {
        case .blocked(let message): .blocked(message)
        case .loaded(let accounts): .loaded(accounts)
        case .failed(let message): .failed(message)
        }
        state.withLock { $0.bank = loaded }
        environment.changed()
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        let reload = state.withLock { state -> Bool in
            guard state.pane == .bank else { return false }
            switch state.bank {
            case .blocked, .failed: return status.isReachable
            // Never show accounts that can no longer be kept current.
            case .loaded: return !status.isReachable
            case .notLoaded, .loading: return false
            }
        }
        if reload { environment.spawn { [self] in await loadBankAccounts() } }
    }

    /// Opens `pane`; the bank accounts are fetched each time their page opens.
    public func open(_ pane: Pane) {
        let opened = state.withLock { state -> Bool in
            defer { state.pane = pane }
            return state.pane != pane
        }
        if pane == .bank, opened { environment.spawn { [self] in await loadBankAccounts() } }
        environment.changed()
    }

    public func handle(_ key: Key) -> Bool {
        let current = snapshot
        if let editing = current.editing {
            handleEditing(editing, key)
            return true
        }
        switch key {
        case .character("c"): open(.chat)
        case .character("i"): open(.invite)
        case .character("b"): open(.bank)
        case .character("a"): open(.about)
        case .left, .right:
            let panes = Pane.allCases
            let index = panes.firstIndex(of: current.pane) ?? 0
            open(panes[(index + (key == .right ? 1 : panes.count - 1)) % panes.count])
        default:
            switch current.pane {
            case .chat: return handleChat(key, current)
            case .invite: return handleInvite(key, current)
            case .bank: return handleBank(key)
            case .about: return false
            }
        }
        return true
    }

    private func handleChat(_ key: Key, _ current: State) -> Bool {
        switch key {
        case .up, .down:
            let chats = current.chats
            guard let index = chats.firstIndex(where: { $0.id == current.selectedChat }) else { return true }
            let next = key == .up ? max(0, index - 1) : min(chats.count - 1, index + 1)
            state.withLock { state in
                state.selectedChat = chats[next].id
                state.selectedMessage = state.thread.last?.id
            }
        case .character("k"), .character("j"):
            let thread = current.thread
            guard let index = thread.firstIndex(where: { $0.id == current.selectedMessage }) else { return true }
            let next = key == .character("k") ? max(0, index - 1) : min(thread.count - 1, index + 1)
            state.withLock { $0.selectedMessage = thread[next].id }
        case .character("p"):
            guard let chat = current.selectedChat else { return true }
            environment.spawn { [self] in await report { try await togglePin(chat: chat) } }
        case .character("m"), .enter:
            state.withLock { $0.editing = .message(TextField(maxLength: 200)) }
        case .character("t") where environment.otherDevice != nil:
            environment.spawn { [self] in await postFromOtherDevice() }
        case .character("d"):
            guard let id = current.selectedMessage else { return true }
            environment.spawn { [self] in await report { try await delete(message: id) } }
        case .character("x"):
            let failed = current.thread.last { current.status(of: $0).failure != nil }
            let target = current.selectedMessage.flatMap { id in current.messages.first { $0.id == id } }
                .flatMap { current.status(of: $0).failure != nil ? $0 : nil } ?? failed
            guard let target else { return true }
            environment.spawn { [self] in await report { try await dismissError(message: target.id) } }
        default:
            return false
        }
        environment.changed()
        return true
    }

    private func handleInvite(_ key: Key, _ current: State) -> Bool {
        let fields = InviteDraft.Field.allCases
        switch key {
        case .up, .down:
            let index = fields.firstIndex(of: current.inviteField) ?? 0
            let next = key == .up ? max(0, index - 1) : min(fields.count - 1, index + 1)
            state.withLock { $0.inviteField = fields[next] }
        case .enter, .character("e"):
            state.withLock { $0.editing = .invite($0.inviteField) }
        case .character("s"):
            environment.spawn { [self] in await submitInvite() }
        default:
            return false
        }
        environment.changed()
        return true
    }

    private func handleBank(_ key: Key) -> Bool {
        guard key == .character("f") else { return false }
        environment.spawn { [self] in await loadBankAccounts() }
        return true
    }

    private func handleEditing(_ editing: Editing, _ key: Key) {
        switch editing {
        case .message(var field):
            switch field.apply(key) {
            case .editing:
                state.withLock { $0.editing = .message(field) }
            case .submitted(let text):
                state.withLock { $0.editing = nil }
                environment.spawn { [self] in await report { try await send(text) } }
            case .cancelled:
                state.withLock { $0.editing = nil }
            }
        case .invite(let field):
            typeInvite(field, key)
        }
        environment.changed()
    }

    /// Runs a local write; a failure (a full disk) is said, never swallowed.
    private func report(_ work: () async throws -> Void) async {
        do {
            try await work()
        } catch {
            environment.toast("This change could not be saved on this device.")
        }
    }

    public func render(_ context: RenderContext) -> ScreenContent {
        WorkspaceScreen.render(snapshot, context, now: environment.now())
    }
}

/// The workspace's features and the flow chart's answers for each, so the pattern each one
/// follows is decided by ``OfflinePattern/classify(_:)``, not by hand.
public enum WorkspaceFeature: String, Sendable, Hashable, CaseIterable {
    case about, pinChat, sendMessage, inviteMembers, bankAccounts

    public var traits: FeatureTraits {
        switch self {
        case .about: FeatureTraits(talksToServer: false)
        case .pinChat: FeatureTraits(talksToServer: true, request: .write)
        case .sendMessage: FeatureTraits(talksToServer: true, request: .write, userNeedsConfirmation: true)
        case .inviteMembers: FeatureTraits(talksToServer: true, request: .write, isForm: true, responsePredictable: false)
        case .bankAccounts: FeatureTraits(talksToServer: true, request: .read, staleDataAcceptable: false)
        }
    }

    public var pattern: OfflinePattern { OfflinePattern.classify(traits) }

    public var title: String {
        switch self {
        case .about: "About page"
        case .pinChat: "Pin a chat"
        case .sendMessage: "Send a message"
        case .inviteMembers: "Invite members"
        case .bankAccounts: "Bank accounts"
        }
    }
}
