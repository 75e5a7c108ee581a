import Foundation
import Logging
import NIOCore
import NIOEmbedded
@testable import OfflineServer
import OfflineTestSupport
import PostgresNIO
import Testing

@Suite("Capture: the replication stream's decisions and wire")
struct CaptureStreamTests {
    let start = Date(timeIntervalSince1970: 1_000)

    static func data(_ bytes: [UInt8]) -> ReplicationWire.Replication { .xLogData(start: 0, end: 0, payload: bytes) }
    static let relation = data(PgOutputBytes.relation(id: 7, name: "messages", columns: [("id", 25, true)]))
    static let begin: ReplicationWire.Replication = {
        var message = PgOutputBytes()
        message.char("B")
        message.int(UInt64(0))
        message.int(UInt64(0))
        message.int(UInt32(1))
        return data(message.bytes)
    }()

    static func insert(_ id: String) -> ReplicationWire.Replication {
        var message = PgOutputBytes()
        message.char("I")
        message.int(UInt32(7))
        message.char("N")
        message.tuple([id])
        return data(message.bytes)
    }

    static func commit(end: UInt64) -> ReplicationWire.Replication {
        var message = PgOutputBytes()
        message.char("C")
        message.byte(0)
        message.int(end - 8)
        message.int(end)
        message.int(UInt64(0))
        return data(message.bytes)
    }

    static func change(_ id: String) -> CapturedChange {
        CapturedChange(table: "messages", kind: .upsert, columns: ["id": .text(id)], key: [.text(id)])
    }

    @Test("the transactions complete in one batch are recorded in one write, published through the last; the slot is told after")
    func batches() throws {
        var stream = CaptureStream(tables: ["messages"], through: 100)
        let writes = try stream.receive([Self.relation, Self.begin, Self.insert("a"), Self.commit(end: 200),
                                         Self.begin, Self.insert("b"), Self.commit(end: 300), Self.begin, Self.insert("c")], now: start)
        #expect(writes == [.record([Self.change("a"), Self.change("b")], publishThrough: 300)], "c's transaction is still open")
        #expect(stream.status(now: start) == .init(flushed: 100, reply: true), "nothing written yet: the slot keeps everything")
        stream.wrote(through: 300)
        #expect(stream.status(now: start.addingTimeInterval(0.001)) == .init(flushed: 300, reply: false), "confirmed once written")
        #expect(stream.status(now: start.addingTimeInterval(0.002)) == nil)
        let rest = try stream.receive([Self.commit(end: 400), .keepalive(walEnd: 450, replyRequested: false)], now: start.addingTimeInterval(0.01))
        #expect(rest == [.record([Self.change("c")], publishThrough: 450)], "nothing open: through the server's position")
    }

