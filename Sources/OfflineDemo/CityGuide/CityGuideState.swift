import Foundation
public import OfflineCore
import OfflineKit

// The city guide's state, the events that change it and the effects it asks for: all of it goes
// through ``CityGuideReducer``.
extension CityGuideModel {
    public struct State: Sendable, Hashable {
        /// The selected city, kept across restarts.
        public var city: CityChoice?
        /// The selected city's pack, as the pack store reports it.
        public var pack: PackState = .none
        /// The cities whose pack is on the device, by name.
        public var downloaded: [CityChoice] = []
        /// The selected city's guide, read from its installed pack.
        public var guide: CityGuide?
        /// The installed pack (id and version) the guide was read from.
        public var guideSource: InstalledPack?
        public var focus: Focus = .none
        /// The server's suggestions for the text in the city field.
        public var suggestions: [CityChoice] = []
        public var suggestionsPhase: PackSuggestionsPhase = .idle
        public var isLoadingSuggestions = false
        /// The highlighted entry of the city picker.
        public var pick = 0
        public var page: Page = .home
        /// The highlighted row of the current page.
        public var selection = 0
        public var query = ""
        /// A download was asked for and its call has not returned yet (the manifest may still be
        /// on its way, before the store reports progress).
        public var downloadRequested = false
        public var slowBannerDismissed = false
        public var updateDismissed = false
        public var update: PackUpdatePhase = .idle
        /// Every pack's state as last read from the pack store, by pack id.
        var packs: [String: PackState] = [:]
        /// The guides of the installed packs as last read, by pack id: read from disk once per
        /// version.
        var guides: [String: PackGuide] = [:]
        /// Increases with every change of the city field's text, so a late answer never
        /// overwrites a newer one.
        var suggestionGeneration = 0
        var wasReachable: Bool?
        /// The connectivity monitor's last word: what keys, downloads and updates decide by.
        public var connectivity: ConnectivityKind = .unknown
        /// A status was heard from the monitor (the first may still be “unknown”).
        var heardConnectivity = false
        /// A quiet check for a newer pack is running.
        var checkingForUpdate = false
        /// The message shown at the bottom of the screen until it fades or is dismissed.
        public var toast: String?
        /// Numbers toasts, so a fade meant for an older one leaves a newer one alone.
        var toastSerial = 0

        public enum Focus: Sendable, Hashable {
            case none
            /// The city field; `downloadedOnly` when opened from “Choose a downloaded city”.
            case city(TextField, downloadedOnly: Bool)
            case search(TextField)
        }

        /// Where the user is inside the pack: problem-first navigation.
        public enum Page: Sendable, Hashable {
            case home
            case problem(Int)
            case situation(problem: Int, situation: Int)
            case results
        }

        public init() {}
    }

    /// What the city picker lists.
    public enum PickerSource: Sendable, Hashable {
        /// The server's suggestions for the typed text.
        case suggestions
        /// The downloaded cities matching the typed text: offline, after a timeout, or when asked.
        case downloaded
    }

    /// What changes the city guide's state: all of it goes through ``CityGuideReducer``.
    ///
    /// What a key, a download or an update asked for does depends on the connectivity in the
    /// state, heard from the monitor as ``connectivity(_:)``.
    public enum Event: Sendable, Hashable {
        /// The screen's loop started: restore the city, read the packs, follow them and the
        /// connection.
        case started
        case key(Key)
        /// The connectivity monitor's new status (the current one first).
        case connectivity(ConnectivityStatus)
        /// The city chosen in an earlier session, read from the device at launch.
        case restored(CityChoice)
        /// The pack store now: every pack's state (downloads and their progress included), and
        /// the guide of each installed pack.
        case packsRead(states: [String: PackState], guides: [String: PackGuide])
        /// The city field opens; from “Choose a downloaded city” when `downloadedOnly`.
        case openCityPicker(downloadedOnly: Bool)
        case select(CityChoice)
        /// The pack store changed (a download's progress, an install, a removal).
        case packsChanged
        /// The server's answer for the suggestion request numbered `generation`.
        case suggestionsArrived(generation: Int, [CityChoice])
        /// The suggestion request numbered `generation` failed: refused before sending
        /// (`refused`), or timed out / answered with an error.
        case suggestionsFailed(generation: Int, refused: Bool)
        /// The user asks for the selected city's pack.
        case download
        /// The download of `packId` returned (installed, cancelled or failed: the pack store's
        /// state tells which), or was refused with `refusal` before it started.
        case downloadFinished(packId: String, refusal: OfflineMessage? = nil)
        /// Back while downloading.
        case cancelDownload
        /// The user asks for the newer version of the selected city's pack.
        case update
        case updateFinished(packId: String, UpdateOutcome)
        /// Quietly ask whether the selected city's pack has a newer version (online, installed).
        case checkForUpdate
        /// The quiet check ended (answered, failed or past its deadline: it says nothing).
        case updateChecked
        /// Remove the selected city's pack from the device.
        case remove
        /// The selected city's pack was removed (`removed`), or could not be (`problem`).
        case removeFinished(city: String, problem: String?)
        /// The demo's control: have the backend publish a newer version of the selected pack.
        case publishNewVersion
        /// The demo's backend published a newer version of the selected city's pack, or did not
        /// (`problem`, in words).
        case published(problem: String?)
        /// Hides the slow-connection banner, or else the update affordance.
        case dismiss
        /// The toast numbered `serial` was shown long enough.
        case toastFaded(serial: Int)
    }

    /// How fetching a newer version ended.
    public enum UpdateOutcome: Sendable, Hashable { case installed, cancelled, failed }

    /// What the city guide asks its shell to do.
    public enum Effect: Sendable, Hashable {
        /// Migrate the demo's tables and read the city chosen in an earlier session.
        case restoreCity
        /// Follow the pack store's changes, as ``Event/packsChanged``.
        case followPacks
        /// Follow the connectivity monitor.
        case followConnectivity
        /// Ask the server for the cities matching `text`; the answer comes back as an event
        /// numbered `generation`.
        case fetchSuggestions(text: String, generation: Int)
        /// Remember the chosen city on the device.
        case saveCity(CityChoice)
        /// Stop `packId`'s download, if one runs, and remove its staged files.
        case cancelDownload(packId: String)
        /// Read the pack store again (``Event/packsRead(states:guides:)``).
        case readPacks
        /// Download `packId`'s pack; ``Event/downloadFinished(packId:)`` follows.
        case download(packId: String)
        /// Fetch the newer version of `packId`; ``Event/updateFinished(packId:_:)`` follows.
        case update(packId: String)
        /// Quietly ask whether `packId` has a newer version, giving up at the background deadline;
        /// ``Event/updateChecked`` follows.
        case checkForUpdate(packId: String)
        /// Remove `packId`, the pack of `city`; ``Event/removeFinished(city:problem:)`` follows.
        case remove(packId: String, city: String)
        /// Have the backend publish a newer version of `packId`; ``Event/published(problem:)``
        /// follows.
        case publishNewVersion(packId: String)
        /// Wait while toast `serial` is shown; ``Event/toastFaded(serial:)`` follows.
        case fadeToast(serial: Int)
    }

    /// An installed pack's guide, with the version it was read from.
    public struct PackGuide: Sendable, Hashable {
        public var version: String
        public var guide: CityGuide

        public init(version: String, guide: CityGuide) {
            self.version = version
            self.guide = guide
        }
    }
}
