import Foundation
public import OfflineCore
public import OfflineKit

extension WorkspaceModel {
    /// What changes the workspace's state: all of it goes through ``WorkspaceReducer``.
    public enum Event: Sendable, Hashable {
        case key(Key)
        /// The connectivity monitor's new status.
        case connectivity(ConnectivityStatus)
        /// Chats (pinned first), messages and the conflicts to show, as the device has them now.
        case rowsRead(chats: [WorkspaceChat], messages: [WorkspaceMessage], conflicts: [SyncConflict] = [])
        /// Every message's sync status and the queue of writes, as the outbox has them now.
        case outboxRead(CollectionSyncState)
        /// Where pulls of the chat's messages stand: one running, the last completed.
        case syncProgress(SyncProgress)
        /// The background delivery of queued writes stopped, and why.
        case deliveryStopped(String)
        /// The invite draft kept on the device, read at launch.
        case draftRestored(InviteDraft)
        case open(Pane)
        /// A message written here is on the device and queued.
        case messageWritten(id: String)
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
        /// Submit the invitation, which the form allows or not right now.
        case submitInvite(BlockingForm.Availability)
        case invited(InvitedMember)
        /// The server refused the invitation, in its words, naming the field at fault.
        case inviteRefused(message: String, field: InviteDraft.Field?)
        /// The invitation could not be submitted.
        case inviteFailed(OfflineMessage)
        /// Fetch the bank accounts again.
        case loadBankAccounts
        /// The bank accounts load numbered `generation` ended.
        case bankAccountsLoaded(generation: Int, BankAccounts)
    }

    /// What the workspace asks its shell to do.
    public enum Effect: Sendable, Hashable {
        /// Pin or unpin `chat`: changed on the device and queued in one transaction.
        case togglePin(chat: String)
        /// Write `text` to the selected chat and queue it.
        case sendMessage(String)
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
        /// Read whether the form can be submitted now, then ``Event/submitInvite(_:)``.
        case submitInvite
        /// Send the invitation; its outcome comes back as an event.
        case sendInvitation(InviteDraft)
        /// Fetch the bank accounts; ``Event/bankAccountsLoaded(generation:_:)`` follows.
        case loadBankAccounts(generation: Int)
        case toast(String)
    }
}

/// The workspace's one reducer: every change to ``WorkspaceModel/State``.
///
/// The invite draft is saved one version at a time: while a save runs, later keys only mark the
/// draft unsaved, and the save's end starts the next with the newest content. Bank account loads
/// are numbered, and only the newest one's answer is shown.
public enum WorkspaceReducer: ScreenReducer {
    public typealias State = WorkspaceModel.State
    public typealias Event = WorkspaceModel.Event
    public typealias Effect = WorkspaceModel.Effect

    static let paneKeys: [Key] = [.character("c"), .character("i"), .character("b"), .character("a"), .left, .right]
    static let chatKeys: [Key] = [.up, .down, .character("k"), .character("j"), .character("p"), .character("m"), .enter,
                                  .character("e"), .character("d"), .character("x")]
    static let inviteKeys: [Key] = [.up, .down, .enter, .character("e"), .character("s")]

    /// While a field has focus, every key is the workspace's; otherwise the panes' keys and the
    /// open pane's.
    static func handles(_ key: Key, _ state: State) -> Bool {
        if state.editing != nil || paneKeys.contains(key) { return true }
        switch state.pane {
        case .chat: return chatKeys.contains(key) || ([.character("t"), .character("r")].contains(key) && state.hasOtherDevice)
        case .invite: return inviteKeys.contains(key)
        case .bank: return key == .character("f")
        case .about: return false
        }
    }

