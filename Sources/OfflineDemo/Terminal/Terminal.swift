import Foundation
import OfflineKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's controlling terminal: raw mode, size, colour support, drawing and keys.
///
/// Raw mode is entered by ``enterFullScreen()`` and always left by ``leaveFullScreen()``, which
/// restores the settings the terminal had.
public final class Terminal: Sendable {
    private let input: Int32
    private let output: Int32
    private let saved: SavedSettings

    private final class SavedSettings: @unchecked Sendable {
        // @unchecked: written once before raw mode starts, read once when it ends, on one thread.
        var settings: termios?
    }

    public init(input: Int32 = 0, output: Int32 = 1) {
        self.input = input
        self.output = output
        self.saved = SavedSettings()
    }

    /// Both standard input and output are terminals.
    public var isInteractive: Bool { isatty(input) == 1 && isatty(output) == 1 }

    /// Colour unless `NO_COLOR` is set, the terminal is `dumb`, or output is not a terminal.
    public var supportsColour: Bool {
        let environment = ProcessInfo.processInfo.environment
        if environment["NO_COLOR"] != nil { return false }
        if environment["TERM"] == nil || environment["TERM"] == "dumb" { return false }
        return isatty(output) == 1
    }

    /// Columns and rows, or 80×24 when the size cannot be read.
    public var size: (width: Int, height: Int) {
        var window = winsize()
        #if canImport(Glibc)
        let request = UInt(TIOCGWINSZ)
        #else
        let request = TIOCGWINSZ
        #endif
        guard ioctl(output, request, &window) == 0, window.ws_col > 0, window.ws_row > 0 else {
            return (Frame.standardWidth, Frame.standardHeight)
        }
        return (Int(window.ws_col), Int(window.ws_row))
    }

    /// Raw mode, the alternate screen, and a hidden cursor.
    public func enterFullScreen() {
        var settings = termios()
        if tcgetattr(input, &settings) == 0 {
            saved.settings = settings
            var raw = settings
            raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
            raw.c_oflag &= ~tcflag_t(OPOST)
            raw.c_cflag |= tcflag_t(CS8)
            raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG)
            tcsetattr(input, TCSAFLUSH, &raw)
        }
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[2J")
    }

    /// Restores the terminal exactly as it was.
    public func leaveFullScreen() {
        write("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l")
        if var settings = saved.settings {
            tcsetattr(input, TCSAFLUSH, &settings)
        }
    }

    public func draw(_ frame: Frame) {
        write(frame.ansi(colour: supportsColour))
    }

    public func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                Foundation.write(output, buffer.baseAddress!.advanced(by: offset), buffer.count - offset)
            }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Keys as they are typed, until the calling task is cancelled.
    ///
    /// Reads on a dedicated thread with a short `poll` timeout, so cancelling is prompt and a
    /// lone Escape is told apart from the start of an arrow key.
    public func keys() -> AsyncStream<Key> {
        let (stream, continuation) = AsyncStream.makeStream(of: Key.self)
        let stop = StopFlag()
        let input = self.input
        let thread = Thread {
            var decoder = KeyDecoder()
            var buffer = [UInt8](repeating: 0, count: 64)
            while !stop.isSet {
                var descriptor = pollfd(fd: input, events: Int16(POLLIN), revents: 0)
                let ready = poll(&descriptor, 1, 50)
                if ready < 0 && errno != EINTR { break }
                if ready <= 0 {
                    for key in decoder.flush() { continuation.yield(key) }
                    continue
                }
                let count = read(input, &buffer, buffer.count)
                if count <= 0 { break }
                for key in decoder.decode(buffer[0..<count]) { continuation.yield(key) }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in stop.set() }
        thread.start()
        return stream
    }

    private final class StopFlag: Sendable {
        private let value = Locked(false)
        var isSet: Bool { value.current }
        func set() { value.withLock { $0 = true } }
    }
}
