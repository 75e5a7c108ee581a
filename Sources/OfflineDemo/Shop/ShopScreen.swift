import Foundation
public import OfflineCore

/// The shop, drawn from a state snapshot and its resolved ``CachedScreen``.
public enum ShopScreen {
    public static func render(_ state: ShopModel.State, _ screen: CachedScreen, _ context: RenderContext) -> ScreenContent {
        var body: [Line] = []
        let tabs = Line([
            Span(" "), Span(" " + OfflineMessage.cartTitle.text + " ", state.tab == .cart ? .inverse : .dim),
            Span(" "), Span(" " + OfflineMessage.orderHistoryTitle.text + " ", state.tab == .orders ? .inverse : .dim),
            Span(updatedText(screen), .dim),
        ])
        body.append(tabs)
        body.append(.blank)

        if let empty = screen.emptyState {
            body.append(Line("   " + empty.message.text, .bold))
            if let detail = empty.detail { body.append(Line("   " + detail.text, .dim)) }
            if let retry = empty.retry { body.append(Line("   f: " + retry.text, .color(.cyan))) }
        } else if screen.showsContent {
            switch state.tab {
            case .cart: body += cartLines(state)
            case .orders: body += orderLines(state)
            }
        } else if screen.showsLoadingIndicator {
            body.append(Line("   Loading…", .dim))
        }
        body.append(.blank)

        var actions: [Span] = [Span(" ")]
        for action in screen.actions {
            actions.append(Span("[" + action.title.text + "]", action.isEnabled ? .color(.cyan, bold: true) : TextStyle(color: .gray, dim: true)))
            actions.append(Span(action.isEnabled ? "  " : " (disabled)  ", .dim))
        }
        body.append(Line(actions))
        if screen.refresh.isSuggested, screen.refresh.isEnabled {
            body.append(Line([Span(" Back online. ", .color(.green)), Span("f: " + screen.refresh.title.text, .color(.cyan, bold: true))]))
        }
        if let result = state.lastResult { body.append(Line(" " + result, .color(.green))) }
        body.append(Line(" a11y: " + screen.accessibilityLabel, .dim))

        let banner = screen.banner.map { banner in
            Line([Span(" ● " + banner.title.text, .color(.red, bold: true))] + (banner.detail.map { [Span(" — " + $0.text, .color(.red))] } ?? []))
        }
        let enabled = Dictionary(uniqueKeysWithValues: screen.actions.map { ($0.id, $0.isEnabled) })
        let keys: [KeyHint] = switch state.tab {
        case .cart:
            [KeyHint("v", "orders"), KeyHint("↑↓", "select"), KeyHint("c", "checkout", enabled: enabled["checkout"] ?? false),
             KeyHint("+", "quantity", enabled: enabled["quantity"] ?? false), KeyHint("f", screen.refresh.title.text, enabled: screen.refresh.isEnabled)]
        case .orders:
            [KeyHint("v", "cart"), KeyHint("↑↓", "select"), KeyHint("t", "track", enabled: enabled["track"] ?? false),
             KeyHint("r", "rate", enabled: enabled["rate"] ?? false), KeyHint("f", screen.refresh.title.text, enabled: screen.refresh.isEnabled)]
        }
        return ScreenContent(banner: banner, body: body, keys: keys)
    }

    static func updatedText(_ screen: CachedScreen) -> String {
        guard let updated = screen.lastUpdated else { return "" }
        let components = Calendar.current.dateComponents([.hour, .minute], from: updated)
        let time = String(format: "%02d:%02d", components.hour ?? 0, components.minute ?? 0)
        return "   " + OfflineMessage.updatedAt(time).text + (screen.isStale ? " (saved copy)" : "")
    }

    static func money(_ cents: Int, _ currency: String) -> String {
        let sign = cents < 0 ? "-" : ""
        return "\(sign)\(abs(cents) / 100).\(String(format: "%02d", abs(cents) % 100)) \(currency)"
    }

    static func cartLines(_ state: ShopModel.State) -> [Line] {
        guard let cart = state.cart else { return [] }
        var lines = [Line("   Item                      Image              Qty        Price", .dim)]
        for (index, item) in cart.items.enumerated() {
            let image = (item.imageURL.split(separator: "/").last.map(String.init) ?? "")
            let text = "   " + item.name.padding(toLength: 26, withPad: " ", startingAt: 0)
                + ("[" + image + "]").padding(toLength: 19, withPad: " ", startingAt: 0)
                + String(item.quantity).padding(toLength: 5, withPad: " ", startingAt: 0)
                + money(item.quantity * item.unitPriceCents, cart.currency).leftPadded(to: 12)
            lines.append(Line(text, index == state.selection ? .inverse : .plain))
        }
        lines.append(Line("   Total".padding(toLength: 53, withPad: " ", startingAt: 0) + money(cart.totalCents, cart.currency).leftPadded(to: 12), .bold))
        return lines
    }

    static func orderLines(_ state: ShopModel.State) -> [Line] {
        guard let orders = state.orders else { return [] }
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd"
        formatter.timeZone = TimeZone(identifier: "UTC")
        var lines = [Line("   Order     Date         Status       Total         Rating", .dim)]
        for (index, order) in orders.prefix(10).enumerated() {
            let text = "   " + order.id.padding(toLength: 10, withPad: " ", startingAt: 0)
                + formatter.string(from: order.placedAt).padding(toLength: 13, withPad: " ", startingAt: 0)
                + order.status.padding(toLength: 11, withPad: " ", startingAt: 0)
                + money(order.totalCents, order.currency).leftPadded(to: 12)
                + "   " + (order.rating.map { String(repeating: "*", count: $0) } ?? "-")
            lines.append(Line(text, index == state.selection ? .inverse : .plain))
        }
        return lines
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
