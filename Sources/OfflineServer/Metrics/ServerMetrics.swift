import Foundation
import Metrics

/// What the server counts for its operators, through swift-metrics: to the factory the server was
/// given (`offline serve --metrics-port` gives a Prometheus registry), or to the process's
/// bootstrapped `MetricsSystem`, which does nothing unless the app embedding the server set one.
///
/// | Metric | Kind | What |
/// |---|---|---|
/// | `offlinekit_sync_pulls_total` | counter | pages served, by `outcome` (`ok`, `gone`) |
/// | `offlinekit_sync_changes_sent_total` | counter | rows and deletions in those pages |
/// | `offlinekit_sync_pull_behind_positions` | histogram | feed lag: how far the head was past the position the device acknowledged (its cursor), at each pull after the first |
/// | `offlinekit_sync_streams_open` | gauge | live event streams open on this instance |
/// | `offlinekit_sync_feed_head` | gauge | the feed's newest position, read at each scrape |
/// | `offlinekit_capture_behind` | gauge | capture lag: source positions committed and not yet in the feed (SQLite: noted changes; PostgreSQL: WAL bytes), read at each scrape |
/// | `offlinekit_capture_lag_seconds` | gauge | how long ago capture last caught up with its source, while the source has moved on since (0 when caught up) |
/// | `offlinekit_capture_stopped_tables` | gauge | tables capture stopped reading because they no longer fit the rules |
/// | `offlinekit_capture_capturing` | gauge | 1 on the instance that captures, 0 on the others |
/// | `offlinekit_capture_restarts_total` | counter | times capture started over after a failure (a lost connection, a lost slot) |
/// | `offlinekit_idempotent_replays_total` | counter | writes answered from their stored answer instead of running again |
/// | `offlinekit_purge_runs_total` | counter | purges of expired keys, tokens and tombstones that completed |
/// | `offlinekit_purge_tombstones_total` | counter | feed tombstones those purges removed |
/// | `offlinekit_http_server_errors_total` | counter | requests answered `500` by an error no route answered (each logged at `error` with its cause) |
struct ServerMetrics: Sendable {
    let pulls: Counter
    let pullsGone: Counter
    let changesSent: Counter
    let pullBehind: Recorder
    let streamsOpen: Meter
    let feedHead: Gauge
    let captureBehind: Gauge
    let captureLag: Gauge
    let captureStoppedTables: Gauge
    let captureCapturing: Gauge
    let captureRestarts: Counter
    let replays: Counter
    let purgeRuns: Counter
    let purgedTombstones: Counter
    let serverErrors: Counter

    init(factory: any MetricsFactory = MetricsSystem.factory) {
        pulls = Counter(label: "offlinekit_sync_pulls_total", dimensions: [("outcome", "ok")], factory: factory)
        pullsGone = Counter(label: "offlinekit_sync_pulls_total", dimensions: [("outcome", "gone")], factory: factory)
        changesSent = Counter(label: "offlinekit_sync_changes_sent_total", factory: factory)
        pullBehind = Recorder(label: "offlinekit_sync_pull_behind_positions", factory: factory)
        streamsOpen = Meter(label: "offlinekit_sync_streams_open", factory: factory)
        feedHead = Gauge(label: "offlinekit_sync_feed_head", factory: factory)
        captureBehind = Gauge(label: "offlinekit_capture_behind", factory: factory)
        captureLag = Gauge(label: "offlinekit_capture_lag_seconds", factory: factory)
        captureStoppedTables = Gauge(label: "offlinekit_capture_stopped_tables", factory: factory)
        captureCapturing = Gauge(label: "offlinekit_capture_capturing", factory: factory)
        captureRestarts = Counter(label: "offlinekit_capture_restarts_total", factory: factory)
        replays = Counter(label: "offlinekit_idempotent_replays_total", factory: factory)
        purgeRuns = Counter(label: "offlinekit_purge_runs_total", factory: factory)
        purgedTombstones = Counter(label: "offlinekit_purge_tombstones_total", factory: factory)
        serverErrors = Counter(label: "offlinekit_http_server_errors_total", factory: factory)
    }
}