    @Test("a commit after a quiet spell is written at once; while writers keep committing, one write per 5 ms carries them all")
    func spacing() throws {
        var stream = CaptureStream(tables: ["messages"], through: 0)
        #expect(try stream.receive([Self.relation, Self.begin, Self.insert("a"), Self.commit(end: 10)], now: start)
            == [.record([Self.change("a")], publishThrough: 10)])
        stream.wrote(through: 10)
        #expect(try stream.receive([Self.begin, Self.insert("b"), Self.commit(end: 20)], now: start.addingTimeInterval(0.001)).isEmpty)
        #expect(try stream.receive([Self.begin, Self.insert("c"), Self.commit(end: 30)], now: start.addingTimeInterval(0.002)).isEmpty)
        #expect(try stream.tick(now: start.addingTimeInterval(0.004)).isEmpty)
        #expect(try stream.tick(now: start.addingTimeInterval(0.0051)) == [.record([Self.change("b"), Self.change("c")], publishThrough: 30)])
        #expect(try stream.tick(now: start.addingTimeInterval(0.02)).isEmpty, "nothing held, and the server's position is not past through")
    }

    @Test("a transaction the feed recorded before the session began is passed over")
    func exactlyOnce() throws {
        var stream = CaptureStream(tables: ["messages"], through: 300)
        let writes = try stream.receive([Self.relation, Self.begin, Self.insert("a"), Self.commit(end: 300),
                                         Self.begin, Self.insert("b"), Self.commit(end: 301)], now: start)
        #expect(writes == [.record([Self.change("b")], publishThrough: 301)])
    }

    @Test("a transaction larger than a chunk goes in parts, published with its commit")
    func largeTransactions() throws {
        var stream = CaptureStream(tables: ["messages"], through: 0, chunk: 2)
        let writes = try stream.receive([Self.relation, Self.begin, Self.insert("a"), Self.insert("b"), Self.insert("c"),
                                         Self.commit(end: 50)], now: start)
        #expect(writes == [.record([Self.change("a"), Self.change("b")], publishThrough: nil),
                           .record([Self.change("c")], publishThrough: 50)])
    }

    @Test("idle, the feed follows the server's position at most every 50 ms, and never inside an open transaction")
    func idle() throws {
        var stream = CaptureStream(tables: ["messages"], through: 100)
        #expect(try stream.receive([.keepalive(walEnd: 100, replyRequested: false)], now: start).isEmpty, "nothing past through")
        #expect(try stream.receive([.keepalive(walEnd: 120, replyRequested: false)], now: start) == [.advance(120)])
        stream.wrote(through: 120)
        #expect(try stream.receive([.keepalive(walEnd: 140, replyRequested: false)], now: start.addingTimeInterval(0.01)).isEmpty)
        #expect(try stream.receive([.keepalive(walEnd: 150, replyRequested: false)], now: start.addingTimeInterval(0.06)) == [.advance(150)])
        stream.wrote(through: 150)
        #expect(try stream.receive([Self.relation, Self.begin, Self.insert("a"), .keepalive(walEnd: 170, replyRequested: false)],
                                   now: start.addingTimeInterval(0.2)).isEmpty, "a transaction is open")
    }

    @Test("a server silent for 30 s, although every status asks it to answer, ends the session")
    func silence() throws {
        var stream = CaptureStream(tables: ["messages"], through: 10)
        #expect(try stream.tick(now: start).isEmpty)
        _ = try stream.receive([.keepalive(walEnd: 10, replyRequested: false)], now: start.addingTimeInterval(20))
        #expect(try stream.tick(now: start.addingTimeInterval(49)).isEmpty, "heard 29 s ago")
        #expect(throws: CaptureStream.Silent.self) { try stream.tick(now: start.addingTimeInterval(50)) }
    }

    @Test("the status asks for the server's position every 50 ms, and answers a keepalive that asks")
    func status() throws {
        var stream = CaptureStream(tables: ["messages"], through: 10)
        #expect(stream.status(now: start) == .init(flushed: 10, reply: true))
        #expect(stream.status(now: start.addingTimeInterval(0.02)) == nil)
        _ = try stream.receive([.keepalive(walEnd: 10, replyRequested: true)], now: start.addingTimeInterval(0.03))
        #expect(stream.status(now: start.addingTimeInterval(0.03)) == .init(flushed: 10, reply: false))
        #expect(stream.status(now: start.addingTimeInterval(0.051)) == .init(flushed: 10, reply: true))
    }

    @Test("the replication session signs in to PostgreSQL with SCRAM-SHA-256, MD5 or a clear password; a wrong one is refused in PostgreSQL's words")
    func signsInToPostgres() async throws {
        guard TemporaryPostgres.isEnabled else { return }
        let url = try await TemporaryPostgres.freshDatabase()
        let logger = Logger(label: "test.replication-sign-in")
        do {
            let admin = try await PostgresConnection.connect(configuration: try PostgresStorage.configuration(from: url), id: 1, logger: logger)
            // A password kept as SCRAM makes PostgreSQL answer `md5` with SCRAM: MD5's role keeps an MD5 one.
            for (role, kept) in [("offlinekit_scram", "scram-sha-256"), ("offlinekit_md5", "md5"), ("offlinekit_password", "scram-sha-256")] {
                try await admin.query(PostgresQuery(unsafeSQL: "SET password_encryption = '\(kept)'"), logger: logger)
                try await admin.query(PostgresQuery(unsafeSQL: """
                    DO $$ BEGIN CREATE ROLE \(role) LOGIN REPLICATION; EXCEPTION WHEN duplicate_object THEN NULL; END $$
                    """), logger: logger)
                try await admin.query(PostgresQuery(unsafeSQL: "ALTER ROLE \(role) PASSWORD 'pencil, 1'"), logger: logger)
            }
            try await admin.close()
            for role in LoopbackPostgres.passwordRoles.keys.sorted() {
                var endpoint = try PostgresEndpoint(url: url)
                endpoint.user = role
                for (password, expected) in [("pencil, 1", "replication slot \"offlinekit_none\" does not exist"),
                                             ("pencil, 2", "password authentication failed")] {
                    endpoint.password = password
                    let error = await #expect(throws: ReplicationSession.Failed.self) {
                        try await ReplicationSession.run(endpoint, command: "START_REPLICATION SLOT offlinekit_none LOGICAL 0/0",
                                                         tick: .milliseconds(50)) { _, _ in }
                    }
                    #expect(error?.description.contains(expected) == true, "\(role), \(password): \(String(describing: error))")
                }
            }
        } catch {
            try await TemporaryPostgres.drop(url)
            throw error
        }
        try await TemporaryPostgres.drop(url)
    }

    @Test("messages are cut from the bytes whole, every message of one read together; lengths are checked")
    func framing() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(ReplicationMessageDecoder()))
        var bytes = ByteBuffer()
        ReplicationWire.message("Z", into: &bytes) { $0.writeInteger(UInt8(ascii: "I")) }
        ReplicationWire.message("d", into: &bytes) {
            $0.writeInteger(UInt8(ascii: "k"))
            $0.writeInteger(UInt64(0x16_0000_0100))
            $0.writeInteger(UInt64(0))
            $0.writeInteger(UInt8(1))
        }
        var first = bytes.readSlice(length: bytes.readableBytes - 3)!
        try channel.writeInbound(first)
        guard case .messages(let one)? = try channel.readInbound(as: ReplicationInput.self) else { Issue.record("no batch"); return }
        #expect(one == [ReplicationWire.Backend.readyForQuery], "the cut message waits for its end")
        first = bytes
        try channel.writeInbound(first)
        guard case .messages(let two)? = try channel.readInbound(as: ReplicationInput.self), case .copyData(let body)? = two.first else {
            Issue.record("no keepalive")
            return
        }
        #expect(try ReplicationWire.replication(body) == .keepalive(walEnd: 0x16_0000_0100, replyRequested: true))
        var lie = ByteBuffer()
        lie.writeInteger(UInt8(ascii: "d"))
        lie.writeInteger(Int32(2))
        #expect(throws: ReplicationWire.Malformed.self) { try channel.writeInbound(lie) }
        #expect(throws: ReplicationWire.Malformed.self) { try ReplicationWire.replication(ByteBuffer(bytes: [UInt8(ascii: "w"), 1])) }
    }

    @Test("SCRAM-SHA-256 gives RFC 7677's proof and checks the server's signature; MD5 as PostgreSQL computes it")
    func signIn() throws {
        var scram = ReplicationSignIn.SCRAM(password: "pencil", clientNonce: "rOprNGfwEbeRWgbNEkqO", user: "user")
        #expect(String(decoding: scram.first, as: UTF8.self) == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
        let serverFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        let final = try scram.final(answering: Array(serverFirst.utf8))
        #expect(String(decoding: final, as: UTF8.self)
            == "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        try scram.check(serverFinal: Array("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".utf8))
        #expect(throws: ReplicationSignIn.Refused.self) { try scram.check(serverFinal: Array("v=AAAA".utf8)) }
        var other = ReplicationSignIn.SCRAM(password: "pencil", clientNonce: "abc")
        #expect(throws: ReplicationSignIn.Refused.self, "the server's nonce must extend the client's") {
            try other.final(answering: Array("r=xyz123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".utf8))
        }
        // Computed with Python's hashlib: "md5" + md5(md5("pencil" + "user").hexdigest() + salt).
        #expect(ReplicationSignIn.md5(user: "user", password: "pencil", salt: [1, 2, 3, 4]) == "md54376eb6913b38f9aaff38dc7cf19ca76")
    }
}

