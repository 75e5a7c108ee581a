import Foundation
import OfflineCore
import Testing

@Suite("Pack manifest")
struct PackManifestTests {
    static let hash = String(repeating: "a", count: 64)

    func manifest(_ files: [PackManifest.File]) -> PackManifest {
        PackManifest(id: "paris", version: "2", createdAt: Date(timeIntervalSince1970: 1_700_000_000), files: files)
    }

    @Test("round-trips through JSON with the same bytes every time")
    func roundTrip() throws {
        let original = manifest([.init(path: "places/food.json", size: 10, sha256: Self.hash, mediaType: "application/json")])
        let data = try original.encoded()
        #expect(try PackManifest.decode(data) == original)
        #expect(try original.encoded() == data)
    }

    @Test("refuses hostile and malformed paths", arguments: [
        "../etc/passwd", "a/../../b", "/etc/passwd", "~/x", "a//b", "./a", "a/./b", "", "a\\b", "a/\u{0}b", ".offlinekit-x", "manifest.json",
    ])
    func refusesHostilePaths(path: String) {
        #expect(throws: PackManifestError.self) {
            try manifest([.init(path: path, size: 1, sha256: Self.hash)]).validate()
        }
    }

    @Test("names traversal and absolute paths precisely")
    func precisePathErrors() {
        #expect(throws: PackManifestError.pathTraversal("../x")) { try manifest([.init(path: "../x", size: 1, sha256: Self.hash)]).validate() }
        #expect(throws: PackManifestError.absolutePath("/x")) { try manifest([.init(path: "/x", size: 1, sha256: Self.hash)]).validate() }
    }

    @Test("refuses symlink entries, oversized files, bad checksums and duplicates")
    func refusesBadEntries() {
        #expect(throws: PackManifestError.notARegularFile("link")) {
            try manifest([.init(path: "link", size: 1, sha256: Self.hash, kind: "symlink")]).validate()
        }
        #expect(throws: PackManifestError.oversized("big", 11)) {
            try manifest([.init(path: "big", size: 11, sha256: Self.hash)]).validate(limits: .init(maxFileBytes: 10))
        }
        #expect(throws: PackManifestError.invalidChecksum("x")) {
            try manifest([.init(path: "x", size: 1, sha256: "ABC")]).validate()
        }
        #expect(throws: PackManifestError.duplicatePath("A.json")) {
            try manifest([.init(path: "a.json", size: 1, sha256: Self.hash), .init(path: "A.json", size: 1, sha256: Self.hash)]).validate()
        }
        #expect(throws: PackManifestError.duplicatePath("a")) {
            try manifest([.init(path: "a", size: 1, sha256: Self.hash), .init(path: "a/b", size: 1, sha256: Self.hash)]).validate()
        }
    }

    @Test("refuses paths that name one file on a case-insensitive, normalization-insensitive disk (APFS, HFS+)")
    func refusesCollisionsOnApplePlatforms() {
        let composed = "caf\u{E9}.txt"          // é as one scalar (NFC)
        let decomposed = "cafe\u{301}.txt"      // e + combining acute (NFD)
        #expect(composed.unicodeScalars.count != decomposed.unicodeScalars.count)
        #expect(throws: PackManifestError.duplicatePath(decomposed)) {
            try manifest([.init(path: composed, size: 1, sha256: Self.hash), .init(path: decomposed, size: 1, sha256: Self.hash)]).validate()
        }
        #expect(throws: PackManifestError.duplicatePath("CAF\u{C9}.TXT")) {
            try manifest([.init(path: decomposed, size: 1, sha256: Self.hash), .init(path: "CAF\u{C9}.TXT", size: 1, sha256: Self.hash)]).validate()
        }
        // A folder in one form and a file in the other are one name too.
        #expect(throws: PackManifestError.self) {
            try manifest([.init(path: "Caf\u{E9}", size: 1, sha256: Self.hash), .init(path: "cafe\u{301}/menu.txt", size: 1, sha256: Self.hash)]).validate()
        }
        #expect(throws: Never.self) {
            try manifest([.init(path: "cafe.txt", size: 1, sha256: Self.hash), .init(path: composed, size: 1, sha256: Self.hash)]).validate()
        }
    }

    @Test("refuses a declared total that does not add up, and unsafe ids")
    func refusesTotals() throws {
        var bad = manifest([.init(path: "a", size: 5, sha256: Self.hash)])
        bad.totalBytes = 4
        #expect(throws: PackManifestError.totalMismatch(declared: 4, actual: 5)) { try bad.validate() }
        var traversingID = manifest([])
        traversingID.id = ".."
        #expect(throws: PackManifestError.invalidIdentifier("..")) { try traversingID.validate() }
        #expect(throws: PackManifestError.malformed) { try PackManifest.decode(Data("{}".utf8)) }
    }

    @Test("accepts nested relative paths")
    func acceptsNested() throws {
        try manifest([.init(path: "a/b/c.mp3", size: 0, sha256: Self.hash), .init(path: "a/d.json", size: 3, sha256: Self.hash)]).validate()
    }
}

@Suite("Pack update plan")
struct PackUpdatePlanTests {
    @Test("downloads only files whose content changed, reusing moved files")
    func onlyChanged() {
        let h = { (c: Character) in String(repeating: c, count: 64) }
        let old = PackManifest(id: "p", version: "1", createdAt: .distantPast, files: [
            .init(path: "a", size: 1, sha256: h("a")), .init(path: "b", size: 1, sha256: h("b")), .init(path: "c", size: 1, sha256: h("c")),
        ])
        let new = PackManifest(id: "p", version: "2", createdAt: .distantPast, files: [
            .init(path: "a", size: 1, sha256: h("a")), .init(path: "b", size: 2, sha256: h("d")),
            .init(path: "moved/c", size: 1, sha256: h("c")), .init(path: "e", size: 3, sha256: h("e")),
        ])
        let plan = PackUpdatePlan(installed: old, latest: new)
        #expect(plan.download.map(\.path) == ["b", "e"])
        #expect(plan.reuse.map(\.installedPath) == ["a", "c"])
        #expect(plan.downloadBytes == 5)
        #expect(PackUpdatePlan(installed: nil, latest: new).download.count == 4)
    }
}
