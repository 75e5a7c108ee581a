public import Foundation

/// Where the data on a screen came from.
public enum ResponseSource: String, Sendable, Hashable, Codable {
    /// The device's cache: shown at once, possibly stale.
    case cache
    /// The server, just now.
    case network
}

/// What a screen knows about the data it shows, from a cache read.
public struct CacheMetadata: Sendable, Hashable, Codable {
    public var source: ResponseSource
    /// When the server produced (or last confirmed) this data, by the device's wall clock.
    public var fetchedAt: Date
    /// The server's validator (`ETag`, or `Last-Modified` when there is no ETag).
    public var validator: String?
    /// Older than the server said it stays fresh.
    public var isStale: Bool

    public init(source: ResponseSource, fetchedAt: Date, validator: String?, isStale: Bool) {
        self.source = source
        self.fetchedAt = fetchedAt
        self.validator = validator
        self.isStale = isStale
    }
}

/// The data state of a cache-first screen.
public enum CachedContent: Sendable, Hashable {
    /// Nothing to show yet and a request is in flight (only ever while reachable).
    case loading
    /// Data is on screen.
    case available(CacheMetadata)
    /// Never loaded on this device, and it cannot be loaded now.
    case neverLoaded
    /// Nothing cached and the load failed although the network looked reachable.
    case failed
}

/// An action on a cached screen (“Proceed to Checkout”, “Track Order”) and what it needs.
public struct ScreenAction: Sendable, Hashable, Identifiable {
    /// A stable identifier the app uses to route the tap.
    public var id: String
    public var title: OfflineMessage
    public var requirement: ConnectivityRequirement

    public init(id: String, title: OfflineMessage, requirement: ConnectivityRequirement) {
        self.id = id
        self.title = title
        self.requirement = requirement
    }
}

/// Everything a cached screen's presentation is decided from.
public struct CachedScreenInput: Sendable, Hashable {
    public var connectivity: ConnectivityKind
    public var content: CachedContent
    public var actions: [ScreenAction]
    /// The connection came back after the data on screen was shown offline: suggest a refresh.
    public var reconnected: Bool
    /// A refresh is in flight (the data stays on screen; never a blocking spinner).
    public var isRefreshing: Bool

    public init(
        connectivity: ConnectivityKind,
        content: CachedContent,
        actions: [ScreenAction] = [],
        reconnected: Bool = false,
        isRefreshing: Bool = false
    ) {
        self.connectivity = connectivity
        self.content = content
        self.actions = actions
        self.reconnected = reconnected
        self.isRefreshing = isRefreshing
    }
}

/// The persistent, non-intrusive offline indicator.
public struct OfflineBanner: Sendable, Hashable {
    /// “Offline mode”.
    public var title: OfflineMessage
    /// “Using your saved copy” when cached data is on screen.
    public var detail: OfflineMessage?
    /// Read by screen readers; apps should also post it as an announcement when it appears.
    public var accessibilityLabel: String

    public init(title: OfflineMessage, detail: OfflineMessage?, accessibilityLabel: String) {
        self.title = title
        self.detail = detail
        self.accessibilityLabel = accessibilityLabel
    }
}

/// One action, resolved.
public struct ActionPresentation: Sendable, Hashable, Identifiable {
    public var id: String
    public var title: OfflineMessage
    /// Drawn enabled. A disabled action still answers a tap with ``tapMessage``.
    public var isEnabled: Bool
    /// The non-intrusive message (a toast) to show when the disabled action is tapped.
    public var tapMessage: OfflineMessage?
    public var accessibilityLabel: String
    /// Read after the label: why the action is unavailable.
    public var accessibilityHint: String?
    /// Mark the element disabled for assistive technologies (`.disabled(true)` in SwiftUI).
    public var accessibilityDisabled: Bool { !isEnabled }

    public init(
        id: String, title: OfflineMessage, isEnabled: Bool, tapMessage: OfflineMessage?,
        accessibilityLabel: String, accessibilityHint: String?
    ) {
        self.id = id
        self.title = title
        self.isEnabled = isEnabled
        self.tapMessage = tapMessage
        self.accessibilityLabel = accessibilityLabel
        self.accessibilityHint = accessibilityHint
    }
}

/// What a tap on an action should do.
public enum ActionTapResult: Sendable, Hashable {
    /// Run it: the gate allows it.
    case perform
    /// Do not build any request; show this message instead.
    case explain(OfflineMessage)
}

/// The empty state of a screen with nothing to show.
public struct EmptyStatePresentation: Sendable, Hashable {
    public var message: OfflineMessage
    public var detail: OfflineMessage?
    /// Offered when trying again can work now.
    public var retry: OfflineMessage?
    public var accessibilityLabel: String

    public init(message: OfflineMessage, detail: OfflineMessage?, retry: OfflineMessage?, accessibilityLabel: String) {
        self.message = message
        self.detail = detail
        self.retry = retry
        self.accessibilityLabel = accessibilityLabel
    }
}

/// The refresh control (“Retry” button, pull-to-refresh).
public struct RefreshAffordance: Sendable, Hashable {
    /// Pull-to-refresh and the refresh button run a refresh.
    public var isEnabled: Bool
    /// Show the refresh button prominently: the data is stale or the connection just came back.
    public var isSuggested: Bool
    public var title: OfflineMessage
    /// When disabled, the message a pull or tap shows instead of a spinner.
    public var offlineMessage: OfflineMessage?

