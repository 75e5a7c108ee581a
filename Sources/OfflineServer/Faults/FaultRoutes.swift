import Hummingbird

extension Router where Context == OfflineRequestContext {
    /// The fault switch, with `faultsEnabled` only (`offline serve --faults`), answered only to
    /// this machine (``OfflineRequestContext/requireLocalPeer()``; `404` to anyone else):
    ///
    /// - `PUT /_faults/routes` `{"path": "/api/cities", "fault": {"slow": {"milliseconds": 3000}}, "remaining": 2}`
    ///   (faults: `slow`, `drop`, `dropAfterHandler`, `error` with a 5xx `status`, `vanish`): requests whose path
    ///   starts with `path` get the fault.
    /// - `GET /_faults/routes`: the rules in force. `DELETE /_faults/routes`: clears them.
    ///
    /// Register it first: the middleware only covers routes added after it.
    func addFaultSwitch(_ configuration: ServerConfiguration) {
        guard configuration.faultsEnabled else { return }
        let plan = FaultPlan()
        add(middleware: FaultMiddleware(plan: plan))
        put("/_faults/routes") { request, context in
            try context.requireLocalPeer()
            let rule = try await request.decode(as: FaultRule.self, context: context)
            guard rule.path.hasPrefix("/") else {
                throw HTTPError(.badRequest, message: "A fault rule's path starts with /.")
            }
            plan.set(rule)
            return try DomainHTTP.json(plan.current)
        }
        get("/_faults/routes") { _, context in
            try context.requireLocalPeer()
            return try DomainHTTP.json(plan.current)
        }
        delete("/_faults/routes") { _, context in
            try context.requireLocalPeer()
            plan.clear()
            return Response(status: .noContent)
        }
    }
}
