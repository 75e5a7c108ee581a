import OfflineCore
import Testing

@Suite("Sync page plan")
struct SyncPagePlanTests {
    @Test("a row no write holds takes the server's version, or goes")
    func free() {
        for policy in [SyncPagePlan.Policy.serverWins, .mergeFields, .custom] {
            #expect(SyncPagePlan.step(deleted: false, writesOnTheirWay: false, held: false, policy: policy) == .upsert)
            #expect(SyncPagePlan.step(deleted: true, writesOnTheirWay: false, held: false, policy: policy) == .delete)
        }
    }

    @Test("a row whose writes settled stays held, the server's version kept beside it, deleted or not")
    func settled() {
        #expect(SyncPagePlan.step(deleted: false, writesOnTheirWay: false, held: true, policy: .mergeFields) == .hold)
        #expect(SyncPagePlan.step(deleted: true, writesOnTheirWay: false, held: true, policy: .serverWins) == .hold)
    }

    @Test("under writes on their way, the row shows what the policy says; a deletion shows the user's row")
    func underWrites() {
        #expect(SyncPagePlan.step(deleted: false, writesOnTheirWay: true, held: false, policy: .serverWins) == .holdUnderWrites(.users))
        #expect(SyncPagePlan.step(deleted: false, writesOnTheirWay: true, held: true, policy: .mergeFields) == .holdUnderWrites(.merged))
        #expect(SyncPagePlan.step(deleted: false, writesOnTheirWay: true, held: false, policy: .custom) == .holdUnderWrites(.decided))
        #expect(SyncPagePlan.step(deleted: true, writesOnTheirWay: true, held: false, policy: .mergeFields) == .holdUnderWrites(.users))
    }
}
