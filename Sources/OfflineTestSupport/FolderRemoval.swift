public import Foundation

/// Removes test folders on a queue of its own: a folder with a large pack took 1.65 s to delete,
/// holding a thread of Swift's cooperative pool (the test that dropped it ran there) and every
/// test waiting for one. The process waits for the queue as it exits, so no folder is left.
public enum FolderRemoval {
    private static let queue: DispatchQueue = {
        let queue = DispatchQueue(label: "offlinekit.tests.folder-removal")
        atexit { FolderRemoval.queue.sync {} }
        return queue
    }()

    /// Removes `url` and what it holds, later, off the cooperative pool.
    public static func remove(_ url: URL) {
        queue.async { try? FileManager.default.removeItem(at: url) }
    }
}