    public static func reduce(_ state: inout State, _ event: Event) -> [Effect] {
        switch event {
        case .key(let key):
            return self.key(&state, key)
        case .connectivity(let status):
            guard state.pane == .bank else { return [] }
            switch state.bank {
            case .blocked, .failed: return status.isReachable ? loadBankAccounts(&state) : []
            // Never show accounts that can no longer be kept current.
            case .loaded: return status.isReachable ? [] : loadBankAccounts(&state)
            case .notLoaded, .loading: return []
            }
        case .rowsRead(let chats, let messages, let conflicts):
            state.chats = chats
            state.messages = messages
            state.conflicts = Dictionary(conflicts.map { ($0.rowID, $0) }) { _, latest in latest }
            if state.selectedChat == nil || !chats.contains(where: { $0.id == state.selectedChat }) {
                state.selectedChat = chats.first?.id
            }
            let thread = state.thread
            if let written = state.writtenMessage {
                // Rows read before the message was written do not hold it yet: keep it selected.
                if messages.contains(where: { $0.id == written }) { state.writtenMessage = nil }
            } else if state.selectedMessage == nil || !thread.contains(where: { $0.id == state.selectedMessage }) {
                state.selectedMessage = thread.last?.id
            }
        case .outboxRead(let outbox):
            state.statuses = outbox.statuses.filter { $0.value != .synced }
            state.queue = outbox.queue
        case .syncProgress(let progress):
            state.sync = progress
        case .deliveryStopped(let problem):
            state.deliveryProblem = problem
        case .draftRestored(let draft):
            state.invite = draft
            state.savedDraft = draft
        case .open(let pane):
            return open(&state, pane)
        case .messageWritten(let id):
            state.selectedMessage = id
            state.writtenMessage = state.messages.contains(where: { $0.id == id }) ? nil : id
        case .delete(let id):
            return delete(state, id)
        case .postFromOtherDevice:
            guard state.hasOtherDevice, let chat = state.selectedChat else { return [] }
            state.tabletMessages += 1
            return [.postFromTablet(chat: chat, number: state.tabletMessages)]
        case .editFromOtherDevice:
            guard state.hasOtherDevice, let id = state.selectedMessage else { return [] }
            guard state.messages.first(where: { $0.id == id })?.isMine == true else {
                return [.toast("Your tablet can change only your own messages.")]
            }
            state.tabletMessages += 1
            return [.editFromTablet(id: id, number: state.tabletMessages)]
        case .inviteReplaced(let draft):
            state.invite = draft
            return saveDraft(&state)
        case .draftSaveFinished(let draft, let saved):
            state.savingDraft = false
            var effects: [Effect] = []
            if saved {
                state.savedDraft = draft
            } else {
                effects.append(.toast("The draft could not be saved on this device."))
            }
            if state.draftUnsaved { effects += saveDraft(&state) }
            return effects
        case .submitInvite(let availability):
            guard availability.canSubmit else {
                let message = availability.message ?? .noInternetConnection
                state.invitation = .failed(message)
                return [.toast(message.text)]
            }
            // One submission at a time: the form's idempotency key makes a second harmless, but
            // its answer would replace the first one's.
            guard state.invitation != .submitting else { return [] }
            state.invitation = .submitting
            return [.sendInvitation(state.invite)]
        case .invited(let member):
            state.invitation = .invited(member)
            state.invite = InviteDraft()
            state.savedDraft = nil
            state.draftUnsaved = false
            state.editing = nil
        case .inviteRefused(let message, let field):
            state.invitation = .refused(message: message, field: field)
            if let field { state.inviteField = field }
        case .inviteFailed(let message):
            state.invitation = .failed(message)
            return [.toast(message.text)]
        case .loadBankAccounts:
            return loadBankAccounts(&state)
        case .bankAccountsLoaded(let generation, let accounts):
            // An older load's answer (online, before the connection went) must not replace a
            // newer one's.
            guard generation == state.bankGeneration else { return [] }
            state.bank = accounts
        }
        return []
    }

    // MARK: Keys

    private static func key(_ state: inout State, _ key: Key) -> [Effect] {
        if let editing = state.editing { return edit(&state, editing, key) }
        guard handles(key, state) else { return [] }
        switch key {
        case .character("c"): return open(&state, .chat)
        case .character("i"): return open(&state, .invite)
        case .character("b"): return open(&state, .bank)
        case .character("a"): return open(&state, .about)
        case .left, .right:
            let panes = WorkspaceModel.Pane.allCases
            let index = panes.firstIndex(of: state.pane) ?? 0
            return open(&state, panes[(index + (key == .right ? 1 : panes.count - 1)) % panes.count])
        default:
            switch state.pane {
            case .chat: return chat(&state, key)
            case .invite: return invite(&state, key)
            case .bank: return loadBankAccounts(&state)
            case .about: return []
            }
        }
    }

