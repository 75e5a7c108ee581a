/// OfflineKit's vocabulary comes from OfflineCore (connectivity kinds and requirements, the
/// gate, the message catalog, the UX-state resolvers): `import OfflineKit` brings it along, so an
/// app needs no second import to read `error.message` or call `ConnectivityGate`.
@_exported public import OfflineCore
