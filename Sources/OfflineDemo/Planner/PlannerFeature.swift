public import OfflineCore

/// The planner's features that may use the network, each declaring its requirement.
public enum PlannerFeature: String, Sendable, Hashable, CaseIterable {
    case aiRecommendations
    case remoteSyllabusParsing
    case cloudBackup

    public var title: OfflineMessage {
        switch self {
        case .aiRecommendations: .aiRecommendations
        case .remoteSyllabusParsing: .remoteSyllabusParsing
        case .cloudBackup: .cloudBackup
        }
    }

    public var requirement: ConnectivityRequirement { .networkRequired }

    public func availability(_ connectivity: ConnectivityKind) -> FeatureAvailability {
        FeatureAvailability(title, requirement: requirement, connectivity: connectivity)
    }
}

extension OfflineMessage {
    /// The planner's AI-based recommendations.
    static let aiRecommendations = OfflineMessage(key: "demo.planner.aiRecommendations", text: "AI recommendations")
    /// The planner's remote syllabus parsing.
    static let remoteSyllabusParsing = OfflineMessage(key: "demo.planner.remoteSyllabusParsing", text: "Remote syllabus parsing")
    /// The planner's cloud backup and multi-device sync.
    static let cloudBackup = OfflineMessage(key: "demo.planner.cloudBackup", text: "Cloud backup")
}
