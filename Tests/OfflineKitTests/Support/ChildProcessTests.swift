import Foundation
#if canImport(Glibc)
import Glibc
#endif
import OfflineTestSupport
import Subprocess
import Testing

/// What every child process of the tests must get, whichever way it is started: swift-subprocess
/// (most of them) or ``ChildProcess`` (the few started outside Swift concurrency).
@Suite("Child processes")
struct ChildProcessTests {
    enum Starter: String, CaseIterable, CustomTestStringConvertible {
        case subprocess
        case childProcess
        var testDescription: String { rawValue }

        /// Runs `/bin/sh -c script` and returns what it printed.
        func shell(_ script: String) async throws -> String {
            switch self {
            case .subprocess:
                return try await Subprocess.run(.path("/bin/sh"), arguments: ["-c", script], output: .string(limit: 1 << 16)).standardOutput
            case .childProcess:
                let output = FileManager.default.temporaryDirectory.appending(path: "child-\(UUID().uuidString)").path
                defer { try? FileManager.default.removeItem(atPath: output) }
                try ChildProcess.run("/bin/sh", ["-c", script], output: output)
                return try String(contentsOfFile: output, encoding: .utf8)
            }
        }
    }

    /// The sockets a child shell sees open in its own descriptor table.
    static let countSockets = "find /proc/$$/fd -lname 'socket:*' | wc -l"

    @Test("a child inherits none of the parent's sockets, which SwiftNIO opens without close-on-exec", arguments: Starter.allCases)
    func inheritsNoSockets(_ starter: Starter) async throws {
        // A socket as NIO opens it: no SOCK_CLOEXEC.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(socket >= 0)
        defer { close(socket) }
        // The same child started with a bare posix_spawn sees it: the check can tell.
        let output = FileManager.default.temporaryDirectory.appending(path: "child-fds-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup("\(Self.countSockets) > '\(output)'"), nil]
        defer { argv.forEach { free($0) } }
        try #require(posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        let inherited = try String(contentsOfFile: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect((Int(inherited) ?? 0) >= 1, "a bare posix_spawn passes the socket on")
        let seen = try await starter.shell(Self.countSockets).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(seen == "0")
    }

    @Test("a child starts with every signal's default action, whatever the parent ignores (a tmux server must obey kill-server)",
          arguments: Starter.allCases)
    func defaultSignalActions(_ starter: Starter) async throws {
        // Ignored dispositions are the process's, not a thread's: ignoring one here is seen by
        // whichever thread starts the child. SIGUSR2 is one nothing here uses.
        let previous = signal(SIGUSR2, SIG_IGN)
        defer { signal(SIGUSR2, previous) }
        // grep reads its own status: a shell would reset its dispositions before running anything.
        let line = try await starter.shell("exec /bin/grep SigIgn /proc/self/status").trimmingCharacters(in: .whitespacesAndNewlines)
        let mask = try #require(UInt64(line.dropFirst("SigIgn:".count).trimmingCharacters(in: .whitespaces), radix: 16), "\(line)")
        #expect(mask & (1 << (UInt64(SIGUSR2) - 1)) == 0, "SIGUSR2 is not ignored in the child: \(line)")
    }

    @Test("a child run by swift-subprocess can be killed while it runs", .timeLimit(.minutes(1)))
    func killed() async throws {
        let started = ContinuousClock.now
        let result = try await Subprocess.run(.path("/bin/sleep"), arguments: ["30"], input: .none, output: .discarded,
                                              error: .discarded) { child in
            try child.send(signal: .kill)
        }
        #expect(result.terminationStatus == .signaled(SIGKILL))
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test("ChildProcess starts its child with no signal blocked, whatever the spawning thread blocks")
    func unblocksSignals() throws {
        let output = FileManager.default.temporaryDirectory.appending(path: "child-sigblk-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGCHLD)
        sigaddset(&blocked, SIGTERM)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        // grep reads its own status: a shell would reset its mask before running anything.
        try ChildProcess.run("/bin/grep", ["SigBlk", "/proc/self/status"], output: output)
        let line = try String(contentsOfFile: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.hasPrefix("SigBlk:"), "\(line)")
        #expect(line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces).allSatisfy { $0 == "0" }, "\(line)")
    }

    @Test("ChildProcess exit statuses: 0 runs, another status throws, a killed child reads as 128 + the signal")
    func exitStatuses() throws {
        try ChildProcess.run("/bin/sh", ["-c", "exit 0"])
        #expect(throws: ChildProcess.Failure.exit("/bin/sh", status: 3)) { try ChildProcess.run("/bin/sh", ["-c", "exit 3"]) }
        #expect(throws: ChildProcess.Failure.exit("/bin/sh", status: 128 + SIGKILL)) { try ChildProcess.run("/bin/sh", ["-c", "kill -9 $$"]) }
        #expect(throws: ChildProcess.Failure.self) { try ChildProcess.run("/nonexistent/tool", []) }
    }
}
