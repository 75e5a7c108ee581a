import Foundation
import Testing

/// The city guide in a real terminal: tmux runs `offline demo` at 80×24, the test types keys
/// and reads the pane. Needs tmux and the built binary (`scripts/test.sh` sets `OFFLINEKIT_BIN`).
@Suite(
    "City guide in a terminal (tmux)",
    .integration,
    .timeLimit(.minutes(2))
)
struct CityGuideTerminalTests {
    @Test("choose a city, download its pack, go offline: chips, the saved copy and offline search; back online")
    func downloadThenOffline() async throws {
        try await withTerminalDemo { tmux in
            _ = try await tmux.waitFor("Monitor: online", "City guide ]")
            try await tmux.send("c")
            try await tmux.send("-l", "Par")
            // The field and the list are drawn from one state: once the field shows the typed text,
            // the list holds only cities it names (the empty field's list also shows Paris, France).
            _ = try await tmux.waitFor("Par█", "Paris, France")
            try await tmux.send("Enter")
            _ = try await tmux.waitFor("Download Paris for offline", "[Download pack]")

            try await tmux.send("d")
            let saved = try await tmux.waitFor("Tier 1 Available", "Already saved for offline", "Find a toilet")
            #expect(!saved.contains("Download Paris for offline"))

            // The live monitor decides slow vs offline itself; the weak-network state is covered by
            // the scenario tests, with the monitor kept in step with the switch.
            try await tmux.send("n")                       // slow
            _ = try await tmux.waitFor("Network switch: slow")
            try await tmux.send("n")                       // offline
            let offline = try await tmux.waitFor("Offline: choose a downloaded city", "[Paris]", "Using your saved copy", "Network switch: offline")
            #expect(!offline.contains("Connection is slow"))
            #expect(offline.contains("Find a toilet"))

            // Offline search: the results come from the pack on the device.
            try await tmux.send("/")
            try await tmux.send("-l", "atm")
            _ = try await tmux.waitFor("Cash and ATMs")
            try await tmux.send("Enter")
            _ = try await tmux.waitFor("Card declined", "Lost card")
            try await tmux.send("h")

            try await tmux.send("n")                       // online again
            let online = try await tmux.waitFor("Monitor: online", "Network switch: online")
            #expect(!online.contains("Offline: choose a downloaded city"))
            try await tmux.send("q")
        }
    }
}