@Suite("Capture: transactions put together from the slot's events")
struct TransactionAssemblyTests {
    static func change(_ id: String) -> CapturedChange { CaptureStreamTests.change(id) }

    @Test("a large transaction's part that carries the whole transactions held is not published until the large one ends")
    func partNotPublished() throws {
        let start = Date(timeIntervalSince1970: 1_000)
        var stream = CaptureStream(tables: ["messages"], through: 0, chunk: 2)
        #expect(try stream.receive([CaptureStreamTests.relation, CaptureStreamTests.begin, CaptureStreamTests.insert("a"),
                                    CaptureStreamTests.commit(end: 10)], now: start) == [.record([Self.change("a")], publishThrough: 10)])
        stream.wrote(through: 10)
        #expect(try stream.receive([CaptureStreamTests.begin, CaptureStreamTests.insert("b"), CaptureStreamTests.commit(end: 20)],
                                   now: start.addingTimeInterval(0.001)).isEmpty, "held: 5 ms since the last write")
        #expect(try stream.receive([CaptureStreamTests.begin, CaptureStreamTests.insert("c"), CaptureStreamTests.insert("d")],
                                   now: start.addingTimeInterval(0.002)) == [.record([Self.change("b"), Self.change("c")], publishThrough: nil)])
        #expect(try stream.tick(now: start.addingTimeInterval(0.01)).isEmpty,
                "publishing through b's end would move the head past c, half of a transaction")
        #expect(try stream.receive([CaptureStreamTests.commit(end: 30)], now: start.addingTimeInterval(0.011))
            == [.record([Self.change("d")], publishThrough: 30)])
    }

    @Test("a transaction that ended where the feed had read through is passed over and brings nothing new; one past it is held whole until taken")
    func passesOverRecorded() {
        var assembly = TransactionAssembly(recorded: 300, chunk: 10)
        for event: PgOutputChanges.Event in [.begin, .change(Self.change("a")), .commit(end: 300)] {
            #expect(assembly.add(event) == nil)
        }
        #expect(!assembly.decoded, "a peek that returned only what the feed has decoded nothing new")
        #expect(!assembly.holds && assembly.take() == nil)
        _ = assembly.add(.begin)
        _ = assembly.add(.change(Self.change("b")))
        #expect(assembly.inTransaction && !assembly.holds, "a transaction not ended is not held whole")
        #expect(assembly.add(.commit(end: 301)) == nil)
        #expect(assembly.decoded && assembly.holds && !assembly.inTransaction)
        _ = assembly.add(.begin)
        _ = assembly.add(.change(Self.change("c")))
        _ = assembly.add(.commit(end: 302))
        let whole = assembly.take()
        #expect(whole?.changes == [Self.change("b"), Self.change("c")] && whole?.end == 302, "several transactions, one write")
        #expect(assembly.take() == nil && !assembly.holds)
    }

    @Test("rows reaching the chunk go at once, unpublished; the transaction they end in is published by the next take after its end")
    func chunks() {
        var assembly = TransactionAssembly(recorded: 0, chunk: 2)
        #expect(assembly.add(.begin) == nil)
        #expect(assembly.add(.change(Self.change("a"))) == nil)
        #expect(assembly.add(.commit(end: 10)) == nil)
        #expect(assembly.add(.begin) == nil)
        #expect(assembly.add(.change(Self.change("b"))) == .record([Self.change("a"), Self.change("b")], publishThrough: nil))
        #expect(assembly.take() == nil, "a's rows went with part of a transaction that has not ended")
        #expect(assembly.add(.change(Self.change("c"))) == nil)
        #expect(assembly.add(.change(Self.change("d"))) == .record([Self.change("c"), Self.change("d")], publishThrough: nil))
        #expect(assembly.add(.commit(end: 20)) == nil)
        let last = assembly.take()
        #expect(last?.changes == [] && last?.end == 20, "published with nothing left to record")
    }
}
