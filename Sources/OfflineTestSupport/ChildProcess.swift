#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs a tool to completion without Swift concurrency, for the few callers that cannot wait on
/// it: the shared PostgreSQL cluster is started under a lock on a thread of its own, and the
/// stall watch dumps the process's stacks from its own thread precisely when the cooperative
/// pool is stuck. Every other child process of the tests runs through swift-subprocess, whose
/// API is only `async`; that is all it cannot do here.
///
/// Like swift-subprocess, it starts the child with nothing inherited but the three standard
/// streams: SwiftNIO opens its sockets without close-on-exec, and neither `Foundation.Process`
/// nor a bare `posix_spawn` closes them in the child. A child that outlives its spawner (the
/// tmux server, PostgreSQL's postmaster) then keeps every listener and connection the tests had
/// open at that moment: a listener a test closed still accepts connections nobody answers, a
/// port cannot be listened on again, and a connection a server closed stays open.
public enum ChildProcess {
    public enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// `posix_spawn` failed with this `errno`.
        case spawn(String, errno: Int32)
        /// The tool ran and exited with a status other than 0.
        case exit(String, status: Int32)

        public var description: String {
            switch self {
            case .spawn(let tool, let code): "\(tool) could not be started (errno \(code))."
            case .exit(let tool, let status): "\(tool) exited with status \(status)."
            }
        }
    }

    /// Starts `tool` with `arguments`, standard input from `/dev/null`, standard output to the
    /// file `output` and standard error to the file `errors` (`/dev/null` when nil; the same
    /// path for both merges them), and returns its process id.
    private static func spawn(_ tool: String, _ arguments: [String], output: String? = nil, errors: String? = nil) throws -> pid_t {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([tool] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        #if canImport(Glibc)
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #else
        var actions: posix_spawn_file_actions_t?
        var attributes: posix_spawnattr_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let errors, errors == output {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, errors ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        // The child starts with no signal blocked and every signal's default action: a thread of
        // the tests blocks many (SIGCHLD among them), and a tmux server that inherited that mask
        // never reaped its pane's process, so kill-server left it running after every test.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        #if canImport(Darwin)
        // Every descriptor not named by the file actions is closed in the child.
        flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #else
        closeInheritedDescriptors(&actions)
        #endif
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let result = posix_spawn(&pid, tool, &actions, &attributes, argv, environ)
        guard result == 0 else { throw Failure.spawn(tool, errno: result) }
        return pid
    }

    /// Waits for `pid` to exit and returns its exit status (128 + the signal when killed).
    private static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return exitStatus(status)
    }

    /// Runs `tool` to completion, standard input from `/dev/null`, standard output to the file
    /// `output` and standard error to the file `errors` (`/dev/null` when nil; the same path for
    /// both merges them).
    ///
    /// - Throws: ``Failure`` when it cannot start or exits with a status other than 0 (128 + the
    ///   signal when killed).
    public static func run(_ tool: String, _ arguments: [String], output: String? = nil, errors: String? = nil) throws {
        let status = wait(try spawn(tool, arguments, output: output, errors: errors))
        guard status == 0 else { throw Failure.exit(tool, status: status) }
    }

    private static func exitStatus(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    #if canImport(Glibc)
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which the Glibc module
    /// does not declare.
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Closes every descriptor above the standard three in the child; with an older glibc, marks
    /// the ones open now close-on-exec instead.
    private static func closeInheritedDescriptors(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>) {
        if let addCloseFrom, addCloseFrom(actions, 3) == 0 { return }
        guard let folder = opendir("/proc/self/fd") else { return }
        defer { closedir(folder) }
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let descriptor = Int32(name), descriptor > 2 {
                _ = fcntl(descriptor, F_SETFD, fcntl(descriptor, F_GETFD) | FD_CLOEXEC)
            }
        }
    }
    #endif
}
