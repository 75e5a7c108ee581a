import Foundation
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
/// The screen is three parts: ``State``, ``Event`` and ``Effect`` (WorkspaceState.swift), every
/// change of the state in ``WorkspaceReducer``, and the shell that turns effects into I/O
/// (WorkspaceShell.swift). This model owns the ``ScreenStore`` whose one loop runs them, and
/// turns the screen's public calls into events.
public final class WorkspaceModel: Scenario {
    public let title = "Chat & workspace"
    public let outbox: Outbox
    public let drainer: OutboxDrainer
    public let form: BlockingForm
    /// The chat's messages from the server, pulled when its live stream says they changed.
    public let sync: SyncEngine
    private let environment: DemoEnvironment
    private let store: ScreenStore<WorkspaceReducer>
    private let shell: WorkspaceShell

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
        let bankAccounts = BlockingRead<[WorkspaceBankAccount]>(
            request: TransportRequest(url: environment.url("api/workspace/bank-accounts"), timeout: .seconds(5)),
            transport: environment.transport, connectivity: environment.connectivity
        ) { response in
            try JSONDecoder().decode(BankAccountsResponse.self, from: response.body).accounts
        }
        shell = WorkspaceShell(environment: environment, outbox: outbox, drainer: drainer, form: form, sync: sync, bankAccounts: bankAccounts)
        var initial = State()
        initial.hasOtherDevice = environment.otherDevice != nil
        store = ScreenStore(initial) { [environment] in environment.changed() }
    }

    public var snapshot: State { store.current }
    public var capturesText: Bool { store.current.editing != nil }
    public var toast: String? { store.current.toast }

    /// Sends `event` to the screen's loop; returns at once.
    public func send(_ event: Event) {
        store.send(event)
    }

    // MARK: Starting

    /// Starts the screen's loop in the demo's task group, which owns it and cancels it on exit,
    /// and returns once the device's rows, the queue and the connection's status are in the
    /// state. Sends nothing to the server itself.
    public func start() async {
        environment.spawn { [store, shell] in await store.run(shell) }
        await store.sendAndWait(.started)
        await store.first { $0.queue != nil && $0.connectivity != nil }
    }

    /// The tablet posts a message to the selected chat, through the server, as if the user had
    /// written it there: it appears here by sync (at once online, on reconnecting otherwise).
    public func postFromOtherDevice() async {
        await store.sendAndWait(.postFromOtherDevice)
    }

    /// The tablet changes the selected message's text, through the server: a message this
    /// device edited meanwhile then shows the conflict.
    public func editFromOtherDevice() async {
        await store.sendAndWait(.editFromOtherDevice)
    }

    // MARK: Pattern A: pin a chat

    /// Pins or unpins `chat`: changed on the device and queued in one transaction. Returns once
    /// the write committed; the chat list shows it when the rows' observation delivers it.
    public func togglePin(chat: String) async {
        await store.sendAndWait(.togglePin(chat: chat))
    }

    // MARK: Pattern B: send and delete messages

    /// Sends `text` to the selected chat: shown at once, delivered when the server can be reached.
    /// Returns the message once the chat shows it; nil when nothing was written.
    @discardableResult
    public func send(_ text: String) async -> WorkspaceMessage? {
        guard let id = await store.sendAndWait(.write(text)).writtenMessage else { return nil }
        return await store.first { $0.messages.contains { $0.id == id } }.messages.first { $0.id == id }
    }

    /// Changes the text of one of the user's messages: shown at once (once the rows' observation
    /// delivers it), marked pending until the server has it.
    public func edit(message id: String, to text: String) async {
        await store.sendAndWait(.editMessage(id: id, text: text))
    }

    /// Deletes one of the user's messages: struck through until the server confirms. A message that
    /// never left the device goes at once; a refused one is dismissed instead.
    public func delete(message id: String) async {
        await store.sendAndWait(.delete(message: id))
    }

    /// Dismisses the error on a refused message: a refused message goes, a refused delete's
    /// marker clears.
    public func dismissError(message id: String) async {
        await store.sendAndWait(.dismissError(message: id))
    }

    // MARK: Pattern C: invite members

    /// Replaces the form's content (as typing does) and saves the draft; returns once it is saved
    /// (or the save failed, which the screen says).
    public func updateInvite(_ draft: InviteDraft) async {
        await store.sendAndWait(.inviteReplaced(draft))
        await store.first { !$0.savingDraft }
    }

    /// Submits the invitation, and returns once it was answered. Offline it is refused with the
    /// standard message before any request is built; a server refusal is shown in the server's
    /// words; the draft is kept until the server accepts.
    public func submitInvite() async {
        await store.sendAndWait(.submitInvite)
        await store.first { $0.invitation != .submitting }
    }

    // MARK: Pattern D: bank accounts

    /// Loads the accounts from the server; blocked, sending nothing, while offline.
    public func loadBankAccounts() async {
        await store.sendAndWait(.loadBankAccounts)
    }

    // MARK: Scenario

    public func connectivityChanged(_ status: ConnectivityStatus) {
        send(.connectivity(status))
    }

    /// Opens `pane`; the bank accounts are fetched each time their page opens.
    public func open(_ pane: Pane) {
        send(.open(pane))
    }

    /// Takes `key` in if the state its turn finds has a use for it, and returns once it was
    /// reduced and its effects ran (a request it started may still be on its way): the next key
    /// is then routed by the state this one left.
    public func handle(_ key: Key) async -> Bool {
        await store.offer(.key(key)) { WorkspaceReducer.handles(key, $0) }
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
