/// What ``SyncStateMachine`` reads of a page: where it ends, whether more follows, what it
/// weighs, and how two pages read as one.
public protocol SyncFetchedPage: Sendable, Equatable {
    /// The server's cursor after the page.
    var cursor: String { get }
    /// The cursor a page the live stream sent was read after: the page is what a pull after that
    /// cursor would get. Nil for a pulled page.
    var from: String? { get }
    /// More pages follow at once.
    var hasMore: Bool { get }
    /// How far the server's capture had come when it answered.
    var through: Int64? { get }
    /// How far through the pull, `0...1`, when the server says.
    var progress: Double? { get }
    /// The changes it carries.
    var rows: Int { get }
    /// Its size as received, in bytes: what keeping it aside costs.
    var bytes: Int { get }
    /// Appends `next`, the page after this one: the two then read as one page of the server's
    /// would (every change in order, `next`'s cursor, whether more follows, and how far capture
    /// had come when the server last said).
    mutating func append(_ next: Self)
}

/// One pull of ``SyncStateMachine``, from its first page to its last: the page it waits for,
/// what it keeps aside, the page being written, and the pages asked for ahead of it. Nested in
/// the sync machine as postgres-nio nests its query machines in its connection's: the sync
/// machine decides when a pull starts and what its end means; this one, what each page does.
struct SyncPullStateMachine<Page: SyncFetchedPage>: Sendable {
    enum State: Sendable {
        /// Waiting for the page of request `id` (nil: a page the live stream sent, here
        /// already), asked for `limit` rows.
        case fetching(id: Int?, limit: Int?)
        /// The page's rows are being written; `last` when the pull ends with them, `staging`
        /// when they are kept aside.
        case writing(last: Bool, staging: Bool)
    }

    /// How a page is written.
    enum Write: Sendable, Equatable {
        /// Applied to the app's tables with the cursor after it (a first sync's page, or a pull
        /// of one page); `done` when the pull ends with it.
        case apply(done: Bool)
        /// Kept aside, unseen, until the pull's last page.
        case stage
        /// Applied with what was kept aside; `done` when it is the pull's last page, else the
        /// pages kept aside would pass the bound and the pull goes on.
        case applyStaged(done: Bool)
    }

    /// What comes of asking for the next page.
    enum Next {
        /// Wait for a request: `fetch` is the one to send now, nil when one asked for ahead is
        /// on its way.
        case wait(fetch: (id: Int, after: String?, limit: Int)?)
        /// A page asked for ahead already came.
        case arrived(Page)
        /// The request asked for ahead failed.
        case failed(SyncFailure)
    }

    /// The pull applies each page as it comes (a first sync, or one from nothing after the server
    /// forgot the cursor); every other keeps its pages aside until its last.
    let first: Bool
    private(set) var state: State
    /// Pages taken so far (pages that came together and are written as one count once).
    private(set) var pages = 1
    /// Pages are kept aside, or being kept: a failure drops them.
    private(set) var staged = false
    private var stagedBytes = 0
    /// The rows the page taken last was asked for.
    private var lastLimit: Int?
    /// The cursor of the page being written when the pull goes on after it: once it is in, a
    /// failure starts the pull again from there.
    private var writingCursor: String?
    private var ahead = SyncReadAhead<Page>()

    init(first: Bool, state: State) {
        self.first = first
        self.state = state
    }

    /// Whether `id` is the request whose page the pull waits for.
    func waits(for id: Int) -> Bool {
        if case .fetching(id?, _) = state { true } else { false }
    }

