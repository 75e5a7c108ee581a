public import Foundation

/// The planner's local engines: the day's schedule and "Tell me what to do".
///
/// Pure functions of the local tasks and the current time: they run identically online and
/// offline, and never wait for anything.
public enum PlannerSchedule {
    /// A block of time in today's schedule.
    public struct Slot: Sendable, Hashable {
        public var start: Date
        public var task: PlannerTask
    }

    /// What to do next, and why, in the user's words.
    public struct Recommendation: Sendable, Hashable {
        public var task: PlannerTask
        public var reason: String
    }

    /// How pressing a task is: higher first. Overdue and due-today work dominates, then
    /// priority, then shorter tasks (quick wins).
    public static func score(_ task: PlannerTask, now: Date, calendar: Calendar = .current) -> Double {
        let days = daysUntil(task.due, from: now, calendar: calendar)
        let urgency: Double = days < 0 ? 4 : days == 0 ? 3 : days == 1 ? 2 : days <= 3 ? 1 : 0
        let priority = Double(4 - min(3, max(1, task.priority)))
        return urgency * 3 + priority * 2 - Double(task.estimateMinutes) / 120
    }

    /// Open tasks, most pressing first.
    public static func ranked(_ tasks: [PlannerTask], now: Date, calendar: Calendar = .current) -> [PlannerTask] {
        tasks.filter { !$0.done }.sorted {
            let (left, right) = (score($0, now: now, calendar: calendar), score($1, now: now, calendar: calendar))
            return left != right ? left > right : $0.title < $1.title
        }
    }

    /// Today's plan: the ranked open tasks back to back from now (or 09:00 if earlier),
    /// starting on the next quarter hour, ending at 21:00.
    public static func today(_ tasks: [PlannerTask], now: Date, calendar: Calendar = .current) -> [Slot] {
        let nine = calendar.date(bySettingHour: 9, minute: 0, second: 0, of: now) ?? now
        let end = calendar.date(bySettingHour: 21, minute: 0, second: 0, of: now) ?? now
        var cursor = max(now, nine)
        let minute = calendar.component(.minute, from: cursor)
        let roundUp = (15 - minute % 15) % 15
        cursor = calendar.date(byAdding: .minute, value: roundUp, to: cursor) ?? cursor
        cursor = calendar.date(bySetting: .second, value: 0, of: cursor) ?? cursor
        var slots: [Slot] = []
        for task in ranked(tasks, now: now, calendar: calendar) {
            guard cursor < end else { break }
            slots.append(Slot(start: cursor, task: task))
            cursor = cursor.addingTimeInterval(TimeInterval(task.estimateMinutes * 60))
        }
        return slots
    }

    /// "Tell me what to do": the most pressing task and why; nil when everything is done.
    public static func tellMeWhatToDo(_ tasks: [PlannerTask], now: Date, calendar: Calendar = .current) -> Recommendation? {
        guard let task = ranked(tasks, now: now, calendar: calendar).first else { return nil }
        let days = daysUntil(task.due, from: now, calendar: calendar)
        let due = days < 0 ? "overdue" : days == 0 ? "due today" : days == 1 ? "due tomorrow" : "due in \(days) days"
        let priority = task.priority == 1 ? ", high priority" : ""
        return Recommendation(task: task, reason: "\(due), \(task.estimateMinutes) min\(priority)")
    }

    static func daysUntil(_ date: Date, from now: Date, calendar: Calendar) -> Int {
        calendar.dateComponents([.day], from: calendar.startOfDay(for: now), to: calendar.startOfDay(for: date)).day ?? 0
    }
}
