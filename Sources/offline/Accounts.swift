import ArgumentParser
import Foundation
import OfflineServer

extension Offline {
    struct Accounts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The reference backend's own accounts.",
            subcommands: [Add.self]
        )

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add an account to the server's storage, its password read from standard input.",
                discussion: "For trying the server out with users of your own; real users come from your identity provider's tokens (offline serve --jwt-issuer …)."
            )

            @Argument(help: "The account's name, also its user id (1 to 64 letters, digits, '.', '_' or '-').") var name: String
            @Option(help: "The folder of the server's embedded SQLite databases (offline serve --data).") var data: String?
            @Option(help: "The server's PostgreSQL (offline serve --postgres).") var postgres: String?
            @Option(help: "The account's email (NAME@example.org by default).") var email: String?
            @Option(name: .customLong("display-name"), help: "The name shown for the account (NAME by default).") var displayName: String?

            func run() async throws {
                guard data != nil || postgres != nil else {
                    throw ValidationError("Name where the server keeps its data: --data FOLDER or --postgres URL.")
                }
                guard let password = readLine(strippingNewline: true), !password.isEmpty else {
                    throw ValidationError("Give the account's password on standard input.")
                }
                let configuration = ServerConfiguration(
                    dataDirectory: data.map { URL(fileURLWithPath: $0, isDirectory: true) }, postgresURL: postgres)
                do {
                    let user = try await addAccount(configuration, name: name, password: password, email: email, displayName: displayName)
                    print("offline accounts: added \(user.name); it signs in with its password at POST /api/auth/sign-in")
                } catch let error as AccountAddError {
                    throw ValidationError(error.description)
                }
            }
        }
    }
}
