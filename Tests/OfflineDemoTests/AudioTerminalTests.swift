import Foundation
import Testing

/// The audio sessions in a real terminal: tmux runs `offline demo` at 80×24, the test types keys
/// and reads the pane. Needs tmux and the built binary (`scripts/test.sh` sets `OFFLINEKIT_BIN`).
@Suite(
    "Audio sessions in a terminal (tmux)",
    .integration,
    .timeLimit(.minutes(2))
)
struct AudioTerminalTests {
    @Test("first download asks for storage, then offline the review screen plays the local file and refuses Generate")
    func downloadThenOfflineReview() async throws {
        try await withTerminalDemo { tmux in
            _ = try await tmux.waitFor("Monitor: online")
            try await tmux.send("3")  // the screen's number: tabbing raced the redraw and could wrap around
            _ = try await tmux.waitFor("Calm breathing", "Ease on flights", "Storage permission: asked on the first download")

            try await tmux.send("d")
            _ = try await tmux.waitFor("Allow storage for downloads?")
            try await tmux.send("y")
            let listed = try await tmux.waitFor("[Downloaded]", "Storage permission: allowed")
            #expect(listed.contains("encrypted on this device"))

            try await tmux.send("Enter")
            _ = try await tmux.waitFor("A short breathing exercise")
            try await tmux.send("n")                       // slow
            try await tmux.send("n")                       // offline
            let offline = try await tmux.waitFor("Offline playback available", "Offline mode", "Network switch: offline")
            #expect(offline.contains("[Generate] (disabled)"))
            try await tmux.send(".")
            try await tmux.send(".")
            _ = try await tmux.waitFor("0:01 / 1:00", "(device)")
            try await tmux.send("g")
            _ = try await tmux.waitFor("This feature requires an internet connection.")

            try await tmux.send("Left")                    // back to the list
            try await tmux.send("Down")
            try await tmux.send("Enter")
            let missing = try await tmux.waitFor("Deep focus", "No offline access")
            #expect(missing.contains("[Play] (disabled)"))

            try await tmux.send("q")
        }
    }
}
