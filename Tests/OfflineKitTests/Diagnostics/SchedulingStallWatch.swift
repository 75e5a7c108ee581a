import Dispatch
import Foundation
import NIOCore
import NIOPosix
import OfflineTestSupport
import Synchronization
import Testing

/// A diagnostic, not a check: run with `OFFLINEKIT_STALL_WATCH=SECONDS` beside the rest of the
/// suite, it measures, every 20 ms from a thread of its own, how long a task takes to start on
/// Swift's cooperative pool and a job on each of NIO's shared event loops. When either waits longer than
/// `OFFLINEKIT_STALL_THRESHOLD_MS` (300 by default), it records every thread's stack with
/// `eu-stack` into `OFFLINEKIT_STALL_DIR` (`/tmp/offlinekit-stalls`), so a test that ran out of
/// its time limit can be matched with what held the threads meanwhile. Recording stops every
/// thread for seconds; with `OFFLINEKIT_STALL_STACKS=0` the watch only measures, so each stall's
/// length is what the probe waited and nothing else.
@Suite("Scheduling stall watch (diagnostic)")
struct SchedulingStallWatch {
    static let seconds = ProcessInfo.processInfo.environment["OFFLINEKIT_STALL_WATCH"].flatMap(Double.init)

    @Test("records the stacks of every stall of the cooperative pool or the event loops", .enabled(if: seconds != nil))
    func watch() async throws {
        let environment = ProcessInfo.processInfo.environment
        let threshold = environment["OFFLINEKIT_STALL_THRESHOLD_MS"].flatMap(Int.init) ?? 300
        var directory: URL? = URL(fileURLWithPath: environment["OFFLINEKIT_STALL_DIR"] ?? "/tmp/offlinekit-stalls")
        if environment["OFFLINEKIT_STALL_STACKS"] == "0" { directory = nil }
        if let directory { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) }
        let watcher = StallWatcher(seconds: Self.seconds ?? 0, thresholdMilliseconds: threshold, directory: directory)
        let report = await watcher.run()
        print("stall watch: \(report)")
    }
}

private final class StallWatcher: Sendable {
    let seconds: Double
    let thresholdMilliseconds: Int
    /// Where stacks are recorded; nil to measure only.
    let directory: URL?

    init(seconds: Double, thresholdMilliseconds: Int, directory: URL?) {
        self.seconds = seconds
        self.thresholdMilliseconds = thresholdMilliseconds
        self.directory = directory
    }

    func run() async -> String {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: self.watch()) }
            thread.start()
        }
    }

    private func watch() -> String {
        let end = DispatchTime.now() + seconds
        var samples = 0
        var stalls: [String] = []
        var worstPool = 0.0
        var worstLoop = 0.0
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
        // The control: a thread of its own, woken with each probe. When it waits as long as the
        // probe did, the cores were busy and no thread ran; when it starts at once, something
        // held the pool or the loop.
        let control = ControlThread()
        var worstControl = 0.0
        defer { control.stop() }
        while DispatchTime.now() < end {
            for target in ["pool"] + loops.indices.map({ "loop\($0)" }) {
                let started = DispatchTime.now()
                let signal = DispatchSemaphore(value: 0)
                // When the probe ran, taken by the probe itself: recording the stacks takes
                // seconds under load and stops every thread meanwhile, so the watcher's own
                // clock after the recording would count that too.
                let ran = Mutex<DispatchTime?>(nil)
                let probe: @Sendable () -> Void = {
                    ran.withLock { $0 = DispatchTime.now() }
                    signal.signal()
                }
                control.wake()
                if target == "pool" {
                    Task.detached(operation: probe)
                } else {
                    loops[Int(target.dropFirst(4))!].execute(probe)
                }
                var stopped: UInt64 = 0
                var recorded = ""
                if signal.wait(timeout: started + .milliseconds(thresholdMilliseconds)) == .timedOut {
                    if let directory {
                        let name = "stall-\(stalls.count + 1)-\(target).txt"
                        let recording = DispatchTime.now()
                        dumpStacks(to: directory.appendingPathComponent(name))
                        let done = DispatchTime.now()
                        signal.wait()
                        // The recording stops every thread while it reads them: its time is not
                        // the probe's wait, so the part of it before the probe ran is left out.
                        let probeRan = ran.withLock { $0! }
                        stopped = min(probeRan, done).uptimeNanoseconds - min(probeRan, recording).uptimeNanoseconds
                        recorded = String(format: " (%@, recorded in %.1f s)", name,
                                          Double(done.uptimeNanoseconds - recording.uptimeNanoseconds) / 1e9)
                    } else {
                        signal.wait()
                    }
                }
                let waited = Double(ran.withLock { $0! }.uptimeNanoseconds - started.uptimeNanoseconds - stopped) / 1e9
                let controlWaited = Double(control.waitForRun().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
                worstControl = max(worstControl, controlWaited)
                if waited * 1000 > Double(thresholdMilliseconds) || !recorded.isEmpty {
                    stalls.append(String(format: "%@ %.3f s, the control %.3f s", target, waited, controlWaited) + recorded)
                }
                if target == "pool" { worstPool = max(worstPool, waited) } else { worstLoop = max(worstLoop, waited) }
                samples += 1
            }
            usleep(20_000)
        }
        return String(format: "%d samples, worst pool %.3f s, worst loop %.3f s, worst control thread %.3f s, %d stalls: ",
                      samples, worstPool, worstLoop, worstControl, stalls.count)
            + stalls.joined(separator: ", ")
    }

    /// Records every thread's stack into `file`. The threads are stopped only for the addresses
    /// (`eu-stack -q`: 0.16 s idle, where naming each frame as it goes took 0.59 s); the names are
    /// looked up afterwards in the process's own maps, while it runs on.
    private func dumpStacks(to file: URL) {
        let script = """
            f='\(file.path)'; p=\(getpid())
            eu-stack -q -n 64 -p $p > "$f.raw" 2>&1
            grep -o '0x[0-9a-f]*' "$f.raw" | sort -u | eu-addr2line -p $p -f -a | paste - - - > "$f.map"
            awk -F'\\t' 'NR == FNR { a = $1; sub(/^0x0*/, "", a); name[a] = $2; next }
                { split($0, w, " "); a = w[2]; sub(/^0x0*/, "", a); print (a in name) ? $0 " " name[a] : $0 }' \\
                "$f.map" "$f.raw" | swift demangle --simplified > "$f"
            rm -f "$f.raw" "$f.map"
            """
        try? ChildProcess.run("/bin/sh", ["-c", script])
    }
}

/// A thread that notes when it ran each time it is woken: the watch's baseline for how long any
/// thread waits for a core at that moment.
private final class ControlThread: Sendable {
    private let go = DispatchSemaphore(value: 0)
    private let ran = DispatchSemaphore(value: 0)
    private let state = Mutex<(at: DispatchTime, stopped: Bool)>((DispatchTime.now(), false))

    init() {
        Thread { [self] in
            while true {
                go.wait()
                let stopped = state.withLock { state in
                    state.at = DispatchTime.now()
                    return state.stopped
                }
                ran.signal()
                if stopped { return }
            }
        }.start()
    }

    func wake() { go.signal() }

    /// Waits for the run `wake()` asked for, and returns when it ran.
    func waitForRun() -> DispatchTime {
        ran.wait()
        return state.withLock { $0.at }
    }

    func stop() {
        state.withLock { $0.stopped = true }
        go.signal()
    }
}
