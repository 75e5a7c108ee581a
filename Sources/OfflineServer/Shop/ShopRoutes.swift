import Crypto
import Foundation
import Hummingbird
import NIOCore

extension Router where Context == OfflineRequestContext {
    /// The shop of the cart and order-history story.
    ///
    /// - `GET /shop/cart`, `GET /shop/orders`: JSON with a strong `ETag` and
    ///   `Cache-Control: private, max-age=…, stale-while-revalidate=…, stale-if-error=…`;
    ///   `If-None-Match` answers `304` without a body.
    /// - `PATCH /shop/cart/items/{id}` `{"quantity": n}` (0 removes the line),
    ///   `POST /shop/checkout`, `GET /shop/orders/{id}/tracking`,
    ///   `POST /shop/orders/{id}/rating` `{"stars": 1…5}`: never cached (`no-store`).
    ///
    /// Every request is the signed-in user's (their access token); without one the answer is `401`.
    func addShopRoutes(storage: any ServerStorage, now: @escaping @Sendable () -> Date = { Date() }) {
        let store = ShopStore(storage: storage, now: now)
        let shop = group("shop")

        shop.get("cart") { request, context in
            let user = try context.requireUser().id
            return try ShopHTTP.cacheable(await store.cart(for: user), request: request)
        }
        shop.patch("cart/items/:id") { request, context in
            let user = try context.requireUser().id
            let item = try context.parameters.require("id")
            let update = try await ShopHTTP.decode(ShopQuantityUpdate.self, request, context)
            do {
                return try await context.commitWrite(on: storage) { db in
                    try ShopHTTP.answer(store.setQuantity(update.quantity, item: item, for: user, in: db))
                }
            } catch {
                throw ShopHTTP.error(error)
            }
        }
        shop.get("orders") { request, context in
            let user = try context.requireUser().id
            return try ShopHTTP.cacheable(await store.orders(for: user), request: request)
        }
        shop.post("checkout") { _, context in
            let user = try context.requireUser().id
            do {
                return try await context.commitWrite(on: storage) { db in
                    try ShopHTTP.answer(store.checkout(for: user, in: db), status: .created)
                }
            } catch {
                throw ShopHTTP.error(error)
            }
        }
        shop.get("orders/:id/tracking") { request, context in
            let user = try context.requireUser().id
            let order = try context.parameters.require("id")
            do {
                return try ShopHTTP.json(await store.tracking(order: order, for: user))
            } catch {
                throw ShopHTTP.error(error)
            }
        }
        shop.post("orders/:id/rating") { request, context in
            let user = try context.requireUser().id
            let order = try context.parameters.require("id")
            let rating = try await ShopHTTP.decode(ShopRating.self, request, context)
            do {
                return try await context.commitWrite(on: storage) { db in
                    try ShopHTTP.answer(store.rate(order: order, stars: rating.stars, for: user, in: db))
                }
            } catch {
                throw ShopHTTP.error(error)
            }
        }
    }
}

/// HTTP details of the shop: authentication, caching headers, JSON bodies.
enum ShopHTTP {
    /// Lifetimes the client honours: fresh for 30 s, served stale while revalidating for a
    /// minute more, and kept as a fallback for a day when the server cannot be reached.
    static let cacheControl = "private, max-age=30, stale-while-revalidate=60, stale-if-error=86400"

    static func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: OfflineRequestContext) async throws -> T {
        let buffer = try await request.body.collect(upTo: context.maxUploadSize)
        _ = try JSONBody.parse(buffer, maxBytes: context.maxUploadSize)
        do {
            return try ShopCoding.decoder().decode(type, from: Data(buffer.readableBytesView))
        } catch {
            throw HTTPError(.badRequest, message: "The request body is not valid JSON for this action.")
        }
    }

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        try answer(value, status: status).response
    }

    /// ``json(_:status:)`` as a write route's answer, built inside its write.
    static func answer<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> WriteAnswer {
        .json(try ShopCoding.encoder().encode(value), status: status,
              headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"])
    }

    /// A cacheable JSON answer with a strong ETag over the body; `304` when the client's
    /// `If-None-Match` already names it.
    static func cacheable<T: Encodable>(_ value: T, request: Request) throws -> Response {
        let body = try ShopCoding.encoder().encode(value)
        let etag = "\"" + SHA256.hash(data: body).prefix(16).hexEncoded + "\""
        var headers = HTTPFields()
        headers[.eTag] = etag
        headers[.cacheControl] = cacheControl
        headers[.vary] = "Authorization"
        if let match = request.headers[.ifNoneMatch],
           match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag || $0.trimmingCharacters(in: .whitespaces) == "*" }) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func error(_ error: any Error) -> any Error {
        guard let failure = error as? ShopStore.Failure else { return error }
        return switch failure {
        case .unknownItem: HTTPError(.notFound, message: "That item is no longer in the cart.")
        case .unknownOrder: HTTPError(.notFound, message: "That order was not found.")
        case .invalidQuantity: HTTPError(.badRequest, message: "A quantity is a whole number from 0 to 99.")
        case .invalidRating: HTTPError(.badRequest, message: "A rating is from 1 to 5 stars.")
        case .emptyCart: HTTPError(.conflict, message: "The cart is empty.")
        }
    }
}
