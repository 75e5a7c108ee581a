import Foundation
import OfflineCore
import OfflineKit

/// The workspace's one reducer: every change to ``WorkspaceModel/State``.
///
/// The invite draft is saved one version at a time: while a save runs, later keys only mark the
/// draft unsaved, and the save's end starts the next with the newest content. Bank account loads
/// are numbered, and only the newest one's answer is shown. Connectivity and toasts are state
/// too: the shell neither reads the one nor shows the other.
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
        if key == .escape && state.toast != nil { return true }
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
        case .started:
            return [.prepareDevice, .observeRows, .followConnectivity, .deliver, .followSync]
        case .connectivity(let status):
            state.connectivity = status
            guard state.pane == .bank else { return [] }
            switch state.bank {
            case .blocked, .failed: return status.isReachable ? loadBankAccounts(&state) : []
            // Never show accounts that can no longer be kept current.
            case .loaded: return status.isReachable ? [] : loadBankAccounts(&state)
            case .notLoaded, .loading: return []
            }
        case .rowsRead(let chats, let messages, let conflicts, let outbox):
            if let outbox { applyOutbox(&state, outbox) }
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
            applyOutbox(&state, outbox)
        case .syncProgress(let progress):
            state.sync = progress
        case .deliveryStopped(let problem):
            state.deliveryProblem = problem
        case .draftRestored(let draft):
            guard let draft else { return [] }
            state.invite = draft
            state.savedDraft = draft
        case .open(let pane):
            return open(&state, pane)
        case .togglePin(let chat):
            guard let current = state.chats.first(where: { $0.id == chat }) else { return [] }
            return [.pin(chat: chat, pinned: !current.pinned)]
        case .write(let text):
            guard let chat = state.selectedChat, !text.isEmpty else { return [] }
            return [.sendMessage(chat: chat, text: text)]
        case .editMessage(let id, let text):
            return text.isEmpty ? [] : [.editMessage(id: id, text: text)]
        case .dismissError(let id):
            return [.dismissError(message: id)]
        case .localWriteFailed:
            return toast(&state, "This change could not be saved on this device.")
        case .tabletFinished(let outcome):
            let text = switch outcome {
            case .posted: "Your tablet sent a message."
            case .edited: "Your tablet changed a message."
            case .messageNotThere: "Your tablet does not have this message yet."
            case .unreachable: "Your tablet could not reach the server."
            }
            return toast(&state, text)
        case .toastFaded(let serial):
            if serial == state.toastSerial { state.toast = nil }
        case .messageWritten(let id):
            state.selectedMessage = id
            state.writtenMessage = state.messages.contains(where: { $0.id == id }) ? nil : id
        case .delete(let id):
            return delete(&state, id)
        case .postFromOtherDevice:
            guard state.hasOtherDevice, let chat = state.selectedChat else { return [] }
            state.tabletMessages += 1
            return [.postFromTablet(chat: chat, number: state.tabletMessages)]
        case .editFromOtherDevice:
            guard state.hasOtherDevice, let id = state.selectedMessage else { return [] }
            guard state.messages.first(where: { $0.id == id })?.isMine == true else {
                return toast(&state, "Your tablet can change only your own messages.")
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
                effects += toast(&state, "The draft could not be saved on this device.")
            }
            if state.draftUnsaved { effects += saveDraft(&state) }
            return effects
        case .submitInvite:
            // Refused before any request is built while the connection cannot carry it (and
            // before the first status arrives).
            guard let kind = state.connectivity?.kind, ConnectivityGate.allows(.networkRequired, status: kind) else {
                state.invitation = .failed(.noInternetConnection)
                return toast(&state, OfflineMessage.noInternetConnection.text)
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
            return toast(&state, message.text)
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
        case .escape:
            state.toast = nil
            return []
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
            return reduce(&state, .togglePin(chat: chat))
        case .character("m"), .enter:
            state.editing = .message(TextField(maxLength: 200))
        case .character("t"):
            return reduce(&state, .postFromOtherDevice)
        case .character("r"):
            return reduce(&state, .editFromOtherDevice)
        case .character("e"):
            guard let id = state.selectedMessage, let message = state.messages.first(where: { $0.id == id }) else { return [] }
            guard message.isMine else { return toast(&state, "You can edit only your own messages.") }
            // A message being deleted, or whose refusal waits to be dismissed, is not edited.
            let status = state.status(of: message)
            guard status.pendingAction != .delete, status.failure == nil else { return [] }
            state.editing = .editMessage(id: id, TextField(message.text, maxLength: 200))
        case .character("d"):
            guard let id = state.selectedMessage else { return [] }
            return delete(&state, id)
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
            return reduce(&state, .submitInvite)
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
                return reduce(&state, .write(text))
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
    private static func delete(_ state: inout State, _ id: String) -> [Effect] {
        guard let message = state.messages.first(where: { $0.id == id }) else { return [] }
        guard message.isMine else { return toast(&state, "You can delete only your own messages.") }
        if state.status(of: message).failure != nil { return [.dismissError(message: id)] }
        return [.deleteMessage(id)]
    }

    private static func applyOutbox(_ state: inout State, _ outbox: CollectionSyncState) {
        state.statuses = outbox.statuses.filter { $0.value != .synced }
        state.queue = outbox.queue
    }

    /// Shows `text` at the bottom of the screen until it fades, or Escape dismisses it.
    private static func toast(_ state: inout State, _ text: String) -> [Effect] {
        state.toastSerial += 1
        state.toast = text
        return [.fadeToast(serial: state.toastSerial)]
    }
}
