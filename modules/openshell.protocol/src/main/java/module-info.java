/**
 * The Sandbox Protocol between supervisor and sandbox runtime. Exports nothing publicly.
 */
module openshell.protocol {
}