    private static func chat(_ state: inout State, _ key: Key) -> [Effect] {
        switch key {
        case .up, .down:
            guard let index = state.chats.firstIndex(where: { $0.id == state.selectedChat }) else { return [] }
            let next = key == .up ? max(0, index - 1) : min(state.chats.count - 1, index + 1)
            state.selectedChat = state.chats[next].id
            state.selectedMessage = state.thread.last?.id
        case .character("k"), .character("j"):
            let thread = state.thread
            guard let index = thread.firstIndex(where: { $0.id == state.selectedMessage }) else { return [] }
            let next = key == .character("k") ? max(0, index - 1) : min(thread.count - 1, index + 1)
            state.selectedMessage = thread[next].id
        case .character("p"):
            guard let chat = state.selectedChat else { return [] }
            return [.togglePin(chat: chat)]
        case .character("m"), .enter:
            state.editing = .message(TextField(maxLength: 200))
        case .character("t"):
            return reduce(&state, .postFromOtherDevice)
        case .character("r"):
            return reduce(&state, .editFromOtherDevice)
        case .character("e"):
            guard let id = state.selectedMessage, let message = state.messages.first(where: { $0.id == id }) else { return [] }
            guard message.isMine else { return [.toast("You can edit only your own messages.")] }
            // A message being deleted, or whose refusal waits to be dismissed, is not edited.
            let status = state.status(of: message)
            guard status.pendingAction != .delete, status.failure == nil else { return [] }
            state.editing = .editMessage(id: id, TextField(message.text, maxLength: 200))
        case .character("d"):
            guard let id = state.selectedMessage else { return [] }
            return delete(state, id)
        case .character("x"):
            // The selected message's refusal or conflict first, then the chat's latest.
            let selected = state.thread.filter { $0.id == state.selectedMessage }
            for message in selected + state.thread.reversed() {
                if state.status(of: message).failure != nil { return [.dismissError(message: message.id)] }
                if let conflict = state.conflicts[message.id] { return [.dismissConflict(conflict)] }
            }
        default:
            break
        }
        return []
    }

    private static func invite(_ state: inout State, _ key: Key) -> [Effect] {
        let fields = InviteDraft.Field.allCases
        switch key {
        case .up, .down:
            let index = fields.firstIndex(of: state.inviteField) ?? 0
            let next = key == .up ? max(0, index - 1) : min(fields.count - 1, index + 1)
            state.inviteField = fields[next]
        case .enter, .character("e"):
            state.editing = .invite(state.inviteField)
        case .character("s"):
            return [.submitInvite]
        default:
            break
        }
        return []
    }

    private static func edit(_ state: inout State, _ editing: WorkspaceModel.Editing, _ key: Key) -> [Effect] {
        switch editing {
        case .message(var field):
            switch field.apply(key) {
            case .editing:
                state.editing = .message(field)
            case .submitted(let text):
                state.editing = nil
                return [.sendMessage(text)]
            case .cancelled:
                state.editing = nil
            }
        case .editMessage(let id, var field):
            switch field.apply(key) {
            case .editing:
                state.editing = .editMessage(id: id, field)
            case .submitted(let text):
                state.editing = nil
                let unchanged = state.messages.first { $0.id == id }?.text == text
                return text.isEmpty || unchanged ? [] : [.editMessage(id: id, text: text)]
            case .cancelled:
                state.editing = nil
            }
        case .invite(let field):
            var text = TextField(state.invite[field], maxLength: 80)
            switch text.apply(key) {
            case .editing:
                if case .refused = state.invitation { state.invitation = .idle }
                guard text.text != state.invite[field] else { return [] }
                state.invite[field] = text.text
                return saveDraft(&state)
            case .submitted, .cancelled:
                state.editing = nil
            }
        }
        return []
    }

    // MARK: Effects decided here

    /// Opens `pane`; the bank accounts are fetched each time their page opens.
    private static func open(_ state: inout State, _ pane: WorkspaceModel.Pane) -> [Effect] {
        let opened = state.pane != pane
        state.pane = pane
        return pane == .bank && opened ? loadBankAccounts(&state) : []
    }

    private static func loadBankAccounts(_ state: inout State) -> [Effect] {
        state.bankGeneration += 1
        state.bank = .loading
        return [.loadBankAccounts(generation: state.bankGeneration)]
    }

    /// Saves the newest draft, unless a save runs: its end saves what was typed meanwhile.
    private static func saveDraft(_ state: inout State) -> [Effect] {
        guard !state.savingDraft else {
            state.draftUnsaved = true
            return []
        }
        state.savingDraft = true
        state.draftUnsaved = false
        return [.saveDraft(state.invite)]
    }

    /// Deletes one of the user's messages: a refused one is dismissed instead.
    private static func delete(_ state: State, _ id: String) -> [Effect] {
        guard let message = state.messages.first(where: { $0.id == id }) else { return [] }
        guard message.isMine else { return [.toast("You can delete only your own messages.")] }
        if state.status(of: message).failure != nil { return [.dismissError(message: id)] }
        return [.deleteMessage(id)]
    }
}
