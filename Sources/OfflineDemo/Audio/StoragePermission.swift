import Foundation
import OfflineKit

/// The storage permission the audio screen asks for on the first download, and the answer,
/// kept across restarts.
///
/// ``ask()`` is the pack store's permission hook: with an answer on record it returns it at once;
/// otherwise it raises the prompt and suspends every download that asks until the user answers
/// (several downloads of a batch share one prompt). A cancelled download stops waiting and
/// counts as declined, so quitting never hangs on an open prompt.
final class StoragePermission: Sendable {
    private struct State {
        var answer: StorageAnswer?
        var waiting: [UUID: CheckedContinuation<Bool, Never>] = [:]
    }

    private let preferences: DemoPreferences
    private let state: Locked<State>
    /// Called when the prompt appears or goes away.
    private let onChange: @Sendable () -> Void
    static let preferenceKey = "audio.storagePermission"

    init(preferences: DemoPreferences, onChange: @escaping @Sendable () -> Void) {
        self.preferences = preferences
        self.onChange = onChange
        state = Locked(State(answer: preferences.string(Self.preferenceKey).flatMap(StorageAnswer.init(rawValue:))))
    }

    /// The answer on record, nil before the first download asked.
    var answer: StorageAnswer? { state.withLock { $0.answer } }

    /// True while the prompt is on screen, waiting for the user.
    var isPrompting: Bool { state.withLock { !$0.waiting.isEmpty } }

    /// The pack store's hook: true when downloads may store files on the device.
    @Sendable func ask() async -> Bool {
        let id = UUID()
        let granted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let (answer, prompted) = state.withLock { state -> (StorageAnswer?, Bool) in
                    if let answer = state.answer { return (answer, false) }
                    if Task.isCancelled { return (.denied, false) }
                    state.waiting[id] = continuation
                    return (nil, state.waiting.count == 1)
                }
                if let answer { continuation.resume(returning: answer == .granted) }
                if prompted { onChange() }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(returning: false)
            onChange()
        }
        return granted
    }

    /// Records the user's answer (from the prompt or from settings) and releases waiting downloads.
    func answer(_ answer: StorageAnswer) {
        preferences.set(Self.preferenceKey, answer.rawValue)
        let waiting = state.withLock { state in
            state.answer = answer
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in waiting { continuation.resume(returning: answer == .granted) }
        onChange()
    }
}
