import OfflineCore
import OfflineKit

extension ShellOutcome {
    /// A timer (a toast's fade): sends `event` once `duration` has passed on `clock`, unless the
    /// store's loop ends first.
    static func after(_ duration: Duration, on clock: any Clock<Duration>, send event: Event) -> Self {
        .child { send in
            guard (try? await clock.sleep(for: duration)) != nil else { return }
            send(event)
        }
    }

    /// The connectivity monitor as an input: every status, the current one first, as `event`.
    static func following(_ connectivity: any ConnectivitySource, as event: @escaping @Sendable (ConnectivityStatus) -> Event) -> Self {
        .child { send in
            for await status in connectivity.statusUpdates() { send(event(status)) }
        }
    }
}
