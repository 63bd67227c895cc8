package testutil

// FuzzPatch applies a fuzz input's edits to a copy of a well-formed base:
// after a two-byte big-endian count of bytes to cut from the end (modulo
// len(base)+1), records of a two-byte big-endian offset (modulo the
// length), a length byte and up to that many bytes to write there
// (clipped at the end). An empty input leaves base as it is.
//
// Fuzz targets whose world is kilobytes of structure take edits instead of
// the whole world: inputs stay at a few bytes, mutations land in a
// well-formed world and reach its deep checks, and the fuzzer's
// minimization of each new input (which tries about one cut per pair of
// bytes, up to -fuzzminimizetime) ends in moments.
func FuzzPatch(base, edits []byte) []byte {
	out := append([]byte(nil), base...)
	if len(edits) >= 2 {
		cut := (int(edits[0])<<8 | int(edits[1])) % (len(out) + 1)
		out = out[:len(out)-cut]
		edits = edits[2:]
	}
	for len(edits) >= 3 && len(out) > 0 {
		off := (int(edits[0])<<8 | int(edits[1])) % len(out)
		n := min(int(edits[2]), len(edits)-3)
		copy(out[off:], edits[3:3+n])
		edits = edits[3+n:]
	}
	return out
}
