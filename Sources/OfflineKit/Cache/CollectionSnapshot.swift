public import OfflineCore

/// What an observed collection holds now: what a list screen shows.
///
/// ```swift
/// for await snapshot in cache.observe(orders) {
///     render(snapshot.records ?? [], CachedScreen(CachedScreenInput(connectivity: monitor.status.kind, content: snapshot.content)))
/// }
/// ```
public enum CollectionSnapshot<Record: Sendable>: Sendable {
    /// Nothing stored and a request is in flight.
    case loading
    case loaded(CachedCollection<Record>)
    case unavailable(CacheError)

    public var collection: CachedCollection<Record>? {
        if case .loaded(let collection) = self { collection } else { nil }
    }

    /// The records on screen; nil while none are stored.
    public var records: [Record]? { collection?.records }

    /// The state the ``CachedScreen`` resolver takes.
    public var content: CachedContent { screenContent }
}

extension CollectionSnapshot: Equatable where Record: Equatable {}
extension CollectionSnapshot: Hashable where Record: Hashable {}

extension CollectionSnapshot: CacheObservationSnapshot {
    var loadedValue: CachedCollection<Record>? { collection }
    var failure: CacheError? {
        if case .unavailable(let failure) = self { failure } else { nil }
    }
}

// MARK: - What every observation publishes

/// A value an observation shows: a ``CachedResponse`` or a ``CachedCollection``.
protocol CachedValue: Sendable {
    var metadata: CacheMetadata { get }
    /// Equal digests mean equal content: an observation publishes a value only when it changed.
    var bodyHash: String { get }
}

extension CachedResponse: CachedValue {}
extension CachedCollection: CachedValue {}

/// What an observation publishes: ``CacheSnapshot`` and ``CollectionSnapshot`` (their cases
/// are the witnesses), so one engine serves both observe functions.
protocol CacheObservationSnapshot: Sendable {
    associatedtype Value: CachedValue
    static var loading: Self { get }
    static func loaded(_ value: Value) -> Self
    static func unavailable(_ failure: CacheError) -> Self
    var loadedValue: Value? { get }
    var failure: CacheError? { get }
}

extension CacheObservationSnapshot {
    /// The state the ``CachedScreen`` resolver takes.
    var screenContent: CachedContent {
        if let value = loadedValue { return .available(value.metadata) }
        return switch failure {
        case nil: .loading
        case .unavailable?, .rejected?: .failed
        case _?: .neverLoaded
        }
    }
}
