// Package gen writes the scanner's per-message walkers (fastpath/walk_gen.go) from the wire
// schema table of package fastpath. It owns no runtime code. Load reads the table from
// fastpath's source files (schema.go, signal.go and the descriptor pairing in schema_test.go),
// without compiling package fastpath, so that a walk_gen.go that no longer compiles can still be
// regenerated; Generate writes the walkers. The program fastpath/internal/walkgen runs both
// (go generate ./fastpath), and TestWalkersGenerated in package fastpath runs that program and
// compares its output with the committed file.
//
// A walker is straight-line code for one message: the tag byte of every known field with its
// expected wire type is one case of a switch, so that a field costs a compare and a jump rather
// than a table lookup and a switch on its kind.
//
// At DepthFull a walker first takes the fields in the order of their numbers, which is the
// order protobuf writers send them in: each field with a one-byte tag is one test of the next
// byte against its tag, in sequence, with no loop and no switch. The first byte that is not
// the tag expected there (a field out of order, a repeat of a singular field, a field number
// above 15, an unknown field, a packed run) hands the rest of the message to the switch loop,
// which accepts fields in any order; both check a field alike. Small messages without items
// are written out inside their parent's in-order part (KeyValue inside Span, AnyValue inside
// KeyValue) up to MaxInline levels, saving a call per attribute; the switch loop, off the
// common path, calls their walkers instead, which keeps the code from doubling at each level.
//
// A KeyValue written out so has a fast path before its in-order part (shortString): a short
// key with a short string or a small int value and nothing else, all its text ASCII, is taken
// whole with one test of the entry's ASCII map, where the walk field by field tests the key
// and the string apart and looks for every other member of AnyValue in turn. Anything else
// (a long string, text outside ASCII, another member, a field after the value) finds the fast
// path's tests false and goes through the walk as before, which decides alone what is refused.
//
// It imports proto/ (the OTLP descriptors that name messages and fields) and nothing else of
// otlpgate; only fastpath/internal/walkgen imports it. It runs on the caller's goroutine, at
// generation time only.
package gen
