import Foundation
#if canImport(Glibc)
import Glibc
#endif
import OfflineTestSupport
import Testing

@Suite("Child processes")
struct ChildProcessTests {
    /// The sockets `/bin/sh` sees open in its own descriptor table when started through `start`.
    func socketsSeenByChild(_ start: (String) throws -> Void) throws -> Int {
        let output = FileManager.default.temporaryDirectory.appending(path: "child-fds-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        try start(output)
        let text = try String(contentsOfFile: output, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return try #require(Int(text), "the child printed \(text)")
    }

    @Test("a child inherits none of the parent's sockets, which SwiftNIO opens without close-on-exec")
    func inheritsNoSockets() throws {
        // A socket as NIO opens it: no SOCK_CLOEXEC.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(socket >= 0)
        defer { close(socket) }
        let count = "find /proc/$$/fd -lname 'socket:*' | wc -l"
        // The same child started with a bare posix_spawn sees it: the check can tell.
        let inherited = try socketsSeenByChild { output in
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sh"), strdup("-c"), strdup("\(count) > '\(output)'"), nil]
            defer { argv.forEach { free($0) } }
            try #require(posix_spawn(&pid, "/bin/sh", nil, nil, argv, environ) == 0)
            ChildProcess.wait(pid)
        }
        #expect(inherited >= 1)
        let seen = try socketsSeenByChild { output in try ChildProcess.run("/bin/sh", ["-c", count], output: output) }
        #expect(seen == 0)
    }

    @Test("a child starts with no signal blocked, whatever the spawning thread blocks (a tmux server must see SIGCHLD)")
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

    @Test("exit statuses: 0 runs, another status throws, and a killed child reads as 128 + the signal")
    func exitStatuses() throws {
        try ChildProcess.run("/bin/sh", ["-c", "exit 0"])
        #expect(throws: ChildProcess.Failure.exit("/bin/sh", status: 3)) { try ChildProcess.run("/bin/sh", ["-c", "exit 3"]) }
        #expect(ChildProcess.wait(try ChildProcess.spawn("/bin/sh", ["-c", "kill -9 $$"])) == 128 + SIGKILL)
        #expect(throws: ChildProcess.Failure.self) { try ChildProcess.spawn("/nonexistent/tool", []) }
    }
}
