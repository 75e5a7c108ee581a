import Foundation
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// What a server started with `--faults` keeps for this machine: its test controls answer nobody
/// else, whatever address it listens on. "Another machine" is a network namespace the test makes,
/// joined to this one by a veth pair of its own (10.213.N.0/30): the server listens on this side's
/// address only, curl asks from the other side, and both are removed at the end.
@Suite("Test controls from another machine", .serialized, .timeLimit(.minutes(1)))
struct OffMachineTests {
    /// Whether this machine can make the namespace: root, with `ip` and `curl`.
    static let canMakeNamespaces = getuid() == 0 && ["/usr/sbin/ip", "/usr/bin/ip"].contains(where: FileManager.default.isExecutableFile)
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")

    /// A namespace and its veth pair, from `create()` until `remove()`.
    struct Namespace {
        let name: String
        let hostAddress: String
        let hostLink: String

        static func create() throws -> Namespace {
            let tag = String(UInt32.random(in: 0..<0xFFFF_FF), radix: 16)
            let subnet = Int.random(in: 1...250)
            let namespace = Namespace(name: "okit-off-\(tag)", hostAddress: "10.213.\(subnet).1", hostLink: "okh\(tag)")
            let inside = "okn\(tag)"
            do {
                try ip(["netns", "add", namespace.name])
                try ip(["link", "add", namespace.hostLink, "type", "veth", "peer", "name", inside])
                try ip(["link", "set", inside, "netns", namespace.name])
                try ip(["addr", "add", "\(namespace.hostAddress)/30", "dev", namespace.hostLink])
                try ip(["link", "set", namespace.hostLink, "up"])
                try ip(["-n", namespace.name, "addr", "add", "10.213.\(subnet).2/30", "dev", inside])
                try ip(["-n", namespace.name, "link", "set", inside, "up"])
            } catch {
                namespace.remove()
                throw error
            }
            return namespace
        }

        /// Deletes the namespace, which takes its end of the pair and so the pair.
        func remove() {
            try? Self.ip(["link", "del", hostLink])
            try? Self.ip(["netns", "del", name])
        }

        /// The status curl got for `method path` from inside the namespace ("000": no answer).
        func status(_ method: String, _ url: String, body: String? = nil) throws -> String {
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("okit-off-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: output) }
            var arguments = ["netns", "exec", name, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-X", method]
            if let body { arguments += ["-H", "Content-Type: application/json", "--data", body] }
            try? ChildProcess.run(Self.tool, arguments + [url], output: output)
            return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }

        static let tool = FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") ? "/usr/sbin/ip" : "/usr/bin/ip"
        static func ip(_ arguments: [String]) throws { try ChildProcess.run(tool, arguments) }
    }

    @Test("with --faults and packs, the pack publisher, the fault switch and the pack faults answer 404 to another machine",
          .enabled(if: canMakeNamespaces, "needs root, ip and curl to make another machine"))
    func controlsRefuseOtherMachines() async throws {
        let namespace = try await offPool { try Namespace.create() }
        defer { namespace.remove() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("offline-off-machine-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = ServerConfiguration.testing(packsDirectory: folder.appendingPathComponent("packs"), faultsEnabled: true)
        configuration.host = namespace.hostAddress
        try await withLiveServer(configuration) { port in
            let base = "http://\(namespace.hostAddress):\(port)"
            let answers = try await offPool {
                [
                    "health": try namespace.status("GET", "\(base)/health"),
                    "publish": try namespace.status("POST", "\(base)/_demo/packs/city-paris/publish"),
                    "fault switch": try namespace.status("PUT", "\(base)/_faults/routes", body: #"{"path":"/health","fault":{"drop":{}}}"#),
                    "fault list": try namespace.status("GET", "\(base)/_faults/routes"),
                    "pack faults": try namespace.status("PUT", "\(base)/_faults/packs", body: #"{"bytesPerSecond":1000}"#),
                ]
            }
            // The other machine reaches the server: its 404s are the server's.
            #expect(answers["health"] == "204", "\(answers)")
            for control in ["publish", "fault switch", "fault list", "pack faults"] {
                #expect(answers[control] == "404", "\(control) from another machine: \(answers)")
            }
        }
    }
}
