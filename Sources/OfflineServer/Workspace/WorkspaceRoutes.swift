import Foundation
import Hummingbird

/// A member of the demo workspace.
struct WorkspaceMember: Codable, Sendable, Hashable {
    var email: String
    var name: String
    var role: String
}

/// An invitation as the form submits it.
struct InvitationInput: Codable, Sendable {
    var email: String
    var name: String?
    var role: String?
}

/// A bank account from the simulated external provider.
struct BankAccount: Codable, Sendable, Hashable {
    var id: String
    var institution: String
    var name: String
    var mask: String
    var balance: String
}

extension Router where Context == OfflineRequestContext {
    /// - `GET /api/workspace/members`: for members only.
    /// - `POST /api/workspace/invitations`: validated here, because only the server knows
    ///   who is already a member and which domains may join (pattern C, blocking form);
    ///   `422` with a message and the field at fault when invalid, `201` with the member.
    ///   Only the workspace's admins invite (`403` for anyone else).
    /// - `GET /api/workspace/bank-accounts`: accounts from a simulated external provider; never
    ///   to be shown stale (pattern D, full-page blocking read).
    func addWorkspaceRoutes(store: DomainStore) {
        get("/api/workspace/members") { _, context in
            let user = try context.requireUser()
            guard try await store.role(of: user.email) != nil else {
                return try DomainHTTP.problem("Only members of this workspace can see who is in it.", status: .forbidden)
            }
            return try DomainHTTP.json(["members": try await store.members()])
        }
        post("/api/workspace/invitations") { request, context in
            let user = try context.requireUser()
            guard try await store.role(of: user.email) == "admin" else {
                return try DomainHTTP.problem("Only an admin of this workspace can invite people.", status: .forbidden)
            }
            let input = try await request.decode(as: InvitationInput.self, context: context)
            switch InvitationRules.validate(input) {
            case .failure(let problem):
                return try DomainHTTP.json(problem, status: .unprocessableContent)
            case .success(let member):
                return try await context.commitWrite(on: store.storage) { db in
                    guard try DomainStore.addMember(member, in: db) else {
                        return try DomainHTTP.problemAnswer("\(member.email) is already a member of this workspace.", field: "email",
                                                            status: .unprocessableContent)
                    }
                    return try DomainHTTP.answer(member, status: .created)
                }
            }
        }
        get("/api/workspace/bank-accounts") { _, context in
            let user = try context.requireUser().id
            // The provider takes a moment, as real aggregators do.
            try await Task.sleep(for: .milliseconds(300))
            return try DomainHTTP.json(["accounts": BankProvider.accounts(for: user)])
        }
    }
}

/// The server-side checks of an invitation.
enum InvitationRules {
    static let blockedDomains: Set<String> = ["example.invalid", "mailinator.com"]
    static let roles: Set<String> = ["member", "admin", "viewer"]

    static func validate(_ input: InvitationInput) -> Result<WorkspaceMember, DomainHTTP.Problem> {
        let email = input.email.trimmingCharacters(in: .whitespaces).lowercased()
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), !parts[1].hasPrefix("."), !parts[1].hasSuffix("."),
              email.count <= 254, !email.contains(where: \.isWhitespace) else {
            return .failure(.init(message: "Enter a valid email address.", field: "email"))
        }
        guard !blockedDomains.contains(String(parts[1])) else {
            return .failure(.init(message: "Invitations to \(parts[1]) addresses are not allowed.", field: "email"))
        }
        let role = (input.role ?? "member").lowercased()
        guard roles.contains(role) else {
            return .failure(.init(message: "Choose a role: member, admin or viewer.", field: "role"))
        }
        let name = input.name?.trimmingCharacters(in: .whitespaces).nilIfEmpty ?? String(parts[0])
        return .success(WorkspaceMember(email: email, name: name, role: role))
    }
}

extension DomainHTTP.Problem: Error {}

/// The simulated external bank-account provider.
enum BankProvider {
    static func accounts(for user: String) -> [BankAccount] {
        [
            BankAccount(id: "acc-1", institution: "Northwind Bank", name: "Everyday checking", mask: "4321", balance: "2,480.15"),
            BankAccount(id: "acc-2", institution: "Northwind Bank", name: "Savings", mask: "9876", balance: "12,004.00"),
            BankAccount(id: "acc-3", institution: "Contoso Credit Union", name: "Travel card", mask: "1122", balance: "-312.40"),
        ]
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
