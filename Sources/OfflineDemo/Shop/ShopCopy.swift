import OfflineCore

extension OfflineMessage {
    static let proceedToCheckout = OfflineMessage(key: "demo.shop.proceedToCheckout", text: "Proceed to Checkout")
    static let updateQuantity = OfflineMessage(key: "demo.shop.updateQuantity", text: "Update Quantity")
    static let trackOrder = OfflineMessage(key: "demo.shop.trackOrder", text: "Track Order")
    static let rateOrder = OfflineMessage(key: "demo.shop.rateOrder", text: "Rate Order")
    static let cartTitle = OfflineMessage(key: "demo.shop.cart", text: "Cart")
    static let orderHistoryTitle = OfflineMessage(key: "demo.shop.orderHistory", text: "Order history")
}
