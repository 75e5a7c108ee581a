import Foundation
public import OfflineCore
public import OfflineKit

// The workspace's state, the events that change it and the effects it asks for: all of it goes
// through ``WorkspaceReducer``.
extension WorkspaceModel {
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
        /// The connectivity monitor's last status; nil until the first arrives.
        public var connectivity: ConnectivityStatus?
        /// The message shown at the bottom of the screen until it fades or is dismissed.
        public var toast: String?
        /// Numbers toasts, so a fade meant for an older one leaves a newer one alone.
        var toastSerial = 0
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

    /// What changes the workspace's state: all of it goes through ``WorkspaceReducer``.
    public enum Event: Sendable, Hashable {
        case key(Key)
        /// The connectivity monitor's new status.
        case connectivity(ConnectivityStatus)
        /// The screen's loop started: observe the device and connectivity, deliver queued writes.
        case started
        /// Chats (pinned first), messages and the conflicts to show, as the device has them now,
        /// and with them (from the same observation) every message's sync status and the queue.
        case rowsRead(chats: [WorkspaceChat], messages: [WorkspaceMessage], conflicts: [SyncConflict] = [],
                      outbox: CollectionSyncState? = nil)
        /// Every message's sync status and the queue of writes, as the outbox has them now.
        case outboxRead(CollectionSyncState)
        /// Where pulls of the chat's messages stand: one running, the last completed.
        case syncProgress(SyncProgress)
        /// The background delivery of queued writes stopped, and why.
        case deliveryStopped(String)
        /// The invite draft kept on the device, read at launch (nil when there is none).
        case draftRestored(InviteDraft?)
        case open(Pane)
        /// Pin or unpin a chat.
        case togglePin(chat: String)
        /// Write a message to the selected chat.
        case write(String)
        /// Change the text of one of the user's messages.
        case editMessage(id: String, text: String)
        /// Dismiss the server's refusal of a message.
        case dismissError(message: String)
        /// A message written here is on the device and queued.
        case messageWritten(id: String)
        /// A change the user made could not be saved on this device (a full disk).
        case localWriteFailed
        /// The tablet's post or edit ended.
        case tabletFinished(TabletOutcome)
        /// Delete one of the user's messages (or dismiss it when the server refused it).
        case delete(message: String)
        /// The demo's control: the user's tablet posts to the selected chat.
        case postFromOtherDevice
        /// The demo's control: the user's tablet changes the selected message's text.
        case editFromOtherDevice
        /// The invite form's content replaced as a whole (as typing does).
        case inviteReplaced(InviteDraft)
        /// A save of the invite draft ended; `saved` is false when the device refused it.
        case draftSaveFinished(InviteDraft, saved: Bool)
        /// Submit the invitation, if the connection allows.
        case submitInvite
        case invited(InvitedMember)
        /// The server refused the invitation, in its words, naming the field at fault.
        case inviteRefused(message: String, field: InviteDraft.Field?)
        /// The invitation could not be submitted.
        case inviteFailed(OfflineMessage)
        /// Fetch the bank accounts again.
        case loadBankAccounts
        /// The bank accounts load numbered `generation` ended.
        case bankAccountsLoaded(generation: Int, BankAccounts)
        /// The toast numbered `serial` was shown long enough.
        case toastFaded(serial: Int)
    }

    /// How an action of the user's tablet ended.
    public enum TabletOutcome: Sendable, Hashable {
        case posted, edited, messageNotThere, unreachable
    }

    /// What the workspace asks its shell to do.
    public enum Effect: Sendable, Hashable {
        /// Migrate and seed the device's tables, then read the saved invite draft.
        case prepareDevice
        /// Observe chats, messages, conflicts and the outbox's markers, in one observation.
        case observeRows
        /// Follow the connectivity monitor.
        case followConnectivity
        /// Deliver queued writes in the background, and pull the chat's messages.
        case deliver
        /// Follow where pulls stand.
        case followSync
        /// Pin (or unpin) `chat`: changed on the device and queued in one transaction.
        case pin(chat: String, pinned: Bool)
        /// Write `text` to `chat` and queue it.
        case sendMessage(chat: String, text: String)
        /// Change message `id`'s text on the device and queue the change.
        case editMessage(id: String, text: String)
        /// Forget a conflict the user has seen.
        case dismissConflict(SyncConflict)
        /// The tablet changes message `id`'s text, numbered `number`.
        case editFromTablet(id: String, number: Int)
        /// Queue the delete of a message (or drop one the server never saw).
        case deleteMessage(String)
        /// Dismiss the server's refusal of a message.
        case dismissError(message: String)
        /// The tablet posts its `number`th message to `chat`.
        case postFromTablet(chat: String, number: Int)
        /// Save the invite draft on the device; ``Event/draftSaveFinished(_:saved:)`` follows.
        case saveDraft(InviteDraft)
        /// Send the invitation; its outcome comes back as an event.
        case sendInvitation(InviteDraft)
        /// Fetch the bank accounts; ``Event/bankAccountsLoaded(generation:_:)`` follows.
        case loadBankAccounts(generation: Int)
        /// Wait while toast `serial` is shown; ``Event/toastFaded(serial:)`` follows.
        case fadeToast(serial: Int)
    }
}
