import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import OfflineCore
@testable import OfflineServer
import Testing

/// HEAD is answered wherever GET is.
@Suite("HEAD requests", .timeLimit(.minutes(1)))
struct HeadRequestTests {
    @Test("HEAD answers every GET route like GET, without a body")
    func head() async throws {
        try await PackPathTests.withFolders { packs, _, _ in
            let configuration = ServerConfiguration.testing(packsDirectory: packs, faultsEnabled: true)
            let server = try await SyncTestBackend.prepare(.sqlite, configuration)
            let router = try server.router()
            // Parameters filled with names that exist where they can, so most routes answer 2xx.
            let samples = ["{id}": "paris", "{version}": "1", "**": "media/a.bin", "{collection}": "notes"]
            let gets = router.routes.filter { $0.method == .get }.map { route in
                samples.reduce(route.path.description) { $0.replacingOccurrences(of: $1.key, with: $1.value) }
            }
            #expect(gets.contains("/packs/paris/1/media/a.bin"))
            #expect(gets.count > 10)
            let app = Application(router: router)
            try await app.test(.router) { client in
                for uri in gets {
                    let get = try await client.execute(uri: uri, method: .get) { $0 }
                    try await client.execute(uri: uri, method: .head) { head in
                        #expect(head.status == get.status, "\(uri)")
                        #expect(head.headers[.contentLength] == get.headers[.contentLength], "\(uri)")
                        #expect(head.headers[.contentType] == get.headers[.contentType], "\(uri)")
                        #expect(head.body.readableBytes == 0, "\(uri)")
                    }
                }
                try await client.execute(uri: "/packs/paris/1/media/a.bin", method: .head) { response in
                    #expect(response.status == .ok)
                    #expect(response.headers[.contentLength] == "1000")
                    #expect(response.headers[.eTag] != nil)
                }
            }
        }
    }
}
