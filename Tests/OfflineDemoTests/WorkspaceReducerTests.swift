import Foundation
import OfflineCore
@testable import OfflineDemo
@testable import OfflineKit
import Testing

/// The workspace's state, driven by events alone: no outbox, no server, no clock.
@Suite("Workspace reducer")
struct WorkspaceReducerTests {
    typealias Reducer = WorkspaceReducer

    static let chats = [
        WorkspaceChat(id: "general", title: "General", pinned: false),
        WorkspaceChat(id: "design", title: "Design", pinned: false),
    ]
    static let messages = [
        WorkspaceMessage(id: "m1", chat: "general", author: "mia", text: "Hi", sentAt: Date(timeIntervalSince1970: 1)),
        WorkspaceMessage(id: "m2", chat: "general", author: WorkspaceStore.me, text: "Hello", sentAt: Date(timeIntervalSince1970: 2)),
        WorkspaceMessage(id: "m3", chat: "design", author: WorkspaceStore.me, text: "Mockups?", sentAt: Date(timeIntervalSince1970: 3)),
    ]
    static let online = ConnectivityStatus(kind: .online, reason: .probeSucceeded, since: Date(timeIntervalSince1970: 0))
    static let offline = ConnectivityStatus(kind: .offlineSoft, reason: .blackhole, since: Date(timeIntervalSince1970: 1))
    static let accounts = [WorkspaceBankAccount(id: "a", institution: "Northwind Bank", name: "Savings", mask: "4321", balance: "€1")]

    static func loaded() -> WorkspaceModel.State {
        var state = WorkspaceModel.State()
        _ = Reducer.reduce(&state, .rowsRead(chats: chats, messages: messages))
        return state
    }

    static func type(_ text: String, _ state: inout WorkspaceModel.State) -> [WorkspaceModel.Effect] {
        text.flatMap { Reducer.reduce(&state, .key(.character($0))) }
    }

