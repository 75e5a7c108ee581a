import Foundation
import OfflineCore
import Testing

private let fetched = Date(timeIntervalSince1970: 1_700_000_000)
private let fromCache = CachedContent.available(CacheMetadata(source: .cache, fetchedAt: fetched, validator: "\"v1\"", isStale: true))
private let fresh = CachedContent.available(CacheMetadata(source: .network, fetchedAt: fetched, validator: "\"v2\"", isStale: false))
private let cartActions = [
    ScreenAction(id: "checkout", title: OfflineMessage(key: "app.checkout", text: "Proceed to Checkout"), requirement: .networkRequired),
    ScreenAction(id: "quantity", title: OfflineMessage(key: "app.quantity", text: "Update Quantity"), requirement: .networkRequired),
    ScreenAction(id: "share", title: OfflineMessage(key: "app.share", text: "Share"), requirement: .offlineCapable),
]

@Suite("Cached screen")
struct CachedScreenTests {
    @Test("offline with a cached copy: data shown, banner, network actions disabled, local ones not",
          arguments: [ConnectivityKind.offlineHard, .offlineSoft])
    func offlineWithCache(_ kind: ConnectivityKind) {
        let screen = CachedScreen(CachedScreenInput(connectivity: kind, content: fromCache, actions: cartActions))
        #expect(screen.showsContent)
        #expect(!screen.showsLoadingIndicator)
        #expect(screen.emptyState == nil)
        #expect(screen.banner?.title == .offlineMode)
        #expect(screen.banner?.detail == .usingSavedCopy)
        #expect(screen.banner?.accessibilityLabel == "Offline mode. Using your saved copy.")
        #expect(screen.actions.map(\.isEnabled) == [false, false, true])
        #expect(screen.actions.map(\.accessibilityDisabled) == [true, true, false])
        #expect(screen.actions[0].accessibilityHint == "Unavailable while offline")
        #expect(screen.actions[0].accessibilityLabel == "Proceed to Checkout")
        #expect(screen.lastUpdated == fetched)
        #expect(screen.isStale)
    }

    @Test("tapping a disabled action explains, without building a request")
    func tapDisabled() {
        let screen = CachedScreen(CachedScreenInput(connectivity: .offlineHard, content: fromCache, actions: cartActions))
        #expect(screen.tap("checkout") == .explain(.noInternetConnection))
        #expect(screen.tap("checkout") == .explain(OfflineMessage(
            key: "offline.noInternetConnection", text: "No internet connection. Please check your connection and try again.")))
        #expect(screen.tap("share") == .perform)
        #expect(screen.tap("missing") == nil)
        #expect(screen.pullToRefresh() == .explain(.noInternetConnection))
    }

    @Test("online: no banner, every action enabled", arguments: [ConnectivityKind.online, .poor])
    func online(_ kind: ConnectivityKind) {
        let screen = CachedScreen(CachedScreenInput(connectivity: kind, content: fresh, actions: cartActions))
        #expect(screen.banner == nil)
        #expect(screen.actions.allSatisfy { $0.isEnabled })
        #expect(screen.actions.allSatisfy { $0.tapMessage == nil && $0.accessibilityHint == nil })
        #expect(screen.tap("checkout") == .perform)
        #expect(screen.refresh.isEnabled)
        #expect(!screen.refresh.isSuggested)
        #expect(screen.accessibilityLabel.isEmpty)
    }

    @Test("back online after an offline view: banner gone, actions enabled, a refresh is offered")
    func reconnected() {
        let screen = CachedScreen(CachedScreenInput(connectivity: .online, content: fromCache, actions: cartActions, reconnected: true))
        #expect(screen.banner == nil)
        #expect(screen.actions.allSatisfy { $0.isEnabled })
        #expect(screen.refresh == RefreshAffordance(isEnabled: true, isSuggested: true, title: .retry, offlineMessage: nil))
        #expect(screen.pullToRefresh() == .perform)
    }

    @Test("stale data online suggests a refresh; a refresh in flight keeps the data and disables the control")
    func staleOnline() {
        let stale = CachedScreen(CachedScreenInput(connectivity: .online, content: fromCache))
        #expect(stale.refresh.isSuggested)
        #expect(stale.refresh.title == .refresh)
        let refreshing = CachedScreen(CachedScreenInput(connectivity: .online, content: fromCache, isRefreshing: true))
        #expect(refreshing.showsContent)
        #expect(!refreshing.refresh.isEnabled)
        #expect(!refreshing.showsLoadingIndicator)
    }

    @Test("never loaded and offline: the first-time empty state, no spinner", arguments: [CachedContent.neverLoaded, .loading, .failed])
    func neverLoadedOffline(_ content: CachedContent) {
        let screen = CachedScreen(CachedScreenInput(connectivity: .offlineHard, content: content, actions: cartActions))
        #expect(!screen.showsContent)
        #expect(!screen.showsLoadingIndicator)
        #expect(screen.emptyState?.message.text == "An internet connection is required to load this for the first time.")
        #expect(screen.emptyState?.detail == .tryAgainWhenOnline)
        #expect(screen.emptyState?.retry == nil)
        #expect(screen.banner?.detail == nil)
        #expect(screen.accessibilityLabel == "Offline mode. An internet connection is required to load this for the first time. Try again when online.")
    }

    @Test("loading online shows an indicator and nothing else")
    func loadingOnline() {
        let screen = CachedScreen(CachedScreenInput(connectivity: .online, content: .loading))
        #expect(screen.showsLoadingIndicator)
        #expect(screen.emptyState == nil)
        #expect(screen.accessibilityLabel == "Loading")
    }

    @Test("a failed first load online offers Retry with the standard message, never a status code")
    func failedOnline() {
        let screen = CachedScreen(CachedScreenInput(connectivity: .online, content: .failed))
        #expect(screen.emptyState?.message == .noInternetConnection)
        #expect(screen.emptyState?.retry == .retry)
        #expect(screen.refresh.isSuggested)
        #expect(screen.refresh.title == .retry)
    }

    @Test("unknown connectivity shows no banner but still refuses network actions")
    func unknown() {
        let screen = CachedScreen(CachedScreenInput(connectivity: .unknown, content: fromCache, actions: cartActions))
        #expect(screen.banner == nil)
        #expect(!screen.actions[0].isEnabled)
        #expect(screen.actions[2].isEnabled)
    }

    @Test("every state has a non-empty screen-reader summary except online with data",
          arguments: ConnectivityKind.allCases, [CachedContent.loading, .neverLoaded, .failed, fromCache])
    func accessibilitySummary(_ kind: ConnectivityKind, _ content: CachedContent) {
        let screen = CachedScreen(CachedScreenInput(connectivity: kind, content: content))
        if kind.isOffline || !screen.showsContent {
            #expect(!screen.accessibilityLabel.isEmpty)
        }
        // Never both a spinner and an empty state, and never a spinner offline.
        #expect(!(screen.showsLoadingIndicator && screen.emptyState != nil))
        if !kind.isReachable { #expect(!screen.showsLoadingIndicator) }
    }
}
