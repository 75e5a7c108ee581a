import Foundation
import Testing

/// The chat and workspace screen in a real terminal: tmux runs `offline demo` at 80×24, the test
/// types keys and reads the pane. Needs tmux and the built binary (`scripts/test.sh` sets
/// `OFFLINEKIT_BIN`).
@Suite(
    "Chat & workspace in a terminal (tmux)",
    .integration,
    .timeLimit(.minutes(2))
)
struct WorkspaceTerminalTests {
    @Test("offline, bank accounts are blocked and a sent message shows pending; online again it is sent and unmarked")
    func offlineMessageThenOnline() async throws {
        try await withTerminalDemo { tmux in
            try await tmux.send("4")  // the screen's number: tabbing raced the redraw and could wrap around
            _ = try await tmux.waitFor("Sync queue: everything sent", "General", "Team trip")

            try await tmux.send("n")                       // slow
            try await tmux.send("n")                       // offline
            _ = try await tmux.waitFor("Network switch: offline", "Monitor: offline")

            try await tmux.send("b")
            _ = try await tmux.waitFor("This feature requires an internet connection.")
            try await tmux.send("c")
            try await tmux.send("m")
            try await tmux.run(["send-keys", "-t", "demo", "-l", "hello from the train"])
            try await tmux.send("Enter")
            let offline = try await tmux.waitFor("~ you: hello from the train", "1 waiting")
            #expect(offline.contains("next try when back online"))

            try await tmux.send("n")                       // online again
            // The queue's line and the message's marker come from one observation of the outbox:
            // the first frame whose queue reads empty has lost the marker too.
            let online = try await tmux.waitFor("Monitor: online", "Sync queue: everything sent", "you: hello from the train")
            #expect(!online.contains("~ you: hello from the train"), "\(online)")
            #expect(!online.contains("waiting"))

            try await tmux.send("q")
        }
    }
}
