import Foundation
@testable import OfflineServer
import Testing

@Suite("Password checks run on threads of their own, with a bounded wait", .timeLimit(.minutes(1)))
struct PasswordChecksTests {
    @Test("past the threads and the waiting places, a check is refused at once; the admitted ones all finish")
    func boundedWait() async throws {
        let checks = PasswordChecks(threads: 1, maxWaiting: 2)
        let release = DispatchSemaphore(value: 0)
        let admitted = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<3 {
                group.addTask { try await checks.run { release.wait(); return index } }
            }
            // One check holds the thread, two wait: the pool is full.
            while checks.inUse < 3 { try await Task.sleep(for: .milliseconds(1)) }
            await #expect(throws: PasswordChecks.Busy.self) { try await checks.run { -1 } }
            #expect(checks.inUse == 3, "the refused check took no place")
            for _ in 0..<3 { release.signal() }
            return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
        }
        #expect(admitted == [0, 1, 2])
        #expect(checks.inUse == 0)
        #expect(try await checks.run { 7 } == 7, "places come back")
    }
}
