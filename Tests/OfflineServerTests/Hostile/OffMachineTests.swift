import Foundation
@testable import OfflineServer
import OfflineTestSupport
import Testing

/// What a server started with `--faults` keeps for this machine: its test controls answer nobody
/// else, whatever address it listens on. "Another machine" is a network namespace the test makes,
/// joined to this one by a veth pair of its own (10.213.N.0/29, the other side with two addresses):
/// the server listens on this side's address only, curl and python ask from the other side, and
/// both are removed at the end.
@Suite("Test controls from another machine", .serialized, .timeLimit(.minutes(1)))
struct OffMachineTests {
    /// Whether this machine can make the namespace: root, with `ip` and `curl`.
    static let canMakeNamespaces = getuid() == 0 && ["/usr/sbin/ip", "/usr/bin/ip"].contains(where: FileManager.default.isExecutableFile)
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    /// A namespace and its veth pair, from `create()` until `remove()`.
    struct Namespace {
        let name: String
        let hostAddress: String
        let hostLink: String
        /// The other machine's two addresses.
        let clients: [String]

        static func create() throws -> Namespace {
            let tag = String(UInt32.random(in: 0..<0xFFFF_FF), radix: 16)
            let subnet = Int.random(in: 1...250)
            let namespace = Namespace(name: "okit-off-\(tag)", hostAddress: "10.213.\(subnet).1", hostLink: "okh\(tag)",
                                      clients: ["10.213.\(subnet).2", "10.213.\(subnet).3"])
            let inside = "okn\(tag)"
            do {
                try ip(["netns", "add", namespace.name])
                try ip(["link", "add", namespace.hostLink, "type", "veth", "peer", "name", inside])
                try ip(["link", "set", inside, "netns", namespace.name])
                try ip(["addr", "add", "\(namespace.hostAddress)/29", "dev", namespace.hostLink])
                try ip(["link", "set", namespace.hostLink, "up"])
                try ip(["-n", namespace.name, "addr", "add", "10.213.\(subnet).2/29", "dev", inside])
                try ip(["-n", namespace.name, "addr", "add", "10.213.\(subnet).3/29", "dev", inside])
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

        /// What `script` (Python 3, run in the namespace) printed.
        func python(_ script: String) throws -> String {
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("okit-off-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: output) }
            try ChildProcess.run(Self.tool, ["netns", "exec", name, "python3", "-c", script], output: output)
            return (try String(contentsOfFile: output, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)
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

    @Test("one address holds its share of connections and no more; another address is served; a silent connection is closed at the head deadline",
          .enabled(if: canMakeNamespaces, "needs root, ip, curl and python3 to make another machine"))
    func connectionsPerAddress() async throws {
        let namespace = try await offPool { try Namespace.create() }
        defer { namespace.remove() }
        var configuration = ServerConfiguration.testing(idleTimeout: .seconds(30), requestHeadTimeout: .seconds(1), maxConnections: 64)
        configuration.maxConnectionsPerAddress = 8
        configuration.host = namespace.hostAddress
        try await withLiveServer(configuration) { port in
            // From the first address: 20 connections opened and left silent; how many the server
            // closed at once, and, of those it kept, how many are still open 3 s later (past the
            // 1 s head deadline). From the second address, meanwhile: /health.
            let script = """
                socket, time = __import__("socket"), __import__("time")
                def connect(source):
                    s = socket.socket(); s.bind((source, 0)); s.settimeout(5); s.connect(("\(namespace.hostAddress)", \(port))); return s
                def closed(s):
                    s.settimeout(0.05)
                    try:
                        return s.recv(1) == b""
                    except socket.timeout:
                        return False
                    except OSError:
                        return True
                held = [connect("\(namespace.clients[0])") for _ in range(20)]
                time.sleep(0.5)
                refused = sum(closed(s) for s in held)
                other = connect("\(namespace.clients[1])")
                other.sendall(b"GET /health HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
                other.settimeout(5)
                health = other.recv(64).split(b"\\r\\n")[0].decode()
                time.sleep(3)
                kept = [s for s in held if not closed(s)]
                print(refused, len(kept), health, sep="|")
                """
            let answer = try await offPool { try namespace.python(script) }.split(separator: "|").map(String.init)
            #expect(answer.count == 3, "\(answer)")
            guard answer.count == 3 else { return }
            #expect(answer[0] == "12", "20 opened with a share of 8: 12 closed at once (\(answer))")
            #expect(answer[2] == "HTTP/1.1 204 No Content", "another address is served (\(answer))")
            #expect(answer[1] == "0", "the 8 kept, silent, are closed at the 1 s head deadline (\(answer))")
        }
    }

    @Test("tokens naming no one: an address is refused before a look-up once it sent four, then one a second",
          .enabled(if: canMakeNamespaces, "needs root, ip, curl and python3 to make another machine"))
    func madeUpTokens() async throws {
        let namespace = try await offPool { try Namespace.create() }
        defer { namespace.remove() }
        var configuration = ServerConfiguration.testing()
        configuration.host = namespace.hostAddress
        try await withLiveServer(configuration) { port in
            let script = """
                http = __import__("http.client", fromlist=["HTTPConnection"])
                secrets, time = __import__("secrets"), __import__("time")
                def get(token):
                    c = http.HTTPConnection("\(namespace.hostAddress)", \(port), timeout=5, source_address=("\(namespace.clients[0])", 0))
                    c.request("GET", "/api/records/notes", headers={"Authorization": "Bearer " + token})
                    return c.getresponse().status
                statuses = [get(secrets.token_urlsafe(32)) for _ in range(12)]
                time.sleep(1.1)
                print(",".join(map(str, statuses)), get(secrets.token_urlsafe(32)), sep="|")
                """
            let answer = try await offPool { try namespace.python(script) }.split(separator: "|").map(String.init)
            #expect(answer.count == 2, "\(answer)")
            guard answer.count == 2 else { return }
            let statuses = answer[0].split(separator: ",").map(String.init)
            #expect(Array(statuses.prefix(4)) == ["401", "401", "401", "401"], "\(statuses)")
            #expect(statuses.filter { $0 == "429" }.count >= 6, "refused before a look-up: \(statuses)")
            #expect(answer[1] == "401", "a second later, one more is looked at (\(answer))")
        }
    }
}