    public init(isEnabled: Bool, isSuggested: Bool, title: OfflineMessage, offlineMessage: OfflineMessage?) {
        self.isEnabled = isEnabled
        self.isSuggested = isSuggested
        self.title = title
        self.offlineMessage = offlineMessage
    }
}

/// A cache-first screen (cart, order history, any app screen), resolved from connectivity, the
/// cache result and each action's requirement.
///
/// ```swift
/// let screen = CachedScreen(CachedScreenInput(
///     connectivity: monitor.status.kind,
///     content: .available(result.metadata),
///     actions: [ScreenAction(id: "checkout", title: checkout, requirement: .networkRequired)]))
/// screen.banner?.title        // “Offline mode” while offline
/// screen.tap("checkout")      // .explain(“No internet connection. Please check your connection and try again.”)
/// ```
public struct CachedScreen: Sendable, Hashable {
    public var banner: OfflineBanner?
    /// Show the data (it is kept on screen in every state that has it).
    public var showsContent: Bool
    /// A loading indicator may be shown; never while offline.
    public var showsLoadingIndicator: Bool
    public var emptyState: EmptyStatePresentation?
    public var actions: [ActionPresentation]
    public var refresh: RefreshAffordance
    /// When the data on screen was fetched, for “Updated 10:42”; nil when there is none.
    public var lastUpdated: Date?
    /// The data is older than the server said it stays fresh.
    public var isStale: Bool
    /// A summary of the screen's state for screen readers.
    public var accessibilityLabel: String

    public init(_ input: CachedScreenInput) {
        let kind = input.connectivity
        let offline = kind.isOffline

        switch input.content {
        case .available(let metadata):
            showsContent = true
            lastUpdated = metadata.fetchedAt
            isStale = metadata.isStale
            emptyState = nil
            showsLoadingIndicator = false
        case .loading:
            showsContent = false
            lastUpdated = nil
            isStale = false
            // A request can only be in flight while reachable; offline there is never a spinner.
            showsLoadingIndicator = kind.isReachable
            emptyState = kind.isReachable ? nil : Self.neverLoadedState(reachable: false)
        case .neverLoaded:
            showsContent = false
            lastUpdated = nil
            isStale = false
            showsLoadingIndicator = false
            emptyState = Self.neverLoadedState(reachable: kind.isReachable)
        case .failed:
            showsContent = false
            lastUpdated = nil
            isStale = false
            showsLoadingIndicator = false
            emptyState = kind.isReachable
                ? EmptyStatePresentation(
                    message: .noInternetConnection, detail: nil, retry: .retry,
                    accessibilityLabel: OfflineMessage.noInternetConnection.text)
                : Self.neverLoadedState(reachable: false)
        }

        if offline {
            let detail: OfflineMessage? = showsContent ? .usingSavedCopy : nil
            banner = OfflineBanner(
                title: .offlineMode, detail: detail,
                accessibilityLabel: [OfflineMessage.offlineMode.text, detail?.text].compactMap { $0 }.map(Self.sentence).joined(separator: " "))
        } else {
            banner = nil
        }

        actions = input.actions.map { action in
            let allowed = ConnectivityGate.allows(action.requirement, status: kind)
            return ActionPresentation(
                id: action.id, title: action.title, isEnabled: allowed,
                tapMessage: allowed ? nil : .noInternetConnection,
                accessibilityLabel: action.title.text,
                accessibilityHint: allowed ? nil : OfflineMessage.unavailableOffline.text)
        }

        let canRefresh = kind.isReachable && !input.isRefreshing
        let suggested = kind.isReachable && showsContent && (isStale || input.reconnected)
        let failedOnline = kind.isReachable && input.content == .failed
        refresh = RefreshAffordance(
            isEnabled: canRefresh,
            isSuggested: suggested || failedOnline,
            title: input.reconnected || failedOnline ? .retry : .refresh,
            offlineMessage: kind.isReachable ? nil : .noInternetConnection)

        var summary: [String] = []
        if let banner { summary.append(banner.accessibilityLabel) }
        if let emptyState { summary.append(emptyState.accessibilityLabel) }
        if showsLoadingIndicator { summary.append("Loading") }
        accessibilityLabel = summary.joined(separator: " ")
    }

    /// What tapping the action `id` should do; `.explain` for a disabled action, `nil` for an
    /// unknown id.
    public func tap(_ id: String) -> ActionTapResult? {
        guard let action = actions.first(where: { $0.id == id }) else { return nil }
        if action.isEnabled { return .perform }
        return .explain(action.tapMessage ?? .noInternetConnection)
    }

    /// What pulling to refresh should do: refresh, or explain instead of spinning.
    public func pullToRefresh() -> ActionTapResult {
        refresh.isEnabled ? .perform : .explain(refresh.offlineMessage ?? .noInternetConnection)
    }

    static func neverLoadedState(reachable: Bool) -> EmptyStatePresentation {
        EmptyStatePresentation(
            message: .internetRequiredFirstTime,
            detail: reachable ? nil : .tryAgainWhenOnline,
            retry: reachable ? .retry : nil,
            accessibilityLabel: [OfflineMessage.internetRequiredFirstTime.text, reachable ? nil : OfflineMessage.tryAgainWhenOnline.text]
                .compactMap { $0 }.joined(separator: " "))
    }

    static func sentence(_ text: String) -> String {
        guard let last = text.last else { return text }
        return ".!?…".contains(last) ? text : text + "."
    }
}