    /// The page waited for came: with the pages asked for ahead that already came after it
    /// (written with it, in one transaction, as one larger page of the server's would be).
    ///
    /// - Returns: the page as it is to be written, and how; the requests to send for the pages
    ///   asked for ahead that waited on this one.
    mutating func arrived(_ page: Page, stagedBytesPerPull: Int, grows: Bool,
                          limit: (Int?) -> Int) -> (page: Page, write: Write, requests: SyncReadAhead<Page>.Requests) {
        guard case .fetching(let id, var asked) = state else { preconditionFailure("a page arrived while none was waited for") }
        let requests = id.map { ahead.arrived($0, .page(page), askedLimit: asked, grows: grows, limit: limit) } ?? []
        var page = page
        while page.hasMore, let next = ahead.takeArrived(after: page.cursor) {
            page.append(next.page)
            asked = next.limit
        }
        lastLimit = asked
        let write: Write
        if first {
            write = .apply(done: !page.hasMore)
        } else if page.hasMore {
            if stagedBytes + page.bytes > stagedBytesPerPull {
                write = .applyStaged(done: false)
                stagedBytes = 0
            } else {
                write = .stage
                stagedBytes += page.bytes
            }
        } else if staged {
            write = .applyStaged(done: true)
        } else {
            write = .apply(done: true)
        }
        staged = staged || write == .stage
        writingCursor = write == .apply(done: false) || write == .applyStaged(done: false) ? page.cursor : nil
        state = .writing(last: !page.hasMore, staging: write == .stage)
        return (page, write, requests)
    }

    /// The page being written is in.
    ///
    /// - Returns: the cursor a failure from now on starts again from, when the page moved the
    ///   saved one (a page applied while the pull goes on), and whether the pull is over; nil
    ///   when no page was being written.
    mutating func written() -> (resumeAt: String?, last: Bool)? {
        guard case .writing(let last, let staging) = state else { return nil }
        defer { writingCursor = nil }
        staged = staging
        return (writingCursor, last)
    }

    /// Asks for the page after `cursor`: the one asked for ahead after that very cursor when
    /// there is one (what it brought, or its request on its way), else a new request (numbered
    /// `ids`, counted up) for as many rows as `limit` says after the page taken last.
    mutating func fetchNext(after cursor: String?, grows: Bool, limit: (Int?) -> Int, ids: inout Int) -> Next {
        pages += 1
        if let asked = ahead.takeFirst(after: cursor) {
            state = .fetching(id: asked.id, limit: asked.limit)
            switch asked.arrival {
            case .page(let page)?: return .arrived(page)
            case .failed(let failure)?: return .failed(failure)
            case nil: return .wait(fetch: nil)
            }
        }
        let request = (id: ids, after: cursor, limit: limit(grows ? lastLimit : nil))
        ids += 1
        state = .fetching(id: request.id, limit: request.limit)
        return .wait(fetch: request)
    }

    /// Keeps ``SyncReadAhead/depth`` pages asked for after `page`, which is being written.
    mutating func askAhead(after page: Page, grows: Bool, limit: (Int?) -> Int, ids: inout Int) -> SyncReadAhead<Page>.Requests {
        ahead.keep(after: page, askedLimit: lastLimit, grows: grows, limit: limit, ids: &ids)
    }

    /// A request asked for ahead answered.
    ///
    /// - Returns: the requests to send for the pages that waited on it.
    mutating func aheadArrived(_ id: Int, _ arrival: SyncReadAhead<Page>.Arrival, grows: Bool,
                               limit: (Int?) -> Int) -> SyncReadAhead<Page>.Requests {
        ahead.arrived(id, arrival, askedLimit: nil, grows: grows, limit: limit)
    }

    /// Drops every page asked for ahead.
    ///
    /// - Returns: the requests still on their way, to cancel.
    mutating func dropAhead() -> [Int] {
        ahead.dropAll()
    }
}

/// The pages a pull asks for ahead of the one being written, each after the cursor of the page
/// before it, ``depth`` at most: with one, the next page's request waited for the page before it
/// to be handed over, and the write waited for it at about half the pages of a first sync. A
/// page that came before the pull asked for it is written with the one before it
/// (``takeArrived(after:)``): at most `2 × depth` pages are held in memory, `depth` being
/// written and `depth` asked for after them.
struct SyncReadAhead<Page: SyncFetchedPage>: Sendable {
    /// What a request asked for ahead brought.
    enum Arrival: Sendable {
        case page(Page)
        case failed(SyncFailure)
    }

    /// A page asked for ahead.
    struct Asked: Sendable {
        let id: Int
        /// The cursor it is asked after; nil while it waits for the page before it (request
        /// `previous`) to say where that one ends.
        var after: String?
        var previous: Int?
        /// The rows it is asked for, once asked.
        var limit: Int?
        var arrival: Arrival?
        /// Nothing will come of it: the page before it was the pull's last, or failed.
        var none = false
    }

