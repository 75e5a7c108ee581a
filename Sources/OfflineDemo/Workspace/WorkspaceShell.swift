import Foundation
import GRDB
import OfflineCore
import OfflineKit

/// The workspace's shell: turns each ``WorkspaceModel/Effect`` into a write on the device, a
/// request or an observation, and tells the reducer how it ended. It decides nothing.
///
/// Local writes end before the next input is reduced; requests, observations, the outbox's
/// delivery and a toast's timer run as children of the store's loop.
struct WorkspaceShell: ScreenShell {
    typealias Reducer = WorkspaceReducer
    typealias Event = WorkspaceModel.Event

    let environment: DemoEnvironment
    let outbox: Outbox
    let drainer: OutboxDrainer
    let form: BlockingForm
    let sync: SyncEngine
    let bankAccounts: BlockingRead<[WorkspaceBankAccount]>
    /// How long a toast stays.
    var toastDuration: Duration = .seconds(4)
    var clock: any Clock<Duration> = ContinuousClock()

    func perform(_ effect: WorkspaceModel.Effect) async -> ShellOutcome<Event> {
        switch effect {
        case .prepareDevice: return .finished(await prepareDevice())
        case .observeRows: return .child { send in await observeRows(send) }
        case .followConnectivity: return .following(environment.connectivity, as: Event.connectivity)
        case .deliver:
            return .child { send in
                await withDiscardingTaskGroup { group in
                    group.addTask { await deliver(send) }
                    group.addTask { [sync] in try? await sync.run() }
                }
            }
        case .followSync:
            return .child { [sync] send in
                for await progress in sync.progress() { send(.syncProgress(progress)) }
            }
        case .pin(let chat, let pinned):
            return await locally {
                try await outbox.write(WorkspaceOperations.pinChat, path: WorkspaceOperations.pinPath(chat), json: PinPayload(pinned: pinned),
                                       record: RecordKey(WorkspaceOperations.pins, chat)) { db in
                    try WorkspaceStore.setPinned(pinned, chat: chat, db)
                }
                return []
            }
        case .sendMessage(let chat, let text): return await locally { try await send(text, to: chat) }
        case .editMessage(let id, let text):
            return await locally {
                try await outbox.write(WorkspaceOperations.editMessage, path: WorkspaceOperations.messagePath(id), json: ["text": text],
                                       record: RecordKey(WorkspaceOperations.messages, id)) { db in
                    try WorkspaceStore.setText(text, message: id, db)
                }
                return []
            }
        case .dismissConflict(let conflict): return await locally { try await sync.dismiss(conflict); return [] }
        case .deleteMessage(let id): return await locally { try await enqueueDelete(id); return [] }
        case .dismissError(let id):
            return await locally { try await outbox.dismissError(on: RecordKey(WorkspaceOperations.messages, id)); return [] }
        // The tablet's actions end before the next input: the demo's controls that follow them
        // (going online) count on the server having them.
        case .postFromTablet(let chat, let number): return .finished([.tabletFinished(await post(number, to: chat))])
        case .editFromTablet(let id, let number): return .finished([.tabletFinished(await edit(id, fromTablet: number))])
        case .saveDraft(let draft):
            let saved = (try? await form.saveDraft(draft)) != nil
            return .finished([.draftSaveFinished(draft, saved: saved)])
        case .sendInvitation(let draft): return .child { send in send(await sendInvitation(draft)) }
        case .loadBankAccounts(let generation):
            return .child { [bankAccounts] send in
                let loaded: WorkspaceModel.BankAccounts = switch await bankAccounts.load() {
                case .blocked(let message): .blocked(message)
                case .loaded(let accounts): .loaded(accounts)
                case .failed(let message): .failed(message)
                }
                send(.bankAccountsLoaded(generation: generation, loaded))
            }
        case .fadeToast(let serial): return .after(toastDuration, on: clock, send: .toastFaded(serial: serial))
        }
    }

    /// Runs a change on the device; one that fails (a full disk) is said, never swallowed.
    private func locally(_ write: () async throws -> [Event]) async -> ShellOutcome<Event> {
        do {
            return .finished(try await write())
        } catch {
            return .finished([.localWriteFailed])
        }
    }

    // MARK: Starting

    /// Brings the demo's tables up to date, seeds the chats on first launch, and reads the saved
    /// invite draft. Sends nothing.
    private func prepareDevice() async -> [Event] {
        try? await DemoMigrations.migrate(environment.database.writer)
        let now = environment.now()
        try? await environment.database.writer.write { db in try WorkspaceStore.seedIfEmpty(now: now, db) }
        return [.draftRestored(try? await form.loadDraft(InviteDraft.self))]
    }

