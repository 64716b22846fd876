package conformance

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"google.golang.org/protobuf/proto"
)

var (
	seedCount = flag.Int("conformance.seeds", 300, "random requests per signal in the round-trip tests")
	onlySeed  = flag.Uint64("conformance.seed", 0, "run only this seed, as printed by a failure")
)

// seeds lists the seeds to run; a failure names its seed, and -conformance.seed replays it.
func seeds(n int) []uint64 {
	if *onlySeed != 0 {
		return []uint64{*onlySeed}
	}
	if *seedCount < n {
		n = *seedCount
	}
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

// vtMessage is one of our generated messages with its vtprotobuf methods.
type vtMessage[T any] interface {
	*T
	proto.Message
	MarshalVT() ([]byte, error)
	UnmarshalVT([]byte) error
	SizeVT() int
	EqualVT(*T) bool
	CloneVT() *T
}

// roundTrip checks ref, a message of the reference bindings, against our type T:
//
//  1. the reference encoding decodes with UnmarshalVT and with proto.Unmarshal into T, to
//     equal messages, which re-encode (MarshalVT, and protobuf-go deterministic) to exactly the
//     reference's deterministic bytes, with SizeVT agreeing;
//  2. our encoding decodes with the reference to a message proto.Equal to ref;
//  3. CloneVT is EqualVT and proto.Equal to the original; a clone changed at one random spot
//     is equal under neither, and changing it leaves the original's encoding untouched.
//
// It returns our decoded message and the reference's deterministic bytes for further checks.
func roundTrip[T any, P vtMessage[T]](ref proto.Message, r *rand.Rand) (*T, []byte, error) {
	want, err := deterministic.Marshal(ref)
	if err != nil {
		return nil, nil, fmt.Errorf("reference marshal: %w", err)
	}
	plain, err := proto.Marshal(ref)
	if err != nil {
		return nil, nil, fmt.Errorf("reference marshal: %w", err)
	}
	var ours P = new(T)
	md := ours.ProtoReflect().Descriptor()
	if err := ours.UnmarshalVT(plain); err != nil {
		return nil, nil, fmt.Errorf("UnmarshalVT of reference bytes: %w", err)
	}
	var viaProto P = new(T)
	if err := proto.Unmarshal(plain, viaProto); err != nil {
		return nil, nil, fmt.Errorf("proto.Unmarshal of reference bytes into ours: %w", err)
	}
	if !ours.EqualVT(viaProto) || !proto.Equal(ours, viaProto) {
		return nil, nil, errors.New("UnmarshalVT and proto.Unmarshal decode the reference bytes differently")
	}
	if n := ours.SizeVT(); n != len(want) {
		return nil, nil, fmt.Errorf("SizeVT %d, reference size %d", n, len(want))
	}
	got, err := ours.MarshalVT()
	if err != nil {
		return nil, nil, fmt.Errorf("MarshalVT: %w", err)
	}
	if err := sameBytes("MarshalVT vs reference", md, got, want); err != nil {
		return nil, nil, err
	}
	gotProto, err := deterministic.Marshal(viaProto)
	if err != nil {
		return nil, nil, fmt.Errorf("deterministic proto.Marshal of ours: %w", err)
	}
	if err := sameBytes("proto.Marshal of ours vs reference", md, gotProto, want); err != nil {
		return nil, nil, err
	}

	back := ref.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(got, back); err != nil {
		return nil, nil, fmt.Errorf("reference unmarshal of MarshalVT bytes: %w", err)
	}
	if !proto.Equal(back, ref) {
		return nil, nil, errors.New("reference decodes MarshalVT bytes to a message not proto.Equal to the original")
	}

	var clone P = ours.CloneVT()
	if !ours.EqualVT(clone) || !clone.EqualVT(ours) || !proto.Equal(ours, clone) {
		return nil, nil, errors.New("CloneVT result is not equal to the original")
	}
	if cb, err := clone.MarshalVT(); err != nil || !bytes.Equal(cb, want) {
		return nil, nil, fmt.Errorf("clone encodes differently (err %v)", err)
	}
	where := mutate(r, clone.ProtoReflect())
	if proto.Equal(ours, clone) {
		return nil, nil, fmt.Errorf("BUG: mutation at %s is not visible to proto.Equal", where)
	}
	if ours.EqualVT(clone) || clone.EqualVT(ours) {
		return nil, nil, fmt.Errorf("EqualVT misses a change at %s", where)
	}
	after, err := ours.MarshalVT()
	if err != nil {
		return nil, nil, fmt.Errorf("MarshalVT after mutating the clone: %w", err)
	}
	if err := sameBytes("original after mutating its clone at "+where, md, after, want); err != nil {
		return nil, nil, err
	}
	return ours, want, nil
}

// concatenated checks the property batching relies on: the concatenation of two encoded
// requests is the encoding of a request holding both runs of entries, for ours and for the
// reference alike.
func concatenated[T any, P vtMessage[T]](ref proto.Message, a, b []byte) error {
	joined := append(append([]byte(nil), a...), b...)
	var ours P = new(T)
	if err := ours.UnmarshalVT(joined); err != nil {
		return fmt.Errorf("UnmarshalVT of a concatenation: %w", err)
	}
	got, err := ours.MarshalVT()
	if err != nil {
		return fmt.Errorf("MarshalVT: %w", err)
	}
	md := ours.ProtoReflect().Descriptor()
	if err := sameBytes("MarshalVT of decoded concatenation", md, got, joined); err != nil {
		return err
	}
	back := ref.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(joined, back); err != nil {
		return fmt.Errorf("reference unmarshal of a concatenation: %w", err)
	}
	refGot, err := deterministic.Marshal(back)
	if err != nil {
		return fmt.Errorf("reference marshal: %w", err)
	}
	return sameBytes("reference re-encoding of a concatenation", md, refGot, joined)
}

// TestRoundTrip runs roundTrip on random requests and responses of every signal, plus the
// concatenation, message reuse and OTEP re-tag checks on the same requests.
func TestRoundTrip(t *testing.T) {
	for _, sig := range signals() {
		t.Run(sig.name, func(t *testing.T) {
			var prev []byte
			checked := 0
			for _, seed := range seeds(300) {
				g := newGen(seed, sig.stream)
				want, err := sig.request(g)
				if err == nil {
					err = sig.response(g)
				}
				if err == nil && prev != nil {
					err = sig.concat(prev, want)
				}
				if err == nil {
					err = sig.reuse(want)
				}
				if err == nil && seed%4 == 0 {
					err = sig.data(want, g.r)
				}
				if err == nil {
					err = sig.otep(g.u64(), want)
				}
				if err != nil {
					t.Fatalf("%s seed %d (replay with -run 'TestRoundTrip/%s' -conformance.seed=%d): %v",
						sig.name, seed, sig.name, seed, err)
				}
				prev = want
				checked += len(want)
			}
			if checked == 0 {
				t.Fatal("every generated request was empty: the generator is broken")
			}
		})
	}
}