    /// Requests to send: their id, the cursor each is asked after, and the rows.
    typealias Requests = [(id: Int, after: String?, limit: Int)]

    static var depth: Int { 2 }

    private(set) var asked: [Asked] = []

    /// Keeps ``depth`` pages asked for after `page`, which is being written: the first after its
    /// cursor, unless already asked for; each next after the cursor of the one before it, once
    /// that one came and has more after it.
    ///
    /// - Parameters:
    ///   - askedLimit: the rows `page` was asked for.
    ///   - grows: whether the pull's pages grow (``SyncPolicy/pageLimit(after:pageSize:)``).
    ///   - limit: the rows to ask for after a page asked for so many (nil: as for a first page).
    ///   - ids: the number of the next request, counted up.
    /// - Returns: the requests to send now.
    mutating func keep(after page: Page, askedLimit: Int?, grows: Bool, limit: (Int?) -> Int, ids: inout Int) -> Requests {
        guard page.hasMore else {
            _ = dropAll()
            return []
        }
        var requests: Requests = []
        if asked.isEmpty {
            let rows = limit(grows ? askedLimit : nil)
            asked.append(Asked(id: ids, after: page.cursor, limit: rows))
            ids += 1
            requests.append((asked[0].id, page.cursor, rows))
        }
        while asked.count < Self.depth, let previous = asked.last {
            asked.append(Asked(id: ids, previous: previous.id))
            ids += 1
            if previous.none || previous.arrival != nil {
                requests += askAfter(previous.id, previous.arrival, none: previous.none, askedLimit: previous.limit, grows: grows, limit: limit)
            }
        }
        return requests
    }

    /// Request `id` answered (one asked for ahead, or the page the pull waited for, asked for
    /// `askedLimit` rows): kept when asked for ahead, and the request waiting on it asked for.
    mutating func arrived(_ id: Int, _ arrival: Arrival, askedLimit: Int?, grows: Bool, limit: (Int?) -> Int) -> Requests {
        var askedLimit = askedLimit
        if let index = asked.firstIndex(where: { $0.id == id }) {
            asked[index].arrival = arrival
            askedLimit = asked[index].limit
        }
        return askAfter(id, arrival, none: false, askedLimit: askedLimit, grows: grows, limit: limit)
    }

    /// Asks for the page that waits on request `previous`, now that it answered (or that nothing
    /// will come of it: `none`).
    private mutating func askAfter(_ previous: Int, _ arrival: Arrival?, none: Bool, askedLimit: Int?, grows: Bool,
                                   limit: (Int?) -> Int) -> Requests {
        guard let next = asked.firstIndex(where: { $0.previous == previous && $0.after == nil && !$0.none }) else { return [] }
        guard !none, case .page(let page)? = arrival, page.hasMore else {
            asked[next].none = true
            return askAfter(asked[next].id, nil, none: true, askedLimit: nil, grows: grows, limit: limit)
        }
        let rows = limit(grows ? askedLimit : nil)
        asked[next].after = page.cursor
        asked[next].limit = rows
        return [(asked[next].id, page.cursor, rows)]
    }

    /// The oldest page asked for, no longer kept, when it was asked after `cursor` and something
    /// will come of it; else nil, and every page asked for is dropped (nothing asked after it
    /// can serve either).
    mutating func takeFirst(after cursor: String?) -> Asked? {
        guard let first = asked.first else { return nil }
        guard let after = first.after, after == cursor, !first.none else {
            asked.removeAll()
            return nil
        }
        asked.removeFirst()
        return first
    }

    /// The oldest page asked for, no longer kept, if it already came, was asked after `cursor`
    /// and arrived whole; else nil, and it stays kept.
    mutating func takeArrived(after cursor: String) -> (page: Page, limit: Int?)? {
        guard let first = asked.first, first.after == cursor, case .page(let page)? = first.arrival else { return nil }
        asked.removeFirst()
        return (page, first.limit)
    }

    /// Drops every page asked for.
    ///
    /// - Returns: the requests still on their way, to cancel.
    mutating func dropAll() -> [Int] {
        defer { asked.removeAll() }
        return asked.filter { $0.after != nil && $0.arrival == nil }.map(\.id)
    }
}
