/// The five offline UX patterns every feature fits into.
public enum OfflinePattern: String, Sendable, Hashable, CaseIterable {
    /// No offline behaviour: no server, or a read where stale data is fine.
    case none
    /// A: optimistic without feedback. Queue the write, continue as if it succeeded.
    case optimisticWithoutFeedback = "A"
    /// B: optimistic with feedback. Queue the write; show pending items greyed out (deletions
    /// struck through) while offline, and errors when the server refuses.
    case optimisticWithFeedback = "B"
    /// C: blocking form. Fields stay editable and the draft is saved locally; submit is disabled
    /// offline.
    case blockingForm = "C"
    /// D: full-page blocking read. Only when the data must never be stale.
    case fullPageBlocking = "D"
}

/// The answers to the flow chart's questions about a feature.
public struct FeatureTraits: Sendable, Hashable {
    /// The kind of request a feature makes; a feature that both reads and writes writes.
    public enum Request: String, Sendable, Hashable {
        case read
        case write
    }

    /// 1. Does the feature interact with the server?
    public var talksToServer: Bool
    /// 2. What type of request is made?
    public var request: Request
    /// 3. (reads) Is it OK for the user to see stale data?
    public var staleDataAcceptable: Bool
    /// 4. (writes) Is the UI a form (a submit button, inputs being filled)?
    public var isForm: Bool
    /// 5. (writes) Can the server's response be anticipated?
    public var responsePredictable: Bool
    /// 6. (writes) Does the user need to know the action succeeded on the server?
    public var userNeedsConfirmation: Bool
    /// Moves money: never optimistic.
    public var movesMoney: Bool

    public init(
        talksToServer: Bool,
        request: Request = .read,
        staleDataAcceptable: Bool = true,
        isForm: Bool = false,
        responsePredictable: Bool = true,
        userNeedsConfirmation: Bool = false,
        movesMoney: Bool = false
    ) {
        self.talksToServer = talksToServer
        self.request = request
        self.staleDataAcceptable = staleDataAcceptable
        self.isForm = isForm
        self.responsePredictable = responsePredictable
        self.userNeedsConfirmation = userNeedsConfirmation
        self.movesMoney = movesMoney
    }
}

extension OfflinePattern {
    /// Walks the flow chart.
    ///
    /// ```swift
    /// OfflinePattern.classify(FeatureTraits(talksToServer: true, request: .write))   // .optimisticWithoutFeedback (pin a chat)
    /// ```
    public static func classify(_ traits: FeatureTraits) -> OfflinePattern {
        guard traits.talksToServer else { return .none }
        switch traits.request {
        case .read:
            return traits.staleDataAcceptable ? .none : .fullPageBlocking
        case .write:
            if traits.isForm || traits.movesMoney || !traits.responsePredictable { return .blockingForm }
            return traits.userNeedsConfirmation ? .optimisticWithFeedback : .optimisticWithoutFeedback
        }
    }

    /// What a feature following this pattern requires of the connection at the moment of use.
    ///
    /// Optimistic writes and stale-tolerant reads work offline; blocking forms and blocking
    /// reads need the network to complete (a form's fields still work offline).
    public var requirement: ConnectivityRequirement {
        switch self {
        case .none, .optimisticWithoutFeedback, .optimisticWithFeedback: .offlineCapable
        case .blockingForm, .fullPageBlocking: .networkRequired
        }
    }
}