    @Test("a message just written stays selected when rows read before the write arrive after it")
    func writtenMessageStaysSelected() {
        var state = Self.loaded()
        let sent = WorkspaceMessage(id: "m4", chat: "general", author: WorkspaceStore.me, text: "Meet at the station",
                                    sentAt: Date(timeIntervalSince1970: 4))
        _ = Reducer.reduce(&state, .messageWritten(id: sent.id))
        #expect(state.selectedMessage == "m4")
        // A read that started before the write lands after it, without the new message.
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Self.messages))
        #expect(state.selectedMessage == "m4", "the stale read must not move the selection")
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Self.messages + [sent]))
        #expect(state.selectedMessage == "m4")
        // Once the rows hold it, the selection follows the rows again.
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Self.messages))
        #expect(state.selectedMessage == "m2")
    }

    @Test("the rows read select the first chat and its newest message; moving chats follows the thread")
    func selection() {
        var state = Self.loaded()
        #expect(state.selectedChat == "general")
        #expect(state.selectedMessage == "m2")
        _ = Reducer.reduce(&state, .key(.character("k")))
        #expect(state.selectedMessage == "m1")
        _ = Reducer.reduce(&state, .key(.down))
        #expect(state.selectedChat == "design" && state.selectedMessage == "m3")
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Array(Self.messages.prefix(2))))
        #expect(state.selectedMessage == nil, "the selected message went; the thread is empty")
    }

    @Test("writing a message: the field takes every key, Enter hands the text to the shell")
    func writeMessage() {
        var state = Self.loaded()
        #expect(Reducer.reduce(&state, .key(.character("m"))).isEmpty)
        #expect(Reducer.handles(.character("q"), state))
        _ = Self.type("Hey", &state)
        #expect(Reducer.reduce(&state, .key(.enter)) == [.sendMessage(chat: "general", text: "Hey")])
        #expect(state.editing == nil)
        #expect(!Reducer.handles(.character("q"), state))
    }

    @Test("delete: someone else's message is refused in words, a refused one of mine is dismissed, else the delete is queued")
    func delete() {
        var state = Self.loaded()
        #expect(Reducer.reduce(&state, .delete(message: "m1")) == [.fadeToast(serial: 1)])
        #expect(state.toast == "You can delete only your own messages.")
        #expect(Reducer.reduce(&state, .key(.character("d"))) == [.deleteMessage("m2")])
        let failure = OutboxFailure(kind: .rejected, detail: "card")
        let queue = OutboxSnapshot(pendingCount: 0, inFlightCount: 0, nextRetryAt: nil, failures: [], pausedFor: nil)
        _ = Reducer.reduce(&state, .outboxRead(CollectionSyncState(statuses: ["m2": RecordSyncStatus(pendingAction: .add, failure: failure)],
                                                                   queue: queue)))
        #expect(Reducer.reduce(&state, .key(.character("d"))) == [.dismissError(message: "m2")])
        _ = Reducer.reduce(&state, .key(.character("k")))
        #expect(Reducer.reduce(&state, .key(.character("x"))) == [.dismissError(message: "m2")], "x finds the refused message in the thread")
        #expect(state.chatsNeedingAttention == ["general"])
    }

    @Test("typing in the invite form saves one draft at a time; keys typed meanwhile are saved next, with the newest text")
    func draftSavesInOrder() {
        var state = Self.loaded()
        _ = Reducer.reduce(&state, .key(.character("i")))
        _ = Reducer.reduce(&state, .key(.character("e")))
        #expect(Self.type("a", &state) == [.saveDraft(InviteDraft(email: "a"))])
        #expect(Self.type("na", &state).isEmpty, "a save is running")
        #expect(Reducer.reduce(&state, .key(.left)).isEmpty, "a key that changes nothing saves nothing")

        let next = Reducer.reduce(&state, .draftSaveFinished(InviteDraft(email: "a"), saved: true))
        #expect(next == [.saveDraft(InviteDraft(email: "ana"))])
        #expect(state.savedDraft == InviteDraft(email: "a"))
        #expect(Reducer.reduce(&state, .draftSaveFinished(InviteDraft(email: "ana"), saved: true)).isEmpty)
        #expect(state.savedDraft == state.invite)

        _ = Self.type("@", &state)
        #expect(Reducer.reduce(&state, .draftSaveFinished(InviteDraft(email: "ana@"), saved: false)) == [.fadeToast(serial: 1)])
        #expect(state.toast == "The draft could not be saved on this device.")
        #expect(state.savedDraft == InviteDraft(email: "ana"))
        _ = Reducer.reduce(&state, .key(.enter))
        #expect(state.editing == nil)
    }

    @Test("submit: refused offline with the message; one submission at a time; accepted clears the form")
    func submit() {
        var state = Self.loaded()
        _ = Reducer.reduce(&state, .open(.invite))
        _ = Reducer.reduce(&state, .inviteReplaced(InviteDraft(email: "ana@northwind.test")))
        #expect(Reducer.reduce(&state, .key(.character("s"))) == [.fadeToast(serial: 1)], "no status yet: refused as offline")
        _ = Reducer.reduce(&state, .connectivity(Self.offline))
        #expect(Reducer.reduce(&state, .submitInvite) == [.fadeToast(serial: 2)])
        #expect(state.toast == OfflineMessage.noInternetConnection.text)
        #expect(state.invitation == .failed(.noInternetConnection))

        _ = Reducer.reduce(&state, .connectivity(Self.online))
        #expect(Reducer.reduce(&state, .key(.character("s"))) == [.sendInvitation(InviteDraft(email: "ana@northwind.test"))])
        #expect(Reducer.reduce(&state, .submitInvite).isEmpty, "pressed again while the first is on its way")
        _ = Reducer.reduce(&state, .inviteRefused(message: "Not allowed.", field: .name))
        #expect(state.invitation == .refused(message: "Not allowed.", field: .name))
        #expect(state.inviteField == .name)

        _ = Reducer.reduce(&state, .submitInvite)
        _ = Reducer.reduce(&state, .invited(InvitedMember(email: "ana@northwind.test", name: "", role: "member")))
        #expect(state.invite == InviteDraft())
        #expect(state.savedDraft == nil)
    }

    @Test("an older bank accounts answer arriving after the connection went is dropped: accounts are never shown offline")
    func staleBankAccountsDropped() {
        var state = Self.loaded()
        #expect(Reducer.reduce(&state, .key(.character("b"))) == [.loadBankAccounts(generation: 1)])
        #expect(state.bank == .loading)
        _ = Reducer.reduce(&state, .bankAccountsLoaded(generation: 1, .loaded(Self.accounts)))
        #expect(Reducer.reduce(&state, .connectivity(Self.offline)) == [.loadBankAccounts(generation: 2)])
        #expect(Reducer.reduce(&state, .key(.character("f"))) == [.loadBankAccounts(generation: 3)])
        _ = Reducer.reduce(&state, .bankAccountsLoaded(generation: 3, .blocked(.featureRequiresInternet)))
        _ = Reducer.reduce(&state, .bankAccountsLoaded(generation: 2, .loaded(Self.accounts)))
        #expect(state.bank == .blocked(.featureRequiresInternet))

        #expect(Reducer.reduce(&state, .connectivity(Self.online)) == [.loadBankAccounts(generation: 4)])
        #expect(Reducer.reduce(&state, .key(.character("c"))).isEmpty)
        #expect(Reducer.reduce(&state, .connectivity(Self.offline)).isEmpty, "the accounts are not on screen")
    }

    @Test("the tablet's key exists only with a tablet, and numbers its messages")
    func tablet() {
        var state = Self.loaded()
        #expect(!Reducer.handles(.character("t"), state))
        #expect(Reducer.reduce(&state, .postFromOtherDevice).isEmpty)
        state.hasOtherDevice = true
        #expect(Reducer.reduce(&state, .key(.character("t"))) == [.postFromTablet(chat: "general", number: 1)])
        #expect(Reducer.reduce(&state, .postFromOtherDevice) == [.postFromTablet(chat: "general", number: 2)])
    }

    @Test("editing a message: only the user's own, the field starts with its text, Enter hands a changed text to the shell")
    func editMessage() {
        var state = Self.loaded()
        _ = Reducer.reduce(&state, .key(.character("k")))
        #expect(Reducer.reduce(&state, .key(.character("e"))) == [.fadeToast(serial: 1)])
        #expect(state.toast == "You can edit only your own messages.")
        _ = Reducer.reduce(&state, .key(.character("j")))
        #expect(Reducer.reduce(&state, .key(.character("e"))).isEmpty)
        guard case .editMessage("m2", let field)? = state.editing else {
            Issue.record("not editing m2: \(String(describing: state.editing))")
            return
        }
        #expect(field.text == "Hello")
        #expect(Reducer.reduce(&state, .key(.enter)).isEmpty, "an unchanged text is not sent")
        _ = Reducer.reduce(&state, .key(.character("e")))
        _ = Self.type(" there", &state)
        #expect(Reducer.reduce(&state, .key(.enter)) == [.editMessage(id: "m2", text: "Hello there")])
        #expect(state.editing == nil)
        state.statuses["m2"] = RecordSyncStatus(pendingAction: .delete)
        #expect(Reducer.reduce(&state, .key(.character("e"))).isEmpty && state.editing == nil, "a message being deleted is not edited")
    }

    @Test("a conflict shows on its message until x dismisses it; the tablet edits only the user's own messages")
    func conflicts() {
        var state = Self.loaded()
        state.hasOtherDevice = true
        let conflict = SyncConflict(collection: "messages", rowID: "m2", fields: ["text"],
                                    server: SyncedRow(id: "m2", value: Data(#"{"body":{"text":"Hi!"}}"#.utf8)),
                                    detectedAt: Date(timeIntervalSince1970: 5))
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Self.messages, conflicts: [conflict]))
        #expect(state.conflicts["m2"] == conflict && state.canDismiss)
        let screen = WorkspaceScreen.render(state, RenderContext(connectivity: .online), now: Date(timeIntervalSince1970: 10))
        let text = screen.body.map(\.text).joined(separator: "\n")
        #expect(text.contains("This was also changed elsewhere"), "\(text)")
        #expect(Reducer.reduce(&state, .key(.character("x"))) == [.dismissConflict(conflict)])
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Self.messages))
        #expect(state.conflicts.isEmpty && !state.canDismiss)
        #expect(Reducer.reduce(&state, .key(.character("x"))).isEmpty)

        #expect(Reducer.reduce(&state, .key(.character("r"))) == [.editFromTablet(id: "m2", number: 1)])
        _ = Reducer.reduce(&state, .key(.character("k")))
        #expect(Reducer.reduce(&state, .key(.character("r"))) == [.fadeToast(serial: 1)])
        #expect(state.toast == "Your tablet can change only your own messages.")
    }

    @Test("a toast fades only by its own timer, Escape dismisses it, and the rows and markers of one observation land together")
    func toastsAndObservedRows() {
        var state = Self.loaded()
        #expect(Reducer.reduce(&state, .tabletFinished(.unreachable)) == [.fadeToast(serial: 1)])
        #expect(Reducer.reduce(&state, .localWriteFailed) == [.fadeToast(serial: 2)])
        _ = Reducer.reduce(&state, .toastFaded(serial: 1))
        #expect(state.toast == "This change could not be saved on this device.", "an older toast's timer leaves the newer one")
        #expect(Reducer.handles(.escape, state))
        _ = Reducer.reduce(&state, .key(.escape))
        #expect(state.toast == nil && !Reducer.handles(.escape, state))

        let queue = OutboxSnapshot(pendingCount: 1, inFlightCount: 0, nextRetryAt: nil, failures: [], pausedFor: nil)
        let outbox = CollectionSyncState(statuses: ["m2": RecordSyncStatus(pendingAction: .update)], queue: queue)
        _ = Reducer.reduce(&state, .rowsRead(chats: Self.chats, messages: Self.messages, outbox: outbox))
        #expect(state.statuses["m2"]?.pendingAction == .update && state.queue == queue)
        #expect(Reducer.reduce(&state, .started) == [.prepareDevice, .observeRows, .followConnectivity, .deliver, .followSync])
    }
}