    /// Chats, messages, conflicts and the outbox's markers and queue, from one GRDB observation:
    /// a row and its marker always arrive together, values arrive in the order of the commits
    /// they follow, and no read blocks a thread of the cooperative pool. Acknowledgement and
    /// dismissal hooks change the rows in the outbox's transaction, so they come with it.
    private func observeRows(_ send: @Sendable (Event) -> Void) async {
        let observation = ValueObservation.tracking { db in
            WorkspaceRows(chats: try WorkspaceStore.chats(db), messages: try WorkspaceStore.messages(db),
                          conflicts: try SyncEngine.conflicts(in: WorkspaceOperations.messages, db),
                          outbox: try Outbox.syncState(in: WorkspaceOperations.messages, db))
        }.removeDuplicates()
        do {
            for try await rows in observation.values(in: environment.database.writer, bufferingPolicy: .bufferingNewest(1)) {
                send(.rowsRead(chats: rows.chats, messages: rows.messages, conflicts: rows.conflicts, outbox: rows.outbox))
            }
        } catch is CancellationError {
        } catch {
            send(.deliveryStopped("The chat could not be read on this device: \(error)"))
        }
    }

    private func deliver(_ send: @Sendable (Event) -> Void) async {
        do {
            try await drainer.run()
        } catch is CancellationError {
        } catch {
            send(.deliveryStopped(String(describing: error)))
        }
    }

    // MARK: Messages

    private func send(_ text: String, to chat: String) async throws -> [Event] {
        let message = WorkspaceMessage(id: UUID().uuidString.lowercased(), chat: chat, author: WorkspaceStore.me,
                                       text: text, sentAt: environment.now())
        let payload = MessagePayload(chat: chat, text: text, sentAt: message.sentAt)
        let body = try JSONEncoder.demo.encode(payload)
        try await outbox.write(WorkspaceOperations.sendMessage, path: WorkspaceOperations.messagePath(message.id), payload: body,
                               record: RecordKey(WorkspaceOperations.messages, message.id)) { db in
            try WorkspaceStore.insert(message, db)
        }
        return [.messageWritten(id: message.id)]
    }

    private func enqueueDelete(_ id: String) async throws {
        let outbox = outbox
        try await environment.database.writer.write { db in
            let entry = try outbox.enqueue(WorkspaceOperations.deleteMessage, path: WorkspaceOperations.messagePath(id),
                                           record: RecordKey(WorkspaceOperations.messages, id), in: db)
            // Cancelled against its unsent add: the server never saw it, so it just goes.
            if entry == nil { try WorkspaceStore.deleteMessage(id: id, db) }
        }
    }

    // MARK: The tablet

    private func post(_ number: Int, to chat: String) async -> WorkspaceModel.TabletOutcome {
        guard let device = environment.otherDevice else { return .unreachable }
        do {
            _ = try await device.post("Written on my tablet (\(number))", to: chat, at: environment.now())
            return .posted
        } catch {
            return .unreachable
        }
    }

    private func edit(_ id: String, fromTablet number: Int) async -> WorkspaceModel.TabletOutcome {
        guard let device = environment.otherDevice else { return .unreachable }
        do {
            return try await device.edit(id, text: "Changed on my tablet (\(number))") ? .edited : .messageNotThere
        } catch {
            return .unreachable
        }
    }

    // MARK: Invitation

    private func sendInvitation(_ draft: InviteDraft) async -> Event {
        let body = InvitedMember(email: draft.email, name: draft.name, role: draft.role)
        do {
            let response = try await form.submit(WorkspaceOperations.inviteMember, path: "/api/workspace/invitations", json: body)
            return .invited((try? JSONDecoder().decode(InvitedMember.self, from: response.body)) ?? body)
        } catch let error as NetworkRequiredError {
            return .inviteFailed(error.message)
        } catch let error as FormSubmissionError {
            if error.failure.kind == .rejected, let response = error.response,
               let problem = try? JSONDecoder().decode(InvitationProblem.self, from: response.body) {
                return .inviteRefused(message: problem.message, field: problem.field.flatMap(InviteDraft.Field.init(rawValue:)))
            }
            return .inviteFailed(error.message)
        } catch {
            return .inviteFailed(.tryAgainWhenOnline)
        }
    }
}

/// What the workspace observes on the device, in one read.
struct WorkspaceRows: Equatable, Sendable {
    var chats: [WorkspaceChat]
    var messages: [WorkspaceMessage]
    var conflicts: [SyncConflict]
    var outbox: CollectionSyncState
}
