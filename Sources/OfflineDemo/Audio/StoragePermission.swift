import Foundation
import OfflineKit

/// The storage permission the audio screen asks for on the first download, and the answer,
/// kept across restarts: ``restore()`` reads it back when the screen loads.
///
/// ``ask()`` is the pack store's permission hook: with an answer on record it returns it at once;
/// otherwise it raises the prompt and suspends every download that asks until the user answers
/// (several downloads of a batch share one prompt). A cancelled download stops waiting and
/// counts as declined, so quitting never hangs on an open prompt.
final class StoragePermission: Sendable {
    /// The answer on record and whether the prompt is open, as of `revision`, which grows with
    /// every change: of two reports, the one with the higher revision is the newer.
    struct Status: Sendable, Hashable {
        var answer: StorageAnswer?
        var isPrompting: Bool
        var revision: Int
    }

    private struct State {
        var answer: StorageAnswer?
        var waiting: [UUID: CheckedContinuation<Bool, Never>] = [:]
        var revision = 0
        var status: Status { Status(answer: answer, isPrompting: !waiting.isEmpty, revision: revision) }
    }

    private let preferences: DemoPreferences
    private let state: Locked<State>
    /// Called with the new status when the prompt appears or goes away, or the answer changes.
    /// Reports can arrive out of order from different tasks; the revision tells which is newer.
    private let onChange: @Sendable (Status) -> Void
    static let preferenceKey = "audio.storagePermission"

    /// No answer on record until ``restore()`` reads the one kept, or the user answers.
    init(preferences: DemoPreferences, onChange: @escaping @Sendable (Status) -> Void) {
        self.preferences = preferences
        self.onChange = onChange
        state = Locked(State())
    }

    /// Takes back the answer kept by an earlier session, unless one was given since, and
    /// returns the status then. The screen's load calls it before any download can ask.
    func restore() async -> Status {
        guard let saved = await preferences.string(Self.preferenceKey).flatMap(StorageAnswer.init(rawValue:)),
              state.withLock({ $0.answer == nil }) else { return status }
        return record(saved)
    }

    /// The answer on record (nil before the first download asked) and whether the prompt is on
    /// screen, waiting for the user.
    var status: Status { state.withLock { $0.status } }

    /// The pack store's hook: true when downloads may store files on the device.
    @Sendable func ask() async -> Bool {
        let id = UUID()
        let granted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let (answer, prompted) = state.withLock { state -> (StorageAnswer?, Status?) in
                    if let answer = state.answer { return (answer, nil) }
                    if Task.isCancelled { return (.denied, nil) }
                    state.waiting[id] = continuation
                    guard state.waiting.count == 1 else { return (nil, nil) }
                    state.revision += 1
                    return (nil, state.status)
                }
                if let answer { continuation.resume(returning: answer == .granted) }
                if let prompted { onChange(prompted) }
            }
        } onCancel: {
            let (waiting, status) = state.withLock { state in
                let waiting = state.waiting.removeValue(forKey: id)
                if waiting != nil, state.waiting.isEmpty { state.revision += 1 }
                return (waiting, state.status)
            }
            waiting?.resume(returning: false)
            onChange(status)
        }
        return granted
    }

    /// Records the user's answer (from the prompt or from settings), keeps it for the next
    /// session, and releases waiting downloads; returns once it is kept.
    func answer(_ answer: StorageAnswer) async {
        await preferences.set(Self.preferenceKey, answer.rawValue)
        record(answer)
    }

    /// Makes `answer` the one on record and releases waiting downloads; returns the new status.
    @discardableResult
    private func record(_ answer: StorageAnswer) -> Status {
        let (waiting, status) = state.withLock { state in
            state.answer = answer
            state.revision += 1
            defer { state.waiting = [:] }
            return (Array(state.waiting.values), Status(answer: answer, isPrompting: false, revision: state.revision))
        }
        for continuation in waiting { continuation.resume(returning: answer == .granted) }
        onChange(status)
        return status
    }
}
