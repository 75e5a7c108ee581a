#if canImport(Darwin)
public import Foundation

/// Pack downloads that go on while the app is suspended (Apple platforms): a background
/// `URLSession` fetches each missing file of a pack, the store verifies and stages each one as it
/// lands, and the pack is installed when the last one has, in one atomic step as always.
///
/// ```swift
/// let background = BackgroundPackDownloads(store: packs, identifier: "com.example.app.packs")
///
/// // In the app delegate: the system relaunches the app in the background with the session's
/// // events; hand them over, and the system is told when they are handled.
/// func application(_ application: UIApplication,
///                  handleEventsForBackgroundURLSession identifier: String,
///                  completionHandler: @escaping () -> Void) {
///     background.handleEvents(for: identifier, completionHandler: completionHandler)
/// }
///
/// // When the user asks for a 1 GiB pack:
/// try await background.start("paris")
/// ```
///
/// The transfer itself is the system's: it chooses when to run on a metered or constrained
/// network according to the configuration, and files that fail are fetched again by the next
/// ``start(_:)`` or by ``PackStore/download(_:)``, which resumes from what is staged. Everything
/// this type does besides driving the session (listing the missing files, verifying, staging,
/// installing) is ``PackStore``'s shared code: ``PackStore/pendingFiles(_:)`` and
/// ``PackStore/adopt(_:downloadedAt:)``.
public final class BackgroundPackDownloads: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
    // @unchecked: `session` is written once, in init, before `self` is shared; the rest is
    // immutable or locked.
    public let store: PackStore
    public let identifier: String
    // Set once, at the end of init: the session needs `self` as its delegate.
    private var session: URLSession!
    private let systemCompletion = Locked<(@Sendable () -> Void)?>(nil)
    private let adopting = Locked<[Task<Void, Never>]>([])

    /// - Parameter configure: adjusts the background configuration (for example
    ///   `allowsExpensiveNetworkAccess = false` to wait for Wi-Fi).
    public init(store: PackStore, identifier: String, configure: (URLSessionConfiguration) -> Void = { _ in }) {
        self.store = store
        self.identifier = identifier
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sessionSendsLaunchEvents = true
        configure(configuration)
        super.init()
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    }

    /// Hands the pack's missing files to the system and returns once they are queued. A pack with
    /// nothing missing is installed at once.
    ///
    /// - Throws: what ``PackStore/pendingFiles(_:)`` throws (offline, permission, policy, space).
    public func start(_ packID: String) async throws {
        let files = try await store.pendingFiles(packID)
        guard !files.isEmpty else {
            _ = try await store.download(packID)
            return
        }
        for file in files {
            let task = session.downloadTask(with: file.url)
            task.taskDescription = String(decoding: try JSONEncoder().encode(file), as: UTF8.self)
            task.countOfBytesClientExpectsToReceive = file.size
            task.resume()
        }
    }

    /// Keeps the system's completion handler for the session `identifier` names, and calls it
    /// once the events are handled (each finished file verified and staged).
    public func handleEvents(for identifier: String, completionHandler: @escaping @Sendable () -> Void) {
        guard identifier == self.identifier else { return }
        systemCompletion.withLock { $0 = completionHandler }
    }

    public func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        guard let request = Self.request(of: downloadTask),
              (downloadTask.response as? HTTPURLResponse)?.statusCode == 200
        else { return }
        // The system removes `location` when this returns: keep the bytes first.
        let kept = FileManager.default.temporaryDirectory.appendingPathComponent("offlinekit-\(UUID().uuidString)")
        do { try FileManager.default.moveItem(at: location, to: kept) } catch { return }
        let work = Task { [store] in
            defer { try? FileManager.default.removeItem(at: kept) }
            // A copy that does not verify stays unstaged; the next download fetches it again.
            try? await store.adopt(request, downloadedAt: kept)
            await self.installIfComplete(request.packID)
        }
        adopting.withLock { $0.append(work) }
    }

    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        // Nothing to keep: a file that failed is not staged, and the next start or download
        // fetches it again (a foreground download resumes it by range).
    }

    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
        let work = adopting.withLock { tasks in defer { tasks = [] }; return tasks }
        let completion = systemCompletion.withLock { handler in defer { handler = nil }; return handler }
        Task { @MainActor in
            for task in work { await task.value }
            completion?()
        }
    }

    /// Installs `packID` once no file of it is still in the session's hands.
    private func installIfComplete(_ packID: String) async {
        let running = await session.allTasks.contains { task in
            task.state == .running && Self.request(of: task)?.packID == packID
        }
        guard !running else { return }
        // Every file is staged: this verifies and installs without fetching them again.
        _ = try? await store.download(packID)
    }

    private static func request(of task: URLSessionTask) -> PackFileRequest? {
        task.taskDescription.flatMap { try? JSONDecoder().decode(PackFileRequest.self, from: Data($0.utf8)) }
    }
}
#endif
