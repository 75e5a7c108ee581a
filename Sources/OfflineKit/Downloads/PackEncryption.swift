import Crypto
public import Foundation

/// The key that encrypts a pack store's files at rest, supplied by the app (from its keychain).
///
/// Files are sealed with AES-GCM in 64 KiB chunks as they download, so nothing is ever written
/// in the clear, and reads decrypt chunk by chunk, so playback never needs the whole file in
/// memory.
///
/// ```swift
/// let key = try PackEncryptionKey(rawKey: keychainData)      // 32 bytes
/// let store = PackStore(directory: url, source: source, transport: transport,
///                       connectivity: monitor, configuration: .init(encryptionKey: key))
/// ```
public struct PackEncryptionKey: Sendable {
    let key: SymmetricKey

    /// - Throws: ``PackEncryptionKey/InvalidKey`` unless `rawKey` is 16, 24 or 32 bytes.
    public init(rawKey: Data) throws {
        guard [16, 24, 32].contains(rawKey.count) else { throw InvalidKey() }
        key = SymmetricKey(data: rawKey)
    }

    /// A new random 256-bit key, and its bytes for the app to keep.
    public static func generate() -> (key: PackEncryptionKey, rawKey: Data) {
        let key = SymmetricKey(size: .bits256)
        let data = key.withUnsafeBytes { Data($0) }
        return (PackEncryptionKey(key: key), data)
    }

    private init(key: SymmetricKey) { self.key = key }

    public struct InvalidKey: Error, CustomStringConvertible {
        public var description: String { "an encryption key must be 16, 24 or 32 bytes" }
    }
}

/// The chunked AES-GCM layout of an encrypted pack file.
///
/// Each chunk of up to ``plainChunk`` bytes is stored as nonce (12) + ciphertext + tag (16).
/// The additional data binds the chunk's index and whether it is the last, so chunks can be
/// neither reordered nor dropped from the end without the read failing.
enum ChunkedCipher {
    static let plainChunk = 64 << 10
    static let overhead = 28

    static func sealedLength(ofPlain length: Int64) -> Int64 {
        let chunks = (length + Int64(plainChunk) - 1) / Int64(plainChunk)
        return length + chunks * Int64(overhead)
    }

    /// Plain bytes held by a sealed file of `length` bytes, or nil when no layout gives that length.
    static func plainLength(ofSealed length: Int64) -> Int64? {
        let full = Int64(plainChunk + overhead)
        let chunks = (length + full - 1) / full
        let plain = length - chunks * Int64(overhead)
        guard plain >= 0, sealedLength(ofPlain: plain) == length else { return nil }
        return plain
    }

    static func additionalData(index: Int64, isLast: Bool) -> Data {
        var data = Data("offlinekit.pack.v1".utf8)
        withUnsafeBytes(of: index.bigEndian) { data.append(contentsOf: $0) }
        data.append(isLast ? 1 : 0)
        return data
    }

    static func seal(_ plain: some DataProtocol, index: Int64, isLast: Bool, key: SymmetricKey) throws -> Data {
        let box = try AES.GCM.seal(plain, using: key, authenticating: additionalData(index: index, isLast: isLast))
        guard let combined = box.combined else { throw PackEncryptionError.damaged }
        return combined
    }

    static func open(_ sealed: some DataProtocol, index: Int64, isLast: Bool, key: SymmetricKey) throws -> Data {
        do {
            let box = try AES.GCM.SealedBox(combined: sealed)
            return try AES.GCM.open(box, using: key, authenticating: additionalData(index: index, isLast: isLast))
        } catch {
            throw PackEncryptionError.damaged
        }
    }
}

/// An encrypted file could not be read back.
public enum PackEncryptionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file is not what this key sealed (wrong key, or the bytes were altered).
    case damaged
    public var description: String { "the file could not be decrypted with this key" }
}

/// Reads an installed pack file, decrypting on the fly when the store encrypts at rest.
///
/// ```swift
/// let reader = try store.openFile("audio/session.m4a", inPack: "sleep-01")
/// while let chunk = try reader.read(upToCount: 64 * 1024), !chunk.isEmpty { player.feed(chunk) }
/// ```
public final class PackFileReader {
    private let file: RawFile
    private let key: SymmetricKey?
    /// The file's plain length.
    public let length: Int64
    private var position: Int64 = 0

    init(url: URL, key: SymmetricKey?) throws {
        file = try RawFile(path: url.path, create: false)
        self.key = key
        let stored = try file.size
        if key != nil {
            guard let plain = ChunkedCipher.plainLength(ofSealed: stored) else { throw PackEncryptionError.damaged }
            length = plain
        } else {
            length = stored
        }
    }

    /// Moves the read position to `offset` of the plain content.
    public func seek(to offset: Int64) {
        position = min(max(0, offset), length)
    }

    /// Reads up to `count` plain bytes from the current position; empty at the end.
    public func read(upToCount count: Int) throws -> Data {
        let data = try read(at: position, count: count)
        position += Int64(data.count)
        return data
    }

    /// Reads up to `count` plain bytes at `offset` without moving the position.
    public func read(at offset: Int64, count: Int) throws -> Data {
        guard offset < length, count > 0 else { return Data() }
        let wanted = Int(min(Int64(count), length - offset))
        guard let key else { return Data(try file.read(count: wanted, at: offset)) }
        var result = Data()
        result.reserveCapacity(wanted)
        let chunk = Int64(ChunkedCipher.plainChunk)
        var cursor = offset
        while result.count < wanted {
            let index = cursor / chunk
            let plain = try chunkPlain(index: index, key: key)
            let start = Int(cursor - index * chunk)
            let take = min(plain.count - start, wanted - result.count)
            guard take > 0 else { throw PackEncryptionError.damaged }
            result.append(plain[plain.startIndex + start ..< plain.startIndex + start + take])
            cursor += Int64(take)
        }
        return result
    }

    /// Reads the whole plain content.
    public func readAll() throws -> Data { try read(at: 0, count: Int(length)) }

    private func chunkPlain(index: Int64, key: SymmetricKey) throws -> Data {
        let chunk = Int64(ChunkedCipher.plainChunk)
        let plainStart = index * chunk
        let plainCount = min(chunk, length - plainStart)
        let sealedStart = index * (chunk + Int64(ChunkedCipher.overhead))
        let sealed = try file.read(count: Int(plainCount) + ChunkedCipher.overhead, at: sealedStart)
        return try ChunkedCipher.open(sealed, index: index, isLast: plainStart + plainCount == length, key: key)
    }
}
