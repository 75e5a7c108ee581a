import Foundation
import OfflineKitTesting
import Testing
import OfflineTestSupport

/// Under CI every suite runs: the integration suites are turned on by `OFFLINEKIT_INTEGRATION`
/// and need root, the built binary, nginx, PostgreSQL and tmux. A suite that would quietly skip
/// for want of one of them makes this test fail instead, naming what is missing.
@Suite("Integration suites under CI")
struct IntegrationUnderCITests {
    static var underCI: Bool {
        let value = ProcessInfo.processInfo.environment["CI"] ?? ""
        return !value.isEmpty && value != "false" && value != "0"
    }

    /// What a skipped integration suite would need, with whether this machine has it.
    static func requirements() -> [(String, Bool)] {
        let environment = ProcessInfo.processInfo.environment
        let fileManager = FileManager.default
        let path = (environment["PATH"] ?? "").split(separator: ":").map(String.init)
        let postgres = ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .contains { fileManager.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/initdb") }
        return [
            ("OFFLINEKIT_INTEGRATION set (scripts/test.sh sets it)", environment["OFFLINEKIT_INTEGRATION"] != nil),
            ("OFFLINEKIT_BIN naming the built `offline`", environment["OFFLINEKIT_BIN"].map(fileManager.isExecutableFile(atPath:)) ?? false),
            ("running as root (network namespaces, tmpfs, runuser)", getuid() == 0),
            ("nginx", LoopbackNginx.executable != nil),
            ("PostgreSQL's initdb under /usr/lib/postgresql", postgres),
            ("tmux on PATH", path.contains { fileManager.isExecutableFile(atPath: $0 + "/tmux") }),
        ]
    }

    @Test("under CI, nothing an integration suite needs is missing, so none of them is skipped",
          .enabled(if: underCI))
    func nothingSkipped() {
        let missing = Self.requirements().filter { !$0.1 }.map(\.0)
        #expect(missing.isEmpty, "integration suites would be skipped under CI; missing: \(missing.joined(separator: ", "))")
    }
}
