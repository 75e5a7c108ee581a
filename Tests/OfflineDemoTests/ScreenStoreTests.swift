import OfflineCore
@testable import OfflineDemo
import Testing

/// The screens' one input loop, with a reducer and a shell of its own: no server, no clock.
@Suite("Screen store", .timeLimit(.minutes(1)))
struct ScreenStoreTests {
    enum Reducer: ScreenReducer {
        struct State: Sendable, Hashable {
            var log: [String] = []
            var count = 0
        }

        enum Event: Sendable, Hashable {
            case add(Int)
            case recorded(String)
            case startChild
            case childSaid(String)
        }

        enum Effect: Sendable, Hashable {
            case record(String)
            case child
        }

        static func reduce(_ state: inout State, _ event: Event) -> [Effect] {
            switch event {
            case .add(let number):
                state.count += number
                state.log.append("add \(number)")
                return [.record("\(number)a"), .record("\(number)b")]
            case .recorded(let name):
                state.log.append("recorded \(name)")
            case .startChild:
                return [.child]
            case .childSaid(let text):
                state.log.append("child \(text)")
            }
            return []
        }
    }

    /// Records how many effects run at once, and whether its child saw its cancellation.
    struct Shell: ScreenShell {
        typealias Reducer = ScreenStoreTests.Reducer
        let running = Locked(0)
        let mostAtOnce = Locked(0)
        let childCancelled = Locked(false)

        func perform(_ effect: Reducer.Effect) async -> ShellOutcome<Reducer.Event> {
            switch effect {
            case .record(let name):
                let now = running.withLock { $0 += 1; return $0 }
                mostAtOnce.withLock { $0 = max($0, now) }
                await Task.yield()
                running.withLock { $0 -= 1 }
                return .finished([.recorded(name)])
            case .child:
                return .child { [childCancelled] send in
                    send(.childSaid("started"))
                    // Runs until the store's loop ends.
                    let (never, _) = AsyncStream.makeStream(of: Void.self)
                    for await _ in never {}
                    childCancelled.withLock { $0 = Task.isCancelled }
                }
            }
        }
    }

    @Test("events are reduced in the order sent; each one's effects run one at a time and their outcomes are reduced before the next event")
    func order() async {
        let store = ScreenStore<Reducer>(Reducer.State())
        let shell = Shell()
        await withDiscardingTaskGroup { group in
            group.addTask { await store.run(shell) }
            store.send(.add(1))
            store.send(.add(2))
            let state = await store.sendAndWait(.add(3))
            #expect(state.log == ["add 1", "recorded 1a", "recorded 1b", "add 2", "recorded 2a", "recorded 2b",
                                  "add 3", "recorded 3a", "recorded 3b"])
            #expect(state.count == 6)
            #expect(shell.mostAtOnce.current == 1)
            group.cancelAll()
        }
    }

    @Test("an awaited send returns the state right after its own event, even when later ones are already reduced")
    func awaitedSendSeesItsOwnState() async {
        let store = ScreenStore<Reducer>(Reducer.State())
        await withDiscardingTaskGroup { group in
            group.addTask { await store.run(Shell()) }
            async let first = store.sendAndWait(.add(1))
            store.send(.add(10))
            let state = await first
            // Either send may enter the stream first; either way the state returned is the one
            // its own event and effects left, not a later one.
            #expect(state.count == 1 || state.count == 11)
            #expect(state.log.last == "recorded 1b")
            group.cancelAll()
        }
    }

    @Test("an offered event is taken or refused by the state its turn finds")
    func offer() async {
        let store = ScreenStore<Reducer>(Reducer.State())
        await withDiscardingTaskGroup { group in
            group.addTask { await store.run(Shell()) }
            store.send(.add(1))
            #expect(await store.offer(.add(5)) { $0.count == 1 }, "the earlier event was reduced before this one's turn")
            #expect(await !store.offer(.add(100)) { _ in false })
            #expect(store.current.count == 6)
            group.cancelAll()
        }
    }

    @Test("a child an effect started runs beside the loop and is cancelled when the loop ends; sends after the end return at once")
    func childEndsWithTheLoop() async {
        let store = ScreenStore<Reducer>(Reducer.State())
        let shell = Shell()
        let loop = Task { await store.run(shell) }
        await store.sendAndWait(.startChild)
        await store.first { $0.log.contains("child started") }
        #expect(await store.sendAndWait(.add(1)).count == 1, "the child does not hold the loop")
        loop.cancel()
        await loop.value
        #expect(shell.childCancelled.current)
        #expect(await store.sendAndWait(.add(1)).count == 1, "the loop has ended: nothing is reduced")
    }
}
