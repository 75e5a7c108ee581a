import Foundation
import GRDB
public import OfflineCore
public import OfflineKit

/// The chat and workspace scenario: one feature per offline UX pattern.
///
/// - About (None): no server at all.
/// - Pin a chat (A): the local change and the queued write commit together; nothing else shows.
/// - Send, edit and delete messages (B): shown at once; pending ones dimmed, pending deletes
///   struck through, refusals shown with their error until dismissed. A message edited here and
///   on the user's tablet before the edit arrived says so, and keeps the text written here.
/// - Invite members (C): a ``BlockingForm`` whose draft is saved as the user types; submit is
///   disabled offline and the server's validation problems are shown in words.
/// - Bank accounts (D): a ``BlockingRead``: blocked with the standard message offline.
///
/// Queued writes go through an ``Outbox`` drained in the background by an ``OutboxDrainer``.
/// Every change of the state goes through ``WorkspaceReducer``; this model is the shell that
/// reads the device, writes to it and talks to the server as the reducer asks, sending the
/// outcomes back as events.
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
        /// Changing the text of one of the user's messages.
        case editMessage(id: String, TextField)
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
        /// Messages the user edited that were also changed elsewhere, by id, until dismissed.
        public var conflicts: [String: SyncConflict] = [:]
        /// The queue of writes, for the status line.
        public var queue: OutboxSnapshot?
        /// Where pulls stand, for the status line.
        public var sync: SyncProgress?
        public var selectedChat: String?
        public var selectedMessage: String?
        /// A message just written here and selected, until a read of the rows includes it: a read
        /// that started before the write must not move the selection off it.
        var writtenMessage: String?
        /// How many messages the tablet has posted or edited, to number them.
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
        /// The user has a tablet the demo can post from.
        var hasOtherDevice = false
        /// Increases with every load of the bank accounts, so a late answer never replaces a
        /// newer one.
        var bankGeneration = 0
        /// A save of the invite draft is running.
        var savingDraft = false
        /// The draft changed since the running save started: saved when it ends.
        var draftUnsaved = false
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

        /// Whether `x` has something to dismiss in the selected chat: a refusal or a conflict.
        public var canDismiss: Bool {
            thread.contains { status(of: $0).failure != nil || conflicts[$0.id] != nil }
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
    private let store: ScreenStore<WorkspaceReducer>
    private let reloading = Locked(())

    public init(environment: DemoEnvironment) {
        self.environment = environment
        self.outbox = Outbox(database: environment.database, operations: WorkspaceOperations.all, now: environment.now)
        self.sync = SyncEngine(database: environment.database, baseURL: environment.serverURL, transport: environment.rawTransport,
                               connectivity: environment.connectivity, collections: [WorkspaceSync.messages(me: environment.user)],
                               outbox: outbox)
        // The tablet's edits made while this device was offline come down before this device's
        // own go up: an edit both made is then seen, and said.
        self.drainer = OutboxDrainer(outbox: outbox, baseURL: environment.serverURL, transport: environment.rawTransport,
                                     connectivity: environment.connectivity, requestTimeout: .seconds(5), pullFirst: sync)
        self.form = BlockingForm(id: "workspace.invite-members", database: environment.database, baseURL: environment.serverURL,
                                 transport: environment.transport, connectivity: environment.connectivity, now: environment.now)
        self.bankAccounts = BlockingRead(
            request: TransportRequest(url: environment.url("api/workspace/bank-accounts"), timeout: .seconds(5)),
            transport: environment.transport, connectivity: environment.connectivity
        ) { response in
            try JSONDecoder().decode(BankAccountsResponse.self, from: response.body).accounts
        }
        var initial = State()
        initial.hasOtherDevice = environment.otherDevice != nil
        store = ScreenStore(initial)
    }

    public var snapshot: State { store.current }
    public var capturesText: Bool { store.current.editing != nil }

    // MARK: The shell

    /// Applies `event`, asks for a redraw, and runs the effects it calls for in the background,
    /// in order.
    public func send(_ event: Event) {
        let effects = apply(event)
        guard !effects.isEmpty else { return }
        environment.spawn { [self] in
            for effect in effects { await report(effect) }
        }
    }

    /// Applies `event` and waits for the effects it calls for, in order.
    private func sendAndWait(_ event: Event) async {
        for effect in apply(event) { await report(effect) }
    }

    private func apply(_ event: Event) -> [Effect] {
        let effects = store.send(event)
        environment.changed()
        return effects
    }

    private func perform(_ effect: Effect) async throws {
        switch effect {
        case .togglePin(let chat): try await togglePin(chat: chat)
        case .sendMessage(let text): try await send(text)
        case .editMessage(let id, let text): try await edit(message: id, to: text)
        case .dismissConflict(let conflict): try await sync.dismiss(conflict); await refresh()
        case .editFromTablet(let id, let number): await edit(id, fromTablet: number)
        case .deleteMessage(let id): try await enqueueDelete(id)
        case .dismissError(let id): try await dismissError(message: id)
        case .postFromTablet(let chat, let number): await post(number, to: chat)
        case .saveDraft(let draft): try await saveDraft(draft)
        case .submitInvite: await submitInvite()
        case .sendInvitation(let draft): await sendInvitation(draft)
        case .loadBankAccounts(let generation): await loadBankAccounts(generation)
        case .toast(let text): environment.toast(text)
        }
    }

    /// Runs `effect`; a local write that fails (a full disk) is said, never swallowed.
    private func report(_ effect: Effect) async {
        do {
            try await perform(effect)
        } catch {
            if case .saveDraft = effect { return }  // Said by the reducer, with the save's end.
            environment.toast("This change could not be saved on this device.")
        }
    }

    // MARK: Starting

    /// Loads chats, messages and the saved draft from the device, then starts delivering queued
    /// writes and following the queue in the background. Sends nothing itself.
    public func start() async {
        try? await DemoMigrations.migrate(environment.database.writer)
        let now = environment.now()
        try? await environment.database.writer.write { db in try WorkspaceStore.seedIfEmpty(now: now, db) }
        // Rows, markers and the queue together, so the first frame already shows what is pending.
        // Read here once, before their observation starts: its values all come later.
        if let state = try? await outbox.syncState(in: WorkspaceOperations.messages) { send(.outboxRead(state)) }
        reload()
        if let draft = try? await form.loadDraft(InviteDraft.self) {
            send(.draftRestored(draft))
        }
        environment.spawn { [self] in await deliver() }
        environment.spawn { [self] in await followOutbox() }
        environment.spawn { [self] in await followSync() }
        environment.spawn { [sync] in try? await sync.run() }
        environment.changed()
    }

    /// Shows what each pull brought: messages from the user's other devices, as they arrive, and
    /// where pulls stand on the status line.
    /// Rows only: the markers and the queue have observers of their own, and a copy of them
    /// read here could land after a newer one and bring back a marker already cleared.
    ///
    /// Read after every pull, whatever it brought: the progress stream keeps only its newest
    /// value, so a pull that brought rows and the empty one right after it (back online, the
    /// reconnection's pull and the live stream's) can reach here as the empty one alone.
    private func followSync() async {
        for await progress in sync.progress() {
            send(.syncProgress(progress))
            if !progress.isPulling { reload() }
        }
    }

    /// The tablet posts a message to the selected chat, through the server, as if the user had
    /// written it there: it appears here by sync (at once online, on reconnecting otherwise).
    public func postFromOtherDevice() async {
        await sendAndWait(.postFromOtherDevice)
    }

    private func post(_ number: Int, to chat: String) async {
        guard let device = environment.otherDevice else { return }
        do {
            _ = try await device.post("Written on my tablet (\(number))", to: chat, at: environment.now())
            environment.toast("Your tablet sent a message.")
        } catch {
            environment.toast("Your tablet could not reach the server.")
        }
    }

    /// The tablet changes the selected message's text, through the server: a message this
    /// device edited meanwhile then shows the conflict.
    public func editFromOtherDevice() async {
        await sendAndWait(.editFromOtherDevice)
    }

    private func edit(_ id: String, fromTablet number: Int) async {
        guard let device = environment.otherDevice else { return }
        do {
            if try await device.edit(id, text: "Changed on my tablet (\(number))") {
                environment.toast("Your tablet changed a message.")
            } else {
                environment.toast("Your tablet does not have this message yet.")
            }
        } catch {
            environment.toast("Your tablet could not reach the server.")
        }
    }

    /// Reads chats, messages and the conflicts to show, in one read. Never waits for the network.
    ///
    /// Reloads asked for at once (after a local change, beside the outbox's and the sync's
    /// observations) read and send in turn: one that read earlier can never send after one that
    /// read later, and bring back rows from before a change (a pinned chat shown unpinned).
    public func reload() {
        reloading.withLock { _ in
            let (chats, messages, conflicts) = (try? environment.database.writer.read { db in
                (try WorkspaceStore.chats(db), try WorkspaceStore.messages(db), try SyncEngine.conflicts(in: WorkspaceOperations.messages, db))
            }) ?? ([], [], [])
            send(.rowsRead(chats: chats, messages: messages, conflicts: conflicts))
        }
    }

    private func deliver() async {
        do {
            try await drainer.run()
        } catch is CancellationError {
        } catch {
            send(.deliveryStopped(String(describing: error)))
        }
    }

    /// Pending markers, errors and the queue, from one observation so that the queue's line and
    /// the markers never disagree; acknowledgement and dismissal hooks change the local rows in
    /// the same transaction, so the rows are read again with them.
    private func followOutbox() async {
        do {
            for try await state in outbox.syncStateUpdates(in: WorkspaceOperations.messages) {
                send(.outboxRead(state))
                reload()
            }
        } catch {}
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
        let payload = MessagePayload(chat: chat, text: text, sentAt: message.sentAt)
        let body = try JSONEncoder.demo.encode(payload)
        try await outbox.write(WorkspaceOperations.sendMessage, path: WorkspaceOperations.messagePath(message.id), payload: body,
                               record: RecordKey(WorkspaceOperations.messages, message.id)) { db in
            try WorkspaceStore.insert(message, db)
        }
        send(.messageWritten(id: message.id))
        await refresh()
        return message
    }

    /// Changes the text of one of the user's messages: shown at once, marked pending until the
    /// server has it.
    public func edit(message id: String, to text: String) async throws {
        guard !text.isEmpty else { return }
        try await outbox.write(WorkspaceOperations.editMessage, path: WorkspaceOperations.messagePath(id), json: ["text": text],
                               record: RecordKey(WorkspaceOperations.messages, id)) { db in
            try WorkspaceStore.setText(text, message: id, db)
        }
        await refresh()
    }

    /// Deletes one of the user's messages: struck through until the server confirms. A message that
    /// never left the device goes at once; a refused one is dismissed instead.
    public func delete(message id: String) async throws {
        for effect in apply(.delete(message: id)) { try await perform(effect) }
    }

    private func enqueueDelete(_ id: String) async throws {
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

    /// Reads the rows right after a local change. The markers and the queue come only from their
    /// observation, which delivers its values in order: read here too, a state read after the
    /// change could be overwritten by the observation's value from just before it, and a pending
    /// message showed without its marker (seen in a clean-clone run).
    private func refresh() async {
        reload()
    }

    // MARK: Pattern C: invite members

    /// Replaces the form's content (as typing does) and saves the draft.
    ///
    /// - Throws: when the draft could not be saved on this device.
    public func updateInvite(_ draft: InviteDraft) async throws {
        for effect in apply(.inviteReplaced(draft)) { try await perform(effect) }
    }

    /// Saves one version of the draft; the reducer hears how it ended, and may ask for the next.
    private func saveDraft(_ draft: InviteDraft) async throws {
        do {
            try await form.saveDraft(draft)
        } catch {
            await sendAndWait(.draftSaveFinished(draft, saved: false))
            throw error
        }
        await sendAndWait(.draftSaveFinished(draft, saved: true))
    }

    /// Submits the invitation. Offline it is refused with the standard message before any request
    /// is built; a server refusal is shown in the server's words; the draft is kept until the
    /// server accepts.
    public func submitInvite() async {
        await sendAndWait(.submitInvite(form.availability))
    }

    private func sendInvitation(_ draft: InviteDraft) async {
        let body = InvitedMember(email: draft.email, name: draft.name, role: draft.role)
        do {
            let response = try await form.submit(WorkspaceOperations.inviteMember, path: "/api/workspace/invitations", json: body)
            send(.invited((try? JSONDecoder().decode(InvitedMember.self, from: response.body)) ?? body))
        } catch let error as NetworkRequiredError {
            send(.inviteFailed(error.message))
        } catch let error as FormSubmissionError {
            if error.failure.kind == .rejected, let response = error.response,
               let problem = try? JSONDecoder().decode(InvitationProblem.self, from: response.body) {
                send(.inviteRefused(message: problem.message, field: problem.field.flatMap(InviteDraft.Field.init(rawValue:))))
            } else {
                send(.inviteFailed(error.message))
            }
        } catch {
            send(.inviteFailed(.tryAgainWhenOnline))
        }
    }

    // MARK: Pattern D: bank accounts

    /// Loads the accounts from the server; blocked, sending nothing, while offline.
    public func loadBankAccounts() async {
        await sendAndWait(.loadBankAccounts)
    }

    private func loadBankAccounts(_ generation: Int) async {
        let loaded: BankAccounts = switch await bankAccounts.load() {
        case .blocked(let message): .blocked(message)
        case .loaded(let accounts): .loaded(accounts)
        case .failed(let message): .failed(message)
        }
        send(.bankAccountsLoaded(generation: generation, loaded))
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    /// Opens `pane`; the bank accounts are fetched each time their page opens.
    public func open(_ pane: Pane) {
        send(.open(pane))
    }

    public func handle(_ key: Key) -> Bool {
        guard WorkspaceReducer.handles(key, store.current) else { return false }
        send(.key(key))
        return true
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
